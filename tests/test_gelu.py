"""gelu beyond the op table (tests/test_ops.py): float64 to 1e-12, special
values, the nn.GELU drop-in."""
import math

import pytest
import torch
import torch.nn.functional as F

import tinycuda

APPROX = ["none", "tanh"]


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
