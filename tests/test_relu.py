import pytest
import torch

import tinycuda
from conftest import check_op, noncontiguous

SHAPES = [(0,), (1,), (7,), (33,), (1000,), (4097,), (3, 0), (5, 33), (2, 3, 4097), ()]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("contiguous", [True, False], ids=["contig", "strided"])
def test_relu_matches_torch(device, dtype, shape, contiguous):
    x = torch.randn(shape, device=device).to(dtype)
    if not contiguous:
        x = noncontiguous(x)
    check_op(tinycuda.relu, torch.relu, [x])


def test_relu_special_values(device, dtype):
    x = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e-30, -1e-30],
                     device=device).to(dtype)
    y = tinycuda.relu(x)
    torch.testing.assert_close(y, torch.relu(x), equal_nan=True)


@pytest.mark.parametrize("shape", [(1,), (7,), (33,), (4, 129)], ids=str)
def test_relu_backward_op(device, dtype, shape):
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


def test_relu_gradcheck():
    x = torch.randn(4, 33, dtype=torch.float64)
    x = torch.where(x.abs() < 1e-3, x + 0.01, x).requires_grad_()  # stay off the kink
    assert torch.autograd.gradcheck(tinycuda.relu, (x,))


def test_relu_opcheck(device, dtype):
    x = torch.randn(3, 33, device=device, dtype=dtype, requires_grad=True)
    torch.library.opcheck(torch.ops.tinycuda.relu.default, (x,))
    torch.library.opcheck(torch.ops.tinycuda.relu_backward.default, (torch.randn_like(x), x.detach()))
    torch.library.opcheck(torch.ops.tinycuda.relu_mask.default, (x,))
    _, mask = torch.ops.tinycuda.relu_mask(x.detach())
    torch.library.opcheck(torch.ops.tinycuda.relu_mask_backward.default, (torch.randn_like(x), mask))


def test_relu_errors():
    with pytest.raises(RuntimeError, match=r"tinycuda::relu: x must be float32.*got Long"):
        tinycuda.relu(torch.arange(4))
    with pytest.raises(RuntimeError, match=r"tinycuda::relu_backward: x has dtype Double but grad_out has dtype Float"):
        tinycuda.ops.relu_backward(torch.randn(3), torch.randn(3, dtype=torch.float64))
    with pytest.raises(RuntimeError, match=r"tinycuda::relu_backward: grad_out has shape \[3\] but x has shape \[4\]"):
        tinycuda.ops.relu_backward(torch.randn(3), torch.randn(4))
    with pytest.raises(RuntimeError, match=r"tinycuda::relu_mask_backward: mask must have shape \[2\]"):
        torch.ops.tinycuda.relu_mask_backward(torch.randn(9), torch.zeros(1, dtype=torch.uint8))
    with pytest.raises(RuntimeError, match=r"tinycuda::relu_mask_backward: mask must be a uint8 tensor"):
        torch.ops.tinycuda.relu_mask_backward(torch.randn(9), torch.zeros(2))
