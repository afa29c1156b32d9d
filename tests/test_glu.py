import math

import pytest
import torch
import torch.nn.functional as F

import tinycuda
from conftest import HALF, check_op, noncontiguous, requires_cuda

SHAPES = [(0,), (1,), (7,), (33,), (1000,), (4097,), (3, 0), (5, 33), (2, 3, 4097), ()]
# name -> (tinycuda, torch reference, the backward op's extra args)
KINDS = {
    "swiglu": (tinycuda.swiglu, lambda a, b: F.silu(a) * b, ()),
    "geglu_tanh": (tinycuda.geglu, lambda a, b: F.gelu(a, approximate="tanh") * b, ()),
    "geglu_none": (lambda a, b: tinycuda.geglu(a, b, "none"), lambda a, b: F.gelu(a) * b, ("none",)),
}


def _backward_op(kind):
    return torch.ops.tinycuda.swiglu_backward if kind == "swiglu" else torch.ops.tinycuda.geglu_backward


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("layout", ["contig", "strided", "a_strided"])
@pytest.mark.parametrize("kind", KINDS)
def test_glu_matches_torch(device, dtype, shape, layout, kind):
    a = (3 * torch.randn(shape, device=device)).to(dtype)
    b = torch.randn(shape, device=device).to(dtype)
    if layout != "contig":
        a = noncontiguous(a)
    if layout == "strided":
        b = noncontiguous(b)
    ours, ref, _ = KINDS[kind]
    check_op(ours, ref, [a, b])


@pytest.mark.parametrize("kind", KINDS)
def test_glu_float64(device, kind):
    a, b, g = (4 * torch.randn(3, 257, device=device, dtype=torch.float64) for _ in range(3))
    ours, ref, extra = KINDS[kind]
    torch.testing.assert_close(ours(a, b), ref(a, b), rtol=1e-12, atol=1e-12)
    ga, gb = _backward_op(kind)(g, a, b, *extra)
    la, lb = a.clone().requires_grad_(), b.clone().requires_grad_()
    ra, rb = torch.autograd.grad(ref(la, lb), (la, lb), g)
    torch.testing.assert_close(ga, ra, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(gb, rb, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_glu_special_values(device, dtype, kind):
    inf, nan = math.inf, math.nan
    a = torch.tensor([nan, inf, -inf, 0.0, -0.0, 1e-30, -1e-30, 0.5, -0.5, 5.0, -5.0, 10.0, -10.0, 100.0, -100.0],
                     device=device).to(dtype)
    b = torch.ones_like(a)
    b[7:9] = -3.0
    ours, ref, _ = KINDS[kind]
    # float64 is the reference: torch's vectorized fp32 CPU gelu returns NaN for gelu(+inf)
    torch.testing.assert_close(ours(a, b).double(), ref(a.double(), b.double()).to(dtype).double(), equal_nan=True,
                               rtol=1e-5 if dtype == torch.float32 else 1e-2, atol=1e-6)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shape", [(1,), (7,), (33,), (4, 129)], ids=str)
def test_glu_backward_op(device, dtype, shape, kind):
    g, a, b = (torch.randn(shape, device=device).to(dtype) for _ in range(3))
    _, ref, extra = KINDS[kind]
    ga, gb = _backward_op(kind)(noncontiguous(g), a, noncontiguous(b), *extra)
    assert ga.is_contiguous() and gb.is_contiguous()
    la, lb = a.double().requires_grad_(), b.double().requires_grad_()
    ra, rb = torch.autograd.grad(ref(la, lb), (la, lb), g.double())
    sa, sb = a.clone().requires_grad_(), b.clone().requires_grad_()
    same_a, same_b = torch.autograd.grad(ref(sa, sb), (sa, sb), g)  # torch in the same precision
    for got, r, same in ((ga, ra, same_a), (gb, rb, same_b)):
        if dtype in HALF:
            assert (got.double() - r).abs().max() <= 3 * (same.double() - r).abs().max() + \
                torch.finfo(dtype).eps * r.abs().max()
        else:
            torch.testing.assert_close(got.double(), r, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("offsets", [(1, 1, 1), (0, 1, 0), (0, 0, 1)], ids=str)
def test_glu_unaligned(device, offsets):
    # 4-byte offsets of a, b or grad_out: the scalar path on CUDA, with n % 4 != 0
    oa, ob, og = offsets
    a = (3 * torch.randn(4099, device=device))[oa:oa + 4097]
    b = torch.randn(4099, device=device)[ob:ob + 4097]
    g = torch.randn(4099, device=device)[og:og + 4097]
    for kind, (ours, ref, extra) in KINDS.items():
        torch.testing.assert_close(ours(a, b), ref(a, b))
        la, lb = a.clone().requires_grad_(), b.clone().requires_grad_()
        for got, r in zip(_backward_op(kind)(g, a, b, *extra), torch.autograd.grad(ref(la, lb), (la, lb), g)):
            torch.testing.assert_close(got, r)


@pytest.mark.parametrize("kind", KINDS)
def test_glu_gradcheck(kind):
    a = torch.randn(4, 33, dtype=torch.float64, requires_grad=True)
    b = torch.randn(4, 33, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(KINDS[kind][0], (a, b))


def test_glu_grad_of_one_input():
    a = torch.randn(5, 9, requires_grad=True)
    b = torch.randn(5, 9)
    (ga,) = torch.autograd.grad(tinycuda.swiglu(a, b).sum(), a)
    torch.testing.assert_close(ga, torch.autograd.grad((F.silu(a) * b).sum(), a)[0])


def test_glu_opcheck(device, dtype):
    a = torch.randn(3, 33, device=device, dtype=dtype, requires_grad=True)
    b = torch.randn(3, 33, device=device, dtype=dtype, requires_grad=True)
    g = torch.randn(3, 33, device=device, dtype=dtype)
    torch.library.opcheck(torch.ops.tinycuda.swiglu.default, (a, b))
    torch.library.opcheck(torch.ops.tinycuda.swiglu_backward.default, (g, a.detach(), b.detach()))
    torch.library.opcheck(torch.ops.tinycuda.geglu.default, (a, b))  # the default, 'tanh'
    for approximate in ("none", "tanh"):
        torch.library.opcheck(torch.ops.tinycuda.geglu.default, (a, b, approximate))
        torch.library.opcheck(torch.ops.tinycuda.geglu_backward.default, (g, a.detach(), b.detach(), approximate))


def test_swiglu_module(device):
    m = tinycuda.nn.SwiGLU()
    assert not m.state_dict()
    x = torch.randn(2, 3, 66, device=device, requires_grad=True)
    y = m(x)
    assert y.shape == (2, 3, 33)
    torch.testing.assert_close(y, F.silu(x[..., :33]) * x[..., 33:])
    (gx,) = torch.autograd.grad(y.sum(), x)
    torch.testing.assert_close(gx, torch.autograd.grad((F.silu(x[..., :33]) * x[..., 33:]).sum(), x)[0])
    with pytest.raises(ValueError, match=r"tinycuda.nn.SwiGLU: the last dim of x must be even, got shape \[4, 7\]"):
        m(torch.randn(4, 7, device=device))


def test_glu_errors():
    a = torch.randn(3, 4)
    with pytest.raises(RuntimeError, match=r"tinycuda::swiglu: a must be float32.*got Long"):
        tinycuda.swiglu(torch.arange(4), torch.arange(4))
    with pytest.raises(RuntimeError, match=r"tinycuda::swiglu: a has shape \[3, 4\] but b has shape \[4, 3\]"):
        tinycuda.swiglu(a, torch.randn(4, 3))
    with pytest.raises(RuntimeError, match=r"tinycuda::geglu: b has dtype Half but a has dtype Float"):
        tinycuda.geglu(a, a.half())
    with pytest.raises(RuntimeError, match=r"tinycuda::geglu: approximate must be 'none' or 'tanh', got 'erf'"):
        tinycuda.geglu(a, a, "erf")
    with pytest.raises(RuntimeError, match=r"tinycuda::geglu_backward: approximate must be 'none' or 'tanh'"):
        torch.ops.tinycuda.geglu_backward(a, a, a, "sigmoid")
    with pytest.raises(RuntimeError, match=r"tinycuda::swiglu_backward: grad_out has shape \[3\] but a has shape \[3, 4\]"):
        torch.ops.tinycuda.swiglu_backward(torch.randn(3), a, a)
    with pytest.raises(RuntimeError, match=r"tinycuda::swiglu_backward: a has shape \[3, 4\] but b has shape \[4\]"):
        torch.ops.tinycuda.swiglu_backward(a, a, torch.randn(4))
    # the fake kernels (torch.compile, meta tensors) check the same
    m = torch.empty(3, 4, device="meta")
    with pytest.raises(RuntimeError, match=r"tinycuda::swiglu: a has shape \[3, 4\] but b has shape \[4\]"):
        tinycuda.swiglu(m, torch.empty(4, device="meta"))
    with pytest.raises(RuntimeError, match=r"tinycuda::geglu: approximate must be 'none' or 'tanh', got 'erf'"):
        tinycuda.geglu(m, m, "erf")
    with pytest.raises(RuntimeError, match=r"tinycuda::geglu: a has dtype torch.float32 but b has dtype torch.float16"):
        tinycuda.geglu(m, m.half())


@requires_cuda
def test_glu_device_mismatch():
    with pytest.raises(RuntimeError, match=r"tinycuda::swiglu: b is on cpu but a is on cuda:0"):
        tinycuda.swiglu(torch.randn(3, device="cuda"), torch.randn(3))
