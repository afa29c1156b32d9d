"""tinycuda.capi: the kernels through libtinycuda's C ABI, called with cffi.

The C headers (csrc/include, shipped beside the library in lib/include) are
the ABI's only declaration: cffi reads them, so no params struct, field, enum
or entry point is restated here. One generic call fills any params struct
(the entry point's argument type): arrays become pointers; dtype, stream and,
on CUDA where tc_<op>_workspace_size is declared, the workspace are filled in
one place.

Every op of the torch door is here, under its name and with its arguments
(tinycuda.ops' function for a forward, the torch.ops.tinycuda schema for a
backward, whose ``output_mask`` picks the gradients: the others are None).
Importing this module does not import torch. CPU arrays: NumPy, or anything
exposing DLPack on the CPU (torch tensors, for bfloat16); CUDA arrays: any
object exposing ``__cuda_array_interface__`` or ``__dlpack__`` (torch, CuPy).
All C-contiguous (but the x of an elementwise-family forward, sigmoid ...
rsqrt, the a and b of add ... pow and their backwards, and the x of a
reduce-family forward, mean ... argmin, read through their strides, and the x of
a scan-family forward, copied C-contiguous, and the x of permute_copy,
transpose_copy and contiguous, read through its strides, of any dtype), of one
dtype and device (no promotion), which picks the CPU or the
CUDA kernel (current device, on ``stream``, default: the array
library's current one). Outputs are new arrays of the input's type, or passed in: ``out=``
(``mean=``, ``rstd=``, ``mask=``) for a forward, ``grad_x=`` ... for a
backward. Arguments are checked here; a non-zero status from the library
raises CapiError with its message.

    from tinycuda import capi
    y = capi.linear(x, w, b)                   # NumPy in, NumPy out (CPU kernel)
    gx, gw, gb = capi.linear_backward(gy, x, w)
    p = capi.softmax(x, dim=0)
    loss, grad = capi.cross_entropy(logits, target, compute_grad=True)   # target: int64
    loss, gh, gw, gb = capi.fused_linear_cross_entropy(h, w, target, b, compute_grad=True)

``algo`` (linear, matmul, softmax) is the params struct's field: an int or the
header's name ("TC_GEMM_TILED").

The elementwise family's functions (capi.sigmoid ... capi.rsqrt, capi.add ...
capi.pow and their backwards) are made from the core's op lists: names from the
header's tc_unary_op and tc_binary_op, arguments and defaults from the
library's tc_unary_schema and tc_binary_schema. A binary op broadcasts a and b
(up to 8 dims) and takes a number for either (or a 0-dim CPU array beside a
larger one, as the torch layer takes a 0-dim CPU tensor); its backward returns
the gradients at the broadcast shape, for the caller to sum over broadcast dims.

The reduce family's functions (capi.mean ... capi.min, tinycuda/reduce.h)
are made the same way, from tc_reduce_op and tc_reduce_schema: capi.<op>(x,
<the schema's arguments>) over any dims (dim None or []: all of them), the
result new and C-contiguous over the kept dims (int64 for an index op, one
tc_reduce_differentiable says has no gradient; max and min return (values,
indices), indices int64, as their schemas); capi.<op>_backward(grad_out,
x, y, <the same arguments>) from the forward's input and output (an index
op's refuses every call; max's and min's take the indices in y's place).

The scan family's functions (capi.cumsum ... capi.logcumsumexp, tinycuda/scan.h)
likewise, from tc_scan_op and tc_scan_schema: capi.<op>(x, dim, *, reverse=False,
exclusive=False), the result new and C-contiguous of x's shape;
capi.<op>_backward(grad_out, x, y, <the same arguments>).

The triangle family's functions (capi.triu, capi.tril, tinycuda/triangle.h) likewise, from tc_triangle_op and
tc_triangle_schema: capi.<op>(x, diagonal=0), x of any dtype (its elements move by size). capi.histc and
capi.bincount (tinycuda/histogram.h) take torch's arguments; the sizes torch reads from the data (histc's range
when min == max, bincount's length) come from the core's range pass, read back (a sync on CUDA).

The losses family's functions (capi.mse_loss ... capi.triplet_margin_loss, tinycuda/losses.h) likewise, from
tc_loss_op and tc_loss_schema: capi.<op>(<torch.nn.functional's arguments>), the tensors of any strides, broadcast
as torch broadcasts them (triplet_margin_loss's C-contiguous); capi.<op>_backward(grad_out, <the same arguments>,
output_mask) returns a gradient for each operand tc_loss_grads names, at the broadcast shape.
"""
import ast
import ctypes
import functools
import inspect
import math
import numbers
import os
import re

import cffi
import numpy as np

from . import _build

__all__ = ["CapiError", "ffi", "lib", "version", "cuda_device_count", "built_with_cuda", "add_layer_norm",
           "add_layer_norm_backward", "add_rms_norm",
           "add_rms_norm_backward", "cross_entropy",
           "cross_entropy_backward", "flash_attention", "flash_attention_backward", "flash_attention_qkvpacked",
           "flash_attention_qkvpacked_backward", "fused_linear_cross_entropy", "gelu", "gelu_backward", "swiglu",
           "swiglu_backward", "geglu", "geglu_backward", "layer_norm", "layer_norm_backward", "linear",
           "linear_act", "linear_backward", "matmul", "relu", "relu_backward", "relu_mask", "relu_mask_backward",
           "rms_norm", "rms_norm_", "rms_norm_backward", "rope", "rope_", "rope_backward", "scale_bias_relu",
           "scale_bias_relu_backward", "softmax", "log_softmax", "softmax_backward", "square", "square_backward",
           "sum", "sum_backward", "where", "permute_copy", "transpose_copy", "contiguous", "histc", "bincount",
           "sort", "argsort", "topk", "sort_backward", "embedding", "embedding_backward", "adamw_",
           "multi_tensor_l2norm"]


class CapiError(RuntimeError):
    """A non-zero tc_status; `.status` is its code."""

    def __init__(self, message, status):
        super().__init__(message)
        self.status = status


ffi = None  # the cffi.FFI holding the headers' declarations, once lib() has run
_lib = None


def lib(path=None):
    """libtinycuda, loaded once: `path`, else $TINYCUDA_LIB, else tinycuda/lib/libtinycuda.so;
    declared from <its folder>/include, else from the source checkout's csrc/include."""
    global ffi, _lib
    if _lib is not None:
        return _lib
    path = path or os.environ.get("TINYCUDA_LIB") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "lib", "libtinycuda.so")
    if not os.path.exists(path):
        raise FileNotFoundError(f"tinycuda.capi: {path} not found; build it with "
                                "`pip install --no-build-isolation -e .` or `make -C csrc`")
    include = os.path.join(os.path.dirname(os.path.abspath(path)), "include")
    ffi = cffi.FFI()
    ffi.cdef(_build.declarations(include if os.path.isdir(include) else _build.INCLUDE))
    _lib = ffi.dlopen(path)
    return _lib


def _text(char_p):
    return ffi.string(char_p).decode()


def version():
    return _text(lib().tc_version())


def built_with_cuda():
    return bool(lib().tc_built_with_cuda())


def cuda_device_count():
    return lib().tc_cuda_device_count()


@functools.cache
def _constants(prefix):
    return sorted((n for n in dir(lib()) if n.startswith(prefix)), key=lambda n: getattr(lib(), n))


def _enum(op, arg, prefix, value):
    """The header's constant for a string option ('mean' -> TC_REDUCTION_MEAN)."""
    names = _constants(prefix)
    if not isinstance(value, str) or value != value.lower() or prefix + value.upper() not in names:
        choices = [repr(n[len(prefix):].lower()) for n in names]
        raise ValueError(f"tinycuda.capi.{op}: {arg} must be {', '.join(choices[:-1])} or {choices[-1]}, "
                         f"got {value!r}")
    return getattr(lib(), prefix + value.upper())


@functools.cache
def _dtypes(floating=True):
    """tc_dtype's dtypes as array libraries name them ('float32', ...): the float ones, every family's, or
    (floating=False) all of them, the integer ones and bool too (the families that take them: sort)."""
    names = [n[3:].lower() for n in _constants("TC_") if n in ffi.typeof("tc_dtype").relements]
    return [n for n in names if "float" in n] if floating else names


@functools.cache
def _entry(entry, device):
    """(entry point, its params struct's pointer type, {field: type}, workspace-size function or None)."""
    so = lib()
    fn = getattr(so, f"tc_{entry}_{device}")
    ptype = ffi.typeof(fn).args[0]
    return fn, ptype, {name: f.type for name, f in ptype.item.fields}, getattr(so, f"tc_{entry}_workspace_size", None)


# ---------------------------------------------------------------------------
# arrays: NumPy, __cuda_array_interface__, DLPack

_dlpack = cffi.FFI()  # DLPack's DLTensor, what a "dltensor" capsule points to
_dlpack.cdef("typedef struct { void* data; struct { int device_type, device_id; } device; int ndim; "
             "struct { uint8_t code, bits; uint16_t lanes; } dtype; int64_t* shape; int64_t* strides; "
             "uint64_t byte_offset; } DLTensor;")
_CAI_DTYPES = {"<f4": "float32", "<f2": "float16", "<f8": "float64", "|u1": "uint8", "<i4": "int32", "<i8": "int64",
               "|b1": "bool", "|i1": "int8", "<i2": "int16", "<u2": "uint16", "<u4": "uint32", "<u8": "uint64",
               "<c8": "complex64", "<c16": "complex128"}
_DL_DTYPES = {(2, 32): "float32", (2, 16): "float16", (2, 64): "float64", (4, 16): "bfloat16", (1, 8): "uint8",
              (0, 32): "int32", (0, 64): "int64", (6, 8): "bool", (0, 8): "int8", (0, 16): "int16", (1, 16): "uint16",
              (1, 32): "uint32", (1, 64): "uint64", (5, 64): "complex64", (5, 128): "complex128"}
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype, _capsule_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]


class _Array:
    """What the C call needs from one array argument; `keep` holds it alive.
    strides: in elements (any sign, 0 for a broadcast dim), None where the
    array's are not whole elements; itemsize: an element's bytes."""

    def __init__(self, src, ptr, shape, dtype, itemsize, device, strides, keep=None):
        self.src, self.ptr, self.shape, self.dtype, self.itemsize = src, ptr, tuple(shape), dtype, itemsize
        self.device, self.keep = device, keep
        self.strides = None if strides is None else tuple(strides)
        self.size = math.prod(self.shape)
        self.contiguous = self.size == 0 or self.strides is not None and all(
            n == 1 or s == c for n, s, c in zip(self.shape, self.strides, _c_strides(self.shape)))


def _c_strides(shape):
    """The element strides of a C-contiguous array of `shape`."""
    return [math.prod(shape[d + 1:]) for d in range(len(shape))]


def _elements(byte_strides, itemsize):
    """Byte strides (NumPy's, __cuda_array_interface__'s) in elements; None if one is not a whole element."""
    return None if any(s % itemsize for s in byte_strides) else [s // itemsize for s in byte_strides]


def _view(op, name, obj):
    if isinstance(obj, np.ndarray):
        return _Array(obj, obj.ctypes.data, obj.shape, obj.dtype.name, obj.itemsize, "cpu",
                      _elements(obj.strides, obj.itemsize))
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
        strides = cai.get("strides")  # None: C-contiguous
        strides = _c_strides(cai["shape"]) if strides is None else _elements(strides, itemsize)
        return _Array(obj, cai["data"][0], cai["shape"], dtype, itemsize, "cuda", strides)
    if hasattr(obj, "__dlpack__"):
        capsule = obj.__dlpack__()
        t = _dlpack.cast("DLTensor*", _capsule_pointer(capsule, b"dltensor"))
        shape = [t.shape[i] for i in range(t.ndim)]
        dtype = _DL_DTYPES.get((t.dtype.code, t.dtype.bits), f"dlpack({t.dtype.code},{t.dtype.bits})")
        # DLPack's strides count elements; NULL: C-contiguous
        strides = [t.strides[i] for i in range(t.ndim)] if t.strides != _dlpack.NULL else _c_strides(shape)
        device = {1: "cpu", 2: "cuda"}.get(t.device.device_type, f"dlpack-device-{t.device.device_type}")
        ptr = int(_dlpack.cast("uintptr_t", t.data)) + t.byte_offset
        return _Array(obj, ptr, shape, dtype, t.dtype.bits * t.dtype.lanes // 8, device, strides, keep=capsule)
    raise TypeError(f"tinycuda.capi.{op}: {name} must be a NumPy array or a CUDA array "
                    f"(__cuda_array_interface__ or DLPack), got {type(obj).__name__}")


def _check(op, named, strided=(), floating=True):
    """Views of the arrays of named (None: left out): C-contiguous (but those named in `strided`, which the
    kernel reads through their strides), of one supported dtype (a float one, or with floating=False any of
    tc_dtype's), on one device."""
    views = {name: _view(op, name, obj) for name, obj in named.items() if obj is not None}
    name0, a0 = next(iter(views.items()))
    for name, a in views.items():
        if a.dtype not in _dtypes(floating):
            raise TypeError(f"tinycuda.capi.{op}: {name} has dtype {a.dtype}; expected one of "
                            f"{', '.join(_dtypes(floating))}")
        if not a.contiguous and name not in strided:
            raise ValueError(f"tinycuda.capi.{op}: {name} must be C-contiguous")
        if a.device != a0.device:
            raise ValueError(f"tinycuda.capi.{op}: {name} is a {a.device} array but {name0} is a {a0.device} array")
        if a.dtype != a0.dtype:
            raise TypeError(f"tinycuda.capi.{op}: {name} has dtype {a.dtype} but {name0} has dtype {a0.dtype}")
    return views


def _same_shape(op, v, *names):
    for name in names[1:]:
        if v[name].shape != v[names[0]].shape:
            raise ValueError(f"tinycuda.capi.{op}: {name} has shape {v[name].shape} but {names[0]} has shape "
                             f"{v[names[0]].shape}")


def _xp(obj, device="cpu"):
    """The array library of obj, torch or CuPy (another library's CPU arrays: NumPy), for
    the little no kernel does: allocate, cast, move a dim, add."""
    mod = type(obj).__module__.split(".")[0]
    if mod in ("torch", "cupy"):
        return __import__(mod)  # the caller's arrays come from it: it is loaded already
    if device == "cpu":
        return np
    raise TypeError(f"tinycuda.capi: cannot make arrays like a {type(obj).__name__}; pass them in")


def _empty(op, like, shape, dtype=None):
    """A new contiguous array of like's kind and device; dtype a name (default: like's, which a torch tensor
    keeps whatever it is called: "<i2" from __cuda_array_interface__)."""
    xp = _xp(like.src, like.device)
    if xp.__name__ == "torch":
        return like.src.new_empty(shape, dtype=getattr(xp, dtype) if dtype and dtype != like.dtype else None)
    return xp.empty(shape, dtype=dtype or like.dtype)


def _astype(a, dtype):
    xp = _xp(a)
    return a.to(getattr(xp, dtype)) if xp.__name__ == "torch" else xp.asarray(a, dtype)


def _movedim(op, a, src, dst):
    """A contiguous copy of the array of view `a` with dim src moved to dst."""
    xp = _xp(a.src, a.device)
    return a.src.movedim(src, dst).contiguous() if xp.__name__ == "torch" else \
        xp.ascontiguousarray(xp.moveaxis(a.src, src, dst))


def _stream(like, stream):
    mod = type(like.src).__module__.split(".")[0]
    if stream is None and like.device == "cuda" and mod in ("torch", "cupy"):
        cuda = _xp(like.src).cuda
        stream = cuda.current_stream(like.src.device) if mod == "torch" else cuda.get_current_stream()
    return int(getattr(stream, "cuda_stream", getattr(stream, "ptr", stream or 0)))


def _array(op, name, given, like, shape, dtype=None):
    """`given` checked to be a C-contiguous (shape, dtype) array on `like`'s
    device (dtype: like's by default), or, for None or True, a new one."""
    dtype = dtype or like.dtype
    arr = _empty(op, like, shape, dtype) if given is None or given is True else given
    a = _view(op, name, arr)
    if a.shape != tuple(shape) or a.dtype != dtype or a.device != like.device or not a.contiguous:
        raise ValueError(f"tinycuda.capi.{op}: {name} must be a C-contiguous {dtype} {like.device} array of "
                         f"shape {tuple(shape)}, got {a.dtype} {a.shape} on {a.device}"
                         + ("" if a.contiguous else " (not contiguous)"))
    return arr, a


def _outputs(op, like, output_mask, specs):
    """(array, view) for each (name, given, shape) of a backward's gradients:
    new or checked where output_mask is set, else (None, None)."""
    if len(output_mask) != len(specs):
        raise ValueError(f"tinycuda.capi.{op}: output_mask must have {len(specs)} entries, got {output_mask!r}")
    res = []
    for want, (name, given, shape) in zip(output_mask, specs):
        if not want and given is not None:
            raise ValueError(f"tinycuda.capi.{op}: {name} is given but output_mask skips it")
        res.append(_array(op, name, given, like, shape) if want else (None, None))
    return res


def _acc(v):
    """The dtype of statistics and accumulators for arrays of view v's dtype."""
    return "float64" if v.dtype == "float64" else "float32"


def _call(op, like, /, stream=None, entry=None, **fields):
    """Runs tc_<entry>_cpu or _cuda (entry: op by default) on like's device with
    its params struct filled from `fields` (an array view becomes a pointer,
    None NULL, a string the header's constant of that name), dtype (where the
    struct has one) and stream from `like`, and on CUDA the workspace when
    tc_<entry>_workspace_size is declared. op and like are positional-only: a
    struct may have a field named op (tc_unary_params)."""
    fn, ptype, types, workspace_size = _entry(entry or op, "cuda" if like.device == "cuda" else "cpu")
    p = ffi.new(ptype)
    for name, value in fields.items():
        t = types[name]
        if isinstance(value, _Array):
            value = value.ptr
        elif isinstance(value, str):  # an enum constant's name
            if not hasattr(lib(), value) or not value.startswith("TC_"):
                raise ValueError(f"tinycuda.capi.{op}: {name} must be an int or a TC_* constant, got {value!r}")
            value = getattr(lib(), value)
        setattr(p, name, ffi.NULL if value is None else ffi.cast(t, value) if t.kind == "pointer" else value)
    if "dtype" in types and like.dtype in _dtypes(floating=False):  # a copy's params take an itemsize instead
        p.dtype = getattr(lib(), "TC_" + like.dtype.upper())
    p.stream = ffi.cast("void*", _stream(like, stream))
    if workspace_size is not None and like.device == "cuda" and (nbytes := workspace_size(p)):
        p.workspace_bytes = nbytes
        workspace = _empty(op, like, (p.workspace_bytes,), dtype="uint8")  # alive until the call is queued
        p.workspace = ffi.cast("void*", _view(op, "workspace", workspace).ptr)
    status = fn(p)
    if status != 0:
        raise CapiError(f"tinycuda.capi.{op}: {_text(lib().tc_status_string(status))}: "
                        f"{_text(lib().tc_last_error())}", status)


# ---------------------------------------------------------------------------
# ops of one shape: elementwise (relu, square, gelu, swiglu, geglu) and along a dim

def _shaped(op, named, outs, /, stream, entry=None, dim=None, **fields):
    """Most ops: the arrays of named ({argument: (struct field, array)}) and the outputs of outs ({argument:
    (struct field, array or None)}) of one shape; the kernel takes n elements (dim None) or rows of cols along
    dim, moved last when it is not (a contiguous copy each way, as the torch layer). Returns the output(s)."""
    v = _check(op, {arg: a for arg, (_, a) in named.items()})
    _same_shape(op, v, *v)
    first = last = next(iter(v.values()))
    nd, moved = max(len(first.shape), 1), False
    if dim is not None:
        if not -nd <= dim < nd:
            raise ValueError(f"tinycuda.capi.{op}: dim {dim} is out of range for {len(first.shape)} dims")
        moved = dim % nd != nd - 1
        if moved:
            v = _check(op, {arg: _movedim(op, a, dim % nd, -1) for arg, a in v.items()})
            last = next(iter(v.values()))
    res = {arg: _array(op, arg, None if moved else given, last, last.shape) for arg, (_, given) in outs.items()}
    size = dict(n=last.size) if dim is None else dict(zip(("rows", "cols"), _rows_cols(last.shape)))
    _call(op, last, stream, entry, **size, **{f: v[arg] for arg, (f, _) in named.items()},
          **{f: res[arg][1] for arg, (f, _) in outs.items()}, **fields)
    ys = []
    for arg, (_, given) in outs.items():
        y = _movedim(op, res[arg][1], -1, dim % nd) if moved else res[arg][0]
        if moved and given is not None:
            _array(op, arg, given, first, first.shape)[0][...] = y
            y = given
        ys.append(y)
    return ys[0] if len(ys) == 1 else tuple(ys)


def _rows_cols(shape):
    """[rows, cols] of an array over its last dim; a 0-dim one is one row of one column."""
    cols = shape[-1] if shape else 1
    return (math.prod(shape) // cols if cols else 0), cols


def relu(x, *, out=None, stream=None):
    """max(x, 0)."""
    return _shaped("relu", {"x": ("x", x)}, {"out": ("y", out)}, stream)


def relu_backward(grad_out, x, *, grad_x=None, stream=None):
    """grad_out * [x > 0]."""
    return _shaped("relu_backward", {"x": ("x", x), "grad_out": ("grad_y", grad_out)}, {"grad_x": ("grad_x", grad_x)},
                   stream)


def relu_mask(x, *, out=None, mask=None, stream=None):
    """(max(x, 0), bitmask): bit j of mask[i] is [x[8i + j] > 0], for relu_mask_backward."""
    v = _check("relu_mask", {"x": x})["x"]
    mask, mv = _array("relu_mask", "mask", mask, v, ((v.size + 7) // 8,), "uint8")
    return _shaped("relu_mask", {"x": ("x", x)}, {"out": ("y", out)}, stream, mask=mv), mask


def relu_mask_backward(grad_out, mask, *, grad_x=None, stream=None):
    """grad_out where the mask bit is set, else 0."""
    op = "relu_mask_backward"
    v = _check(op, {"grad_out": grad_out})["grad_out"]
    mv = _array(op, "mask", mask, v, ((v.size + 7) // 8,), "uint8")[1]
    return _shaped(op, {"grad_out": ("grad_y", grad_out)}, {"grad_x": ("grad_x", grad_x)}, stream, mask=mv)


def square(x, *, out=None, stream=None):
    """x * x."""
    return _shaped("square", {"x": ("x", x)}, {"out": ("y", out)}, stream)


def square_backward(grad_out, x, *, grad_x=None, stream=None):
    """2 * x * grad_out."""
    return _shaped("square_backward", {"x": ("x", x), "grad_out": ("grad_y", grad_out)},
                   {"grad_x": ("grad_x", grad_x)}, stream)


def gelu(x, approximate="none", *, out=None, stream=None):
    """x/2 (1 + erf(x / sqrt 2)) (approximate='none') or its tanh form, as F.gelu."""
    return _shaped("gelu", {"x": ("x", x)}, {"out": ("y", out)}, stream,
                   approximate=_enum("gelu", "approximate", "TC_GELU_", approximate))


def gelu_backward(grad_out, x, approximate="none", *, grad_x=None, stream=None):
    """grad_out * gelu'(x), x the forward input."""
    op = "gelu_backward"
    return _shaped(op, {"x": ("x", x), "grad_out": ("grad_y", grad_out)}, {"grad_x": ("grad_x", grad_x)}, stream,
                   approximate=_enum(op, "approximate", "TC_GELU_", approximate))


# ---------------------------------------------------------------------------
# the elementwise family (sigmoid ... rsqrt, add ... pow), the reduce family (mean ... argmin) and the scan
# family (cumsum ... logcumsumexp) and their backwards, made from the core's op lists

# The op names, read from the headers so that __all__ lists them without loading
# libtinycuda (whose path lib() may yet be given); each op's functions are made
# on first use (the module's __getattr__) from the library's tc_unary_schema,
# tc_binary_schema, tc_reduce_schema and tc_scan_schema. Every reduce op has its _backward name
# here: which ops have a gradient only the library says (tc_reduce_differentiable);
# the backward of one that has none refuses every call.
_UNARY = _build.unary_ops()
_BINARY = _build.binary_ops()
_REDUCE = _build.op_names("tc_reduce_op")
_SCAN = _build.op_names("tc_scan_op")
_TRIANGLE = _build.op_names("tc_triangle_op")  # no _backward: triu's gradient is triu
_LOSS = _build.op_names("tc_loss_op")
__all__ += [f for name in _UNARY + _BINARY + _REDUCE + _SCAN + _LOSS for f in (name, name + "_backward")]
__all__ += _TRIANGLE


_MADE = {}  # not in globals(): capi.max and capi.min would replace the builtins this module calls


def __getattr__(name):
    """capi.<op> and capi.<op>_backward of the elementwise, reduce, scan and losses families, and capi.<op> of
    the triangle family, made on first use."""
    if name in _MADE:
        return _MADE[name]
    if name in _TRIANGLE:
        _MADE[name] = _triangle_function(name)
        return _MADE[name]
    op = name.removesuffix("_backward")
    make = (_unary_functions if op in _UNARY else _binary_functions if op in _BINARY
            else _reduce_functions if op in _REDUCE else _scan_functions if op in _SCAN
            else _loss_functions if op in _LOSS else None)
    if make is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    forward, backward = make(op)
    _MADE.update({op: forward, op + "_backward": backward})
    return _MADE[name]


def _parse_schema(text):
    """(name, [(type, argument, default or inspect.Parameter.empty, keyword-only)]) of a schema of
    tc_unary_schema, tc_binary_schema or tc_reduce_schema: "leaky_relu(Tensor x, float negative_slope=0.01)
    -> Tensor", "add(Tensor a, Tensor b, *, float alpha=1.0) -> Tensor" (the arguments after its *
    keyword-only), "var(Tensor x, int[1]? dim=None, *, float correction=1.0, bool keepdim=False) -> Tensor"
    (a default in the schema's words: None, [], [0, 1], True and False are Python's too), "max(Tensor x,
    int dim, bool keepdim=False) -> (Tensor values, Tensor indices)" (the outputs: _returns)."""
    name, args = re.fullmatch(r"(\w+)\((.*)\) -> (?:Tensor|\(.*\))", text).groups()
    parsed, keyword = [], False
    for arg in re.split(r", (?![^\[]*\])", args):  # not at a list default's commas
        if arg == "*":
            keyword = True
            continue
        decl, _, default = arg.partition("=")
        typ, argname = decl.split()
        parsed.append((typ, argname, _default(default) if default else inspect.Parameter.empty, keyword))
    return name, parsed


def _returns(text):
    """The names of a schema's outputs where it returns several ("-> (Tensor values, Tensor indices)":
    ["values", "indices"]); [] for "-> Tensor"."""
    returns = re.fullmatch(r".* -> \((.*)\)", text)
    return [r.split()[1] for r in returns.group(1).split(", ")] if returns else []


def _default(text):
    """A schema's default as Python's: a literal (2.0, None, [], False), or inf, -inf or nan as torch writes them."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return float(text)


def _unary_scalars(op, floats, given):
    """The params' alpha and beta: the op's float arguments (floats: the schema's) in schema order, a bound
    left out (None, "float?") -inf for the first and +inf for the second, at least one of them given.
    (A binary op's one float, add's alpha, is its params' alpha too.)"""
    optional = [name for typ, name, *_ in floats if typ.endswith("?")]
    if optional and all(given[name] is None for name in optional):
        raise ValueError(f"tinycuda.capi.{op}: at least one of {' and '.join(optional)} must be given")
    values = []
    for k, (_, name, *_) in enumerate(floats):
        v = given[name]
        if v is None and name in optional:
            values.append((-math.inf, math.inf)[k])
            continue
        try:
            values.append(float(v))
        except (TypeError, ValueError):
            raise TypeError(f"tinycuda.capi.{op}: {name} must be a float{' or None' if name in optional else ''}, "
                            f"got {v!r}") from None
    return dict(zip(("alpha", "beta"), values))


def _contiguous(a):
    """A C-contiguous copy of the array of view `a` (a torch tensor, a CuPy or a NumPy array)."""
    xp = _xp(a.src, a.device)
    return a.src.contiguous() if xp.__name__ == "torch" else xp.ascontiguousarray(a.src)


def _unary(op, index, x, scalars, out, stream):
    v = _check(op, {"x": x}, strided=("x",))["x"]
    y, yv = _array(op, "out", out, v, v.shape)
    sizes, strides = v.shape, v.strides
    if len(sizes) > 8 or strides is None:
        # the params hold up to 8 dims of element strides: else x is read flat, from a contiguous copy if need be
        v = v if v.contiguous else _check(op, {"x": _contiguous(v)})["x"]
        sizes, strides = (v.size,), (1,)
    _call(op, v, stream, "unary", op=index, ndim=len(sizes), sizes=list(sizes), x_strides=list(strides), x=v,
          y=yv, **scalars)
    return y


def _unary_functions(name):
    """(capi.<name>, capi.<name>_backward), with the schema's arguments and defaults."""
    so = lib()
    index = getattr(so, "TC_UNARY_" + name.upper())
    schema_name, args = _parse_schema(_text(so.tc_unary_schema(index)))
    if schema_name != name:
        raise RuntimeError(f"tinycuda.capi: the library's schema of TC_UNARY_{name.upper()} names op "
                           f"{schema_name!r}: the headers and the library disagree")
    xname, floats = args[0][1], args[1:]
    saved = "y" if so.tc_unary_backward_reads_output(index) else "x"  # tinycuda/elementwise.h's names
    P = inspect.Parameter
    scalars = [P(n, P.KEYWORD_ONLY if kw else P.POSITIONAL_OR_KEYWORD, default=d) for _, n, d, kw in floats]
    keyword = [P("stream", P.KEYWORD_ONLY, default=None)]
    forward_sig = inspect.Signature([P(xname, P.POSITIONAL_OR_KEYWORD), *scalars,
                                     P("out", P.KEYWORD_ONLY, default=None), *keyword])
    backward_sig = inspect.Signature([P("grad_out", P.POSITIONAL_OR_KEYWORD), P(saved, P.POSITIONAL_OR_KEYWORD),
                                      *scalars, P("grad_x", P.KEYWORD_ONLY, default=None), *keyword])

    def bind(op, sig, args, kwargs):
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"tinycuda.capi.{op}: {e}") from None
        bound.apply_defaults()
        return bound.arguments

    def forward(*args, **kwargs):
        a = bind(name, forward_sig, args, kwargs)
        return _unary(name, index, a[xname], _unary_scalars(name, floats, a), a["out"], a["stream"])

    def backward(*args, **kwargs):
        op = name + "_backward"
        a = bind(op, backward_sig, args, kwargs)
        return _shaped(op, {saved: ("saved", a[saved]), "grad_out": ("grad_y", a["grad_out"])},
                       {"grad_x": ("grad_x", a["grad_x"])}, a["stream"], "unary_backward", op=index,
                       **_unary_scalars(op, floats, a))

    forward.__doc__ = (f"tinycuda.{name} through the C ABI, the core's schema {_text(so.tc_unary_schema(index))}: "
                       f"x of any strides (negative or 0 too), read in place up to 8 dims; out C-contiguous.")
    backward.__doc__ = (f"grad_out * {name}'(x), from {saved}, the forward's {'output' if saved == 'y' else 'input'}; "
                        f"all C-contiguous.")
    for fn, fname, sig in ((forward, name, forward_sig), (backward, name + "_backward", backward_sig)):
        fn.__name__ = fn.__qualname__ = fname
        fn.__signature__ = sig
    return forward, backward


def _bind(op, sig, args, kwargs):
    """sig's arguments bound to args and kwargs, defaults filled in; a TypeError naming the op."""
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as e:
        raise TypeError(f"tinycuda.capi.{op}: {e}") from None
    bound.apply_defaults()
    return bound.arguments


def _binary_operands(op, named):
    """The operands of named ({"a": ..., "b": ..., and for a backward "grad_out": ...}): ({name: view} of the
    arrays, {name: float} of the numbers). A Python number, or a 0-dim CPU array beside an operand that is
    not one (whatever its dtype: what a 0-dim CPU tensor is to the torch layer), is a host scalar; the arrays
    must share one dtype and device (no promotion here)."""
    a, b = named["a"], named["b"]
    if all(isinstance(v, numbers.Real) for v in (a, b)):
        raise TypeError(f"tinycuda.capi.{op}: a and b must be arrays or numbers, at least one of them an array; "
                        f"got {type(a).__name__} and {type(b).__name__}")
    views = {k: None if isinstance(v, numbers.Real) else _view(op, k, v) for k, v in (("a", a), ("b", b))}

    def cpu_scalar(v):
        return v is not None and v.shape == () and v.device == "cpu"

    scalars = {}
    for k, other in (("a", "b"), ("b", "a")):
        if views[k] is None:
            scalars[k] = float(named[k])
        elif cpu_scalar(views[k]) and views[other] is not None and not cpu_scalar(views[other]):
            scalars[k] = float(views[k].src.item() if hasattr(views[k].src, "item") else views[k].src)
    arrays = {k: v for k, v in named.items() if k not in scalars}
    return _check(op, arrays, strided=("a", "b")), scalars


def _broadcast_shape(op, v):
    """The broadcast of the shapes of the views v holds of a and b (and where's condition), torch's rule
    (right-aligned), at most 8 dims."""
    shapes = {k: v[k].shape for k in ("condition", "a", "b") if k in v}
    nd = max(map(len, shapes.values()))
    if nd > 8:
        raise ValueError(f"tinycuda.capi.{op}: at most 8 dims, got {nd}")
    out = [1] * nd
    for shape in shapes.values():
        for d, n in enumerate(shape, nd - len(shape)):
            if n != out[d] and 1 not in (n, out[d]):
                names = ["condition"] if "condition" in v else []
                said = [f"{k} has shape {v[k].shape if k in v else ()}" for k in names + ["a", "b"]]
                raise ValueError(f"tinycuda.capi.{op}: {', '.join(said[:-1])} and {said[-1]}, which do not "
                                 f"broadcast")
            out[d] = n if out[d] == 1 else out[d]
    return tuple(out)


def _strided_fields(op, v, names, scalars, shape):
    """The params' fields of the operands: sizes, each array's element strides in the output's shape (0 along
    a broadcast dim; one whose strides are not whole elements read from a contiguous copy), or its scalar."""
    nd = len(shape)
    fields = dict(ndim=nd, sizes=list(shape))
    for k in names:
        if k in scalars:
            fields.update({k: None, f"{k}_scalar": scalars[k], f"{k}_strides": [0] * nd})
            continue
        x = v[k] if v[k].strides is not None else _view(op, k, _contiguous(v[k]))
        lead = nd - len(x.shape)
        fields.update({k: x, f"{k}_strides": [
            0 if d < lead or x.shape[d - lead] == 1 else x.strides[d - lead] for d in range(nd)]})
        if k in ("a", "b"):
            fields[f"{k}_scalar"] = 0.0
    return fields


def _binary_functions(name):
    """(capi.<name>, capi.<name>_backward) of a binary op, with the schema's arguments and defaults."""
    so = lib()
    index = getattr(so, "TC_BINARY_" + name.upper())
    text = _text(so.tc_binary_schema(index))
    schema_name, args = _parse_schema(text)
    if schema_name != name or [a[:2] for a in args[:2]] != [("Tensor", "a"), ("Tensor", "b")]:
        raise RuntimeError(f"tinycuda.capi: the library's schema of TC_BINARY_{name.upper()} is {text!r}, not "
                           f"{name}(Tensor a, Tensor b, ...): the headers and the library disagree")
    floats = args[2:]
    P = inspect.Parameter
    scalars = [P(n, P.KEYWORD_ONLY if kw else P.POSITIONAL_OR_KEYWORD, default=d) for _, n, d, kw in floats]
    positional = [s for s in scalars if s.kind == P.POSITIONAL_OR_KEYWORD]
    keyword = [s for s in scalars if s.kind == P.KEYWORD_ONLY]
    forward_sig = inspect.Signature([P("a", P.POSITIONAL_OR_KEYWORD), P("b", P.POSITIONAL_OR_KEYWORD), *positional,
                                     *keyword, P("out", P.KEYWORD_ONLY, default=None),
                                     P("stream", P.KEYWORD_ONLY, default=None)])
    backward_sig = inspect.Signature([
        P("grad_out", P.POSITIONAL_OR_KEYWORD), P("a", P.POSITIONAL_OR_KEYWORD), P("b", P.POSITIONAL_OR_KEYWORD),
        P("output_mask", P.POSITIONAL_OR_KEYWORD, default=(True, True)), *positional, *keyword,
        P("grad_a", P.KEYWORD_ONLY, default=None), P("grad_b", P.KEYWORD_ONLY, default=None),
        P("stream", P.KEYWORD_ONLY, default=None)])

    def forward(*args, **kwargs):
        g = _bind(name, forward_sig, args, kwargs)
        v, host = _binary_operands(name, {"a": g["a"], "b": g["b"]})
        shape = _broadcast_shape(name, v)
        like = next(iter(v.values()))
        out, outv = _array(name, "out", g["out"], like, shape)
        _call(name, like, g["stream"], "binary", op=index, **_strided_fields(name, v, ("a", "b"), host, shape),
              out=outv, **_unary_scalars(name, floats, g))
        return out

    def backward(*args, **kwargs):
        op = name + "_backward"
        g = _bind(op, backward_sig, args, kwargs)
        v, host = _binary_operands(op, {"grad_out": g["grad_out"], "a": g["a"], "b": g["b"]})
        shape = _broadcast_shape(op, v)
        gv = v["grad_out"]
        if gv.shape != shape:
            raise ValueError(f"tinycuda.capi.{op}: grad_out has shape {gv.shape} but a and b broadcast to {shape}")
        if not gv.contiguous:
            raise ValueError(f"tinycuda.capi.{op}: grad_out must be C-contiguous")
        (ga, gav), (gb, gbv) = _outputs(op, gv, tuple(g["output_mask"]),
                                        (("grad_a", g["grad_a"], shape), ("grad_b", g["grad_b"], shape)))
        _call(op, gv, g["stream"], "binary_backward", op=index, **_strided_fields(op, v, ("a", "b"), host, shape),
              grad_out=gv, grad_a=gav, grad_b=gbv, **_unary_scalars(op, floats, g))
        return ga, gb

    forward.__doc__ = (
        f"tinycuda.{name} through the C ABI, the core's schema {text}. a, b: arrays of any strides (negative or 0 "
        f"too), read in place, broadcast as torch broadcasts (up to 8 dims), or numbers; a 0-dim CPU array beside "
        f"a larger or a CUDA one is read as a number too, as the torch layer reads a 0-dim CPU tensor. The arrays "
        f"must have one dtype and device: the C door does not promote (convert one first). out: C-contiguous, "
        f"of the broadcast shape and the arrays' dtype.")
    backward.__doc__ = (
        f"(grad_a, grad_b) of {name}(a, b) for grad_out (C-contiguous, of the broadcast shape and the arrays' "
        f"dtype), a and b the forward's operands (arrays of any strides or numbers, as there). Each gradient is "
        f"written at the broadcast shape, as the core writes it and as torch.ops.tinycuda.{name}_backward "
        f"returns it: the caller sums it over a's (b's) broadcast dims. output_mask picks them; a skipped one is "
        f"None.")
    for fn, fname, sig in ((forward, name, forward_sig), (backward, name + "_backward", backward_sig)):
        fn.__name__ = fn.__qualname__ = fname
        fn.__signature__ = sig
    return forward, backward


def where(condition, a, b, *, out=None, stream=None):
    """tinycuda.where through the C ABI: condition ? a : b, broadcast over all three (up to 8 dims), each read
    through its strides. condition: a bool array on a's and b's device (a 0-dim CPU one goes with CUDA a and b
    too, as the torch op takes it); a, b: as a binary op's (arrays of one dtype, no promotion, or numbers, or a
    0-dim CPU array beside a larger one). out: C-contiguous, of the broadcast shape and the arrays' dtype. Its
    gradient is where again (where(condition, grad, 0), where(condition, 0, grad)): no backward entry point."""
    op = "where"
    v, host = _binary_operands(op, {"a": a, "b": b})
    like = next(iter(v.values()))
    c = _view(op, "condition", condition)
    if c.dtype != "bool":
        raise TypeError(f"tinycuda.capi.{op}: condition must be bool, got {c.dtype}")
    if c.device != like.device:
        if c.shape != () or c.device != "cpu":
            raise ValueError(f"tinycuda.capi.{op}: condition is a {c.device} array but a and b are "
                             f"{like.device} arrays")
        value = bool(c.src.item() if hasattr(c.src, "item") else c.src)
        moved = _empty(op, like, (), "bool")  # the 0-dim CPU condition's value on a's device
        _fill(moved, value)
        c = _view(op, "condition", moved)
    v = {"condition": c, **v}
    shape = _broadcast_shape(op, v)
    res, outv = _array(op, "out", out, like, shape)
    _call(op, like, stream, **_strided_fields(op, v, ("condition", "a", "b"), host, shape), out=outv)
    return res


def _glu(op, named, outs, approximate, stream):
    """glu's kernels: act silu (swiglu, approximate None) or gelu (geglu, approximate as gelu's)."""
    if approximate is not None:
        _enum(op, "approximate", "TC_GELU_", approximate)
    act = "TC_GLU_SILU" if approximate is None else "TC_GLU_GELU" + ("_TANH" if approximate == "tanh" else "")
    return _shaped(op, named, outs, stream, "glu_backward" if "grad_a" in outs else "glu", act=act)


def swiglu(a, b, *, out=None, stream=None):
    """silu(a) * b."""
    return _glu("swiglu", {"a": ("a", a), "b": ("b", b)}, {"out": ("y", out)}, None, stream)


def swiglu_backward(grad_out, a, b, *, grad_a=None, grad_b=None, stream=None):
    """(grad_out * b * silu'(a), grad_out * silu(a)) in one pass."""
    return _glu("swiglu_backward", {"a": ("a", a), "grad_out": ("grad_y", grad_out), "b": ("b", b)},
                {"grad_a": ("grad_a", grad_a), "grad_b": ("grad_b", grad_b)}, None, stream)


def geglu(a, b, approximate="tanh", *, out=None, stream=None):
    """gelu(a) * b, gelu's tanh form by default ('none': the erf form)."""
    return _glu("geglu", {"a": ("a", a), "b": ("b", b)}, {"out": ("y", out)}, approximate, stream)


def geglu_backward(grad_out, a, b, approximate="tanh", *, grad_a=None, grad_b=None, stream=None):
    """(grad_out * b * gelu'(a), grad_out * gelu(a)) in one pass."""
    return _glu("geglu_backward", {"a": ("a", a), "grad_out": ("grad_y", grad_out), "b": ("b", b)},
                {"grad_a": ("grad_a", grad_a), "grad_b": ("grad_b", grad_b)}, approximate, stream)


# ---------------------------------------------------------------------------
# the reduce family: mean ... argmin over any set of dims (tinycuda/reduce.h), made from the core's op list

def _reduced_dims(op, typ, dim, nd):
    """The dims a reduction over `dim` (the schema's type typ: "int[1]", "int[1]?", "int?" or "int", max's: no
    None) reduces of an array of nd dims, as a set: the torch layer's rule and words (csrc/torch/reduce.cpp).
    None or []: every dim; a negative dim counts from the end; a 0-dim array takes dim 0 and -1 and reduces
    nothing."""
    def is_int(d):
        return isinstance(d, numbers.Integral) and not isinstance(d, bool)

    listed = typ.startswith("int[")
    if dim is None and typ != "int":
        dims = []
    elif is_int(dim):
        dims = [int(dim)]
    elif listed and isinstance(dim, (list, tuple)) and all(map(is_int, dim)):
        dims = [int(d) for d in dim]
    else:
        raise TypeError(f"tinycuda.capi.{op}: dim must be an int{', a list of ints' if listed else ''}"
                        f"{' or None' if typ != 'int' else ''}, got {dim!r}")
    if not dims:
        return set(range(nd))
    reduced, lim = set(), max(nd, 1)
    for d in dims:
        if not -lim <= d < lim:
            raise ValueError(f"tinycuda.capi.{op}: dim {d} is out of range for a tensor of {nd} dims")
        if nd == 0:
            continue
        if d % nd in reduced:
            raise ValueError(f"tinycuda.capi.{op}: dim {d % nd} appears more than once in the list of dims")
        reduced.add(d % nd)
    return reduced


def _reduced_shape(shape, reduced, keepdim):
    """The result's shape: the kept dims in order, and with keepdim a 1 for each reduced one."""
    return tuple(1 if d in reduced else n for d, n in enumerate(shape) if keepdim or d not in reduced)


def _reduce_runs(op, shape, reduced):
    """(sizes, reduce_mask) of the params for a C-contiguous array of `shape`: its own dims up to 8; past 8,
    each run of neighbouring kept (reduced) dims merged into one, as the torch layer merges them."""
    if len(shape) <= 8:
        return list(shape), _mask_bits(reduced)
    sizes, kinds = [], []
    for d, n in enumerate(shape):
        if kinds and kinds[-1] == (d in reduced):
            sizes[-1] *= n
        else:
            sizes.append(n)
            kinds.append(d in reduced)
    if len(sizes) > 8:
        raise ValueError(f"tinycuda.capi.{op}: x has {len(shape)} dims whose reduced and kept ones alternate "
                         f"{len(sizes)} times; at most 8")
    return sizes, _mask_bits(d for d, r in enumerate(kinds) if r)


def _mask_bits(dims):
    return functools.reduce(lambda m, d: m | 1 << d, dims, 0)


def _reduce_functions(name):
    """(capi.<name>, capi.<name>_backward) of a reduce op, with the schema's arguments and defaults. The
    arguments after x are read by name, as the torch layer reads them: dim, keepdim, and the op's float
    (var's and std's correction, vector_norm's ord: the params' scalar)."""
    so = lib()
    index = getattr(so, "TC_REDUCE_" + name.upper())
    text = _text(so.tc_reduce_schema(index))
    schema_name, args = _parse_schema(text)
    known = {n for typ, n, *_ in args[1:] if n in ("dim", "keepdim") or typ == "float"}
    floats = [n for typ, n, *_ in args if typ == "float"]  # (this module's sum is capi.sum)
    if (schema_name != name or args[0][0] != "Tensor" or "dim" not in known or len(known) != len(args) - 1
            or len(floats) > 1):
        raise RuntimeError(f"tinycuda.capi: the library's schema of TC_REDUCE_{name.upper()} is {text!r}, not "
                           f"{name}(Tensor x, dim, keepdim and at most one float): the headers and the library "
                           f"disagree")
    xname, rest = args[0][1], args[1:]
    dim_type = next(typ for typ, n, *_ in rest if n == "dim")
    scalar = floats[0] if floats else None
    differentiable = so.tc_reduce_differentiable(index) == 1
    returns = _returns(text)  # max, min: ["values", "indices"]
    saved = returns[-1] if returns else "y"  # what the backward reads besides x
    P = inspect.Parameter
    params = [P(n, P.KEYWORD_ONLY if kw else P.POSITIONAL_OR_KEYWORD, default=d) for _, n, d, kw in rest]
    positional = [p for p in params if p.kind == P.POSITIONAL_OR_KEYWORD]
    keyword = [p for p in params if p.kind == P.KEYWORD_ONLY]
    stream = P("stream", P.KEYWORD_ONLY, default=None)
    forward_sig = inspect.Signature([P(xname, P.POSITIONAL_OR_KEYWORD), *positional, *keyword,
                                     P("out", P.KEYWORD_ONLY, default=None), stream])
    backward_sig = inspect.Signature([*(P(n, P.POSITIONAL_OR_KEYWORD) for n in ("grad_out", xname, saved)),
                                      *positional, *keyword, P("grad_x", P.KEYWORD_ONLY, default=None), stream])

    def options(op, g, nd):
        """(the reduced dims, keepdim, the params' scalar) of bound arguments g."""
        keepdim = g.get("keepdim", False)
        if not isinstance(keepdim, (bool, np.bool_)):
            raise TypeError(f"tinycuda.capi.{op}: keepdim must be a bool, got {keepdim!r}")
        value = 0.0
        if scalar is not None:
            try:
                value = float(g[scalar])
            except (TypeError, ValueError):
                raise TypeError(f"tinycuda.capi.{op}: {scalar} must be a float, got {g[scalar]!r}") from None
        return _reduced_dims(op, dim_type, g["dim"], nd), bool(keepdim), value

    def forward(*args, **kwargs):
        g = _bind(name, forward_sig, args, kwargs)
        v = _check(name, {xname: g[xname]}, strided=(xname,))[xname]
        reduced, keepdim, value = options(name, g, len(v.shape))
        shape = _reduced_shape(v.shape, reduced, keepdim)
        out, out_indices = (g["out"], None) if not returns or g["out"] is None else g["out"]
        y, yv = _array(name, "out", out, v, shape, None if differentiable else "int64")
        i, iv = _array(name, "out", out_indices, v, shape, "int64") if returns else (None, None)
        if len(v.shape) > 8 or v.strides is None:
            # past 8 dims (merged: _reduce_runs), or strides of no whole element: read from a contiguous copy
            _reduce_runs(name, v.shape, reduced)  # its error before the copy
            v = v if v.contiguous else _check(name, {xname: _contiguous(v)})[xname]
            sizes, mask = _reduce_runs(name, v.shape, reduced)
            strides = _c_strides(sizes)
        else:
            sizes, mask, strides = list(v.shape), _mask_bits(reduced), list(v.strides)
        _call(name, v, g["stream"], "reduce", op=index, scalar=value, ndim=len(sizes), sizes=sizes,
              x_strides=strides, reduce_mask=mask, x=v, y=yv, indices=iv)
        return (y, i) if returns else y

    def backward(*args, **kwargs):
        op = name + "_backward"
        g = _bind(op, backward_sig, args, kwargs)
        if not differentiable:
            raise TypeError(f"tinycuda.capi.{op}: {name} has no gradient (its result is an int64 index)")
        # max's, min's: x for its shape alone (any strides), the int64 indices checked apart
        v = _check(op, {xname: g[xname], "grad_out": g["grad_out"], **({} if returns else {"y": g["y"]})},
                   strided=(xname,) if returns else ())
        xv = v[xname]
        reduced, keepdim, value = options(op, g, len(xv.shape))
        shape = _reduced_shape(xv.shape, reduced, keepdim)
        if returns:
            if g[saved] is None:
                raise TypeError(f"tinycuda.capi.{op}: {saved} must be an int64 array, got None")
            v[saved] = _array(op, saved, g[saved], v["grad_out"], shape, "int64")[1]
        for arg in ("grad_out", saved):
            if v[arg].shape != shape:
                raise ValueError(f"tinycuda.capi.{op}: {arg} must have shape {shape}, got {v[arg].shape}")
        gx, gxv = _array(op, "grad_x", g["grad_x"], xv, xv.shape)
        sizes, mask = _reduce_runs(op, xv.shape, reduced)
        _call(op, xv, g["stream"], "reduce_backward", op=index, scalar=value, ndim=len(sizes), sizes=sizes,
              reduce_mask=mask, grad_y=v["grad_out"], x=None if returns else xv, y=None if returns else v["y"],
              indices=v[saved] if returns else None, grad_x=gxv)
        return gx

    dtype = "x's dtype" if differentiable else "int64 (an index into the reduced dims, row-major)"
    forward.__doc__ = (
        f"tinycuda.{name} through the C ABI, the core's schema {text}. x: an array of any strides (negative or 0 "
        f"too), read in place (past 8 dims, from a contiguous copy whose neighbouring kept or reduced dims are "
        f"merged, at most 8 runs). dim: an int{', a list of ints' if dim_type.startswith('int[') else ''} or "
        f"None; None or [] reduces every dim, a negative dim counts from the end. out: C-contiguous over the kept "
        f"dims (keepdim: a 1 for each reduced one), of {dtype}"
        + (f"; ({', '.join(returns)}) are returned, out a pair of them, the indices int64." if returns else "."))
    backward.__doc__ = (
        f"grad_x of {name}(x) for grad_out, from x and y, the forward's input and output, all C-contiguous, of "
        f"one dtype, with the forward's arguments; grad_x C-contiguous, of x's shape." if differentiable and
        not returns else
        f"grad_x of {name}(x) for grad_out (the values'), from x (its shape) and the forward's int64 {saved}: "
        f"grad_out at the element each index names, 0 elsewhere; grad_x C-contiguous, of x's shape." if returns
        else f"{name} has no gradient (tc_reduce_differentiable is 0): every call raises TypeError.")
    for fn, fname, sig in ((forward, name, forward_sig), (backward, name + "_backward", backward_sig)):
        fn.__name__ = fn.__qualname__ = fname
        fn.__signature__ = sig
    return forward, backward


# ---------------------------------------------------------------------------
# the scan family: cumsum ... logcumsumexp along one dim (tinycuda/scan.h), made from the core's op list

def _scan_shape(op, shape, dim):
    """(outer, n, inner) of an array of `shape` around dim: the torch layer's rule and words
    (csrc/torch/scan.cpp); a 0-dim array takes dim 0 and -1."""
    if not isinstance(dim, numbers.Integral) or isinstance(dim, bool):
        raise TypeError(f"tinycuda.capi.{op}: dim must be an int, got {dim!r}")
    nd = len(shape)
    if not -max(nd, 1) <= dim < max(nd, 1):
        raise ValueError(f"tinycuda.capi.{op}: dim {dim} is out of range for a tensor of {nd} dims")
    if nd == 0:
        return 1, 1, 1
    d = dim % nd
    return math.prod(shape[:d]), shape[d], math.prod(shape[d + 1:])


def _scan_functions(name):
    """(capi.<name>, capi.<name>_backward) of a scan op, with the schema's arguments and defaults (dim, and the
    keyword-only reverse and exclusive, read by name as the torch layer reads them)."""
    so = lib()
    index = getattr(so, "TC_SCAN_" + name.upper())
    text = _text(so.tc_scan_schema(index))
    schema_name, args = _parse_schema(text)
    if schema_name != name or [n for _, n, *_ in args[1:]] != ["dim", "reverse", "exclusive"]:
        raise RuntimeError(f"tinycuda.capi: the library's schema of TC_SCAN_{name.upper()} is {text!r}, not "
                           f"{name}(Tensor x, int dim, *, bool reverse, bool exclusive): the headers and the library "
                           f"disagree")
    xname = args[0][1]
    P = inspect.Parameter
    rest = [P(n, P.KEYWORD_ONLY if kw else P.POSITIONAL_OR_KEYWORD, default=d) for _, n, d, kw in args[1:]]
    stream = P("stream", P.KEYWORD_ONLY, default=None)
    forward_sig = inspect.Signature([P(xname, P.POSITIONAL_OR_KEYWORD), *rest, P("out", P.KEYWORD_ONLY, default=None),
                                     stream])
    backward_sig = inspect.Signature([*(P(n, P.POSITIONAL_OR_KEYWORD) for n in ("grad_out", xname, "y")), *rest,
                                      P("grad_x", P.KEYWORD_ONLY, default=None), stream])

    def flags(op, g):
        for f in ("reverse", "exclusive"):
            if not isinstance(g[f], (bool, np.bool_)):
                raise TypeError(f"tinycuda.capi.{op}: {f} must be a bool, got {g[f]!r}")
        return dict(reverse=int(g["reverse"]), exclusive=int(g["exclusive"]))

    def forward(*args, **kwargs):
        g = _bind(name, forward_sig, args, kwargs)
        v = _check(name, {xname: g[xname]}, strided=(xname,))[xname]
        outer, n, inner = _scan_shape(name, v.shape, g["dim"])
        if not v.contiguous:  # the kernels read [outer, n, inner] contiguous, as the torch layer's copy
            v = _check(name, {xname: _contiguous(v)})[xname]
        y, yv = _array(name, "out", g["out"], v, v.shape)
        _call(name, v, g["stream"], "scan", op=index, outer=outer, n=n, inner=inner, x=v, y=yv, **flags(name, g))
        return y

    def backward(*args, **kwargs):
        op = name + "_backward"
        g = _bind(op, backward_sig, args, kwargs)
        v = _check(op, {xname: g[xname], "grad_out": g["grad_out"], "y": g["y"]})
        _same_shape(op, v, xname, "grad_out", "y")
        xv = v[xname]
        outer, n, inner = _scan_shape(op, xv.shape, g["dim"])
        gx, gxv = _array(op, "grad_x", g["grad_x"], xv, xv.shape)
        _call(op, xv, g["stream"], "scan_backward", op=index, outer=outer, n=n, inner=inner, grad_y=v["grad_out"],
              x=xv, y=v["y"], grad_x=gxv, **flags(op, g))
        return gx

    forward.__doc__ = (
        f"tinycuda.{name} through the C ABI, the core's schema {text}. x: an array of any strides (read from a "
        f"C-contiguous copy when it is not one); dim: an int, negative from the end; reverse: scan from the end; "
        f"exclusive: each output leaves its own element out. out: C-contiguous, of x's shape and dtype.")
    backward.__doc__ = (
        f"grad_x of {name}(x) for grad_out, from x and y, the forward's input and output, all C-contiguous, of one "
        f"shape and dtype, with the forward's arguments; grad_x C-contiguous, of x's shape.")
    for fn, fname, sig in ((forward, name, forward_sig), (backward, name + "_backward", backward_sig)):
        fn.__name__ = fn.__qualname__ = fname
        fn.__signature__ = sig
    return forward, backward


# ---------------------------------------------------------------------------
# the triangle family: triu, tril (tinycuda/triangle.h), made from the core's op list

def _triangle_function(name):
    """capi.<name> of a triangle op, with the schema's arguments and defaults (diagonal); any dtype."""
    so = lib()
    index = getattr(so, "TC_TRIANGLE_" + name.upper())
    text = _text(so.tc_triangle_schema(index))
    schema_name, args = _parse_schema(text)
    if schema_name != name or [n for _, n, *_ in args[1:]] != ["diagonal"]:
        raise RuntimeError(f"tinycuda.capi: the library's schema of TC_TRIANGLE_{name.upper()} is {text!r}, not "
                           f"{name}(Tensor x, int diagonal): the headers and the library disagree")
    xname = args[0][1]
    P = inspect.Parameter
    sig = inspect.Signature([P(xname, P.POSITIONAL_OR_KEYWORD),
                             *(P(n, P.POSITIONAL_OR_KEYWORD, default=d) for _, n, d, _ in args[1:]),
                             P("out", P.KEYWORD_ONLY, default=None), P("stream", P.KEYWORD_ONLY, default=None)])

    def forward(*a, **kw):
        g = _bind(name, sig, a, kw)
        diagonal = g["diagonal"]
        if not isinstance(diagonal, numbers.Integral) or isinstance(diagonal, bool):
            raise TypeError(f"tinycuda.capi.{name}: diagonal must be an int, got {diagonal!r}")
        v = _view(name, xname, g[xname])
        if len(v.shape) < 2:
            raise ValueError(f"tinycuda.capi.{name}: x must have at least 2 dims, got {len(v.shape)}")
        if not v.contiguous:  # the kernels read [batch, rows, cols] contiguous, as the torch layer's copy
            v = _view(name, xname, _contiguous(v))
        y, yv = _array(name, "out", g["out"], v, v.shape)
        _call(name, v, g["stream"], "triangle", op=index, batch=math.prod(v.shape[:-2]), rows=v.shape[-2],
              cols=v.shape[-1], diagonal=int(diagonal), elem_bytes=v.itemsize, x=v, y=yv)
        return y

    forward.__doc__ = (
        f"tinycuda.{name} through the C ABI, the core's schema {text}. x: an array of any dtype (its elements move "
        f"by their size) and at least 2 dims, any strides (read from a C-contiguous copy when it is not one). out: "
        f"C-contiguous, of x's shape and dtype.")
    forward.__name__ = forward.__qualname__ = name
    forward.__signature__ = sig
    return forward


# ---------------------------------------------------------------------------
# the histogram family: histc, bincount (tinycuda/histogram.h)

_INTEGERS = ("uint8", "int8", "int16", "int32", "int64")


def _data_range(op, v, stream):
    """[min, max] of the array of view v (the range pass; an int64 v's as ints), read back: a sync on CUDA."""
    ints = v.dtype == "int64"
    out, ov = _array(op, "range", None, v, (2,), "int64" if ints else "float64")
    _call(op, v, stream, "histogram_range", x_int64=int(ints), n=v.size, x=v, out=ov)
    return out.tolist()


def histc(x, bins=100, min=0, max=0, *, out=None, stream=None):
    """torch.histc: the counts of x's values in `bins` equal bins over [min, max], in x's dtype; min == max: the
    data's range (read back: a sync on CUDA), widened by 1 each way where it is one value, as the torch layer
    (csrc/torch/histogram.cpp). x: any shape and strides (a C-contiguous copy when it is not one)."""
    op = "histc"
    v = _check(op, {"x": x}, strided=("x",))["x"]
    if not v.contiguous:
        v = _check(op, {"x": _contiguous(v)})["x"]
    if not isinstance(bins, numbers.Integral) or isinstance(bins, bool) or bins <= 0:
        raise ValueError(f"tinycuda.capi.{op}: bins must be an int > 0, got {bins!r}")
    lo, hi = float(min), float(max)
    if lo == hi and v.size:
        lo, hi = _data_range(op, v, stream)
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    res, rv = _array(op, "out", out, v, (bins,))
    _call(op, v, stream, n=v.size, bins=bins, min=lo, max=hi, x=v, out=rv)  # the core checks the range
    return res


def bincount(x, weights=None, minlength=0, *, out=None, stream=None):
    """torch.bincount: how often each value of the 1-D non-negative integer x occurs (int64), or the sum of its
    weights (float32 weights: float32; any other: converted to float64, as torch), max(max(x) + 1, minlength)
    long (the range pass, read back: a sync on CUDA); an empty x gives int64 zeros of minlength."""
    op = "bincount"
    v = _view(op, "x", x)
    if v.dtype not in _INTEGERS or len(v.shape) != 1:
        raise TypeError(f"tinycuda.capi.{op}: x must be a 1-D array of {', '.join(_INTEGERS)}, got {v.dtype} of "
                        f"shape {v.shape}")
    if not isinstance(minlength, numbers.Integral) or minlength < 0:
        raise ValueError(f"tinycuda.capi.{op}: minlength must be an int >= 0, got {minlength!r}")
    if v.dtype != "int64" or not v.contiguous:
        v = _view(op, "x", _astype(_contiguous(v), "int64"))
    w = None
    if weights is not None:
        w = _view(op, "weights", weights)
        if w.shape != v.shape or w.device != v.device:
            raise ValueError(f"tinycuda.capi.{op}: weights must be a 1-D {v.device} array as long as x "
                             f"({v.shape[0]}), got shape {w.shape} on {w.device}")
        if w.dtype != "float32" or not w.contiguous:
            w = _view(op, "weights", _astype(_contiguous(w), "float64" if w.dtype != "float32" else w.dtype))
    if v.size == 0:
        w, bins = None, minlength  # torch's int64 zeros, weights or not
    else:
        lo, hi = _data_range(op, v, stream)
        if v.device == "cuda" and lo < 0:
            raise ValueError(f"tinycuda.capi.{op}: x must be non-negative, got {lo} (its minimum)")
        bins = max(hi + 1, minlength, 1)
    like = v if w is None else w
    res, rv = _array(op, "out", out, like, (bins,), "int64" if w is None else None)
    _call(op, like, stream, n=v.size, bins=bins, x=v, weights=w, out=rv)
    return res


# ---------------------------------------------------------------------------
# the losses family: mse_loss ... triplet_margin_loss (tinycuda/losses.h), made from the core's op list

def _loss_shape(op, rule, views):
    """The broadcast shape of views ({name: view}, the first the op's input), checked as tc_loss_shape's rule
    says: the torch layer's rule and words (csrc/torch/losses.cpp)."""
    so = lib()
    (first, x) = next(iter(views.items()))
    said = ", ".join(f"{n} has shape {list(v.shape)}" for n, v in views.items())
    for k, (n, v) in enumerate(views.items()):
        if rule in (so.TC_LOSS_SHAPE_SAME_NDIM, so.TC_LOSS_SHAPE_ROWS) and len(v.shape) != len(x.shape):
            raise ValueError(f"tinycuda.capi.{op}: every tensor must have as many dims as {first}: {said}")
        if (rule == so.TC_LOSS_SHAPE_ROWS or (rule == so.TC_LOSS_SHAPE_TARGET_AS_INPUT and k == 1)) \
                and v.shape != x.shape:
            raise ValueError(f"tinycuda.capi.{op}: {n} must have {first}'s shape {list(x.shape)}, got {list(v.shape)}")
        if rule == so.TC_LOSS_SHAPE_TARGET_AS_INPUT and k > 1 and not (  # torch scales the loss in place
                len(v.shape) <= len(x.shape) and all(s in (1, x.shape[d - len(v.shape)]) for d, s in enumerate(v.shape))):
            raise ValueError(f"tinycuda.capi.{op}: {n} has shape {list(v.shape)}, which does not broadcast to "
                             f"{first}'s shape {list(x.shape)}")
    nd = max(len(v.shape) for v in views.values())
    if nd > 8:
        raise ValueError(f"tinycuda.capi.{op}: at most 8 dims, got {nd}")
    shape = [1] * nd
    for v in views.values():
        for d, m in enumerate(v.shape, nd - len(v.shape)):
            if m != shape[d] and 1 not in (m, shape[d]):
                raise ValueError(f"tinycuda.capi.{op}: {said}, which do not broadcast")
            shape[d] = m if shape[d] == 1 else shape[d]
    return tuple(shape)


def _loss_reduction(op, index, g):
    """The params' reduction: torch's legacy one where size_average or reduce is given, else reduction's."""
    name, legacy = g["reduction"], [g.get(k) for k in ("size_average", "reduce")]
    if any(f is not None for f in legacy):
        if name == "batchmean":
            raise ValueError(f"tinycuda.capi.{op}: reduction='batchmean' cannot go with size_average or reduce "
                             f"(torch divides their legacy reduction by the batch): give reduction alone")
        mean, total = (True if f is None else bool(f) for f in legacy)
        name = "mean" if mean and total else "sum" if total else "none"
    if not isinstance(name, str):
        raise TypeError(f"tinycuda.capi.{op}: reduction must be a str, got {name!r}")
    r = ffi.new("tc_loss_reduction*")
    if lib().tc_loss_parse_reduction(index, name.encode(), r) != 0:
        raise ValueError(f"tinycuda.capi.{op}: {_text(lib().tc_last_error()).split(': ', 1)[1]}")
    return r[0]


def _loss_functions(name):
    """(capi.<name>, capi.<name>_backward) of a loss, with the schema's arguments and defaults: the tensors are the
    params' operands in schema order; the options are read by name, as the torch layer reads them."""
    so = lib()
    index = getattr(so, "TC_LOSS_" + name.upper())
    text = _text(so.tc_loss_schema(index))
    schema_name, args = _parse_schema(text)
    if schema_name != name:
        raise RuntimeError(f"tinycuda.capi: the library's schema of TC_LOSS_{name.upper()} names op {schema_name!r}: "
                           f"the headers and the library disagree")
    tensors = [n for typ, n, *_ in args if typ.startswith("Tensor")]
    grads = [n for k, n in enumerate(tensors) if so.tc_loss_grads(index) >> k & 1]
    rule = so.tc_loss_shape(index)
    P = inspect.Parameter
    params = [P(n, P.KEYWORD_ONLY if kw else P.POSITIONAL_OR_KEYWORD, default=d) for _, n, d, kw in args]
    stream = P("stream", P.KEYWORD_ONLY, default=None)
    forward_sig = inspect.Signature([*params, P("out", P.KEYWORD_ONLY, default=None), stream])
    backward_sig = inspect.Signature([P("grad_out", P.POSITIONAL_OR_KEYWORD), *params,
                                      P("output_mask", P.POSITIONAL_OR_KEYWORD, default=(True,) * len(grads)),
                                      *(P("grad_" + n, P.KEYWORD_ONLY, default=None) for n in grads), stream])

    def prepare(op, g, extra=None):
        """(the input's view, the broadcast shape, the result's shape, the params' fields)."""
        given = {n: g[n] for n in tensors if g[n] is not None}
        v = _check(op, {**given, **(extra or {})}, strided=() if rule == so.TC_LOSS_SHAPE_ROWS else tuple(given))
        views = {n: v[n] for n in given}
        shape = _loss_shape(op, rule, views)
        x = views[tensors[0]]
        reduction = _loss_reduction(op, index, g)
        nd, operands, strides = len(shape), [ffi.NULL] * 4, [[0] * 8 for _ in range(4)]
        for k, n in enumerate(tensors):
            if n not in views:
                continue
            a = views[n] if views[n].strides is not None else _view(op, n, _contiguous(views[n]))
            lead = nd - len(a.shape)
            operands[k] = ffi.cast("void*", a.ptr)
            for d in range(lead, nd):
                strides[k][d] = 0 if a.shape[d - lead] == 1 else a.strides[d - lead]
            views[n] = a  # alive until the call
        out = () if reduction != so.TC_LOSS_REDUCTION_NONE else shape[:-1] if rule == so.TC_LOSS_SHAPE_ROWS else shape
        try:
            options = {n: float(g[n]) for n in ("beta", "delta", "margin", "p", "eps") if n in g}
        except (TypeError, ValueError):
            raise TypeError(f"tinycuda.capi.{op}: " + ", ".join(
                f"{n} must be a float, got {g[n]!r}" for n in ("beta", "delta", "margin", "p", "eps") if n in g
                and not isinstance(g[n], numbers.Real))) from None
        for n in ("swap", "log_target"):
            if n in g:
                if not isinstance(g[n], (bool, np.bool_)):
                    raise TypeError(f"tinycuda.capi.{op}: {n} must be a bool, got {g[n]!r}")
                options[n] = int(g[n])
        fields = dict(op=index, reduction=reduction, batch=x.shape[0] if x.shape else 1, ndim=nd, sizes=list(shape),
                      operands=operands, strides=strides, **options)
        return x, views, shape, out, fields

    def forward(*args, **kwargs):
        g = _bind(name, forward_sig, args, kwargs)
        x, views, shape, out, fields = prepare(name, g)
        y, yv = _array(name, "out", g["out"], x, out)
        _call(name, x, g["stream"], "loss", **fields, out=yv)
        return y

    def backward(*args, **kwargs):
        op = name + "_backward"
        g = _bind(op, backward_sig, args, kwargs)
        x, views, shape, out, fields = prepare(op, g, {"grad_out": g["grad_out"]})
        gv = _view(op, "grad_out", g["grad_out"])  # checked by prepare: C-contiguous, the input's dtype and device
        if gv.shape != out:
            raise ValueError(f"tinycuda.capi.{op}: grad_out must have shape {list(out)}, got {list(gv.shape)}")
        mask = tuple(g["output_mask"])
        if len(mask) != len(grads):
            raise ValueError(f"tinycuda.capi.{op}: output_mask must have {len(grads)} entries, got {mask!r}")
        res, ptrs = [], [ffi.NULL] * 4
        for n, want in zip(grads, mask):
            if not want and g["grad_" + n] is not None:
                raise ValueError(f"tinycuda.capi.{op}: grad_{n} is given but output_mask skips it")
            arr, av = _array(op, "grad_" + n, g["grad_" + n], x, shape) if want else (None, None)
            res.append(arr)
            if want:
                ptrs[tensors.index(n)] = ffi.cast("void*", av.ptr)
        _call(op, x, g["stream"], "loss_backward", **fields, grad_out=gv, grads=ptrs)
        return res[0] if len(res) == 1 else tuple(res)

    forward.__doc__ = (
        f"tinycuda.{name} through the C ABI, the core's schema {text}. The tensors: arrays of one dtype and "
        f"device, of any strides (read in place{'; here C-contiguous' if rule == so.TC_LOSS_SHAPE_ROWS else ''}), "
        f"broadcast as torch broadcasts them. out: C-contiguous, the loss of each element (reduction='none') or "
        f"one value.")
    backward.__doc__ = (
        f"The gradients of {name} ({', '.join(grads)}) for grad_out (C-contiguous, of the result's shape), with the "
        f"forward's arguments, each C-contiguous at the broadcast shape (the caller sums it over its operand's "
        f"broadcast dims); output_mask picks them, a skipped one is None.")
    for fn, fname, sig in ((forward, name, forward_sig), (backward, name + "_backward", backward_sig)):
        fn.__name__ = fn.__qualname__ = fname
        fn.__signature__ = sig
    return forward, backward


# ---------------------------------------------------------------------------
# the sort family: sort, argsort, topk and sort_backward along one dim (tinycuda/sort.h)

def _sort_dim(op, shape, dim):
    """dim of an array of `shape` wrapped, the torch layer's rule and words (csrc/torch/sort.cpp); a 0-dim array
    takes dim 0 and -1."""
    if not isinstance(dim, numbers.Integral) or isinstance(dim, bool):
        raise TypeError(f"tinycuda.capi.{op}: dim must be an int, got {dim!r}")
    nd = len(shape)
    if not -max(nd, 1) <= dim < max(nd, 1):
        raise ValueError(f"tinycuda.capi.{op}: dim {dim} is out of range for a tensor of {nd} dims")
    return dim % nd if nd else 0


def _along(op, v, d, floating):
    """The view of a C-contiguous array holding v with dim d last (v itself when it is one already)."""
    if len(v.shape) and d != len(v.shape) - 1:
        return _check(op, {"a": _movedim(op, v, d, -1)}, floating=floating)["a"]
    return v if v.contiguous else _check(op, {"a": _contiguous(v)}, floating=floating)["a"]


def _put_back(op, name, res, given, like_shape, d, nd):
    """A result computed with dim d last (res: (array, view)), in like_shape's layout: into `given` when passed."""
    arr, view = res
    if not nd or d == nd - 1:
        return arr
    y = _movedim(op, view, -1, d)
    if given is not None:
        _array(op, name, given, view, like_shape, view.dtype)[0][...] = y
        return given
    return y


def _sort_rows(op, x, k, dim, descending, values, indices, stream, want_values=True):
    """(values, indices): the first k of each row of x's stable sort along dim (None for k: the whole row)."""
    v = _check(op, {"x": x}, strided=("x",), floating=False)["x"]
    nd, d = len(v.shape), _sort_dim(op, v.shape, dim)
    n = v.shape[d] if nd else 1
    k = n if k is None else k
    if not isinstance(k, numbers.Integral) or not 0 <= k <= n:
        raise ValueError(f"tinycuda.capi.{op}: k must be in [0, {n}] (the size of dim {d}), got {k!r}")
    if not isinstance(descending, (bool, np.bool_)):
        raise TypeError(f"tinycuda.capi.{op}: descending must be a bool, got {descending!r}")
    a = _along(op, v, d, False)
    out_shape = tuple(a.shape[:-1]) + (k,) if nd else ()
    moved = nd and d != nd - 1
    res_v = _array(op, "values", None if moved else values, a, out_shape) if want_values else (None, None)
    res_i = _array(op, "indices", None if moved else indices, a, out_shape, "int64")
    _call(op, a, stream, "sort", rows=(a.size // n if n else 0), n=n, k=k, descending=int(descending), x=a,
          values=res_v[1], indices=res_i[1])
    like = tuple(v.shape[:d]) + (k,) + tuple(v.shape[d + 1:]) if nd else ()
    ind = _put_back(op, "indices", res_i, indices, like, d, nd)
    return (_put_back(op, "values", res_v, values, like, d, nd) if want_values else None), ind


def sort(x, dim=-1, descending=False, *, stable=False, values=None, indices=None, stream=None):
    """torch.sort: (values, indices int64) along dim, stable (which stable=False allows). x: any dtype of
    tc_dtype, any strides (a C-contiguous copy with dim last when it is not one)."""
    return _sort_rows("sort", x, None, dim, descending, values, indices, stream)


def argsort(x, dim=-1, descending=False, *, stable=False, out=None, stream=None):
    """torch.argsort: sort's indices alone (int64)."""
    return _sort_rows("argsort", x, None, dim, descending, None, out, stream, want_values=False)[1]


def topk(x, k, dim=-1, largest=True, sorted=True, *, values=None, indices=None, stream=None):
    """torch.topk: the k largest (smallest) along dim and their indices, in order, ties to the lower index. As
    the torch layer, a 0-dim x (k 0 or 1) gives itself, and bool is refused."""
    v = _check("topk", {"x": x}, strided=("x",), floating=False)["x"]
    if v.dtype == "bool":
        raise TypeError("tinycuda.capi.topk: x must not be bool (as torch.topk)")
    if not v.shape:
        if k not in (0, 1):
            raise ValueError(f"tinycuda.capi.topk: k must be in [0, 1] (the size of dim 0), got {k!r}")
        k = 1
    return _sort_rows("topk", x, k, dim, largest, values, indices, stream)


def sort_backward(grad_values, indices, dim, n, *, grad_x=None, stream=None):
    """The gradient of sort's or topk's values: zeros with n along dim, grad_values scattered to the indices."""
    op = "sort_backward"
    g = _check(op, {"grad_values": grad_values}, strided=("grad_values",))["grad_values"]
    i = _check(op, {"indices": indices}, strided=("indices",), floating=False)["indices"]
    if i.dtype != "int64":
        raise TypeError(f"tinycuda.capi.{op}: indices must be int64, got {i.dtype}")
    _same_shape(op, {"indices": i, "grad_values": g}, "indices", "grad_values")
    nd, d = len(g.shape), _sort_dim(op, g.shape, dim)
    k = g.shape[d] if nd else 1
    if not isinstance(n, numbers.Integral) or n < k or (not nd and n != 1):
        raise ValueError(f"tinycuda.capi.{op}: n must be >= {k} (the size of dim {d} of grad_values), got {n!r}")
    ga, ia = _along(op, g, d, True), _along(op, i, d, False)
    out_shape = tuple(ga.shape[:-1]) + (n,) if nd else ()
    moved = nd and d != nd - 1
    res = _array(op, "grad_x", None if moved else grad_x, ga, out_shape)
    _call(op, ga, stream, "sort_backward", rows=(math.prod(out_shape) // n if n else 0), n=n, k=k,
          grad_values=ga, indices=ia, grad_x=res[1])
    return _put_back(op, "grad_x", res, grad_x, tuple(g.shape[:d]) + (n,) + tuple(g.shape[d + 1:]) if nd else (),
                     d, nd)


# ---------------------------------------------------------------------------
# embedding: weight's rows at int64 indices, and the gradient of weight (tinycuda/embedding.h)

def _indices(op, input, like):
    """The view of input: a C-contiguous int64 array on like's device."""
    i = _view(op, "input", input)
    if i.dtype != "int64" or i.device != like.device or not i.contiguous:
        raise ValueError(f"tinycuda.capi.{op}: input must be a C-contiguous int64 {like.device} array, got "
                         f"{i.dtype} {i.shape} on {i.device}" + ("" if i.contiguous else " (not contiguous)"))
    return i


def _padding_idx(op, padding_idx, num_embeddings):
    """padding_idx as the core takes it (the torch layer's rule): None -> -1; in [-num_embeddings,
    num_embeddings), a negative one counted from the end."""
    if padding_idx is None:
        return -1
    if not isinstance(padding_idx, numbers.Integral) or isinstance(padding_idx, bool) or \
            not -num_embeddings <= padding_idx < num_embeddings:
        raise ValueError(f"tinycuda.capi.{op}: padding_idx must be in [-num_embeddings, num_embeddings) = "
                         f"[{-num_embeddings}, {num_embeddings}), got {padding_idx!r}")
    return int(padding_idx) + (num_embeddings if padding_idx < 0 else 0)


def embedding(input, weight, padding_idx=None, *, out=None, stream=None):
    """F.embedding(input, weight, padding_idx): weight's [num_embeddings, embedding_dim] rows at input's int64
    indices (any shape), out of shape input.shape + (embedding_dim,). padding_idx is checked as the torch op
    does and not read (the forward copies its row like any). An index out of range: CapiError naming its
    position on the CPU, a device-side assert on CUDA."""
    op = "embedding"
    w = _check(op, {"weight": weight})["weight"]
    if len(w.shape) != 2:
        raise ValueError(f"tinycuda.capi.{op}: weight must be 2-D (num_embeddings, embedding_dim), got shape {w.shape}")
    i = _indices(op, input, w)
    v, d = w.shape
    _padding_idx(op, padding_idx, v)
    res, ov = _array(op, "out", out, w, i.shape + (d,))
    _call(op, w, stream, num_indices=i.size, num_embeddings=v, embedding_dim=d, input=i, weight=w, out=ov)
    return res


def embedding_backward(grad_out, input, num_embeddings, padding_idx=None, *, grad_weight=None, stream=None):
    """The gradient of embedding's weight: grad_weight (num_embeddings, embedding_dim), each id's row the sum of
    grad_out's rows at its positions (grad_out: input.shape + (embedding_dim,)), zeros for ids not in input and
    for padding_idx; deterministic, accumulated in float32 (float64 for float64)."""
    op = "embedding_backward"
    g = _check(op, {"grad_out": grad_out})["grad_out"]
    i = _indices(op, input, g)
    if not isinstance(num_embeddings, numbers.Integral) or isinstance(num_embeddings, bool) or num_embeddings < 0:
        raise ValueError(f"tinycuda.capi.{op}: num_embeddings must be an int >= 0, got {num_embeddings!r}")
    if len(g.shape) != len(i.shape) + 1 or g.shape[:-1] != i.shape:
        raise ValueError(f"tinycuda.capi.{op}: grad_out must have shape input.shape + (embedding_dim,) = "
                         f"{i.shape} + (D,), got {g.shape}")
    pad = _padding_idx(op, padding_idx, num_embeddings)
    d = g.shape[-1]
    res, gv = _array(op, "grad_weight", grad_weight, g, (num_embeddings, d))
    _call(op, g, stream, num_indices=i.size, num_embeddings=num_embeddings, embedding_dim=d, padding_idx=pad,
          grad_out=g, input=i, grad_weight=gv)
    return res


# ---------------------------------------------------------------------------
# adamw: one AdamW step over lists of arrays, the L2 norm of many arrays (tinycuda/adamw.h)

def _pointers(views, names):
    """The core's host array of the views' data pointers (alive as long as the returned cdata)."""
    return ffi.new("void*[]", [ffi.cast("void*", views[n].ptr) for n in names])


def adamw_(params, grads, exp_avgs, exp_avg_sqs, lr, beta1, beta2, eps, weight_decay, step, grad_norm=None,
           max_grad_norm=0.0, masters=None, *, stream=None):
    """tinycuda.adamw_: params, exp_avgs and exp_avg_sqs updated in place, one AdamW step (lists of
    C-contiguous arrays of one dtype and device, each i of one shape); grad_norm: multi_tensor_l2norm's
    one-element result (float32, float64 for float64), read by the kernel: the clip's norm. masters:
    master weights, float32 copies of float16/bfloat16 params, updated in place; exp_avgs and
    exp_avg_sqs are then float32 too (tinycuda/adamw.h)."""
    op = "adamw_"
    lists = {"params": params, "grads": grads, "exp_avgs": exp_avgs, "exp_avg_sqs": exp_avg_sqs}
    if masters is not None and len(masters):
        lists["masters"] = masters
    if len({len(xs) for xs in lists.values()}) != 1:
        names = ", ".join(list(lists)[:-1]) + " and " + list(lists)[-1]
        raise ValueError(f"tinycuda.capi.{op}: {names} must have one array each alike, got "
                         f"{', '.join(str(len(xs)) for xs in lists.values())}")
    n = len(params)
    if n == 0:
        return
    # the 16-bit side (params, grads) and the state's (one dtype with it, or float32 beside masters)
    low = ("params", "grads") if "masters" in lists else tuple(lists)
    v = _check(op, {f"{name}[{i}]": a for name in low for i, a in enumerate(lists[name])})
    if "masters" in lists:
        v.update(_check(op, {f"{name}[{i}]": a for name in ("masters", "exp_avgs", "exp_avg_sqs")
                             for i, a in enumerate(lists[name])}))
        if v["masters[0]"].dtype != "float32" or v["params[0]"].dtype not in ("float16", "bfloat16"):
            raise TypeError(f"tinycuda.capi.{op}: master weights go with float16 or bfloat16 params and float32 "
                            f"masters, got {v['params[0]'].dtype} and {v['masters[0]'].dtype}")
        if v["masters[0]"].device != v["params[0]"].device:
            raise ValueError(f"tinycuda.capi.{op}: masters are on {v['masters[0]'].device} but params on "
                             f"{v['params[0]'].device}")
    for i in range(n):
        _same_shape(op, v, *(f"{name}[{i}]" for name in lists))
    first = v["params[0]"]
    ptrs = {name: _pointers(v, [f"{name}[{i}]" for i in range(n)]) for name in lists}
    norm = None
    if grad_norm is not None:
        norm = _view(op, "grad_norm", grad_norm)
        acc = "float64" if first.dtype == "float64" else "float32"
        if norm.size != 1 or norm.dtype != acc or norm.device != first.device:
            raise ValueError(f"tinycuda.capi.{op}: grad_norm must be one {acc} value on {first.device}, got "
                             f"{norm.dtype} {norm.shape} on {norm.device}")
    _call(op, first, stream, "adamw", count=n, numel=ffi.new("int64_t[]", [v[f"params[{i}]"].size for i in range(n)]),
          params=ptrs["params"], grads=ptrs["grads"], exp_avg=ptrs["exp_avgs"], exp_avg_sq=ptrs["exp_avg_sqs"],
          lr=float(lr), beta1=float(beta1), beta2=float(beta2), eps=float(eps), weight_decay=float(weight_decay),
          step=int(step), grad_norm=norm, max_grad_norm=float(max_grad_norm),
          master=ptrs.get("masters"))


def multi_tensor_l2norm(tensors, *, out=None, stream=None):
    """sqrt(sum of every element squared over every array): a 0-dim float32 array (float64 for float64) on the
    arrays' device, summed in a fixed order (C-contiguous arrays of one dtype and device)."""
    op = "multi_tensor_l2norm"
    if len(tensors) == 0:
        raise ValueError(f"tinycuda.capi.{op}: tensors must hold at least one array")
    names = [f"tensors[{i}]" for i in range(len(tensors))]
    v = _check(op, dict(zip(names, tensors)))
    first = v[names[0]]
    res, nv = _array(op, "out", out, first, (), dtype="float64" if first.dtype == "float64" else "float32")
    _call(op, first, stream, count=len(names), numel=ffi.new("int64_t[]", [v[n].size for n in names]),
          tensors=_pointers(v, names), norm=nv)
    return res


# ---------------------------------------------------------------------------
# rows: scale_bias_relu, softmax

def scale_bias_relu(x, bias, scale=1.0, *, out=None, stream=None):
    """relu(x * scale + bias); x [..., C], bias [C]."""
    op = "scale_bias_relu"
    v = _check(op, {"x": x, "bias": bias})
    if not v["x"].shape or v["bias"].shape != v["x"].shape[-1:]:
        raise ValueError(f"tinycuda.capi.{op}: bias must have shape (C,) for x [..., C], got {v['bias'].shape} "
                         f"for x {v['x'].shape}")
    return _shaped(op, {"x": ("x", x)}, {"out": ("y", out)}, stream, dim=-1, scale=float(scale), bias=v["bias"])


def scale_bias_relu_backward(grad_out, out, scale, output_mask=(True, True), *, grad_x=None, grad_bias=None,
                             stream=None):
    """(grad_out * [out > 0] * scale, sum over rows of grad_out * [out > 0]); out: the forward output."""
    op = "scale_bias_relu_backward"
    v = _check(op, {"grad_out": grad_out, "out": out})
    _same_shape(op, v, "out", "grad_out")
    rows, cols = _rows_cols(v["out"].shape)
    (gx, gxv), (gb, gbv) = _outputs(op, v["out"], output_mask, (("grad_x", grad_x, v["out"].shape),
                                                                 ("grad_bias", grad_bias, (cols,))))
    _call(op, v["out"], stream, rows=rows, cols=cols, scale=float(scale), grad_y=v["grad_out"], y=v["out"],
          grad_x=gxv, grad_bias=gbv)
    return gx, gb


def softmax(x, dim=-1, *, algo=0, out=None, stream=None):
    """softmax over dim."""
    return _shaped("softmax", {"x": ("x", x)}, {"out": ("y", out)}, stream, dim=dim, log=0, algo=algo)


def log_softmax(x, dim=-1, *, algo=0, out=None, stream=None):
    """log_softmax over dim."""
    return _shaped("log_softmax", {"x": ("x", x)}, {"out": ("y", out)}, stream, "softmax", dim=dim, log=1, algo=algo)


def softmax_backward(grad_out, out, dim=-1, log=False, *, grad_x=None, stream=None):
    """grad of softmax (log=False) or log_softmax (log=True) over dim, from the forward output `out`."""
    return _shaped("softmax_backward", {"out": ("y", out), "grad_out": ("grad_y", grad_out)},
                   {"grad_x": ("grad_x", grad_x)}, stream, dim=dim, log=int(log))


# ---------------------------------------------------------------------------
# the transpose family: permute_copy, transpose_copy, contiguous (tinycuda/transpose.h)

def _itemsize(op, v):
    """Bytes an element of view v: a copy moves bytes, whatever they hold."""
    try:
        return 2 if v.dtype == "bfloat16" else np.dtype(v.dtype).itemsize
    except TypeError:
        raise TypeError(f"tinycuda.capi.{op}: x has dtype {v.dtype}, whose element size is unknown") from None


def _permute(op, x, order, algo, out, stream):
    """y = x's view permuted by order (each dim once, wrapped), C-contiguous, through the core's permute_copy;
    x read in place through its strides (any sign)."""
    v = _view(op, "x", x)
    if v.strides is None:
        raise ValueError(f"tinycuda.capi.{op}: x's strides are not whole elements")
    y, yv = _array(op, "out", out, v, [v.shape[d] for d in order])
    big = [d for d in order if v.shape[d] != 1]  # a unit dim steps nowhere: the core's 8 dims are for the others
    if v.size == 0:
        return y
    if len(big) > 8:
        raise ValueError(f"tinycuda.capi.{op}: at most 8 dims of size > 1, got {len(big)}")
    _call(op, v, stream, "permute_copy", itemsize=_itemsize(op, v), ndim=len(big), sizes=[v.shape[d] for d in big],
          x_strides=[v.strides[d] for d in big], x=v, y=yv, algo=algo)
    return y


def _wrap(op, arg, dim, nd):
    if not isinstance(dim, numbers.Integral) or isinstance(dim, bool):
        raise TypeError(f"tinycuda.capi.{op}: {arg} must be an int, got {dim!r}")
    if not -max(nd, 1) <= dim < max(nd, 1):
        raise ValueError(f"tinycuda.capi.{op}: {arg} {dim} is out of range for a tensor of {nd} dims")
    return dim % nd if nd else 0


def permute_copy(x, dims, *, algo=0, out=None, stream=None):
    """x.permute(dims), C-contiguous, in one copy; x any strides and dtype."""
    op = "permute_copy"
    nd = len(_view(op, "x", x).shape)
    if len(dims) != nd:
        raise ValueError(f"tinycuda.capi.{op}: dims must list each of x's {nd} dims once, got {len(dims)} dims")
    order = [_wrap(op, "dims entry", d, nd) for d in dims]
    if len(set(order)) != nd:
        raise ValueError(f"tinycuda.capi.{op}: dims repeats a dim: {list(dims)}")
    return _permute(op, x, order, algo, out, stream)


def transpose_copy(x, dim0, dim1, *, algo=0, out=None, stream=None):
    """x with dims dim0 and dim1 swapped, C-contiguous, in one copy; x any strides and dtype."""
    op = "transpose_copy"
    nd = len(_view(op, "x", x).shape)
    d0, d1 = _wrap(op, "dim0", dim0, nd), _wrap(op, "dim1", dim1, nd)
    return _permute(op, x, [d1 if d == d0 else d0 if d == d1 else d for d in range(nd)], algo, out, stream)


def contiguous(x, *, out=None, stream=None):
    """x itself if C-contiguous (and no out given), else its C-contiguous copy (NumPy's ascontiguousarray)."""
    v = _view("contiguous", "x", x)
    if v.contiguous and out is None:
        return x
    return _permute("contiguous", x, list(range(len(v.shape))), 0, out, stream)


# ---------------------------------------------------------------------------
# linear

def _linear_dims(op, v):
    x, w = v["x"], v["weight"]
    if len(w.shape) != 2:
        raise ValueError(f"tinycuda.capi.{op}: weight must be 2-D (out, in), got shape {w.shape}")
    if len(x.shape) < 1 or x.shape[-1] != w.shape[1]:
        raise ValueError(f"tinycuda.capi.{op}: x's last dim must equal weight's in_features "
                         f"{w.shape[1]}, got shape {x.shape}")
    return math.prod(x.shape[:-1]), w.shape[0], w.shape[1]


def _linear(op, x, weight, bias, activation, save_pre, algo, out, pre, stream):
    v = _check(op, {"x": x, "weight": weight, "bias": bias})
    M, N, K = _linear_dims(op, v)
    if bias is not None and v["bias"].shape != (N,):
        raise ValueError(f"tinycuda.capi.{op}: bias must have shape ({N},), got {v['bias'].shape}")
    shape = (*v["x"].shape[:-1], N)
    y, yv = _array(op, "out", out, v["x"], shape)
    p, pv = _array(op, "pre", pre, v["x"], shape) if save_pre or pre is not None else (None, None)
    _call(op, v["x"], stream, entry="linear", M=M, N=N, K=K, x=v["x"], weight=v["weight"], bias=v.get("bias"),
          activation=activation, y=yv, pre=pv, algo=algo)
    return y, p


def linear(x, weight, bias=None, *, algo=0, out=None, stream=None):
    """x @ weight.T + bias; x [..., K], weight [N, K], bias [N] or None."""
    return _linear("linear", x, weight, bias, "TC_ACT_NONE", False, algo, out, None, stream)[0]


def linear_act(x, weight, bias=None, activation="gelu", *, save_pre=False, algo=0, out=None, pre=None,
               stream=None):
    """(act(x @ weight.T + bias), P or None): the activation (tc_activation's
    names: "relu", "gelu", "gelu_tanh"; "none" is linear) in the GEMM's epilogue;
    P = x @ weight.T + bias, what the activation's backward reads, also written
    with save_pre=True (or into pre=)."""
    op = "linear_act"
    act = _enum(op, "activation", "TC_ACT_", activation)
    return _linear(op, x, weight, bias, act, save_pre, algo, out, pre, stream)


def linear_backward(grad_out, x, weight, output_mask=(True, True, True), *, pre=None, activation="none",
                    grad_x=None, grad_weight=None, grad_bias=None, algo=0, stream=None):
    """(grad_out @ weight, grad_out^T @ x, grad_out summed over rows). With an activation
    ("relu", "gelu", "gelu_tanh") and pre = linear_act's P, grad_out is act(P)'s gradient
    and the three use grad_P = grad_out * act'(P) instead."""
    op = "linear_backward"
    act = _enum(op, "activation", "TC_ACT_", activation)
    if (activation == "none") != (pre is None):
        raise ValueError(f"tinycuda.capi.{op}: pre (the forward's P) is given with an activation, and only then")
    v = _check(op, {"grad_out": grad_out, "x": x, "weight": weight, **({"pre": pre} if pre is not None else {})})
    M, N, K = _linear_dims(op, v)
    if v["grad_out"].shape != (*v["x"].shape[:-1], N):
        raise ValueError(f"tinycuda.capi.{op}: grad_out must have shape {(*v['x'].shape[:-1], N)}, "
                         f"got {v['grad_out'].shape}")
    if pre is not None and v["pre"].shape != v["grad_out"].shape:
        raise ValueError(f"tinycuda.capi.{op}: pre must have grad_out's shape {v['grad_out'].shape}, "
                         f"got {v['pre'].shape}")
    (gx, gxv), (gw, gwv), (gb, gbv) = _outputs(op, v["x"], output_mask, (
        ("grad_x", grad_x, v["x"].shape), ("grad_weight", grad_weight, (N, K)), ("grad_bias", grad_bias, (N,))))
    _call(op, v["x"], stream, M=M, N=N, K=K, grad_y=v["grad_out"], pre=v.get("pre"), activation=act, x=v["x"],
          weight=v["weight"], grad_x=gxv, grad_weight=gwv, grad_bias=gbv, algo=algo)
    return gx, gw, gb


def matmul(a, b, *, transpose_a=False, transpose_b=False, algo=0, out=None, accumulate=False, c_float=False,
           stream=None):
    """a @ b with tinycuda.ops.matmul's core shapes: a [M, K] or [Ba, M, K], b [K, N] or
    [Bb, K, N], a batch of 1 broadcasting. transpose_a: a is given as its transpose
    ([..., K, M], contiguous), read in place; transpose_b likewise ([..., N, K]).
    accumulate: out += a @ b (out must be given); c_float: out is float32 for float16 or
    bfloat16 a and b, the product not rounded to their dtype (matmul.h)."""
    op = "matmul"
    if accumulate and out is None:
        raise ValueError(f"tinycuda.capi.{op}: accumulate adds the product into out: give out")
    v = _check(op, {"a": a, "b": b})
    va, vb = v["a"], v["b"]
    for name, x in (("a", va), ("b", vb)):
        if len(x.shape) not in (2, 3):
            raise ValueError(f"tinycuda.capi.{op}: {name} must be 2-D or 3-D, got shape {x.shape}")

    def dims(x, transposed):  # (batch or None, rows, cols, [batch, row, col] strides) of the logical matrix
        *batch, r, c = x.shape
        s = [r * c, c, 1] if not transposed else [r * c, 1, c]
        return (batch[0] if batch else None), (c, r) if transposed else (r, c), s
    ba, (M, K), sa = dims(va, transpose_a)
    bb, (Kb, N), sb = dims(vb, transpose_b)
    if Kb != K:
        raise ValueError(f"tinycuda.capi.{op}: a's K ({K}) must equal b's ({Kb}): shapes {va.shape} and {vb.shape}")
    if ba is not None and bb is not None and ba != bb and 1 not in (ba, bb):
        raise ValueError(f"tinycuda.capi.{op}: batch sizes {ba} and {bb} do not broadcast")
    batch = max(ba or 1, bb or 1) if 0 not in (ba, bb) else 0
    sa[0], sb[0] = (sa[0] if (ba or 1) > 1 else 0), (sb[0] if (bb or 1) > 1 else 0)
    c, cv = _array(op, "out", out, va, (M, N) if ba is None and bb is None else (batch, M, N),
                   "float32" if c_float else None)
    _call(op, va, stream, batch=batch, M=M, N=N, K=K, a=va, a_stride=sa, b=vb, b_stride=sb, bias=None, c=cv,
          accumulate=int(accumulate), c_float=int(c_float), algo=algo)
    return c


# ---------------------------------------------------------------------------
# cross_entropy, fused_linear_cross_entropy

def cross_entropy(logits, target, ignore_index=-100, reduction="mean", label_smoothing=0.0, compute_grad=False,
                  softcap=0.0, lse_square_scale=0.0, return_z_loss=False, weight=None, return_token_accuracy=False,
                  grad_loss=None, *, out=None, n_valid=None, row_loss=None, z_out=None, target_weight_sum=None,
                  row_z=None, accuracy_out=None, row_correct=None, grad_in_place=False, stream=None):
    """F.cross_entropy(logits, target, ...) of logits [N, V] (or [V]) and int64 target [N] (or 0-dim).
    compute_grad: True, or an array (logits itself too), for d loss / d logits from the same pass: then (loss, grad)
    is returned. grad_loss: None (1), or the upstream gradient, of logits' dtype and the loss's shape (one value for
    'mean' and 'sum', one per row for 'none'), which the gradient is multiplied by before its one rounding
    (cross_entropy.h); it needs compute_grad. For chunked callers: n_valid (0-dim int64), the 'mean' divisor instead of
    the count of target's; row_loss ([N], _acc's dtype) for each row's loss. softcap and lse_square_scale
    (z-loss) as cross_entropy.h; return_z_loss: the z terms alone, reduced as the loss, after the others
    ((loss, grad or None, z_loss), into z_out if given). weight: class weights [V] of logits' dtype ('mean' then
    divides by W, the sum of weight[target] over rows not ignored; given as target_weight_sum (0-dim, _acc's dtype)
    by chunked callers; row_z ([N], _acc's dtype) receives each row's z term). return_token_accuracy: the
    token accuracy (float32: 'none' a 1 or 0 per row, 'mean' and 'sum' the fraction of rows not ignored whose
    argmax is the target, NaN when there is none; cross_entropy.h), into accuracy_out if given, returned as
    (loss, grad or None, z_loss or None, token_accuracy); row_correct ([N], float32) receives each row's 1 / 0
    (for chunked callers; n_valid, if given, is then the divisor). grad_in_place: compute_grad is an array that
    holds this gradient for grad_loss = 1 (this call's without grad_loss); only its rows whose grad_loss is not
    exactly 1 are recomputed, times grad_loss, and it alone is written and returned (cross_entropy.h). A target
    outside [0, V) other than ignore_index: CapiError on the CPU, a device-side assert on CUDA."""
    op = "cross_entropy"
    v = _check(op, {"logits": logits, "weight": weight})["logits"]
    if len(v.shape) not in (1, 2) or v.shape[-1] < 1:
        raise ValueError(f"tinycuda.capi.{op}: logits must be 2-D (rows, classes) or 1-D (classes) with at least "
                         f"one class, got shape {v.shape}")
    rows, cols = _rows_cols(v.shape)
    red = _enum(op, "reduction", "TC_REDUCTION_", reduction)
    _, t = _array(op, "target", target, v, v.shape[:-1], "int64")
    loss_shape = v.shape[:-1] if red == lib().TC_REDUCTION_NONE else ()
    if grad_in_place and (isinstance(compute_grad, bool) or grad_loss is None):
        raise ValueError(f"tinycuda.capi.{op}: grad_in_place needs compute_grad, the array holding the gradient for "
                         "grad_loss = 1, and grad_loss")
    if grad_in_place and (out is not None or return_z_loss or return_token_accuracy or
                          any(a is not None for a in (row_loss, row_z, row_correct))):
        raise ValueError(f"tinycuda.capi.{op}: grad_in_place writes the gradient alone: out, return_z_loss, "
                         "return_token_accuracy, row_loss, row_z and row_correct must be left unset")
    loss, lv = _array(op, "out", out, v, loss_shape) if not grad_in_place else (None, None)
    g, gv = _array(op, "compute_grad", compute_grad, v, v.shape) if compute_grad is not False else (None, None)
    if grad_loss is not None and gv is None:
        raise ValueError(f"tinycuda.capi.{op}: grad_loss is given but compute_grad is False (grad_loss scales the "
                         "gradient)")
    gl = grad_loss if grad_loss is None else _array(op, "grad_loss", grad_loss, v, loss_shape)[1]
    nv = n_valid if n_valid is None else _array(op, "n_valid", n_valid, v, (), "int64")[1]
    rl = row_loss if row_loss is None else _array(op, "row_loss", row_loss, v, (rows,), _acc(v))[1]
    z, zv = _array(op, "z_out", z_out, v, loss_shape) if return_z_loss else (None, None)
    wv = weight if weight is None else _array(op, "weight", weight, v, (cols,))[1]
    tw = target_weight_sum if target_weight_sum is None else \
        _array(op, "target_weight_sum", target_weight_sum, v, (), _acc(v))[1]
    rz = row_z if row_z is None else _array(op, "row_z", row_z, v, (rows,), _acc(v))[1]
    acc, av = _array(op, "accuracy_out", accuracy_out, v, loss_shape, "float32") if return_token_accuracy \
        else (None, None)
    rc = row_correct if row_correct is None else _array(op, "row_correct", row_correct, v, (rows,), "float32")[1]
    _call(op, v, stream, rows=rows, cols=cols, ignore_index=int(ignore_index), reduction=red,
          label_smoothing=float(label_smoothing), softcap=float(softcap), lse_square_scale=float(lse_square_scale),
          logits=v, target=t, loss=lv, grad_logits=gv, n_valid=nv, row_loss=rl, z_loss=zv, weight=wv,
          target_weight_sum=tw, row_z=rz, token_accuracy=av, row_correct=rc, grad_loss=gl,
          grad_loss_per_row=int(gl is not None and red == lib().TC_REDUCTION_NONE), grad_in_place=int(grad_in_place))
    if grad_in_place:
        return g
    if return_token_accuracy:
        return loss, g, z, acc
    if return_z_loss:
        return loss, g, z
    return loss if compute_grad is False else (loss, g)


def cross_entropy_backward(grad_logits, grad_loss, logits=None, target=None, ignore_index=-100, reduction="mean",
                           label_smoothing=0.0, softcap=0.0, lse_square_scale=0.0, weight=None, *, stream=None):
    """grad_logits, the gradient for grad_loss = 1, made the gradient for grad_loss in place and returned; rows
    whose grad_loss is exactly 1 are left untouched. With logits (and target and the options of the
    cross_entropy that made it): the other rows recomputed from them, rounded once (cross_entropy's
    grad_in_place; grad_loss of the loss's shape). Without: grad_logits *= grad_loss, grad_loss 0-dim (one
    scale) or one value per row."""
    if logits is not None:
        cross_entropy(logits, target, ignore_index, reduction, label_smoothing, grad_logits, softcap,
                      lse_square_scale, False, weight, False, grad_loss, grad_in_place=True, stream=stream)
        return grad_logits
    op = "cross_entropy_backward"
    v = _check(op, {"grad_logits": grad_logits, "grad_loss": grad_loss})
    g, s = v["grad_logits"], v["grad_loss"]
    per_row = len(s.shape) > 0
    if per_row and (len(g.shape) < 1 or s.shape != g.shape[:-1]):
        raise ValueError(f"tinycuda.capi.{op}: grad_loss must be 0-dim or have shape {g.shape[:-1]}, got {s.shape}")
    cols = (g.shape[-1] if per_row else g.size) or 1
    _call(op, g, stream, rows=g.size // cols, cols=cols, per_row=int(per_row), grad_logits=g, grad_loss=s)
    return grad_logits


def fused_linear_cross_entropy(hidden, weight, target, bias=None, ignore_index=-100, reduction="mean",
                               label_smoothing=0.0, compute_grad=False, chunk_size=0, accum_dtype=None, softcap=0.0,
                               lse_square_scale=0.0, return_z_loss=False, row_scale=None, ce_weight=None,
                               return_token_accuracy=False):
    """cross_entropy(hidden @ weight.T + bias, target, ...) without the [N, V]
    logits: hidden [N, H], weight [V, H], target [N] int64, bias [V] or None.
    compute_grad=True: (loss, grad_hidden, grad_weight, grad_bias (None without
    bias)) for grad_loss = 1, made in the forward; for reduction='none' the
    per-row grad_loss must be given as row_scale [N]. softcap and
    lse_square_scale as cross_entropy's; return_z_loss appends the z terms
    (per row for 'none', else each chunk's share added up in float32).
    ce_weight: class weights [V] (cross_entropy's weight; 'mean' divides by
    the batch's sum of ce_weight[target], given to every chunk, and with
    z-loss the z terms apart by the count, as cross_entropy.h).
    return_token_accuracy appends the token accuracy after those (float32: per
    row for 'none', else each chunk's rows' 1 / 0 (row_correct) summed over the
    batch's count of rows not ignored, NaN when there is none).

    The torch op's algorithm over this module's calls, per chunk of chunk_size
    tokens (0: tc_fused_linear_cross_entropy_chunk's): linear into one [chunk, V] buffer; cross_entropy
    writing the gradient over it ('mean': scaled by the batch's count of valid
    targets; row_scale: then scaled per row by cross_entropy_backward) and each
    row's loss in float32 (float64 for float64), summed at
    the end; linear_backward into grad_hidden's rows and grad_bias (added in
    float32); matmul into grad_weight, the first chunk writing it and the others
    adding (accumulate), in the weight's dtype or, with accum_dtype="float32",
    into a float32 array (c_float) rounded once at the end. Those additions and
    casts are the array library's, on its current stream, where the kernels run
    too."""
    op = "fused_linear_cross_entropy"
    v = _check(op, {"hidden": hidden, "weight": weight, "bias": bias, "row_scale": row_scale, "ce_weight": ce_weight})
    h, w = v["hidden"], v["weight"]
    if len(h.shape) != 2 or len(w.shape) != 2 or w.shape[1] != h.shape[1] or w.shape[0] < 1:
        raise ValueError(f"tinycuda.capi.{op}: hidden must be 2-D (tokens, H) and weight 2-D (classes, H) with at "
                         f"least one class, got shapes {h.shape} and {w.shape}")
    (n, hd), nc = h.shape, w.shape[0]
    if bias is not None and v["bias"].shape != (nc,):
        raise ValueError(f"tinycuda.capi.{op}: bias must have shape ({nc},) (weight's rows), got {v['bias'].shape}")
    t = _array(op, "target", target, h, (n,), "int64")[1]
    if ce_weight is not None:
        _array(op, "ce_weight", ce_weight, h, (nc,))
    red = _enum(op, "reduction", "TC_REDUCTION_", reduction)
    none = red == lib().TC_REDUCTION_NONE
    if compute_grad and none and row_scale is None:
        raise ValueError(f"tinycuda.capi.{op}: reduction='none' makes its gradient from a per-row grad_loss, which "
                         "must be given as row_scale")
    if row_scale is not None:
        if not (none and compute_grad):
            raise ValueError(f"tinycuda.capi.{op}: row_scale is the per-row grad_loss of reduction='none' with "
                             "compute_grad")
        _array(op, "row_scale", row_scale, h, (n,))
    if not 0.0 <= label_smoothing <= 1.0 or chunk_size < 0:
        raise ValueError(f"tinycuda.capi.{op}: label_smoothing must be in [0, 1] and chunk_size >= 0 (0: "
                         f"automatic), got {label_smoothing} and {chunk_size}")
    # a name, np.float32, np.dtype or torch.float32
    accum = None if accum_dtype is None else getattr(accum_dtype, "__name__", str(accum_dtype).rpartition(".")[2])
    if accum not in (None, h.dtype) and (accum != "float32" or h.dtype == "float64"):
        raise ValueError(f"tinycuda.capi.{op}: accum_dtype must be None, the weight's dtype ({h.dtype}) or float32, "
                         f"got {accum_dtype}")
    widen = compute_grad and accum not in (None, h.dtype)
    if h.device == "cpu" and n:  # every row first, so that the message names the row of the batch
        tv = np.frombuffer(ffi.buffer(ffi.cast("int64_t*", t.ptr), 8 * n), np.int64)
        bad = np.flatnonzero((tv != ignore_index) & ((tv < 0) | (tv >= nc)))
        if bad.size:
            raise CapiError(f"tinycuda.capi.{op}: target {tv[bad[0]]} at row {bad[0]} is out of range [0, {nc})",
                            lib().TC_ERR_INVALID_ARGUMENT)
    accum_bytes = 0 if not compute_grad else 4 if widen else h.itemsize
    chunk = min(chunk_size or lib().tc_fused_linear_cross_entropy_chunk(n, hd, nc, accum_bytes), max(n, 1))
    acc, mean = _acc(h), red == lib().TC_REDUCTION_MEAN
    row_loss, buffer, n_valid = _empty(op, h, (n,), acc), _empty(op, h, (chunk, nc)), None
    if mean:  # in hidden's array type, whatever target's
        n_valid = _empty(op, h, (), "int64")
        n_valid[...] = (target != ignore_index).sum()
    w_valid = z_rows_w = None
    if mean and ce_weight is not None:  # the batch's W (targets clipped for the gather: the core checks their range)
        xp = _xp(hidden, h.device)
        tt, cw = xp.asarray(target), _astype(xp.asarray(ce_weight), acc)
        w_valid = _empty(op, h, (), acc)
        # ignored rows by a select, not a product: an inf or NaN weight of an in-range ignore_index stays out
        w_valid[...] = xp.where(tt != ignore_index, cw[tt.clip(0, nc - 1)], 0).sum()
        if lse_square_scale > 0:  # each row's z term apart: MEAN divides them by n_valid, not W
            z_rows_w = _empty(op, h, (n,), acc)
    z_rows = _empty(op, h, (n,)) if return_z_loss and none else None
    correct = _empty(op, h, (n,), "float32") if return_token_accuracy else None
    z_sum = None
    if return_z_loss and not none:
        z_sum = _empty(op, h, (), acc)
        z_sum[...] = 0
    if compute_grad:
        # widen: grad_weight is the float32 accumulator until the end; the first chunk writes it, the rest add
        grad_hidden, grad_weight = _empty(op, h, h.shape), _empty(op, h, w.shape, accum if widen else None)
        grad_bias = None if bias is None else _empty(op, h, (nc,), acc)
        for a in (grad_bias, grad_weight if n == 0 else None):
            if a is not None:
                a[...] = 0
    for s in range(0, n, chunk):
        hc, logits = hidden[s:s + chunk], buffer[:min(chunk, n - s)]
        linear(hc, weight, bias, out=logits)
        z = cross_entropy(logits, target[s:s + chunk], ignore_index, reduction, label_smoothing,
                          logits if compute_grad else False, softcap, lse_square_scale, return_z_loss,
                          ce_weight, n_valid=n_valid, row_loss=row_loss[s:s + chunk],
                          z_out=None if z_rows is None else z_rows[s:s + chunk], target_weight_sum=w_valid,
                          row_z=None if z_rows_w is None else z_rows_w[s:s + chunk],
                          row_correct=None if correct is None else correct[s:s + chunk])
        if z_sum is not None:
            z_sum += z[2]
        if not compute_grad:
            continue
        if row_scale is not None:
            cross_entropy_backward(logits, row_scale[s:s + chunk])
        gb = linear_backward(logits, hc, weight, (True, False, bias is not None), grad_x=grad_hidden[s:s + chunk])[2]
        # grad_weight (+)= logits.T @ hc, unrounded into a float32 accumulator (c_float) when widened
        matmul(logits, hc, transpose_a=True, out=grad_weight, accumulate=s > 0, c_float=widen)
        if bias is not None:
            grad_bias += gb
    total = __getattr__("sum")  # capi.sum, made on first use (not the builtin)
    loss = row_loss if red == lib().TC_REDUCTION_NONE else total(row_loss)
    if mean:
        with np.errstate(invalid="ignore", divide="ignore"):  # no valid target: NaN, as torch
            if z_rows_w is not None:
                loss = total(row_loss - z_rows_w) / w_valid + total(z_rows_w) / _astype(n_valid, acc)
            else:
                loss = loss / (_astype(n_valid, acc) if w_valid is None else w_valid)
    loss = _astype(loss, h.dtype)
    z = () if not return_z_loss else (z_rows if none else _astype(z_sum, h.dtype),)
    if return_token_accuracy:
        with np.errstate(invalid="ignore", divide="ignore"):  # no valid target: NaN, as torch's mean of nothing
            z += (correct if none else _astype(total(correct) / _astype(
                (target != ignore_index).sum() if n_valid is None else n_valid, "float32"), "float32"),)
    if not compute_grad:
        return (loss, *z) if z else loss
    if widen:
        grad_weight = _astype(grad_weight, h.dtype)
    return loss, grad_hidden, grad_weight, None if bias is None else _astype(grad_bias, h.dtype), *z


# ---------------------------------------------------------------------------
# layer_norm, rms_norm

# the norms' arrays of x's shape (add_rms_norm's residual stream and its gradient among them)
_ROW_SHAPED = ("x", "grad_out", "out", "grad_x", "residual", "residual_out", "grad_residual_out")


def _norm(op, named, normalized_shape, stats, outs, stream, output_mask=None, **fields):
    """The norms over x [..., *normalized_shape]: named and outs as _shaped's (those in _ROW_SHAPED of
    x's shape, the others of normalized_shape), stats ({name: array or None}) one per row, in _acc's
    dtype; the outputs of output_mask. Returns (outputs, {name: statistic})."""
    v = _check(op, {arg: a for arg, (_, a) in named.items()})
    x = next(iter(v.values()))  # x, or add_rms_norm_backward's residual_out: the rows
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    lead = len(x.shape) - len(shape)
    if not shape or lead < 0 or x.shape[lead:] != shape:
        raise ValueError(f"tinycuda.capi.{op}: normalized_shape {shape} must equal the last dims of x, "
                         f"whose shape is {x.shape}")
    for arg, a in v.items():
        if a.shape != (x.shape if arg in _ROW_SHAPED else shape):
            raise ValueError(f"tinycuda.capi.{op}: {arg} must have shape "
                             f"{x.shape if arg in _ROW_SHAPED else shape}, got {a.shape}")
    rows = math.prod(x.shape[:lead])
    stats = {name: _array(op, name, a, x, (rows,), _acc(x)) for name, a in stats.items()}
    res = _outputs(op, x, output_mask or [True] * len(outs), [
        (arg, given, x.shape if arg in _ROW_SHAPED else shape) for arg, (_, given) in outs.items()])
    _call(op, x, stream, rows=rows, cols=math.prod(shape), **{f: v.get(arg) for arg, (f, _) in named.items()},
          **{name: a[1] for name, a in stats.items()}, **{f: r[1] for (f, _), r in zip(outs.values(), res)},
          **fields)
    return tuple(r[0] for r in res), {name: a[0] for name, a in stats.items()}


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5, *, out=None, mean=None, rstd=None,
               stream=None):
    """(y, mean, rstd): x normalized over its trailing dims normalized_shape,
    times weight plus bias (each optional, of normalized_shape); mean and rstd
    float32 (float64 for float64 x), one per row, for layer_norm_backward."""
    (y,), st = _norm("layer_norm", {"x": ("x", x), "weight": ("weight", weight), "bias": ("bias", bias)},
                     normalized_shape, dict(mean=mean, rstd=rstd), {"out": ("y", out)}, stream, eps=float(eps))
    return y, st["mean"], st["rstd"]


def layer_norm_backward(grad_out, x, normalized_shape, mean, rstd, weight=None, output_mask=(True, True, True), *,
                        grad_x=None, grad_weight=None, grad_bias=None, stream=None):
    """(grad_x, grad_weight, grad_bias) of layer_norm from x and its mean and rstd."""
    return _norm("layer_norm_backward", {"x": ("x", x), "grad_out": ("grad_y", grad_out),
                                         "weight": ("weight", weight)}, normalized_shape, dict(mean=mean, rstd=rstd),
                 {"grad_x": ("grad_x", grad_x), "grad_weight": ("grad_weight", grad_weight),
                  "grad_bias": ("grad_bias", grad_bias)}, stream, output_mask)[0]


def _rms_options(op, x, eps, offset, casting_mode, backward=False):
    """rms_norm's fields: eps (None: torch's default, the epsilon of rstd's dtype), offset, casting."""
    fields = dict(offset=float(offset), casting=_enum(op, "casting_mode", "TC_RMS_CAST_", casting_mode))
    if not backward:
        fields["eps"] = float(np.finfo(_acc(_check(op, {"x": x})["x"])).eps if eps is None else eps)
    return fields


def rms_norm(x, normalized_shape, weight=None, eps=None, offset=0.0, casting_mode="gemma", *, out=None, rstd=None,
             stream=None):
    """(y, rstd): x / sqrt(mean(x^2) + eps) over its trailing dims
    normalized_shape, times offset + weight (optional); rstd float32 (float64
    for float64 x), one per row, for rms_norm_backward; casting_mode 'gemma',
    'llama' or 'none' (rms_norm.h)."""
    (y,), st = _norm("rms_norm", {"x": ("x", x), "weight": ("weight", weight)}, normalized_shape, dict(rstd=rstd),
                     {"out": ("y", out)}, stream, **_rms_options("rms_norm", x, eps, offset, casting_mode))
    return y, st["rstd"]


def rms_norm_(x, normalized_shape, weight=None, eps=None, offset=0.0, casting_mode="gemma", *, stream=None):
    """rms_norm written over x, which it returns."""
    _norm("rms_norm", {"x": ("x", x), "weight": ("weight", weight)}, normalized_shape, dict(rstd=None),
          {"out": ("y", x)}, stream, **_rms_options("rms_norm_", x, eps, offset, casting_mode))
    return x


def rms_norm_backward(grad_out, x, normalized_shape, rstd, weight=None, output_mask=(True, True), offset=0.0,
                      casting_mode="gemma", *, grad_x=None, grad_weight=None, stream=None):
    """(grad_x, grad_weight) of rms_norm from x and its rstd."""
    return _norm("rms_norm_backward", {"x": ("x", x), "grad_out": ("grad_y", grad_out), "weight": ("weight", weight)},
                 normalized_shape, dict(rstd=rstd), {"grad_x": ("grad_x", grad_x),
                                                     "grad_weight": ("grad_weight", grad_weight)}, stream,
                 output_mask, **_rms_options("rms_norm_backward", x, None, offset, casting_mode, True))[0]


def add_layer_norm(x, residual, normalized_shape, weight=None, bias=None, eps=1e-5, *, out=None, residual_out=None,
                   mean=None, rstd=None, stream=None):
    """(y, residual_out, mean, rstd): s = x + residual (rounded to x's dtype) as residual_out, and y =
    layer_norm(s) over its trailing dims normalized_shape, times weight plus bias (each optional)."""
    (y, s), st = _norm("add_layer_norm", {"x": ("x", x), "residual": ("residual", residual),
                                          "weight": ("weight", weight), "bias": ("bias", bias)},
                       normalized_shape, dict(mean=mean, rstd=rstd),
                       {"out": ("y", out), "residual_out": ("residual_out", residual_out)}, stream, eps=float(eps))
    return y, s, st["mean"], st["rstd"]


def add_layer_norm_backward(grad_out, grad_residual_out, residual_out, normalized_shape, mean, rstd, weight=None,
                            output_mask=(True, True, True), *, grad_x=None, grad_weight=None, grad_bias=None,
                            stream=None):
    """(grad_x, grad_weight, grad_bias) of add_layer_norm from its residual_out, mean and rstd; grad_x is also
    residual's gradient and includes grad_residual_out (None: 0)."""
    return _norm("add_layer_norm_backward", {"residual_out": ("residual_out", residual_out),
                                             "grad_out": ("grad_y", grad_out),
                                             "grad_residual_out": ("grad_residual_out", grad_residual_out),
                                             "weight": ("weight", weight)},
                 normalized_shape, dict(mean=mean, rstd=rstd), {"grad_x": ("grad_x", grad_x),
                                                                "grad_weight": ("grad_weight", grad_weight),
                                                                "grad_bias": ("grad_bias", grad_bias)},
                 stream, output_mask)[0]


def add_rms_norm(x, residual, normalized_shape, weight=None, eps=None, offset=0.0, casting_mode="gemma", *, out=None,
                 residual_out=None, rstd=None, stream=None):
    """(y, residual_out, rstd): s = x + residual (rounded to x's dtype) as
    residual_out, and y = s / sqrt(mean(s^2) + eps) over its trailing dims
    normalized_shape, times offset + weight (optional); eps and casting_mode as rms_norm's."""
    (y, s), st = _norm("add_rms_norm", {"x": ("x", x), "residual": ("residual", residual), "weight": ("weight", weight)},
                       normalized_shape, dict(rstd=rstd), {"out": ("y", out), "residual_out": ("residual_out", residual_out)},
                       stream, **_rms_options("add_rms_norm", x, eps, offset, casting_mode))
    return y, s, st["rstd"]


def add_rms_norm_backward(grad_out, grad_residual_out, residual_out, normalized_shape, rstd, weight=None,
                          output_mask=(True, True), offset=0.0, casting_mode="gemma", *, grad_x=None, grad_weight=None,
                          stream=None):
    """(grad_x, grad_weight) of add_rms_norm from its residual_out and rstd; grad_x is also residual's gradient
    and includes grad_residual_out (None: 0)."""
    return _norm("add_rms_norm_backward", {"residual_out": ("residual_out", residual_out),
                                           "grad_out": ("grad_y", grad_out),
                                           "grad_residual_out": ("grad_residual_out", grad_residual_out),
                                           "weight": ("weight", weight)},
                 normalized_shape, dict(rstd=rstd), {"grad_x": ("grad_x", grad_x),
                                                     "grad_weight": ("grad_weight", grad_weight)}, stream,
                 output_mask, **_rms_options("add_rms_norm_backward", None, None, offset, casting_mode, True))[0]


# ---------------------------------------------------------------------------
# flash_attention: [batch, seqlen, heads, head_dim] arrays (C-contiguous)

def _attention_dims(op, v, varlen=None):
    """The params' sizes; varlen (from _varlen): q [total_q, Hq, D], k and v [total_k, Hkv, D], packed."""
    q, k = v["q"], v["k"]
    rank, layout = (3, "[total, heads, head_dim]") if varlen else (4, "[batch, seqlen, heads, head_dim]")
    for name in ("q", "k", "v"):
        if len(v[name].shape) != rank:
            raise ValueError(f"tinycuda.capi.{op}: {name} must be {rank}-D {layout}, got shape {v[name].shape}")
    _same_shape(op, v, "k", "v")
    (b, sq, hq, d), (bk, sk, hkv, dk) = ((1,) * (4 - rank) + q.shape), ((1,) * (4 - rank) + k.shape)
    if (bk, dk) != (b, d) or (hq % hkv if hkv else hq):
        raise ValueError(f"tinycuda.capi.{op}: q {q.shape} and k, v {k.shape} must share batch and head_dim, "
                         "and q's heads must be a multiple of theirs")
    if d == 0:
        raise ValueError(f"tinycuda.capi.{op}: head_dim must be > 0")
    if varlen:
        return dict(batch=varlen["batch"], seqlen_q=varlen["max_q"], seqlen_k=varlen["max_k"], heads_q=hq,
                    heads_kv=hkv, head_dim=d, cu_seqlens_q=varlen["cu_q"], cu_seqlens_k=varlen["cu_k"], total_q=sq,
                    total_k=sk)
    return dict(batch=b, seqlen_q=sq, seqlen_k=sk, heads_q=hq, heads_kv=hkv, head_dim=d)


def _varlen(op, like, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k):
    """None for fixed lengths, else the checked offsets (int32 [batch + 1] on like's device) and maxima."""
    if cu_seqlens_q is None and cu_seqlens_k is None:
        if max_seqlen_q is not None or max_seqlen_k is not None:
            raise ValueError(f"tinycuda.capi.{op}: max_seqlen_q and max_seqlen_k are read only with cu_seqlens_q/k")
        return None
    if cu_seqlens_q is None or cu_seqlens_k is None:
        raise ValueError(f"tinycuda.capi.{op}: cu_seqlens_q and cu_seqlens_k must be given together")
    cu = {name: _view(op, name, a) for name, a in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k))}
    for name, a in cu.items():
        if a.dtype != "int32" or len(a.shape) != 1 or a.size < 1 or not a.contiguous or a.device != like.device:
            raise ValueError(f"tinycuda.capi.{op}: {name} must be a contiguous 1-D int32 {like.device} array of "
                             f"batch + 1 offsets, got {a.dtype} {a.shape} on {a.device}")
    if cu["cu_seqlens_q"].shape != cu["cu_seqlens_k"].shape:
        raise ValueError(f"tinycuda.capi.{op}: cu_seqlens_q and cu_seqlens_k must have the same length")
    for name, m in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        if not isinstance(m, int) or m < 0:
            raise ValueError(f"tinycuda.capi.{op}: {name} (the longest sequence) must be an int >= 0 with "
                             f"cu_seqlens, got {m!r}")
    return dict(batch=cu["cu_seqlens_q"].size - 1, cu_q=cu["cu_seqlens_q"], cu_k=cu["cu_seqlens_k"],
                max_q=max_seqlen_q, max_k=max_seqlen_k)


def _fill(arr, value):
    """Sets every element: a varlen call's rows in no sequence are left unwritten by the kernels."""
    if hasattr(arr, "fill_"):
        arr.fill_(value)
    else:
        arr.fill(value)


def _rows_strides(shape):
    """[batch, row, head] strides of a C-contiguous [batch, seqlen, heads, head_dim] array (or a packed
    [total, heads, head_dim] one, whose batch stride is not read)."""
    s, h, d = shape[-3:]
    return [s * h * d, h * d, d]


def _attention_options(scale, head_dim, window_left, window_right, softcap, causal, top_left):
    if scale is None:  # the torch op's default (head_dim > 0: _attention_dims)
        scale = 1.0 / math.sqrt(head_dim)
    return dict(scale=scale, softcap=softcap, causal=int(causal), top_left=int(top_left), window_left=window_left,
                window_right=window_right)


def flash_attention(q, k, v, causal=False, scale=None, window_left=-1, window_right=-1, softcap=0.0, top_left=False,
                    cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None, *, algo=0,
                    deterministic=False, out=None, lse=None, stream=None):
    """(out, lse): softmax(q k^T * scale) v with tinycuda.ops.flash_attention's
    options; q [B, Sq, Hq, D], k and v [B, Sk, Hkv, D]; lse [B, Hq, Sq] in
    float32 (float64 for float64), what flash_attention_backward reads.
    Varlen (cu_seqlens_q/k int32 [B + 1], max_seqlen_q/k ints): q [total_q,
    Hq, D], k and v [total_k, Hkv, D], lse [B, Hq, max_seqlen_q]; out's rows
    in no sequence are 0, lse's past a sequence's length +inf. deterministic:
    the torch op's, for its backward: here flash_attention_backward takes it."""
    op = "flash_attention"
    v_ = _check(op, {"q": q, "k": k, "v": v})
    qv = v_["q"]
    vl = _varlen(op, qv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    dims = _attention_dims(op, v_, vl)
    o, ov = _array(op, "out", out, qv, qv.shape)
    l, lv = _array(op, "lse", lse, qv, (dims["batch"], dims["heads_q"], dims["seqlen_q"]), dtype=_acc(qv))
    if vl:
        _fill(o, 0), _fill(l, math.inf)
    _call(op, qv, stream, **dims, q=qv, q_stride=_rows_strides(qv.shape), k=v_["k"],
          k_stride=_rows_strides(v_["k"].shape), v=v_["v"], v_stride=_rows_strides(v_["v"].shape), o=ov,
          o_stride=_rows_strides(qv.shape), lse=lv, algo=algo,
          **_attention_options(scale, dims["head_dim"], window_left, window_right, softcap, causal, top_left))
    return o, l


def flash_attention_backward(grad_out, q, k, v, out, lse, causal, scale, window_left, window_right, softcap,
                             top_left, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None, *,
                             algo=0, deterministic=False, grad_q=None, grad_k=None, grad_v=None, stream=None):
    """(grad_q, grad_k, grad_v) of flash_attention from its out and lse (varlen: the
    forward's offsets and maxima; gradient rows in no sequence are 0). deterministic: as
    tinycuda.ops.flash_attention's (bit-identical gradients run to run; else CUDA's Hopper
    backward adds dQ's shares in no fixed order)."""
    op = "flash_attention_backward"
    v_ = _check(op, {"grad_out": grad_out, "q": q, "k": k, "v": v, "out": out})
    qv = v_["q"]
    vl = _varlen(op, qv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    dims = _attention_dims(op, v_, vl)
    _same_shape(op, v_, "q", "out", "grad_out")
    if lse is None or lse is True:
        raise ValueError(f"tinycuda.capi.{op}: lse must be an array: flash_attention's second output")
    _, lv = _array(op, "lse", lse, qv, (dims["batch"], dims["heads_q"], dims["seqlen_q"]), dtype=_acc(qv))
    (gq, gqv), (gk, gkv), (gv, gvv) = _outputs(op, qv, (True, True, True), (
        ("grad_q", grad_q, qv.shape), ("grad_k", grad_k, v_["k"].shape), ("grad_v", grad_v, v_["v"].shape)))
    if vl:
        _fill(gq, 0), _fill(gk, 0), _fill(gv, 0)
    rs = {name: _rows_strides(v_[name].shape) for name in ("q", "k", "v")}
    _call(op, qv, stream, **dims, q=qv, q_stride=rs["q"], k=v_["k"], k_stride=rs["k"], v=v_["v"], v_stride=rs["v"],
          o=v_["out"], o_stride=rs["q"], lse=lv, grad_o=v_["grad_out"], grad_o_stride=rs["q"], grad_q=gqv,
          grad_q_stride=rs["q"], grad_k=gkv, grad_k_stride=rs["k"], grad_v=gvv, grad_v_stride=rs["v"], algo=algo,
          deterministic=int(bool(deterministic)),
          **_attention_options(scale, dims["head_dim"], window_left, window_right, softcap, causal, top_left))
    return gq, gk, gv


def _qkv(op, v):
    """The attention params' sizes, q's, k's and v's addresses and their (batch, row, head) strides as slices of a
    C-contiguous qkv [B, S, 3, H, D] (view v)."""
    if len(v.shape) != 5 or v.shape[2] != 3:
        raise ValueError(f"tinycuda.capi.{op}: qkv must be 5-D [batch, seqlen, 3, heads, head_dim], got shape "
                         f"{v.shape}")
    b, s, _, h, d = v.shape
    if d == 0:
        raise ValueError(f"tinycuda.capi.{op}: head_dim must be > 0")
    dims = dict(batch=b, seqlen_q=s, seqlen_k=s, heads_q=h, heads_kv=h, head_dim=d)
    return dims, [v.ptr + i * h * d * v.itemsize for i in range(3)], [s * 3 * h * d, 3 * h * d, d]


def flash_attention_qkvpacked(qkv, causal=False, scale=None, window_left=-1, window_right=-1, softcap=0.0,
                              top_left=False, *, algo=0, deterministic=False, out=None, lse=None, stream=None):
    """(out, lse): flash_attention of qkv [B, S, 3, H, D]'s slices (q, k, v along dim 2), read in place; out
    [B, S, H, D], lse [B, H, S] (deterministic: flash_attention's)."""
    op = "flash_attention_qkvpacked"
    v = _check(op, {"qkv": qkv})["qkv"]
    dims, (q, k, v_), st = _qkv(op, v)
    shape = (dims["batch"], dims["seqlen_q"], dims["heads_q"], dims["head_dim"])
    o, ov = _array(op, "out", out, v, shape)
    l, lv = _array(op, "lse", lse, v, (dims["batch"], dims["heads_q"], dims["seqlen_q"]), dtype=_acc(v))
    _call(op, v, stream, entry="flash_attention", **dims, q=q, q_stride=st, k=k, k_stride=st, v=v_, v_stride=st,
          o=ov, o_stride=_rows_strides(shape), lse=lv, algo=algo,
          **_attention_options(scale, dims["head_dim"], window_left, window_right, softcap, causal, top_left))
    return o, l


def flash_attention_qkvpacked_backward(grad_out, qkv, out, lse, causal, scale, window_left, window_right, softcap,
                                       top_left, *, algo=0, deterministic=False, grad_qkv=None, stream=None):
    """grad_qkv [B, S, 3, H, D] of flash_attention_qkvpacked from its out and lse: the three gradients in one
    array like qkv (deterministic: flash_attention_backward's)."""
    op = "flash_attention_qkvpacked_backward"
    named = _check(op, {"grad_out": grad_out, "qkv": qkv, "out": out})
    v = named["qkv"]
    dims, (q, k, v_), st = _qkv(op, v)
    shape = (dims["batch"], dims["seqlen_q"], dims["heads_q"], dims["head_dim"])
    for name in ("grad_out", "out"):
        if tuple(named[name].shape) != shape:
            raise ValueError(f"tinycuda.capi.{op}: {name} must have shape {shape}, got {named[name].shape}")
    if lse is None or lse is True:
        raise ValueError(f"tinycuda.capi.{op}: lse must be an array: flash_attention_qkvpacked's second output")
    _, lv = _array(op, "lse", lse, v, (dims["batch"], dims["heads_q"], dims["seqlen_q"]), dtype=_acc(v))
    g, gv = _array(op, "grad_qkv", grad_qkv, v, v.shape)
    _, (gq, gk, gvv), _ = _qkv(op, gv)
    rs = _rows_strides(shape)
    _call(op, v, stream, entry="flash_attention_backward", **dims, q=q, q_stride=st, k=k, k_stride=st, v=v_,
          v_stride=st, o=named["out"], o_stride=rs, lse=lv, grad_o=named["grad_out"], grad_o_stride=rs, grad_q=gq,
          grad_q_stride=st, grad_k=gk, grad_k_stride=st, grad_v=gvv, grad_v_stride=st, algo=algo,
          deterministic=int(bool(deterministic)),
          **_attention_options(scale, dims["head_dim"], window_left, window_right, softcap, causal, top_left))
    return g


# ---------------------------------------------------------------------------
# rope: q, k [B, H, S, D] (unsqueeze_dim=1) or [B, S, H, D] (unsqueeze_dim=2) arrays (C-contiguous)

def _rope(op, named, cos, sin, position_ids, unsqueeze_dim, interleaved, outs, transpose, stream):
    """The rotation of named's two arrays ({argument: array}, q's then k's) into outs ([(argument, given)] for
    each, or None: in place); tinycuda.ops.rope's shape rules. Returns the two written arrays."""
    (qn, q), (kn, k) = named.items()
    v = _check(op, {qn: q, kn: k, "cos": cos, "sin": sin})
    qv, kv, cv = v[qn], v[kn], v["cos"]
    _same_shape(op, v, "cos", "sin")
    if unsqueeze_dim not in (1, 2):
        raise ValueError(f"tinycuda.capi.{op}: unsqueeze_dim must be 1 ([B, H, S, D]) or 2 ([B, S, H, D]), "
                         f"got {unsqueeze_dim!r}")
    hd, sd = (1, 2) if unsqueeze_dim == 1 else (2, 1)
    if len(qv.shape) != 4 or len(kv.shape) != 4:
        raise ValueError(f"tinycuda.capi.{op}: {qn} and {kn} must be 4-D, got {qv.shape} and {kv.shape}")
    b, s, d = qv.shape[0], qv.shape[sd], qv.shape[3]
    if (kv.shape[0], kv.shape[sd], kv.shape[3]) != (b, s, d) or d % 2:
        raise ValueError(f"tinycuda.capi.{op}: {qn} {qv.shape} and {kn} {kv.shape} must share batch, seqlen and "
                         f"an even head_dim")
    pv, rows, cs_stride_b, pos_stride_b = None, s, 0, 0
    if position_ids is None:
        if not (cv.shape == (s, d) or (len(cv.shape) == 3 and cv.shape[0] in (1, b) and cv.shape[1:] == (s, d))):
            raise ValueError(f"tinycuda.capi.{op}: cos must have shape (S, D), (1, S, D) or (B, S, D) = "
                             f"{(b, s, d)}, got {cv.shape}")
        cs_stride_b = s * d if len(cv.shape) == 3 and cv.shape[0] > 1 else 0
    else:
        pv = _view(op, "position_ids", position_ids)
        if pv.dtype != "int64" or pv.device != qv.device or not pv.contiguous or not (
                pv.shape == (s,) or (len(pv.shape) == 2 and pv.shape[0] in (1, b) and pv.shape[1] == s)):
            raise ValueError(f"tinycuda.capi.{op}: position_ids must be a C-contiguous int64 {qv.device} array of "
                             f"shape (B, S), (1, S) or (S,) = {(b, s)}, got {pv.dtype} {pv.shape} on {pv.device}")
        if not ((len(cv.shape) == 2 and cv.shape[1] == d) or (len(cv.shape) == 3 and cv.shape[0] == 1
                                                               and cv.shape[2] == d)):
            raise ValueError(f"tinycuda.capi.{op}: with position_ids cos must be a table (P, D) or (1, P, D), "
                             f"D = {d}, got {cv.shape}")
        rows, pos_stride_b = cv.shape[-2], s if len(pv.shape) == 2 and pv.shape[0] > 1 else 0
    if outs is None:
        (qo, qov), (ko, kov) = (q, qv), (k, kv)
    else:
        (qo, qov), (ko, kov) = (_array(op, name, given, like, like.shape) for (name, given), like in zip(outs, (qv, kv)))

    def strides(a):  # (batch, head, token) of a C-contiguous 4-D array
        st = [math.prod(a.shape[i + 1:]) for i in range(4)]
        return [st[0], st[hd], st[sd]]

    _call(op, qv, stream, entry="rope", batch=b, seqlen=s, heads_q=qv.shape[hd], heads_k=kv.shape[hd], head_dim=d,
          q=qv, q_stride=strides(qv), k=kv, k_stride=strides(kv), q_out=qov, q_out_stride=strides(qv), k_out=kov,
          k_out_stride=strides(kv), cos=cv, sin=v["sin"], cs_stride_b=cs_stride_b, table_rows=rows,
          position_ids=pv, pos_stride_b=pos_stride_b, interleaved=int(bool(interleaved)), transpose=int(transpose))
    return qo, ko


def rope(q, k, cos, sin, position_ids=None, unsqueeze_dim=1, interleaved=False, *, q_out=None, k_out=None,
         stream=None):
    """(q_out, k_out): q and k rotated by cos and sin, gathered by position_ids if given
    (tinycuda.ops.rope's arguments and shapes); one kernel launch for both."""
    return _rope("rope", {"q": q, "k": k}, cos, sin, position_ids, unsqueeze_dim, interleaved,
                 [("q_out", q_out), ("k_out", k_out)], False, stream)


def rope_backward(grad_q_out, grad_k_out, cos, sin, position_ids=None, unsqueeze_dim=1, interleaved=False, *,
                  grad_q=None, grad_k=None, stream=None):
    """(grad_q, grad_k) of rope: the transposed rotation of its outputs' gradients."""
    return _rope("rope_backward", {"grad_q_out": grad_q_out, "grad_k_out": grad_k_out}, cos, sin, position_ids,
                 unsqueeze_dim, interleaved, [("grad_q", grad_q), ("grad_k", grad_k)], True, stream)


def rope_(q, k, cos, sin, position_ids=None, unsqueeze_dim=1, interleaved=False, *, stream=None):
    """rope written over q and k, returned."""
    return _rope("rope_", {"q": q, "k": k}, cos, sin, position_ids, unsqueeze_dim, interleaved, None, False, stream)
