"""layer_norm beyond the op table (tests/test_ops.py): the statistics (a
large offset, float64), deterministic gradients, the nn.LayerNorm drop-in."""
import pytest
import torch

import tinycuda
from conftest import assert_drop_in_module

pytestmark = pytest.mark.racecheck


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
