import pytest
import torch
import torch.nn.functional as F

import tinycuda
from conftest import assert_drop_in_module, check_op, noncontiguous
from test_layer_norm import CASES as LN_CASES

# One column is degenerate for rms_norm: y = sign(x) * w, and grad_x is pure
# cancellation (rstd * wg * eps / (x^2 + eps)), so the half-precision rule
# would compare rounding noise; two columns instead.
CASES = [((1, 2), (2,)) if case == ((1, 1), (1,)) else case for case in LN_CASES]


def _check(x, normalized_shape, w, eps=None, **tol):
    if w is None:
        check_op(lambda x: tinycuda.rms_norm(x, normalized_shape, None, eps),
                 lambda x: F.rms_norm(x, normalized_shape, None, eps), [x], **tol)
    else:
        check_op(lambda x, w: tinycuda.rms_norm(x, normalized_shape, w, eps),
                 lambda x, w: F.rms_norm(x, normalized_shape, w, eps), [x, w], **tol)


@pytest.mark.parametrize("shape,normalized_shape", CASES, ids=str)
@pytest.mark.parametrize("weight", [True, False], ids=["weight", "no_weight"])
@pytest.mark.parametrize("contiguous", [True, False], ids=["contig", "strided"])
def test_rms_norm_matches_torch(device, dtype, shape, normalized_shape, weight, contiguous):
    x = (2 * torch.randn(shape, device=device) + 0.5).to(dtype)
    w = (1 + 0.5 * torch.randn(normalized_shape, device=device)).to(dtype) if weight else None
    if not contiguous:
        x, w = noncontiguous(x), (noncontiguous(w) if weight else None)
    # An explicit eps: torch's default depends on the dtype, so the float64
    # reference would use another one. grad_weight adds up to 300 rows: fp32
    # atol follows sqrt(rows) * eps.
    _check(x, normalized_shape, w, eps=1e-6, grad_atol32=1e-4)


def test_rms_norm_misaligned_rows(device, dtype):
    # a row start off the 16-byte grid takes the single-element path on CUDA
    x = torch.randn(33 * 64 + 1, device=device).to(dtype)[1:].view(33, 64)
    _check(x, (64,), torch.randn(64, device=device).to(dtype), eps=1e-6, grad_atol32=1e-4)


def test_rms_norm_default_eps_is_torchs(device, dtype):
    # eps=None: torch uses the epsilon of the computation type (float32 for
    # 16-bit x, float64 for float64), which rows of tiny values show
    x = torch.full((3, 16), 1e-4, device=device).to(dtype)
    x[1] = 0
    x[2] *= torch.linspace(-1, 1, 16, device=device).to(dtype)
    ref = x.double() * (x.double().square().mean(-1, keepdim=True) + torch.finfo(torch.float32).eps).rsqrt()
    torch.testing.assert_close(tinycuda.rms_norm(x, 16).double(), ref, rtol=2 * torch.finfo(dtype).eps, atol=0)
    torch.testing.assert_close(tinycuda.rms_norm(x, 16), F.rms_norm(x, (16,)))
    x64 = torch.full((2, 8), 1e-9, device=device, dtype=torch.float64)
    torch.testing.assert_close(tinycuda.rms_norm(x64, 8), F.rms_norm(x64, (8,)))


def test_rms_norm_statistics(device):
    x = torch.randn(6, 5, 7, device=device)
    y, rstd = torch.ops.tinycuda.rms_norm(x, [5, 7], None, 1e-6)
    assert rstd.dtype == torch.float32 and rstd.shape == (6,)
    ref = (x.double().square().mean((1, 2)) + 1e-6).rsqrt()
    torch.testing.assert_close(rstd.double(), ref, rtol=1e-6, atol=0)
    _, rstd64 = torch.ops.tinycuda.rms_norm(x.double(), [5, 7], None, None)
    assert rstd64.dtype == torch.float64


def test_rms_norm_gradcheck():
    x = torch.randn(3, 4, 5, dtype=torch.float64, requires_grad=True)
    w = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, w: tinycuda.rms_norm(x, (4, 5), w), (x, w))
    assert torch.autograd.gradcheck(lambda x: tinycuda.rms_norm(x, 5, eps=0.1), (x,))


def test_rms_norm_opcheck(device, dtype):
    x = torch.randn(5, 33, device=device, dtype=dtype, requires_grad=True)
    w = torch.randn(33, device=device, dtype=dtype, requires_grad=True)
    op = torch.ops.tinycuda.rms_norm.default
    torch.library.opcheck(op, (x, [33], w, None))
    torch.library.opcheck(op, (x, [33], None, 0.1))
    torch.library.opcheck(op, (x.view(5, 3, 11), [3, 11], w.view(3, 11), 1e-6))
    _, rstd = op(x.detach(), [33], None, None)
    g = torch.randn(5, 33, device=device, dtype=dtype)
    bwd = torch.ops.tinycuda.rms_norm_backward.default
    for mask in ([True, True], [True, False], [False, True]):
        torch.library.opcheck(bwd, (g, x.detach(), [33], rstd, w.detach(), mask))
    torch.library.opcheck(bwd, (g, x.detach(), [33], rstd, None, [True, False]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_rms_norm_grads_are_deterministic(device, dtype):
    # 20000 rows: every block of the CUDA backward loops over several rows
    x = torch.randn(20000, 256, device=device, dtype=dtype, requires_grad=True)
    w = torch.randn(256, device=device, dtype=dtype, requires_grad=True)
    g = torch.randn(20000, 256, device=device, dtype=dtype)
    runs = [torch.autograd.grad(tinycuda.rms_norm(x, (256,), w), (x, w), g) for _ in range(2)]
    for first, second in zip(*runs):
        assert torch.equal(first, second)


def test_rms_norm_module_matches_torch_nn():
    for kwargs in ({}, {"elementwise_affine": False}, {"eps": 1e-3}):
        assert_drop_in_module(tinycuda.nn.RMSNorm((3, 8), **kwargs), torch.nn.RMSNorm((3, 8), **kwargs),
                              torch.randn(4, 3, 8))
    m = tinycuda.nn.RMSNorm(6, dtype=torch.bfloat16)
    assert m.weight.dtype == torch.bfloat16 and torch.equal(m.weight, torch.ones(6, dtype=torch.bfloat16))


def test_rms_norm_errors():
    x = torch.randn(3, 4)
    with pytest.raises(RuntimeError, match=r"tinycuda::rms_norm: normalized_shape \[2, 4\] must equal the last "
                                           r"dims of x, whose shape is \[3, 4\]"):
        tinycuda.rms_norm(x, (2, 4))
    with pytest.raises(RuntimeError, match=r"tinycuda::rms_norm: weight must have shape \[4\] \(normalized_shape\), "
                                           r"got \[1, 4\]"):
        tinycuda.rms_norm(x, 4, torch.randn(1, 4))
    with pytest.raises(RuntimeError, match=r"tinycuda::rms_norm: weight has dtype BFloat16 but x has dtype Float"):
        tinycuda.rms_norm(x, 4, torch.randn(4, dtype=torch.bfloat16))
    y, rstd = torch.ops.tinycuda.rms_norm(x, [4], None, None)
    bwd = torch.ops.tinycuda.rms_norm_backward
    with pytest.raises(RuntimeError, match=r"tinycuda::rms_norm_backward: rstd must be Float for x of dtype Float, "
                                           r"got Half"):
        bwd(y, x, [4], rstd.half(), None, [True, False])
    with pytest.raises(RuntimeError, match=r"tinycuda::rms_norm_backward: x has dtype Double but grad_out has "
                                           r"dtype Float"):
        bwd(y, x.double(), [4], rstd, None, [True, False])
