import pytest
import torch
import torch.nn.functional as F

import tinycuda
from conftest import assert_drop_in_module, check_op, noncontiguous

# (x shape, normalized_shape). On CUDA: 16-byte vectors with the row in
# registers (1024, 8192 and the many-row shapes), single elements in registers
# (odd widths up to 4096), the loop path for longer rows (10000: vectors;
# 4097: single elements); one and several row groups a block; empty tensors.
CASES = [
    ((0, 5), (5,)), ((4, 0), (0,)), ((1, 1), (1,)), ((7, 3), (3,)), ((5, 33), (33,)), ((4, 1023), (1023,)),
    ((3, 1024), (1024,)), ((2, 4097), (4097,)), ((2, 8192), (8192,)), ((2, 10000), (10000,)),
    ((2, 3, 4, 5), (4, 5)), ((9,), (9,)), ((100, 2048), (2048,)), ((300, 64), (64,)),
]
AFFINE = ["weight+bias", "weight", "bias", "none"]


def _inputs(shape, normalized_shape, affine, device, dtype):
    x = (2 * torch.randn(shape, device=device) + 0.5).to(dtype)
    w = (1 + 0.5 * torch.randn(normalized_shape, device=device)).to(dtype) if "weight" in affine else None
    b = torch.randn(normalized_shape, device=device).to(dtype) if "bias" in affine else None
    return x, w, b


def _check(x, normalized_shape, w, b, **tol):
    given = [t for t in (x, w, b) if t is not None]

    def call(fn):
        def f(*ts):
            it = iter(ts)
            return fn(next(it), normalized_shape, next(it) if w is not None else None,
                      next(it) if b is not None else None)
        return f
    check_op(call(tinycuda.layer_norm), call(F.layer_norm), given, **tol)


@pytest.mark.parametrize("shape,normalized_shape", CASES, ids=str)
@pytest.mark.parametrize("affine", AFFINE)
@pytest.mark.parametrize("contiguous", [True, False], ids=["contig", "strided"])
def test_layer_norm_matches_torch(device, dtype, shape, normalized_shape, affine, contiguous):
    x, w, b = _inputs(shape, normalized_shape, affine, device, dtype)
    if not contiguous:
        x, w, b = (noncontiguous(t) if t is not None else None for t in (x, w, b))
    # grad_weight / grad_bias add up to 300 rows: fp32 atol follows sqrt(rows) * eps.
    _check(x, normalized_shape, w, b, grad_atol32=1e-4)


def test_layer_norm_misaligned_rows(device, dtype):
    # a row start off the 16-byte grid takes the single-element path on CUDA
    x = torch.randn(33 * 64 + 1, device=device).to(dtype)[1:].view(33, 64)
    w, b = torch.randn(64, device=device).to(dtype), torch.randn(64, device=device).to(dtype)
    _check(x, (64,), w, b, grad_atol32=1e-4)


@pytest.mark.parametrize("cols", [64, 4096, 10000])
def test_layer_norm_statistics_and_large_offset(device, cols):
    # x = 1000 + noise: E[x^2] - E[x]^2 in float32 would lose every digit of the
    # variance; the centered second pass keeps rstd to ~1e-4.
    x = 1000 + torch.randn(8, cols, device=device)
    y, mean, rstd = torch.ops.tinycuda.layer_norm(x, [cols], None, None, 1e-5)
    x64 = x.double()
    ref_mean = x64.mean(-1)
    ref_rstd = (x64.var(-1, unbiased=False) + 1e-5).rsqrt()
    assert mean.dtype == rstd.dtype == torch.float32 and mean.shape == (8,)
    torch.testing.assert_close(mean.double(), ref_mean, rtol=1e-6, atol=0)
    torch.testing.assert_close(rstd.double(), ref_rstd, rtol=1e-3, atol=0)
    torch.testing.assert_close(y.double(), (x64 - ref_mean[:, None]) * ref_rstd[:, None], rtol=0, atol=2e-3)


def test_layer_norm_float64_statistics(device):
    x = torch.randn(5, 7, 3, dtype=torch.float64, device=device)
    y, mean, rstd = torch.ops.tinycuda.layer_norm(x, [7, 3], None, None, 1e-5)
    ref_y, ref_mean, ref_rstd = torch.native_layer_norm(x, [7, 3], None, None, 1e-5)
    assert mean.dtype == torch.float64 and mean.shape == (5,)
    torch.testing.assert_close(y, ref_y)
    torch.testing.assert_close(mean, ref_mean.view(5))
    torch.testing.assert_close(rstd, ref_rstd.view(5))


def test_layer_norm_gradcheck():
    x = torch.randn(3, 4, 5, dtype=torch.float64, requires_grad=True)
    w = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    b = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, w, b: tinycuda.layer_norm(x, (4, 5), w, b), (x, w, b))
    assert torch.autograd.gradcheck(lambda x: tinycuda.layer_norm(x, 5, eps=0.1), (x,))


def test_layer_norm_opcheck(device, dtype):
    x = torch.randn(5, 33, device=device, dtype=dtype, requires_grad=True)
    w = torch.randn(33, device=device, dtype=dtype, requires_grad=True)
    b = torch.randn(33, device=device, dtype=dtype, requires_grad=True)
    op = torch.ops.tinycuda.layer_norm.default
    torch.library.opcheck(op, (x, [33], w, b, 1e-5))
    torch.library.opcheck(op, (x, [33], None, None, 0.1))
    torch.library.opcheck(op, (x.view(5, 3, 11), [3, 11], None, b.view(3, 11), 1e-5))
    _, mean, rstd = op(x.detach(), [33], None, None, 1e-5)
    g = torch.randn(5, 33, device=device, dtype=dtype)
    for mask in ([True, True, True], [True, False, False], [False, True, True]):
        torch.library.opcheck(torch.ops.tinycuda.layer_norm_backward.default,
                              (g, x.detach(), [33], mean, rstd, w.detach(), mask))
    torch.library.opcheck(torch.ops.tinycuda.layer_norm_backward.default,
                          (g, x.detach(), [33], mean, rstd, None, [True, False, True]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_layer_norm_grads_are_deterministic(device, dtype):
    # 20000 rows: every block of the CUDA backward loops over several rows
    x = torch.randn(20000, 256, device=device, dtype=dtype, requires_grad=True)
    w = torch.randn(256, device=device, dtype=dtype, requires_grad=True)
    b = torch.randn(256, device=device, dtype=dtype, requires_grad=True)
    g = torch.randn(20000, 256, device=device, dtype=dtype)
    runs = [torch.autograd.grad(tinycuda.layer_norm(x, (256,), w, b), (x, w, b), g) for _ in range(2)]
    for first, second in zip(*runs):
        assert torch.equal(first, second)


def test_layer_norm_module_matches_torch_nn():
    for kwargs in ({}, {"bias": False}, {"elementwise_affine": False}, {"eps": 1e-3}):
        assert_drop_in_module(tinycuda.nn.LayerNorm((3, 8), **kwargs), torch.nn.LayerNorm((3, 8), **kwargs),
                              torch.randn(4, 3, 8))
    m = tinycuda.nn.LayerNorm(6, dtype=torch.float64)
    assert m.weight.dtype == torch.float64 and torch.equal(m.bias, torch.zeros(6, dtype=torch.float64))


def test_layer_norm_errors():
    x = torch.randn(3, 4)
    with pytest.raises(RuntimeError, match=r"tinycuda::layer_norm: normalized_shape \[5\] must equal the last "
                                           r"dims of x, whose shape is \[3, 4\]"):
        tinycuda.layer_norm(x, 5)
    with pytest.raises(RuntimeError, match=r"tinycuda::layer_norm: normalized_shape must have at least 1 dim"):
        tinycuda.layer_norm(x, ())
    with pytest.raises(RuntimeError, match=r"tinycuda::layer_norm: weight must have shape \[4\] \(normalized_shape\), "
                                           r"got \[3\]"):
        tinycuda.layer_norm(x, 4, torch.randn(3))
    with pytest.raises(RuntimeError, match=r"tinycuda::layer_norm: bias has dtype Half but x has dtype Float"):
        tinycuda.layer_norm(x, 4, None, torch.randn(4, dtype=torch.half))
    with pytest.raises(RuntimeError, match=r"tinycuda::layer_norm: x must be float32.*Long"):
        tinycuda.layer_norm(torch.ones(3, 4, dtype=torch.long), 4)
    y, mean, rstd = torch.ops.tinycuda.layer_norm(x, [4], None, None, 1e-5)
    bwd = torch.ops.tinycuda.layer_norm_backward
    with pytest.raises(RuntimeError, match=r"tinycuda::layer_norm_backward: grad_out has shape \[3, 5\]"):
        bwd(torch.randn(3, 5), x, [4], mean, rstd, None, [True, False, False])
    with pytest.raises(RuntimeError, match=r"tinycuda::layer_norm_backward: mean must be Float for x of dtype "
                                           r"Float, got Double"):
        bwd(y, x, [4], mean.double(), rstd, None, [True, False, False])
    with pytest.raises(RuntimeError, match=r"tinycuda::layer_norm_backward: rstd must have 3 elements \(one per "
                                           r"row\), got 2"):
        bwd(y, x, [4], mean, rstd[:2], None, [True, False, False])
