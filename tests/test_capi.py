"""The C ABI front door: libtinycuda through tinycuda.capi (ctypes).

Same kernels as the torch ops, so results agree bit for bit; bad input is a
Python exception, never a crash."""
import ctypes
import subprocess
import sys

import numpy as np
import pytest
import torch

import tinycuda
from tinycuda import capi
from conftest import HAS_CUDA, requires_cuda

NP_DTYPES = [np.float32, np.float16, np.float64]


def _np(shape, dtype, rng):
    return rng.standard_normal(shape).astype(dtype)


def _same(a, b):
    a = torch.as_tensor(np.asarray(a)) if isinstance(a, np.ndarray) else a
    assert a.shape == b.shape and a.dtype == b.dtype
    assert torch.equal(a.cpu(), b.cpu()), (a - b).abs().max()


@pytest.mark.parametrize("dtype", NP_DTYPES, ids=lambda d: np.dtype(d).name)
def test_capi_matches_torch_ops_bit_for_bit_cpu(dtype):
    rng = np.random.default_rng(0)
    x, w, b = _np((33, 17), dtype, rng), _np((7, 17), dtype, rng), _np((7,), dtype, rng)
    gy = _np((33, 7), dtype, rng)
    t = lambda a: torch.from_numpy(a)  # noqa: E731
    _same(capi.linear(x, w, b), torch.ops.tinycuda.linear(t(x), t(w), t(b)))
    for got, ref in zip(capi.linear_backward(gy, x, w),
                        torch.ops.tinycuda.linear_backward(t(gy), t(x), t(w), [True, True, True])):
        _same(got, ref)
    _same(capi.relu(x), torch.ops.tinycuda.relu(t(x)))
    _same(capi.relu_backward(x, x[::-1].copy()), torch.ops.tinycuda.relu_backward(t(x), t(x[::-1].copy())))
    y_m, mask = capi.relu_mask(x)
    for got, ref in zip((y_m, mask), torch.ops.tinycuda.relu_mask(t(x))):
        _same(got, ref)
    _same(capi.relu_mask_backward(x, mask), torch.ops.tinycuda.relu_mask_backward(t(x), t(mask)))
    for log, fn in ((False, capi.softmax), (True, capi.log_softmax)):
        sm = fn(x)
        _same(sm, (torch.ops.tinycuda.log_softmax if log else torch.ops.tinycuda.softmax)(t(x), -1))
        _same(capi.softmax_backward(x, sm, log=log), torch.ops.tinycuda.softmax_backward(t(x), t(sm), -1, log))
    _same(capi.square(x), torch.ops.tinycuda.square(t(x)))
    _same(capi.square_backward(x, x), torch.ops.tinycuda.square_backward(t(x), t(x)))
    _check_activations(x, x[::-1].copy(), gy=x[:, ::-1].copy(), t=t)
    bias = x[0].copy()
    y = capi.scale_bias_relu(x, bias, 0.5)
    _same(y, torch.ops.tinycuda.scale_bias_relu(t(x), t(bias), 0.5))
    for got, ref in zip(capi.scale_bias_relu_backward(x, y, 0.5),
                        torch.ops.tinycuda.scale_bias_relu_backward(t(x), t(y), 0.5, [True, True])):
        _same(got, ref)
    tgt = np.array([0, 3, -100, 16, 5, 9] * 5 + [1, 2, 4])
    for red in ("mean", "sum", "none"):
        loss, grad = capi.cross_entropy(x, tgt, reduction=red, label_smoothing=0.1, grad=True)
        for got, ref in zip((loss, grad), torch.ops.tinycuda.cross_entropy(t(x), t(tgt), -100, red, 0.1, True)):
            _same(got, ref)
    tgt3 = np.where(tgt == -100, 3, tgt)
    _same(capi.cross_entropy(x, tgt3, ignore_index=3), torch.ops.tinycuda.cross_entropy(t(x), t(tgt3), 3)[0])
    scale = np.linspace(0.5, 2, 33).astype(dtype)
    ref = t(grad.copy())
    torch.ops.tinycuda.cross_entropy_backward(ref, t(scale))
    _same(capi.cross_entropy_backward(grad, scale), ref)
    for dim, keep in ((None, False), (0, True), (1, False)):
        s = capi.sum(x, dim, keep)
        _same(s, torch.ops.tinycuda.sum(t(x), dim, keep))
        _same(capi.sum_backward(s, x.shape, dim, keep), torch.ops.tinycuda.sum_backward(t(s), list(x.shape), dim, keep))
    _check_norms_bit_for_bit(x, x[1].copy(), x[2].copy(), x[::-1].copy(), t)


def _check_norms_bit_for_bit(x, w, b, gy, t):
    """layer_norm / rms_norm (+ backward) through capi against the torch ops; `t` makes a torch tensor."""
    ln = capi.layer_norm(x, x.shape[-1:], w, b)
    for got, ref in zip(ln, torch.ops.tinycuda.layer_norm(t(x), list(x.shape[-1:]), t(w), t(b), 1e-5)):
        _same(got, ref)
    for got, ref in zip(capi.layer_norm_backward(gy, x, x.shape[-1], ln[1], ln[2], w),
                        torch.ops.tinycuda.layer_norm_backward(t(gy), t(x), list(x.shape[-1:]), t(ln[1]), t(ln[2]),
                                                               t(w), [True, True, True])):
        _same(got, ref)
    rms = capi.rms_norm(x, x.shape[-1:], w)
    for got, ref in zip(rms, torch.ops.tinycuda.rms_norm(t(x), list(x.shape[-1:]), t(w), None)):
        _same(got, ref)
    for got, ref in zip(capi.rms_norm_backward(gy, x, x.shape[-1:], rms[1], w),
                        torch.ops.tinycuda.rms_norm_backward(t(gy), t(x), list(x.shape[-1:]), t(rms[1]), t(w),
                                                             [True, True])):
        _same(got, ref)


def _check_activations(a, b, gy, t):
    """gelu, swiglu, geglu and their backwards through the C ABI against the torch ops."""
    for ap in ("none", "tanh"):
        _same(capi.gelu(a, ap), torch.ops.tinycuda.gelu(t(a), ap))
        _same(capi.gelu_backward(gy, a, ap), torch.ops.tinycuda.gelu_backward(t(gy), t(a), ap))
        _same(capi.geglu(a, b, ap), torch.ops.tinycuda.geglu(t(a), t(b), ap))
        for got, ref in zip(capi.geglu_backward(gy, a, b, ap),
                            torch.ops.tinycuda.geglu_backward(t(gy), t(a), t(b), ap)):
            _same(got, ref)
    _same(capi.geglu(a, b), torch.ops.tinycuda.geglu(t(a), t(b)))  # both default to 'tanh'
    _same(capi.swiglu(a, b), torch.ops.tinycuda.swiglu(t(a), t(b)))
    for got, ref in zip(capi.swiglu_backward(gy, a, b), torch.ops.tinycuda.swiglu_backward(t(gy), t(a), t(b))):
        _same(got, ref)


def test_capi_bfloat16_through_dlpack_cpu():
    x = torch.randn(9, 33, dtype=torch.bfloat16)
    _same(capi.relu(x), torch.ops.tinycuda.relu(x))  # torch CPU tensors go through DLPack
    _check_activations(x, x.flip(0).contiguous(), gy=x.flip(1).contiguous(), t=lambda a: a)


def test_capi_out_arrays_and_skipped_grads():
    rng = np.random.default_rng(1)
    x, w, gy = _np((4, 5), np.float32, rng), _np((3, 5), np.float32, rng), _np((4, 3), np.float32, rng)
    out = np.empty((4, 3), np.float32)
    assert capi.linear(x, w, out=out) is out
    np.testing.assert_allclose(out, x @ w.T, rtol=1e-5, atol=1e-5)
    gw = np.empty((3, 5), np.float32)
    gx, gw2, gb = capi.linear_backward(gy, x, w, grad_x=False, grad_weight=gw, grad_bias=False)
    assert gx is None and gb is None and gw2 is gw
    np.testing.assert_allclose(gw, gy.T @ x, rtol=1e-5, atol=1e-5)


def test_capi_bad_input_raises():
    rng = np.random.default_rng(2)
    x = _np((4, 6), np.float32, rng)
    with pytest.raises(TypeError, match=r"tinycuda.capi.relu: x has dtype int32"):
        capi.relu(np.ones(3, np.int32))
    with pytest.raises(ValueError, match=r"tinycuda.capi.relu: x must be C-contiguous"):
        capi.relu(x[:, ::2])
    with pytest.raises(ValueError, match=r"x's last dim must equal weight's in_features 5"):
        capi.linear(x, _np((3, 5), np.float32, rng))
    with pytest.raises(TypeError, match=r"tinycuda.capi.linear: weight has dtype float64 but x has dtype float32"):
        capi.linear(x, _np((3, 6), np.float64, rng))
    with pytest.raises(ValueError, match=r"tinycuda.capi.relu: out has shape \(3,\) \(3 elements\) but the result needs \(4, 6\)"):
        capi.relu(x, out=np.empty(3, np.float32))
    with pytest.raises(ValueError, match=r"grad_y has shape"):
        capi.relu_backward(x, x[:2].copy())
    with pytest.raises(TypeError, match=r"must be a NumPy array or a CUDA array"):
        capi.relu([1.0, 2.0])
    with pytest.raises(ValueError, match=r"tinycuda.capi.gelu: approximate must be 'none' or 'tanh', got 'erf'"):
        capi.gelu(x, "erf")
    with pytest.raises(ValueError, match=r"tinycuda.capi.swiglu: a has shape \(4, 6\) but b has shape \(6, 4\)"):
        capi.swiglu(x, x.T.copy())
    with pytest.raises(ValueError, match=r"tinycuda.capi.geglu_backward: grad_y has shape \(2, 6\) but a has shape"):
        capi.geglu_backward(x[:2].copy(), x, x)
    with pytest.raises(ValueError, match=r"tinycuda.capi.swiglu_backward: grad_b has shape \(3,\)"):
        capi.swiglu_backward(x, x, x, grad_b=np.empty(3, np.float32))
    with pytest.raises(ValueError, match=r"tinycuda.capi.cross_entropy: target must be a contiguous int64 cpu array of shape \(4,\)"):
        capi.cross_entropy(x, np.zeros(4, np.int32))
    with pytest.raises(capi.CapiError, match=r"cross_entropy: target 6 at row 1 is out of range \[0, 6\)"):
        capi.cross_entropy(x, np.array([0, 6, 1, 2]))
    with pytest.raises(ValueError, match=r"grad_loss must be 0-dim or have shape \(4,\)"):
        capi.cross_entropy_backward(x, np.ones(6, np.float32))
    with pytest.raises(ValueError, match=r"tinycuda.capi.layer_norm: normalized_shape \(5,\) must equal the last "
                                         r"dims of x, whose shape is \(4, 6\)"):
        capi.layer_norm(x, 5)
    with pytest.raises(ValueError, match=r"tinycuda.capi.rms_norm: weight must have shape \(6,\), got \(5,\)"):
        capi.rms_norm(x, 6, _np((5,), np.float32, rng))
    with pytest.raises(ValueError, match=r"tinycuda.capi.rms_norm_backward: rstd must be a contiguous float32 cpu "
                                         r"array of shape \(4,\), got float16"):
        capi.rms_norm_backward(x, x, 6, np.ones(4, np.float16))


def test_capi_null_pointers_are_errors_not_crashes():
    lib = capi.lib()
    assert lib.tc_relu_cpu(None) == 1  # TC_ERR_INVALID_ARGUMENT
    assert b"params is NULL" in lib.tc_last_error()
    p = capi.STRUCTS["tc_relu_params"](dtype=0, n=5, x=None, y=None)
    assert lib.tc_relu_cpu(ctypes.byref(p)) == 1
    assert b"relu: x or y is NULL" in lib.tc_last_error()
    p = capi.STRUCTS["tc_linear_params"](dtype=7, M=1, N=1, K=1, x=1, weight=1, y=1)
    assert lib.tc_linear_cpu(ctypes.byref(p)) == 2  # TC_ERR_UNSUPPORTED_DTYPE, checked before any access
    p = capi.STRUCTS["tc_glu_params"](dtype=0, n=4, act=3, a=1, b=1, y=1)
    assert lib.tc_glu_cpu(ctypes.byref(p)) == 1
    assert b"glu: act must be 0 (silu), 1 (gelu) or 2 (gelu tanh), got 3" in lib.tc_last_error()
    p = capi.STRUCTS["tc_gelu_backward_params"](dtype=0, n=4, approximate=2, grad_y=1, x=1, grad_x=1)
    assert lib.tc_gelu_backward_cpu(ctypes.byref(p)) == 1
    assert b"gelu_backward: approximate must be 0 (none) or 1 (tanh), got 2" in lib.tc_last_error()
    p = capi.STRUCTS["tc_glu_backward_params"](dtype=0, n=4, act=0, grad_y=1, a=1, b=1, grad_a=1)
    assert lib.tc_glu_backward_cpu(ctypes.byref(p)) == 1
    assert b"glu_backward: a pointer is NULL" in lib.tc_last_error()


@pytest.mark.skipif(HAS_CUDA, reason="checks the no-GPU path")
def test_capi_reports_no_cuda_device_without_a_gpu():
    assert capi.cuda_device_count() == 0
    lib = capi.lib()
    p = capi.STRUCTS["tc_relu_params"](dtype=0, n=0, x=None, y=None)
    p.n = 4
    p.x = p.y = 16  # never dereferenced: there is no device to run on
    assert lib.tc_relu_cuda(ctypes.byref(p)) == 3  # TC_ERR_NO_CUDA
    assert b"no CUDA device" in lib.tc_last_error()


def test_capi_import_does_not_import_torch():
    code = "import sys, tinycuda.capi as c; c.lib(); assert 'torch' not in sys.modules, 'torch imported'"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_capi_cuda_torch_tensors_bit_for_bit(dtype):
    x = torch.randn(65, 33, device="cuda", dtype=dtype)
    w = torch.randn(17, 33, device="cuda", dtype=dtype)
    b = torch.randn(17, device="cuda", dtype=dtype)
    gy = torch.randn(65, 17, device="cuda", dtype=dtype)
    y = capi.linear(x, w, b)
    assert isinstance(y, torch.Tensor) and y.is_cuda
    _same(y, torch.ops.tinycuda.linear(x, w, b))
    for got, ref in zip(capi.linear_backward(gy, x, w),
                        torch.ops.tinycuda.linear_backward(gy, x, w, [True, True, True])):
        _same(got, ref)
    _same(capi.relu(x), torch.ops.tinycuda.relu(x))
    y_m, mask = capi.relu_mask(x)
    for got, ref in zip((y_m, mask), torch.ops.tinycuda.relu_mask(x)):
        _same(got, ref)
    _same(capi.relu_mask_backward(x, mask), torch.ops.tinycuda.relu_mask_backward(x, mask))
    _same(capi.sum(x), torch.ops.tinycuda.sum(x))
    _same(capi.sum(x, 0), torch.ops.tinycuda.sum(x, 0))
    _check_activations(x, x.flip(0).contiguous(), gy=x.flip(1).contiguous(), t=lambda a: a)
    _same(capi.softmax(x), torch.ops.tinycuda.softmax(x, -1))
    tgt = torch.randint(0, 33, (65,), device="cuda")
    tgt[3] = -100
    for got, ref in zip(capi.cross_entropy(x, tgt, label_smoothing=0.1, grad=True),
                        torch.ops.tinycuda.cross_entropy(x, tgt, -100, "mean", 0.1, True)):
        _same(got, ref)
    _same(capi.log_softmax(x), torch.ops.tinycuda.log_softmax(x, -1))
    yb = capi.scale_bias_relu(x, x[0].contiguous(), 2.0)
    for got, ref in zip(capi.scale_bias_relu_backward(x, yb, 2.0),
                        torch.ops.tinycuda.scale_bias_relu_backward(x, yb, 2.0, [True, True])):
        _same(got, ref)
    xn = torch.randn(1000, 64, device="cuda", dtype=dtype)  # several rows a block in the backward
    _check_norms_bit_for_bit(xn, xn[1].contiguous(), xn[2].contiguous(), torch.randn_like(xn), lambda a: a)


@requires_cuda
def test_capi_cuda_rejects_a_cpu_array():
    x = torch.randn(4, 5, device="cuda")
    with pytest.raises(ValueError, match=r"weight is a cpu array but x is a cuda array"):
        capi.linear(x, np.ones((3, 5), np.float32))


@requires_cuda
def test_capi_cuda_cupy_arrays():
    cupy = pytest.importorskip("cupy")
    x = cupy.random.standard_normal((33, 65), dtype=cupy.float32)
    y = capi.relu(x)
    assert isinstance(y, cupy.ndarray)
    _same(torch.as_tensor(y, device="cuda"), torch.ops.tinycuda.relu(torch.as_tensor(x, device="cuda")))
    s = capi.sum(x, 1)
    _same(torch.as_tensor(s, device="cuda"), torch.ops.tinycuda.sum(torch.as_tensor(x, device="cuda"), 1))
