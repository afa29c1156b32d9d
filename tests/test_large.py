"""Tensors of more than 2^31 elements: every index is 64-bit. The bulk is
zeros (cheap to allocate); random values sit on both sides of 2^31, where a
32-bit index would wrap, and are checked there."""
import pytest
import torch

import tinycuda
from conftest import DEVICES, requires_cuda

pytestmark = pytest.mark.large
N = 2**31 + 4099


@pytest.mark.parametrize("device", DEVICES)
def test_relu_and_sum_past_2_31(device):
    x = torch.zeros(N, dtype=torch.bfloat16, device=device)
    head, tail = torch.randn(64, device=device), torch.randn(2048, device=device)
    x[:64] = head.bfloat16()
    x[-2048:] = tail.bfloat16()
    y = tinycuda.relu(x)
    assert torch.equal(y[:64], torch.relu(x[:64]))
    assert torch.equal(y[-2048:], torch.relu(x[-2048:]))
    assert not y[2**31 - 8: 2**31 + 8].any()
    del y
    s = tinycuda.sum(x).float()
    expected = x[:64].double().sum() + x[-2048:].double().sum()
    assert abs(s.item() - expected.item()) <= 0.02 * (1 + abs(expected.item()))


@requires_cuda
def test_swiglu_forward_and_backward_past_2_31():
    # CUDA only: the five bf16 tensors of the backward take 21 GB
    g, a, b = (torch.zeros(N, dtype=torch.bfloat16, device="cuda") for _ in range(3))
    ends = (slice(0, 64), slice(N - 2048, N))
    for t in (g, a, b):
        for sl in ends:
            t[sl] = torch.randn(sl.stop - sl.start, device="cuda").bfloat16()
    y = tinycuda.swiglu(a, b)
    for sl in ends:
        torch.testing.assert_close(y[sl], (torch.nn.functional.silu(a[sl].float()) * b[sl].float()).bfloat16())
    assert not y[2**31 - 8: 2**31 + 8].any()
    del y
    ga, gb = torch.ops.tinycuda.swiglu_backward(g, a, b)
    for sl in ends:
        la, lb = a[sl].float().requires_grad_(), b[sl].float().requires_grad_()
        ra, rb = torch.autograd.grad(torch.nn.functional.silu(la) * lb, (la, lb), g[sl].float())
        torch.testing.assert_close(ga[sl], ra.bfloat16())
        torch.testing.assert_close(gb[sl], rb.bfloat16())
    assert not ga[2**31 - 8: 2**31 + 8].any() and not gb[2**31 - 8: 2**31 + 8].any()


@requires_cuda
def test_cross_entropy_past_2_31():
    """bf16 [16800, 128256] logits (2.15e9, 4.3 GB; the gradient as much again):
    row 16743 straddles element 2^31 and the rows after it lie past it."""
    rows, cols = 16800, 128256
    x = torch.zeros(rows, cols, dtype=torch.bfloat16, device="cuda")
    check = torch.tensor([0, 16743, 16744, rows - 1], device="cuda")
    x[check] = (3 * torch.randn(4, cols, device="cuda")).bfloat16()
    t = torch.full((rows,), -100, device="cuda")
    t[check] = torch.tensor([5, 77, cols - 1, 64000], device="cuda")
    loss, grad, *_ = torch.ops.tinycuda.cross_entropy(x, t, -100, "none", 0.0, True)
    ref_x = x[check].float().requires_grad_()
    ref = torch.nn.functional.cross_entropy(ref_x, t[check], reduction="none")
    torch.testing.assert_close(loss[check].float(), ref, rtol=1e-2, atol=1e-2)
    (ref_grad,) = torch.autograd.grad(ref.sum(), ref_x)
    torch.testing.assert_close(grad[check].float(), ref_grad, rtol=1e-2, atol=1e-4)
    assert not grad[1:16743].any() and not grad[16745:rows - 1].any()  # ignored rows: zero
