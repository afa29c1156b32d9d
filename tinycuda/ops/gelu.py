"""gelu: x * Phi(x), exactly as F.gelu (approximate='none': erf form,
'tanh': the tanh approximation). The backward, tinycuda::gelu_backward,
recomputes gelu'(x) from the saved input."""
import torch

from ._fake import register_fake

__all__ = ["gelu"]


APPROXIMATE = ("none", "tanh")


def gelu(x, approximate="none"):
    """F.gelu(x, approximate): x/2 (1 + erf(x / sqrt 2)), or its tanh form."""
    return torch.ops.tinycuda.gelu(x, approximate)


def _check_approximate(op, approximate):
    torch._check(approximate in APPROXIMATE,
                 lambda: f"tinycuda::{op}: approximate must be 'none' or 'tanh', got '{approximate}'")


@register_fake("tinycuda::gelu")
def _gelu_fake(x, approximate):
    _check_approximate("gelu", approximate)
    return x.new_empty(x.shape)


@register_fake("tinycuda::gelu_backward")
def _gelu_backward_fake(grad_out, x, approximate):
    _check_approximate("gelu_backward", approximate)
    torch._check(grad_out.shape == x.shape,
                 lambda: "tinycuda::gelu_backward: grad_out and x must have the same shape")
    return x.new_empty(x.shape)


def _setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])
    ctx.approximate = inputs[1] if len(inputs) > 1 else "none"


def _backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return torch.ops.tinycuda.gelu_backward(grad, x, ctx.approximate), None


torch.library.register_autograd("tinycuda::gelu", _backward, setup_context=_setup)
