"""tinycuda.capi: the kernels through libtinycuda's C ABI, called with ctypes.

Importing this module does not import torch. CPU arrays are NumPy arrays (or
anything exposing DLPack on the CPU); CUDA arrays are any object exposing
``__cuda_array_interface__`` or ``__dlpack__`` (torch CUDA tensors, CuPy
arrays). All arrays must be C-contiguous and share one dtype and device; the
call runs the CPU or CUDA kernel accordingly, on the current CUDA device, on
``stream`` (default: the array library's current stream, else the default
stream). Outputs can be passed in (``out=``, or an array for a gradient) or
are allocated in the input's array type. Arguments are checked here, before
the call; a non-zero status from the library raises CapiError with its
message.

    from tinycuda import capi
    y = capi.linear(x, w, b)                  # NumPy in, NumPy out (CPU kernel)
    gx, gw, gb = capi.linear_backward(gy, x, w)
    loss, grad = capi.cross_entropy(logits, target, grad=True)   # target: int64

fused_linear_cross_entropy stays torch-only (tinycuda.ops): it is three
GEMMs per chunk around the cross_entropy kernel, and the C ABI has no GEMM
at bf16 tensor-core speed to run them with.
"""
import ctypes
import math
import os

import numpy as np

__all__ = ["CapiError", "lib", "version", "cuda_device_count", "built_with_cuda", "cross_entropy",
           "cross_entropy_backward", "gelu", "gelu_backward", "swiglu", "swiglu_backward", "geglu",
           "geglu_backward", "layer_norm", "layer_norm_backward", "linear", "linear_backward", "relu",
           "relu_backward", "relu_mask", "relu_mask_backward", "rms_norm", "rms_norm_backward", "scale_bias_relu",
           "scale_bias_relu_backward", "softmax", "log_softmax", "softmax_backward", "square", "square_backward",
           "sum", "sum_backward"]

DTYPES = {"float32": 0, "float16": 1, "bfloat16": 2, "float64": 3}
_c_int, _c_i64, _c_p, _c_dbl, _c_size = ctypes.c_int, ctypes.c_int64, ctypes.c_void_p, ctypes.c_double, ctypes.c_size_t


class CapiError(RuntimeError):
    """A non-zero tc_status; `.status` is its code."""

    def __init__(self, message, status):
        super().__init__(message)
        self.status = status


# ---------------------------------------------------------------------------
# the params structs, field for field as in csrc/<family>.h

def _struct(name, fields):
    return type(name, (ctypes.Structure,), {"_fields_": fields})


_WS = [("workspace", _c_p), ("workspace_bytes", _c_size)]
STRUCTS = {
    "tc_gelu_params": _struct("tc_gelu_params", [
        ("dtype", _c_int), ("n", _c_i64), ("approximate", _c_int), ("x", _c_p), ("y", _c_p), ("stream", _c_p)]),
    "tc_gelu_backward_params": _struct("tc_gelu_backward_params", [
        ("dtype", _c_int), ("n", _c_i64), ("approximate", _c_int), ("grad_y", _c_p), ("x", _c_p), ("grad_x", _c_p),
        ("stream", _c_p)]),
    "tc_glu_params": _struct("tc_glu_params", [
        ("dtype", _c_int), ("n", _c_i64), ("act", _c_int), ("a", _c_p), ("b", _c_p), ("y", _c_p), ("stream", _c_p)]),
    "tc_glu_backward_params": _struct("tc_glu_backward_params", [
        ("dtype", _c_int), ("n", _c_i64), ("act", _c_int), ("grad_y", _c_p), ("a", _c_p), ("b", _c_p),
        ("grad_a", _c_p), ("grad_b", _c_p), ("stream", _c_p)]),
    "tc_cross_entropy_params": _struct("tc_cross_entropy_params", [
        ("dtype", _c_int), ("rows", _c_i64), ("cols", _c_i64), ("ignore_index", _c_i64), ("reduction", _c_int),
        ("label_smoothing", _c_dbl), ("logits", _c_p), ("target", _c_p), ("loss", _c_p), ("grad_logits", _c_p),
        ("n_valid", _c_p), ("row_loss", _c_p)] + _WS + [("stream", _c_p)]),
    "tc_cross_entropy_backward_params": _struct("tc_cross_entropy_backward_params", [
        ("dtype", _c_int), ("rows", _c_i64), ("cols", _c_i64), ("per_row", _c_int), ("grad_logits", _c_p),
        ("grad_loss", _c_p), ("stream", _c_p)]),
    "tc_linear_params": _struct("tc_linear_params", [
        ("dtype", _c_int), ("M", _c_i64), ("N", _c_i64), ("K", _c_i64), ("x", _c_p), ("weight", _c_p),
        ("bias", _c_p), ("y", _c_p), ("algo", _c_int), ("stream", _c_p)]),
    "tc_linear_backward_params": _struct("tc_linear_backward_params", [
        ("dtype", _c_int), ("M", _c_i64), ("N", _c_i64), ("K", _c_i64), ("grad_y", _c_p), ("x", _c_p),
        ("weight", _c_p), ("grad_x", _c_p), ("grad_weight", _c_p), ("grad_bias", _c_p)] + _WS
        + [("algo", _c_int), ("stream", _c_p)]),
    "tc_relu_params": _struct("tc_relu_params", [
        ("dtype", _c_int), ("n", _c_i64), ("x", _c_p), ("y", _c_p), ("stream", _c_p)]),
    "tc_relu_backward_params": _struct("tc_relu_backward_params", [
        ("dtype", _c_int), ("n", _c_i64), ("grad_y", _c_p), ("x", _c_p), ("grad_x", _c_p), ("stream", _c_p)]),
    "tc_relu_mask_params": _struct("tc_relu_mask_params", [
        ("dtype", _c_int), ("n", _c_i64), ("x", _c_p), ("y", _c_p), ("mask", _c_p), ("stream", _c_p)]),
    "tc_relu_mask_backward_params": _struct("tc_relu_mask_backward_params", [
        ("dtype", _c_int), ("n", _c_i64), ("grad_y", _c_p), ("mask", _c_p), ("grad_x", _c_p), ("stream", _c_p)]),
    "tc_scale_bias_relu_params": _struct("tc_scale_bias_relu_params", [
        ("dtype", _c_int), ("rows", _c_i64), ("cols", _c_i64), ("scale", _c_dbl), ("x", _c_p),
        ("bias", _c_p), ("y", _c_p), ("stream", _c_p)]),
    "tc_scale_bias_relu_backward_params": _struct("tc_scale_bias_relu_backward_params", [
        ("dtype", _c_int), ("rows", _c_i64), ("cols", _c_i64), ("scale", _c_dbl), ("grad_y", _c_p),
        ("y", _c_p), ("grad_x", _c_p), ("grad_bias", _c_p)] + _WS + [("stream", _c_p)]),
    "tc_softmax_params": _struct("tc_softmax_params", [
        ("dtype", _c_int), ("rows", _c_i64), ("cols", _c_i64), ("log", _c_int), ("x", _c_p), ("y", _c_p),
        ("algo", _c_int), ("stream", _c_p)]),
    "tc_softmax_backward_params": _struct("tc_softmax_backward_params", [
        ("dtype", _c_int), ("rows", _c_i64), ("cols", _c_i64), ("log", _c_int), ("grad_y", _c_p), ("y", _c_p),
        ("grad_x", _c_p), ("stream", _c_p)]),
    "tc_layer_norm_params": _struct("tc_layer_norm_params", [
        ("dtype", _c_int), ("rows", _c_i64), ("cols", _c_i64), ("eps", _c_dbl), ("x", _c_p), ("weight", _c_p),
        ("bias", _c_p), ("y", _c_p), ("mean", _c_p), ("rstd", _c_p), ("stream", _c_p)]),
    "tc_layer_norm_backward_params": _struct("tc_layer_norm_backward_params", [
        ("dtype", _c_int), ("rows", _c_i64), ("cols", _c_i64), ("grad_y", _c_p), ("x", _c_p), ("mean", _c_p),
        ("rstd", _c_p), ("weight", _c_p), ("grad_x", _c_p), ("grad_weight", _c_p), ("grad_bias", _c_p)] + _WS
        + [("stream", _c_p)]),
    "tc_rms_norm_params": _struct("tc_rms_norm_params", [
        ("dtype", _c_int), ("rows", _c_i64), ("cols", _c_i64), ("eps", _c_dbl), ("x", _c_p), ("weight", _c_p),
        ("y", _c_p), ("rstd", _c_p), ("stream", _c_p)]),
    "tc_rms_norm_backward_params": _struct("tc_rms_norm_backward_params", [
        ("dtype", _c_int), ("rows", _c_i64), ("cols", _c_i64), ("grad_y", _c_p), ("x", _c_p), ("rstd", _c_p),
        ("weight", _c_p), ("grad_x", _c_p), ("grad_weight", _c_p)] + _WS + [("stream", _c_p)]),
    "tc_sum_params": _struct("tc_sum_params", [
        ("dtype", _c_int), ("outer", _c_i64), ("reduce", _c_i64), ("inner", _c_i64), ("x", _c_p),
        ("y", _c_p)] + _WS + [("stream", _c_p)]),
    "tc_sum_backward_params": _struct("tc_sum_backward_params", [
        ("dtype", _c_int), ("outer", _c_i64), ("reduce", _c_i64), ("inner", _c_i64), ("grad_y", _c_p),
        ("grad_x", _c_p), ("stream", _c_p)]),
}
STRUCTS["tc_square_params"] = STRUCTS["tc_relu_params"]
STRUCTS["tc_square_backward_params"] = STRUCTS["tc_relu_backward_params"]

# entry point -> params struct
_ENTRY = {"cross_entropy": "tc_cross_entropy_params",
          "cross_entropy_backward": "tc_cross_entropy_backward_params",
          "gelu": "tc_gelu_params", "gelu_backward": "tc_gelu_backward_params",
          "glu": "tc_glu_params", "glu_backward": "tc_glu_backward_params",
          "layer_norm": "tc_layer_norm_params", "layer_norm_backward": "tc_layer_norm_backward_params",
          "linear": "tc_linear_params", "linear_backward": "tc_linear_backward_params",
          "relu": "tc_relu_params", "relu_backward": "tc_relu_backward_params",
          "relu_mask": "tc_relu_mask_params", "relu_mask_backward": "tc_relu_mask_backward_params",
          "rms_norm": "tc_rms_norm_params", "rms_norm_backward": "tc_rms_norm_backward_params",
          "scale_bias_relu": "tc_scale_bias_relu_params",
          "scale_bias_relu_backward": "tc_scale_bias_relu_backward_params",
          "softmax": "tc_softmax_params", "softmax_backward": "tc_softmax_backward_params",
          "square": "tc_square_params", "square_backward": "tc_square_backward_params",
          "sum": "tc_sum_params", "sum_backward": "tc_sum_backward_params"}
_WORKSPACE = {"cross_entropy": "tc_cross_entropy_workspace_size",
              "layer_norm_backward": "tc_layer_norm_backward_workspace_size",
              "linear_backward": "tc_linear_backward_workspace_size",
              "rms_norm_backward": "tc_rms_norm_backward_workspace_size",
              "scale_bias_relu_backward": "tc_scale_bias_relu_backward_workspace_size",
              "sum": "tc_sum_workspace_size"}

_lib = None


def lib(path=None):
    """libtinycuda, loaded once: `path`, else $TINYCUDA_LIB, else tinycuda/lib/libtinycuda.so."""
    global _lib
    if _lib is not None:
        return _lib
    path = path or os.environ.get("TINYCUDA_LIB") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "lib", "libtinycuda.so")
    if not os.path.exists(path):
        raise FileNotFoundError(f"tinycuda.capi: {path} not found; build it with "
                                "`pip install --no-build-isolation -e .` or `make -C csrc`")
    so = ctypes.CDLL(path)
    for name, ret in (("tc_version", ctypes.c_char_p), ("tc_last_error", ctypes.c_char_p),
                      ("tc_status_string", ctypes.c_char_p), ("tc_built_with_cuda", _c_int),
                      ("tc_cuda_device_count", _c_int), ("tc_params_sizeof", _c_size)):
        getattr(so, name).restype = ret
    so.tc_status_string.argtypes = [_c_int]
    so.tc_params_sizeof.argtypes = [ctypes.c_char_p]
    for op, struct in _ENTRY.items():
        size = so.tc_params_sizeof(struct.encode())
        if size != ctypes.sizeof(STRUCTS[struct]):
            raise ImportError(f"tinycuda.capi: {struct} is {size} bytes in {path} but "
                              f"{ctypes.sizeof(STRUCTS[struct])} here: library and module disagree")
        for dev in ("cpu", "cuda"):
            fn = getattr(so, f"tc_{op}_{dev}")
            fn.restype, fn.argtypes = _c_int, [ctypes.POINTER(STRUCTS[struct])]
        if op in _WORKSPACE:
            ws = getattr(so, _WORKSPACE[op])
            ws.restype, ws.argtypes = _c_size, [ctypes.POINTER(STRUCTS[struct])]
    _lib = so
    return so


def version():
    return lib().tc_version().decode()


def built_with_cuda():
    return bool(lib().tc_built_with_cuda())


def cuda_device_count():
    return lib().tc_cuda_device_count()


# ---------------------------------------------------------------------------
# arrays: NumPy, __cuda_array_interface__, DLPack

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", _c_int), ("device_id", _c_int)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", _c_p), ("device", _DLDevice), ("ndim", _c_int), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(_c_i64)), ("strides", ctypes.POINTER(_c_i64)),
                ("byte_offset", ctypes.c_uint64)]


_CAI_DTYPES = {"<f4": "float32", "<f2": "float16", "<f8": "float64", "|u1": "uint8", "<i8": "int64"}
_DL_DTYPES = {(2, 32): "float32", (2, 16): "float16", (2, 64): "float64", (4, 16): "bfloat16", (1, 8): "uint8",
              (0, 64): "int64"}
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype, _capsule_pointer.argtypes = _c_p, [ctypes.py_object, ctypes.c_char_p]


class _Array:
    """What the C call needs from one array argument; `keep` holds it alive."""

    def __init__(self, src, ptr, shape, dtype, device, contiguous, keep=None):
        self.src, self.ptr, self.shape, self.dtype = src, ptr, tuple(shape), dtype
        self.device, self.contiguous, self.keep = device, contiguous, keep
        self.size = math.prod(self.shape)


def _c_contiguous(shape, strides, itemsize):
    expected = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != expected:
            return False
        expected *= n
    return True


def _view(op, name, obj):
    if isinstance(obj, np.ndarray):
        dtype = obj.dtype.name
        return _Array(obj, obj.ctypes.data, obj.shape, dtype, "cpu", obj.flags.c_contiguous)
    cai = None
    if hasattr(obj, "__cuda_array_interface__"):
        try:
            cai = obj.__cuda_array_interface__
        except (TypeError, ValueError):
            cai = None
    # The interface has no bfloat16 (torch reports it as "<V2"): DLPack does.
    if cai is not None and cai["typestr"] not in _CAI_DTYPES and hasattr(obj, "__dlpack__"):
        cai = None
    if cai is not None:
        dtype = _CAI_DTYPES.get(cai["typestr"], cai["typestr"])
        itemsize = int(cai["typestr"][2:]) if cai["typestr"][2:].isdigit() else 1
        strides = cai.get("strides")
        contiguous = strides is None or _c_contiguous(cai["shape"], strides, itemsize)
        return _Array(obj, cai["data"][0], cai["shape"], dtype, "cuda", contiguous)
    if hasattr(obj, "__dlpack__"):
        capsule = obj.__dlpack__()
        t = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
        shape = [t.shape[i] for i in range(t.ndim)]
        dtype = _DL_DTYPES.get((t.dtype.code, t.dtype.bits), f"dlpack({t.dtype.code},{t.dtype.bits})")
        strides = [t.strides[i] for i in range(t.ndim)] if t.strides else None
        contiguous = strides is None or _c_contiguous(shape, strides, 1)  # DLPack strides count elements
        device = {1: "cpu", 2: "cuda"}.get(t.device.device_type, f"dlpack-device-{t.device.device_type}")
        return _Array(obj, (t.data or 0) + t.byte_offset, shape, dtype, device, contiguous, keep=capsule)
    raise TypeError(f"tinycuda.capi.{op}: {name} must be a NumPy array or a CUDA array "
                    f"(__cuda_array_interface__ or DLPack), got {type(obj).__name__}")


def _check(op, named):
    """Views every array; all C-contiguous, one supported dtype, one device."""
    views = {}
    first = None
    for name, obj in named.items():
        a = _view(op, name, obj)
        if a.dtype not in DTYPES:
            raise TypeError(f"tinycuda.capi.{op}: {name} has dtype {a.dtype}; "
                            f"expected one of {', '.join(DTYPES)}")
        if not a.contiguous:
            raise ValueError(f"tinycuda.capi.{op}: {name} must be C-contiguous")
        if first is None:
            first = (name, a)
        elif a.device != first[1].device:
            raise ValueError(f"tinycuda.capi.{op}: {name} is a {a.device} array but {first[0]} is a "
                             f"{first[1].device} array")
        elif a.dtype != first[1].dtype:
            raise TypeError(f"tinycuda.capi.{op}: {name} has dtype {a.dtype} but {first[0]} has "
                            f"dtype {first[1].dtype}")
        views[name] = a
    return views


def _family(a):
    mod = type(a.src).__module__.split(".")[0]
    return "numpy" if isinstance(a.src, np.ndarray) else mod


def _empty(op, like, shape, dtype=None):
    """A new contiguous array of `like`'s kind (NumPy, torch, CuPy)."""
    fam = _family(like)
    if fam == "numpy" or like.device == "cpu" and fam != "torch":
        return np.empty(shape, dtype=dtype or like.src.dtype)
    if fam == "torch":
        import torch  # the caller's own arrays are torch tensors: torch is loaded already
        return like.src.new_empty(shape, dtype=getattr(torch, dtype) if dtype else None)
    if fam == "cupy":
        import cupy
        return cupy.empty(shape, dtype=dtype or like.src.dtype)
    raise TypeError(f"tinycuda.capi.{op}: cannot allocate an output like a {type(like.src).__name__}; pass it in")


def _stream(like, stream):
    if stream is not None:
        return int(getattr(stream, "cuda_stream", getattr(stream, "ptr", stream)))
    if like.device != "cuda":
        return 0
    fam = _family(like)
    if fam == "torch":
        import torch
        return torch.cuda.current_stream(like.src.device).cuda_stream
    if fam == "cupy":
        import cupy
        return cupy.cuda.get_current_stream().ptr
    return 0


def _output(op, name, given, like, shape):
    """`given` checked against (shape, dtype, device), or a new array."""
    arr = _empty(op, like, shape) if given is None or given is True else given
    a = _view(op, name, arr)
    if a.shape != tuple(shape):
        raise ValueError(f"tinycuda.capi.{op}: {name} has shape {a.shape} ({a.size} elements) "
                         f"but the result needs {tuple(shape)}")
    if a.dtype != like.dtype or a.device != like.device or not a.contiguous:
        raise ValueError(f"tinycuda.capi.{op}: {name} must be a C-contiguous {like.dtype} {like.device} array")
    return arr, a


def _call(op, like, params, stream):
    so = lib()
    params.dtype = DTYPES[like.dtype]
    params.stream = _stream(like, stream) or None
    keep = None
    if op in _WORKSPACE and like.device == "cuda":
        nbytes = getattr(so, _WORKSPACE[op])(ctypes.byref(params))
        if nbytes:
            keep = _empty(op, like, (nbytes,), dtype="uint8")
            params.workspace, params.workspace_bytes = _view(op, "workspace", keep).ptr, nbytes
    status = getattr(so, f"tc_{op}_{'cuda' if like.device == 'cuda' else 'cpu'}")(ctypes.byref(params))
    if status != 0:
        raise CapiError(f"tinycuda.capi.{op}: {so.tc_status_string(status).decode()}: "
                        f"{so.tc_last_error().decode()}", status)
    return keep


# ---------------------------------------------------------------------------
# ops

def _pointwise(op, x, out, stream):
    v = _check(op, {"x": x})["x"]
    y, yv = _output(op, "out", out, v, v.shape)
    _call(op, v, STRUCTS[_ENTRY[op]](n=v.size, x=v.ptr, y=yv.ptr), stream)
    return y


def _pointwise_backward(op, grad_y, x, out, stream):
    v = _check(op, {"grad_y": grad_y, "x": x})
    if v["grad_y"].shape != v["x"].shape:
        raise ValueError(f"tinycuda.capi.{op}: grad_y has shape {v['grad_y'].shape} but x has shape {v['x'].shape}")
    gx, gv = _output(op, "out", out, v["x"], v["x"].shape)
    _call(op, v["x"], STRUCTS[_ENTRY[op]](n=gv.size, grad_y=v["grad_y"].ptr, x=v["x"].ptr, grad_x=gv.ptr), stream)
    return gx


def relu(x, *, out=None, stream=None):
    """max(x, 0)."""
    return _pointwise("relu", x, out, stream)


def relu_backward(grad_y, x, *, out=None, stream=None):
    """grad_y * [x > 0]."""
    return _pointwise_backward("relu_backward", grad_y, x, out, stream)


def _mask_view(op, mask, like, n):
    """The uint8 bitmask of relu_mask: ceil(n / 8) bytes on `like`'s device."""
    a = _view(op, "mask", mask)
    if a.dtype != "uint8" or a.shape != ((n + 7) // 8,) or not a.contiguous or a.device != like.device:
        raise ValueError(f"tinycuda.capi.{op}: mask must be a contiguous uint8 {like.device} array of "
                         f"shape ({(n + 7) // 8},), got {a.dtype} {a.shape} on {a.device}")
    return a


def relu_mask(x, *, out=None, mask=None, stream=None):
    """(max(x, 0), bitmask): bit j of mask[i] is [x[8i + j] > 0], for relu_mask_backward."""
    op = "relu_mask"
    v = _check(op, {"x": x})["x"]
    y, yv = _output(op, "out", out, v, v.shape)
    mask = _empty(op, v, ((v.size + 7) // 8,), dtype="uint8") if mask is None else mask
    mv = _mask_view(op, mask, v, v.size)
    _call(op, v, STRUCTS[_ENTRY[op]](n=v.size, x=v.ptr, y=yv.ptr, mask=mv.ptr), stream)
    return y, mask


def relu_mask_backward(grad_y, mask, *, out=None, stream=None):
    """grad_y where the mask bit is set, else 0."""
    op = "relu_mask_backward"
    v = _check(op, {"grad_y": grad_y})["grad_y"]
    mv = _mask_view(op, mask, v, v.size)
    gx, gv = _output(op, "out", out, v, v.shape)
    _call(op, v, STRUCTS[_ENTRY[op]](n=v.size, grad_y=v.ptr, mask=mv.ptr, grad_x=gv.ptr), stream)
    return gx


def square(x, *, out=None, stream=None):
    """x * x."""
    return _pointwise("square", x, out, stream)


def square_backward(grad_y, x, *, out=None, stream=None):
    """2 * x * grad_y."""
    return _pointwise_backward("square_backward", grad_y, x, out, stream)


_APPROXIMATE = {"none": 0, "tanh": 1}  # tc_gelu_approximate
_GLU_ACT = {"silu": 0, "none": 1, "tanh": 2}  # tc_glu_act: silu, gelu (erf), gelu (tanh)


def _approximate(op, approximate):
    if approximate not in _APPROXIMATE:
        raise ValueError(f"tinycuda.capi.{op}: approximate must be 'none' or 'tanh', got {approximate!r}")
    return approximate


def gelu(x, approximate="none", *, out=None, stream=None):
    """x/2 (1 + erf(x / sqrt 2)) (approximate='none') or its tanh form, as F.gelu."""
    op = "gelu"
    code = _APPROXIMATE[_approximate(op, approximate)]
    v = _check(op, {"x": x})["x"]
    y, yv = _output(op, "out", out, v, v.shape)
    _call(op, v, STRUCTS[_ENTRY[op]](n=v.size, approximate=code, x=v.ptr, y=yv.ptr), stream)
    return y


def gelu_backward(grad_y, x, approximate="none", *, out=None, stream=None):
    """grad_y * gelu'(x), x the forward input."""
    op = "gelu_backward"
    code = _APPROXIMATE[_approximate(op, approximate)]
    v = _check(op, {"grad_y": grad_y, "x": x})
    if v["grad_y"].shape != v["x"].shape:
        raise ValueError(f"tinycuda.capi.{op}: grad_y has shape {v['grad_y'].shape} but x has shape {v['x'].shape}")
    gx, gv = _output(op, "out", out, v["x"], v["x"].shape)
    _call(op, v["x"], STRUCTS[_ENTRY[op]](n=gv.size, approximate=code, grad_y=v["grad_y"].ptr, x=v["x"].ptr,
                                          grad_x=gv.ptr), stream)
    return gx


def _glu(op, a, b, act, out, stream):
    v = _check(op, {"a": a, "b": b})
    if v["a"].shape != v["b"].shape:
        raise ValueError(f"tinycuda.capi.{op}: a has shape {v['a'].shape} but b has shape {v['b'].shape}")
    y, yv = _output(op, "out", out, v["a"], v["a"].shape)
    _call("glu", v["a"], STRUCTS[_ENTRY["glu"]](n=yv.size, act=_GLU_ACT[act], a=v["a"].ptr, b=v["b"].ptr, y=yv.ptr),
          stream)
    return y


def _glu_backward(op, grad_y, a, b, act, grad_a, grad_b, stream):
    v = _check(op, {"grad_y": grad_y, "a": a, "b": b})
    for name in ("grad_y", "b"):
        if v[name].shape != v["a"].shape:
            raise ValueError(f"tinycuda.capi.{op}: {name} has shape {v[name].shape} but a has shape {v['a'].shape}")
    ga, gav = _output(op, "grad_a", grad_a, v["a"], v["a"].shape)
    gb, gbv = _output(op, "grad_b", grad_b, v["a"], v["a"].shape)
    _call("glu_backward", v["a"], STRUCTS[_ENTRY["glu_backward"]](
        n=gav.size, act=_GLU_ACT[act], grad_y=v["grad_y"].ptr, a=v["a"].ptr, b=v["b"].ptr, grad_a=gav.ptr,
        grad_b=gbv.ptr), stream)
    return ga, gb


def swiglu(a, b, *, out=None, stream=None):
    """silu(a) * b."""
    return _glu("swiglu", a, b, "silu", out, stream)


def swiglu_backward(grad_y, a, b, *, grad_a=None, grad_b=None, stream=None):
    """(grad_y * b * silu'(a), grad_y * silu(a)) in one pass; grad_a / grad_b: arrays to fill, or None."""
    return _glu_backward("swiglu_backward", grad_y, a, b, "silu", grad_a, grad_b, stream)


def geglu(a, b, approximate="tanh", *, out=None, stream=None):
    """gelu(a) * b, gelu's tanh form by default ('none': the erf form)."""
    return _glu("geglu", a, b, _approximate("geglu", approximate), out, stream)


def geglu_backward(grad_y, a, b, approximate="tanh", *, grad_a=None, grad_b=None, stream=None):
    """(grad_y * b * gelu'(a), grad_y * gelu(a)) in one pass; grad_a / grad_b: arrays to fill, or None."""
    op = "geglu_backward"
    return _glu_backward(op, grad_y, a, b, _approximate(op, approximate), grad_a, grad_b, stream)


def _rows_cols(op, v, name):
    if len(v.shape) < 1:
        raise ValueError(f"tinycuda.capi.{op}: {name} must have at least 1 dim")
    cols = v.shape[-1]
    return (v.size // cols if cols else 0), cols


def scale_bias_relu(x, bias, scale, *, out=None, stream=None):
    """relu(x * scale + bias); x [..., C], bias [C]."""
    op = "scale_bias_relu"
    v = _check(op, {"x": x, "bias": bias})
    rows, cols = _rows_cols(op, v["x"], "x")
    if v["bias"].shape != (cols,):
        raise ValueError(f"tinycuda.capi.{op}: bias must have shape ({cols},), got {v['bias'].shape}")
    y, yv = _output(op, "out", out, v["x"], v["x"].shape)
    _call(op, v["x"], STRUCTS[_ENTRY[op]](rows=rows, cols=cols, scale=float(scale), x=v["x"].ptr,
                                          bias=v["bias"].ptr, y=yv.ptr), stream)
    return y


def scale_bias_relu_backward(grad_y, y, scale, *, grad_x=True, grad_bias=True, stream=None):
    """(grad_y * [y > 0] * scale, sum over rows of grad_y * [y > 0]); y is the forward output.
    grad_x / grad_bias: True to allocate, an array to fill, False to skip (None returned)."""
    op = "scale_bias_relu_backward"
    v = _check(op, {"grad_y": grad_y, "y": y})
    if v["grad_y"].shape != v["y"].shape:
        raise ValueError(f"tinycuda.capi.{op}: grad_y has shape {v['grad_y'].shape} but y has shape {v['y'].shape}")
    rows, cols = _rows_cols(op, v["y"], "y")
    gx, gxv = _output(op, "grad_x", grad_x, v["y"], v["y"].shape) if grad_x is not False else (None, None)
    gb, gbv = _output(op, "grad_bias", grad_bias, v["y"], (cols,)) if grad_bias is not False else (None, None)
    _call(op, v["y"], STRUCTS[_ENTRY[op]](rows=rows, cols=cols, scale=float(scale), grad_y=v["grad_y"].ptr,
                                          y=v["y"].ptr, grad_x=gxv and gxv.ptr, grad_bias=gbv and gbv.ptr), stream)
    return gx, gb


def _softmax(op, x, log, out, stream):
    v = _check(op, {"x": x})["x"]
    rows, cols = _rows_cols(op, v, "x")
    y, yv = _output(op, "out", out, v, v.shape)
    _call("softmax", v, STRUCTS[_ENTRY["softmax"]](rows=rows, cols=cols, log=int(log), x=v.ptr, y=yv.ptr), stream)
    return y


def softmax(x, *, out=None, stream=None):
    """softmax over the last dim."""
    return _softmax("softmax", x, False, out, stream)


def log_softmax(x, *, out=None, stream=None):
    """log_softmax over the last dim."""
    return _softmax("log_softmax", x, True, out, stream)


def softmax_backward(grad_y, y, *, log=False, out=None, stream=None):
    """grad of softmax (log=False) or log_softmax (log=True) over the last dim, from the output y."""
    op = "softmax_backward"
    v = _check(op, {"grad_y": grad_y, "y": y})
    if v["grad_y"].shape != v["y"].shape:
        raise ValueError(f"tinycuda.capi.{op}: grad_y has shape {v['grad_y'].shape} but y has shape {v['y'].shape}")
    rows, cols = _rows_cols(op, v["y"], "y")
    gx, gv = _output(op, "out", out, v["y"], v["y"].shape)
    _call(op, v["y"], STRUCTS[_ENTRY[op]](rows=rows, cols=cols, log=int(log), grad_y=v["grad_y"].ptr,
                                          y=v["y"].ptr, grad_x=gv.ptr), stream)
    return gx


def _linear_dims(op, v):
    x, w = v["x"], v["weight"]
    if len(w.shape) != 2:
        raise ValueError(f"tinycuda.capi.{op}: weight must be 2-D (out, in), got shape {w.shape}")
    if len(x.shape) < 1 or x.shape[-1] != w.shape[1]:
        raise ValueError(f"tinycuda.capi.{op}: x's last dim must equal weight's in_features "
                         f"{w.shape[1]}, got shape {x.shape}")
    return math.prod(x.shape[:-1]), w.shape[0], w.shape[1]


def linear(x, weight, bias=None, *, out=None, algo=0, stream=None):
    """x @ weight.T + bias; x [..., K], weight [N, K], bias [N] or None."""
    op = "linear"
    named = {"x": x, "weight": weight, **({"bias": bias} if bias is not None else {})}
    v = _check(op, named)
    M, N, K = _linear_dims(op, v)
    if bias is not None and v["bias"].shape != (N,):
        raise ValueError(f"tinycuda.capi.{op}: bias must have shape ({N},), got {v['bias'].shape}")
    y, yv = _output(op, "out", out, v["x"], (*v["x"].shape[:-1], N))
    _call(op, v["x"], STRUCTS[_ENTRY[op]](M=M, N=N, K=K, x=v["x"].ptr, weight=v["weight"].ptr,
                                          bias=v["bias"].ptr if bias is not None else None, y=yv.ptr,
                                          algo=int(algo)), stream)
    return y


def linear_backward(grad_y, x, weight, *, grad_x=True, grad_weight=True, grad_bias=True, algo=0,
                    stream=None):
    """(grad_y @ weight, grad_y^T @ x, grad_y summed over rows). Each output: True
    to allocate, an array to fill, False to skip (None returned)."""
    op = "linear_backward"
    v = _check(op, {"grad_y": grad_y, "x": x, "weight": weight})
    M, N, K = _linear_dims(op, v)
    if v["grad_y"].shape != (*v["x"].shape[:-1], N):
        raise ValueError(f"tinycuda.capi.{op}: grad_y must have shape {(*v['x'].shape[:-1], N)}, "
                         f"got {v['grad_y'].shape}")
    outs = []
    for name, want, shape in (("grad_x", grad_x, v["x"].shape), ("grad_weight", grad_weight, (N, K)),
                              ("grad_bias", grad_bias, (N,))):
        outs.append(_output(op, name, want, v["x"], shape) if want is not False else (None, None))
    (gx, gxv), (gw, gwv), (gb, gbv) = outs
    _call(op, v["x"], STRUCTS[_ENTRY[op]](M=M, N=N, K=K, grad_y=v["grad_y"].ptr, x=v["x"].ptr,
                                          weight=v["weight"].ptr, grad_x=gxv and gxv.ptr,
                                          grad_weight=gwv and gwv.ptr, grad_bias=gbv and gbv.ptr,
                                          algo=int(algo)), stream)
    return gx, gw, gb


def _sum_view(op, shape, dim, keepdim):
    nd = len(shape)
    if dim is None:
        return 1, math.prod(shape), 1, ((1,) * nd if keepdim else ())
    if not -max(nd, 1) <= dim < max(nd, 1):
        raise ValueError(f"tinycuda.capi.{op}: dim {dim} is out of range for {nd} dims")
    if nd == 0:
        return 1, 1, 1, ()
    d = dim % nd
    out = tuple(1 if i == d else s for i, s in enumerate(shape) if keepdim or i != d)
    return math.prod(shape[:d]), shape[d], math.prod(shape[d + 1:]), out


def sum(x, dim=None, keepdim=False, *, out=None, stream=None):  # noqa: A001
    """Sum of all elements (dim=None) or over one dim, float32 accumulation."""
    op = "sum"
    v = _check(op, {"x": x})["x"]
    outer, red, inner, shape = _sum_view(op, v.shape, dim, keepdim)
    y, yv = _output(op, "out", out, v, shape)
    _call(op, v, STRUCTS[_ENTRY[op]](outer=outer, reduce=red, inner=inner, x=v.ptr, y=yv.ptr), stream)
    return y


def sum_backward(grad_y, shape, dim=None, keepdim=False, *, out=None, stream=None):
    """grad_y broadcast back to `shape` over the summed dim(s)."""
    op = "sum_backward"
    v = _check(op, {"grad_y": grad_y})["grad_y"]
    outer, red, inner, out_shape = _sum_view(op, tuple(shape), dim, keepdim)
    if v.shape != out_shape:
        raise ValueError(f"tinycuda.capi.{op}: grad_y must have shape {out_shape}, got {v.shape}")
    gx, gv = _output(op, "out", out, v, tuple(shape))
    _call(op, v, STRUCTS[_ENTRY[op]](outer=outer, reduce=red, inner=inner, grad_y=v.ptr, grad_x=gv.ptr), stream)
    return gx


_REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}


def _target_view(op, target, like, n):
    """int64 class indices [n] on `like`'s device."""
    a = _view(op, "target", target)
    if a.dtype != "int64" or a.shape != (n,) or not a.contiguous or a.device != like.device:
        raise ValueError(f"tinycuda.capi.{op}: target must be a contiguous int64 {like.device} array of "
                         f"shape ({n},), got {a.dtype} {a.shape} on {a.device}")
    return a


def cross_entropy(logits, target, *, ignore_index=-100, reduction="mean", label_smoothing=0.0, grad=False,
                  out=None, stream=None):
    """F.cross_entropy(logits, target, ...) for logits [N, V] and int64 class
    indices target [N]. grad: False, True (allocate) or an array to fill with
    d loss / d logits for grad_loss = 1, from the same pass; then (loss, grad)
    is returned. A target outside [0, V) other than ignore_index: CapiError on
    the CPU, a NaN row on CUDA."""
    op = "cross_entropy"
    v = _check(op, {"logits": logits})["logits"]
    if len(v.shape) != 2 or v.shape[1] < 1:
        raise ValueError(f"tinycuda.capi.{op}: logits must be 2-D (rows, classes) with at least one class, "
                         f"got shape {v.shape}")
    if reduction not in _REDUCTIONS:
        raise ValueError(f"tinycuda.capi.{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    rows, cols = v.shape
    t = _target_view(op, target, v, rows)
    loss, lv = _output(op, "out", out, v, (rows,) if reduction == "none" else ())
    g, gv = _output(op, "grad", grad, v, v.shape) if grad is not False else (None, None)
    _call(op, v, STRUCTS[_ENTRY[op]](rows=rows, cols=cols, ignore_index=int(ignore_index),
                                     reduction=_REDUCTIONS[reduction], label_smoothing=float(label_smoothing),
                                     logits=v.ptr, target=t.ptr, loss=lv.ptr, grad_logits=gv and gv.ptr), stream)
    return loss if grad is False else (loss, g)


def cross_entropy_backward(grad_logits, grad_loss, *, stream=None):
    """grad_logits *= grad_loss in place and returned; grad_loss is 0-dim (one
    scale) or one value per row. Rows whose scale is exactly 1 are skipped."""
    op = "cross_entropy_backward"
    v = _check(op, {"grad_logits": grad_logits, "grad_loss": grad_loss})
    g, s = v["grad_logits"], v["grad_loss"]
    per_row = len(s.shape) > 0
    if per_row and (len(g.shape) < 1 or s.shape != g.shape[:-1]):
        raise ValueError(f"tinycuda.capi.{op}: grad_loss must be 0-dim or have shape {g.shape[:-1]}, got {s.shape}")
    cols = (g.shape[-1] if per_row else g.size) or 1
    _call(op, g, STRUCTS[_ENTRY[op]](rows=g.size // cols, cols=cols, per_row=int(per_row), grad_logits=g.ptr,
                                     grad_loss=s.ptr), stream)
    return grad_logits
def _norm_view(op, v, normalized_shape, affine):
    """(rows, cols, shape) of x [..., *normalized_shape]; weight/bias in
    `affine` (when given) must have normalized_shape."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    x = v["x"]
    k = len(shape)
    if k < 1 or k > len(x.shape) or x.shape[len(x.shape) - k:] != shape:
        raise ValueError(f"tinycuda.capi.{op}: normalized_shape {shape} must equal the last dims of x, "
                         f"whose shape is {x.shape}")
    for name in affine:
        if name in v and v[name].shape != shape:
            raise ValueError(f"tinycuda.capi.{op}: {name} must have shape {shape}, got {v[name].shape}")
    return math.prod(x.shape[:len(x.shape) - k]), math.prod(shape), shape


def _stats(op, name, given, like, rows):
    """mean / rstd: float32 (float64 for float64 x) arrays of `rows`, given or new."""
    dtype = "float64" if like.dtype == "float64" else "float32"
    arr = _empty(op, like, (rows,), dtype=dtype) if given is None else given
    a = _view(op, name, arr)
    if a.dtype != dtype or a.shape != (rows,) or not a.contiguous or a.device != like.device:
        raise ValueError(f"tinycuda.capi.{op}: {name} must be a contiguous {dtype} {like.device} array of shape "
                         f"({rows},), got {a.dtype} {a.shape} on {a.device}")
    return arr, a


def _optional(named):
    return {k: a for k, a in named.items() if a is not None}


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5, *, out=None, mean=None, rstd=None,
               stream=None):
    """(y, mean, rstd): x normalized over its trailing dims normalized_shape,
    times weight plus bias (each optional, of normalized_shape); mean and rstd
    float32 (float64 for float64 x), one per row, for layer_norm_backward."""
    op = "layer_norm"
    v = _check(op, _optional({"x": x, "weight": weight, "bias": bias}))
    rows, cols, _ = _norm_view(op, v, normalized_shape, ("weight", "bias"))
    y, yv = _output(op, "out", out, v["x"], v["x"].shape)
    mean, mv = _stats(op, "mean", mean, v["x"], rows)
    rstd, rv = _stats(op, "rstd", rstd, v["x"], rows)
    _call(op, v["x"], STRUCTS[_ENTRY[op]](rows=rows, cols=cols, eps=float(eps), x=v["x"].ptr,
                                          weight=v["weight"].ptr if weight is not None else None,
                                          bias=v["bias"].ptr if bias is not None else None, y=yv.ptr,
                                          mean=mv.ptr, rstd=rv.ptr), stream)
    return y, mean, rstd


def layer_norm_backward(grad_y, x, normalized_shape, mean, rstd, weight=None, *, grad_x=True, grad_weight=True,
                        grad_bias=True, stream=None):
    """(grad_x, grad_weight, grad_bias) of layer_norm from x and its mean and
    rstd. Each output: True to allocate, an array to fill, False to skip (None
    returned)."""
    op = "layer_norm_backward"
    v = _check(op, _optional({"grad_y": grad_y, "x": x, "weight": weight}))
    if v["grad_y"].shape != v["x"].shape:
        raise ValueError(f"tinycuda.capi.{op}: grad_y has shape {v['grad_y'].shape} but x has shape {v['x'].shape}")
    rows, cols, shape = _norm_view(op, v, normalized_shape, ("weight",))
    _, mv = _stats(op, "mean", mean, v["x"], rows)
    _, rv = _stats(op, "rstd", rstd, v["x"], rows)
    outs = [_output(op, name, want, v["x"], s) if want is not False else (None, None)
            for name, want, s in (("grad_x", grad_x, v["x"].shape), ("grad_weight", grad_weight, shape),
                                  ("grad_bias", grad_bias, shape))]
    (gx, gxv), (gw, gwv), (gb, gbv) = outs
    _call(op, v["x"], STRUCTS[_ENTRY[op]](rows=rows, cols=cols, grad_y=v["grad_y"].ptr, x=v["x"].ptr, mean=mv.ptr,
                                          rstd=rv.ptr, weight=v["weight"].ptr if weight is not None else None,
                                          grad_x=gxv and gxv.ptr, grad_weight=gwv and gwv.ptr,
                                          grad_bias=gbv and gbv.ptr), stream)
    return gx, gw, gb


def _rms_eps(v, eps):
    """torch's default: the epsilon of the statistics' type."""
    if eps is not None:
        return float(eps)
    return float(np.finfo(np.float64 if v.dtype == "float64" else np.float32).eps)


def rms_norm(x, normalized_shape, weight=None, eps=None, *, out=None, rstd=None, stream=None):
    """(y, rstd): x / sqrt(mean(x^2) + eps) over its trailing dims
    normalized_shape, times weight (optional); eps None is torch's default;
    rstd float32 (float64 for float64 x), one per row, for rms_norm_backward."""
    op = "rms_norm"
    v = _check(op, _optional({"x": x, "weight": weight}))
    rows, cols, _ = _norm_view(op, v, normalized_shape, ("weight",))
    y, yv = _output(op, "out", out, v["x"], v["x"].shape)
    rstd, rv = _stats(op, "rstd", rstd, v["x"], rows)
    _call(op, v["x"], STRUCTS[_ENTRY[op]](rows=rows, cols=cols, eps=_rms_eps(v["x"], eps), x=v["x"].ptr,
                                          weight=v["weight"].ptr if weight is not None else None, y=yv.ptr,
                                          rstd=rv.ptr), stream)
    return y, rstd


def rms_norm_backward(grad_y, x, normalized_shape, rstd, weight=None, *, grad_x=True, grad_weight=True,
                      stream=None):
    """(grad_x, grad_weight) of rms_norm from x and its rstd. Each output: True
    to allocate, an array to fill, False to skip (None returned)."""
    op = "rms_norm_backward"
    v = _check(op, _optional({"grad_y": grad_y, "x": x, "weight": weight}))
    if v["grad_y"].shape != v["x"].shape:
        raise ValueError(f"tinycuda.capi.{op}: grad_y has shape {v['grad_y'].shape} but x has shape {v['x'].shape}")
    rows, cols, shape = _norm_view(op, v, normalized_shape, ("weight",))
    _, rv = _stats(op, "rstd", rstd, v["x"], rows)
    gx, gxv = _output(op, "grad_x", grad_x, v["x"], v["x"].shape) if grad_x is not False else (None, None)
    gw, gwv = _output(op, "grad_weight", grad_weight, v["x"], shape) if grad_weight is not False else (None, None)
    _call(op, v["x"], STRUCTS[_ENTRY[op]](rows=rows, cols=cols, grad_y=v["grad_y"].ptr, x=v["x"].ptr, rstd=rv.ptr,
                                          weight=v["weight"].ptr if weight is not None else None,
                                          grad_x=gxv and gxv.ptr, grad_weight=gwv and gwv.ptr), stream)
    return gx, gw
