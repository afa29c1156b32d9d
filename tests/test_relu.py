"""relu beyond the op table (tests/test_ops.py): special values, the exact
backward, and the 1-bit mask of the training path."""
import pytest
import torch

import tinycuda
from conftest import noncontiguous


def test_relu_special_values(device, dtype):
    x = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e-30, -1e-30],
                     device=device).to(dtype)
    y = tinycuda.relu(x)
    torch.testing.assert_close(y, torch.relu(x), equal_nan=True)


@pytest.mark.parametrize("shape", [(1,), (7,), (33,), (4, 129)], ids=str)
def test_relu_backward_is_exact(device, dtype, shape):
    g, x = torch.randn(shape, device=device).to(dtype), torch.randn(shape, device=device).to(dtype)
    got = tinycuda.ops.relu_backward(noncontiguous(g), x)
    torch.testing.assert_close(got, torch.where(x > 0, g, torch.zeros_like(g)), rtol=0, atol=0)


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 33, 4097], ids=str)
def test_relu_mask_pair(device, dtype, n):
    x = torch.randn(n, device=device).to(dtype)
    x[::5] = 0  # exact zeros get bit 0, as [x > 0] says
    y, mask = torch.ops.tinycuda.relu_mask(x)
    torch.testing.assert_close(y, torch.relu(x), rtol=0, atol=0)
    assert mask.dtype == torch.uint8 and mask.shape == ((n + 7) // 8,)
    bits = (mask.cpu().unsqueeze(1) >> torch.arange(8).to(torch.uint8)) & 1
    assert torch.equal(bits.flatten()[:n].bool(), (x > 0).cpu())
    g = torch.randn(n, device=device).to(dtype)
    gx = torch.ops.tinycuda.relu_mask_backward(g, mask)
    assert torch.equal(gx, torch.where(x > 0, g, torch.zeros_like(g)))


def test_relu_mask_unaligned(device):
    x = torch.randn(4097 + 1, device=device)[1:]  # 4-byte offset: the scalar path
    y, mask = torch.ops.tinycuda.relu_mask(x)
    assert torch.equal(y, torch.relu(x))
    g = torch.randn(4098, device=device)[1:]
    assert torch.equal(torch.ops.tinycuda.relu_mask_backward(g, mask), torch.where(x > 0, g, 0 * g))


def test_relu_uses_the_mask_path_for_training():
    x = torch.randn(10, requires_grad=True)
    assert "relu_mask" in tinycuda.relu(x).grad_fn.name()
    with torch.no_grad():
        assert tinycuda.relu(x).grad_fn is None
