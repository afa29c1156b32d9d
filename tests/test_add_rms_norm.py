"""add_rms_norm beyond the op table (tests/test_ops.py): the fused op gives
the unfused pair's bits (add, then tinycuda's rms_norm) on every kernel path,
gradients when only one of the two outputs is used, deterministic gradients,
and the nn.AddRMSNorm module."""
import pytest
import torch

import tinycuda
from conftest import HAS_CUDA

pytestmark = pytest.mark.racecheck

# one block (16 elements a thread), one block of 32 a thread, a cluster, the
# loop kernel (past a cluster of 16 on sm_90), single elements (odd width)
COLS = [64, 4096, 12288, 40000, 300000, 33]


@pytest.mark.parametrize("cols", COLS)
def test_add_rms_norm_is_add_then_rms_norm_bit_for_bit(device, dtype, cols):
    x, r = torch.randn(3, cols, device=device, dtype=dtype), torch.randn(3, cols, device=device, dtype=dtype)
    w = torch.randn(cols, device=device, dtype=dtype)
    y, s = tinycuda.add_rms_norm(x, r, w, 1e-6)
    assert torch.equal(s, x + r)
    assert torch.equal(y, tinycuda.rms_norm(x + r, cols, w, 1e-6))


def test_add_rms_norm_gradients_of_one_output(device):
    x, r, w = (torch.randn(4, 96, device=device, dtype=torch.float64, requires_grad=True) for _ in range(3))
    w = w[0].detach().requires_grad_()
    y, s = tinycuda.add_rms_norm(x, r, w)
    g = torch.randn_like(y)
    # only y: s's gradient is 0
    ref_y = torch.nn.functional.rms_norm(x + r, (96,), w)
    for got, want in zip(torch.autograd.grad(y, (x, r, w), g, retain_graph=True),
                         torch.autograd.grad(ref_y, (x, r, w), g)):
        torch.testing.assert_close(got, want)
    # only s: x and residual get its gradient, weight none
    gx, gr = torch.autograd.grad(s, (x, r), g)
    assert torch.equal(gx, g) and torch.equal(gr, g)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_add_rms_norm_grads_are_deterministic(device, dtype):
    x, r = (torch.randn(20000, 256, device=device, dtype=dtype, requires_grad=True) for _ in range(2))
    w = torch.randn(256, device=device, dtype=dtype, requires_grad=True)
    g, gs = torch.randn(20000, 256, device=device, dtype=dtype), torch.randn(20000, 256, device=device, dtype=dtype)
    runs = [torch.autograd.grad(tinycuda.add_rms_norm(x, r, w), (x, r, w), (g, gs)) for _ in range(2)]
    for first, second in zip(*runs):
        assert torch.equal(first, second)


def test_add_rms_norm_module():
    """tinycuda.nn.AddRMSNorm is torch.nn.RMSNorm's constructor and state_dict,
    and returns (norm(x + residual), x + residual)."""
    for kwargs in ({}, {"elementwise_affine": False}, {"eps": 1e-3}):
        ours, ref = tinycuda.nn.AddRMSNorm((3, 8), **kwargs), torch.nn.RMSNorm((3, 8), **kwargs)
        assert list(ours.state_dict()) == list(ref.state_dict())
        for p in ref.parameters():
            torch.nn.init.normal_(p)
        ours.load_state_dict(ref.state_dict())
        x, r = torch.randn(4, 3, 8), torch.randn(4, 3, 8)
        y, s = ours(x, r)
        torch.testing.assert_close(s, x + r)
        torch.testing.assert_close(y, ref(x + r))
    with pytest.raises(RuntimeError, match=r"tinycuda::add_rms_norm: normalized_shape \[8\] must equal"):
        tinycuda.nn.AddRMSNorm(8)(torch.randn(2, 5), torch.randn(2, 5))


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU and a CUDA build")
def test_add_rms_norm_misaligned_residual():
    # a residual one element off the 16-byte grid: the single-element kernels
    base = torch.randn(2 * 64 + 1, device="cuda", dtype=torch.bfloat16)
    r, x = base[1:].view(2, 64), torch.randn(2, 64, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(64, device="cuda", dtype=torch.bfloat16)
    y, s = tinycuda.add_rms_norm(x, r, w, 1e-6)
    assert torch.equal(s, x + r)
    torch.testing.assert_close(y.float(), torch.nn.functional.rms_norm((x + r).float(), (64,), w.float(), 1e-6),
                               rtol=2e-2, atol=2e-2)
