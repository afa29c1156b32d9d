"""swiglu and geglu beyond the op table (tests/test_ops.py): float64 to
1e-12, special values, the SwiGLU module."""
import math

import pytest
import torch
import torch.nn.functional as F

import tinycuda

# name -> (tinycuda, torch reference, the backward op's extra args)
KINDS = {
    "swiglu": (tinycuda.swiglu, lambda a, b: F.silu(a) * b, ()),
    "geglu_tanh": (tinycuda.geglu, lambda a, b: F.gelu(a, approximate="tanh") * b, ()),
    "geglu_none": (lambda a, b: tinycuda.geglu(a, b, "none"), lambda a, b: F.gelu(a) * b, ("none",)),
}


def _backward_op(kind):
    return torch.ops.tinycuda.swiglu_backward if kind == "swiglu" else torch.ops.tinycuda.geglu_backward


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
