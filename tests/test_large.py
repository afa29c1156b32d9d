"""Tensors of more than 2^31 elements: every index is 64-bit. The bulk is
zeros (cheap to allocate); random values sit on both sides of 2^31, where a
32-bit index would wrap, and are checked there."""
import pytest
import torch

import tinycuda
from conftest import DEVICES

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
