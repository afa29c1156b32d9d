"""scale_bias_relu beyond the op table (tests/test_ops.py): the module, a
deterministic grad_bias."""
import pytest
import torch

import tinycuda

pytestmark = pytest.mark.racecheck


def test_scale_bias_relu_module():
    m = tinycuda.nn.ScaleBiasReLU(5, scale=2.0)
    assert list(m.state_dict()) == ["bias"]
    x = torch.randn(3, 5)
    torch.testing.assert_close(m(x), torch.relu(2.0 * x))


def test_scale_bias_relu_bias_grad_is_deterministic(device):
    x = torch.randn(3000, 257, device=device, requires_grad=True)
    b = torch.randn(257, device=device, requires_grad=True)
    g = torch.randn(3000, 257, device=device)
    grads = [torch.autograd.grad(tinycuda.scale_bias_relu(x, b, 1.5), b, g)[0] for _ in range(3)]
    assert all(torch.equal(grads[0], gb) for gb in grads[1:])
