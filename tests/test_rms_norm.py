"""rms_norm beyond the op table (tests/test_ops.py): torch's default eps, the
statistics, deterministic gradients, the nn.RMSNorm drop-in."""
import pytest
import torch
import torch.nn.functional as F

import tinycuda
from conftest import assert_drop_in_module

pytestmark = pytest.mark.racecheck


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


@pytest.mark.parametrize("cols", [64, 12288, 40000])
def test_rms_norm_in_place_is_the_forward(device, dtype, cols):
    # one block, one block of 32 a thread, a cluster: every kernel reads its whole row before it writes
    x, w = torch.randn(3, cols, device=device, dtype=dtype), torch.randn(cols, device=device, dtype=dtype)
    for kw in ({}, {"offset": 1.0, "casting_mode": "llama"}):
        y = tinycuda.rms_norm(x, cols, w, 1e-6, **kw)
        z = x.clone()
        assert tinycuda.rms_norm_(z, cols, w, 1e-6, **kw) is z
        assert torch.equal(z, y)
