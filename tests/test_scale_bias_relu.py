import pytest
import torch

import tinycuda
from conftest import check_op, noncontiguous

SHAPES = [(0, 5), (1, 1), (7, 3), (33, 7), (1000, 33), (3, 4097), (2, 3, 129), (4, 0), (9,)]


def reference(x, bias, scale):
    return torch.relu(x * scale + bias)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("contiguous", [True, False], ids=["contig", "strided"])
@pytest.mark.parametrize("scale", [0.5, -1.25])
def test_scale_bias_relu_matches_torch(device, dtype, shape, contiguous, scale):
    x = torch.randn(shape, device=device).to(dtype)
    bias = torch.randn(shape[-1], device=device).to(dtype)
    if not contiguous:
        x, bias = noncontiguous(x), noncontiguous(bias)
    # grad_bias sums over up to 1000 rows: fp32 atol follows sqrt(rows) * eps.
    check_op(lambda x, b: tinycuda.scale_bias_relu(x, b, scale), lambda x, b: reference(x, b, scale),
             [x, bias], grad_atol32=1e-4)


def test_scale_bias_relu_gradcheck():
    x = torch.randn(6, 13, dtype=torch.float64, requires_grad=True)
    b = torch.randn(13, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, b: tinycuda.scale_bias_relu(x, b, 0.7), (x, b))


def test_scale_bias_relu_module():
    m = tinycuda.nn.ScaleBiasReLU(5, scale=2.0)
    assert list(m.state_dict()) == ["bias"]
    x = torch.randn(3, 5)
    torch.testing.assert_close(m(x), torch.relu(2.0 * x))


def test_scale_bias_relu_opcheck(device, dtype):
    x = torch.randn(5, 33, device=device, dtype=dtype, requires_grad=True)
    b = torch.randn(33, device=device, dtype=dtype, requires_grad=True)
    torch.library.opcheck(torch.ops.tinycuda.scale_bias_relu.default, (x, b, 0.5))
    y = torch.ops.tinycuda.scale_bias_relu(x.detach(), b.detach(), 0.5)
    for mask in ([True, True], [True, False], [False, True]):
        torch.library.opcheck(torch.ops.tinycuda.scale_bias_relu_backward.default,
                              (torch.randn_like(y), y, 0.5, mask))


def test_scale_bias_relu_bias_grad_is_deterministic(device):
    x = torch.randn(3000, 257, device=device, requires_grad=True)
    b = torch.randn(257, device=device, requires_grad=True)
    g = torch.randn(3000, 257, device=device)
    grads = [torch.autograd.grad(tinycuda.scale_bias_relu(x, b, 1.5), b, g)[0] for _ in range(3)]
    assert all(torch.equal(grads[0], gb) for gb in grads[1:])


def test_scale_bias_relu_errors():
    with pytest.raises(RuntimeError, match=r"tinycuda::scale_bias_relu: bias must have shape \[5\]"):
        tinycuda.scale_bias_relu(torch.randn(3, 5), torch.randn(4), 1.0)
    with pytest.raises(RuntimeError, match=r"tinycuda::scale_bias_relu: bias has dtype Half"):
        tinycuda.scale_bias_relu(torch.randn(3, 5), torch.randn(5, dtype=torch.half), 1.0)
    with pytest.raises(RuntimeError, match=r"tinycuda::scale_bias_relu: x must be float32.*Long"):
        tinycuda.scale_bias_relu(torch.ones(3, 5, dtype=torch.long), torch.randn(5), 1.0)
    with pytest.raises(RuntimeError, match=r"at least 1 dim"):
        tinycuda.scale_bias_relu(torch.tensor(1.0), torch.randn(1), 1.0)
