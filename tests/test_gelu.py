import math

import pytest
import torch
import torch.nn.functional as F

import tinycuda
from conftest import HALF, check_op, noncontiguous

SHAPES = [(0,), (1,), (7,), (33,), (1000,), (4097,), (3, 0), (5, 33), (2, 3, 4097), ()]
APPROX = ["none", "tanh"]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("contiguous", [True, False], ids=["contig", "strided"])
@pytest.mark.parametrize("approximate", APPROX)
def test_gelu_matches_torch(device, dtype, shape, contiguous, approximate):
    x = (3 * torch.randn(shape, device=device)).to(dtype)
    if not contiguous:
        x = noncontiguous(x)
    check_op(lambda t: tinycuda.gelu(t, approximate), lambda t: F.gelu(t, approximate=approximate), [x])


@pytest.mark.parametrize("approximate", APPROX)
def test_gelu_float64(device, approximate):
    x = 4 * torch.randn(3, 257, device=device, dtype=torch.float64)
    torch.testing.assert_close(tinycuda.gelu(x, approximate), F.gelu(x, approximate=approximate),
                               rtol=1e-12, atol=1e-12)
    g = torch.randn_like(x)
    torch.testing.assert_close(torch.ops.tinycuda.gelu_backward(g, x, approximate),
                               torch.ops.aten.gelu_backward(g, x, approximate=approximate), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("approximate", APPROX)
def test_gelu_special_values(device, dtype, approximate):
    inf, nan = math.inf, math.nan
    x = torch.tensor([nan, inf, -inf, 0.0, -0.0, 1e-30, -1e-30, 0.5, -0.5, 5.0, -5.0, 10.0, -10.0, 100.0, -100.0],
                     device=device).to(dtype)
    # float64 is the reference: torch's own vectorized fp32 CPU path returns NaN for gelu(+inf)
    ref = F.gelu(x.double(), approximate=approximate)
    torch.testing.assert_close(tinycuda.gelu(x, approximate).double(), ref.to(dtype).double(), equal_nan=True,
                               rtol=1e-5 if dtype == torch.float32 else 1e-2, atol=1e-6)
    g = torch.ones_like(x)
    ref = torch.ops.aten.gelu_backward(g.double(), x.double(), approximate=approximate)
    torch.testing.assert_close(torch.ops.tinycuda.gelu_backward(g, x, approximate).double(), ref.to(dtype).double(),
                               equal_nan=True, rtol=1e-5 if dtype == torch.float32 else 1e-2, atol=1e-6)


@pytest.mark.parametrize("approximate", APPROX)
@pytest.mark.parametrize("shape", [(1,), (7,), (33,), (4, 129)], ids=str)
def test_gelu_backward_op(device, dtype, shape, approximate):
    g, x = (torch.randn(shape, device=device).to(dtype) for _ in range(2))
    got = torch.ops.tinycuda.gelu_backward(noncontiguous(g), x, approximate)
    ref = torch.ops.aten.gelu_backward(g.double(), x.double(), approximate=approximate)
    same = torch.ops.aten.gelu_backward(g, x, approximate=approximate)
    assert got.is_contiguous()
    if dtype in HALF:
        assert (got.double() - ref).abs().max() <= 2 * (same.double() - ref).abs().max() + \
            torch.finfo(dtype).eps * ref.abs().max()
    else:
        torch.testing.assert_close(got.double(), ref, rtol=1e-5, atol=1e-6)


def test_gelu_unaligned(device):
    # a 4-byte offset: the scalar path on CUDA, with n % 4 != 0
    x = (3 * torch.randn(4098, device=device))[1:]
    g = torch.randn(4098, device=device)[1:]
    for approximate in APPROX:
        torch.testing.assert_close(tinycuda.gelu(x, approximate), F.gelu(x, approximate=approximate))
        torch.testing.assert_close(torch.ops.tinycuda.gelu_backward(g, x, approximate),
                                   torch.ops.aten.gelu_backward(g, x, approximate=approximate))


@pytest.mark.parametrize("approximate", APPROX)
def test_gelu_gradcheck(approximate):
    x = torch.randn(4, 33, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: tinycuda.gelu(t, approximate), (x,))


def test_gelu_opcheck(device, dtype):
    x = torch.randn(3, 33, device=device, dtype=dtype, requires_grad=True)
    for approximate in APPROX:
        torch.library.opcheck(torch.ops.tinycuda.gelu.default, (x, approximate))
        torch.library.opcheck(torch.ops.tinycuda.gelu_backward.default,
                              (torch.randn_like(x), x.detach(), approximate))
    torch.library.opcheck(torch.ops.tinycuda.gelu.default, (x,))  # the default, 'none'


def test_gelu_module(device):
    for approximate in APPROX:
        m, ref = tinycuda.nn.GELU(approximate), torch.nn.GELU(approximate)
        assert isinstance(m, torch.nn.GELU) and repr(m) == repr(ref) and not m.state_dict()
        x = torch.randn(4, 65, device=device, requires_grad=True)
        y = m(x)
        torch.testing.assert_close(y, ref(x))
        (gx,) = torch.autograd.grad(y.sum(), x)
        torch.testing.assert_close(gx, torch.autograd.grad(ref(x).sum(), x)[0])
    assert tinycuda.nn.GELU().approximate == "none"


def test_gelu_errors():
    with pytest.raises(RuntimeError, match=r"tinycuda::gelu: x must be float32.*got Long"):
        tinycuda.gelu(torch.arange(4))
    with pytest.raises(RuntimeError, match=r"tinycuda::gelu: approximate must be 'none' or 'tanh', got 'erf'"):
        tinycuda.gelu(torch.randn(3), "erf")
    with pytest.raises(RuntimeError, match=r"tinycuda::gelu_backward: approximate must be 'none' or 'tanh', got 'x'"):
        torch.ops.tinycuda.gelu_backward(torch.randn(3), torch.randn(3), "x")
    with pytest.raises(RuntimeError, match=r"tinycuda::gelu_backward: grad_out has shape \[3\] but x has shape \[4\]"):
        torch.ops.tinycuda.gelu_backward(torch.randn(3), torch.randn(4))
    with pytest.raises(RuntimeError, match=r"tinycuda::gelu_backward: x has dtype Double but grad_out has dtype Float"):
        torch.ops.tinycuda.gelu_backward(torch.randn(3), torch.randn(3, dtype=torch.float64))
    # the fake kernel (torch.compile, meta tensors) checks the same
    with pytest.raises(RuntimeError, match=r"tinycuda::gelu: approximate must be 'none' or 'tanh', got 'erf'"):
        tinycuda.gelu(torch.empty(3, device="meta"), "erf")
    with pytest.raises(RuntimeError, match=r"tinycuda::gelu_backward: grad_out and x must have the same shape"):
        torch.ops.tinycuda.gelu_backward(torch.empty(3, device="meta"), torch.empty(4, device="meta"))
