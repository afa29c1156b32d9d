"""relu: max(x, 0).

Two autograd paths. tinycuda.relu on a tensor that needs a gradient runs
tinycuda::relu_mask, which also writes a 1-bit-per-element sign mask; its
backward, tinycuda::relu_mask_backward, reads that mask instead of a saved
activation (8 + 1/8 instead of 12 bytes per fp32 element). The plain
tinycuda::relu op saves its output, [y > 0] == [x > 0], and backs off to
tinycuda::relu_backward.
"""
import torch

from . import _fake
from ._fake import register_fake


__all__ = ["relu", "relu_backward"]


def relu(x):
    """max(x, 0) elementwise; NaN stays NaN."""
    if torch.is_grad_enabled() and x.requires_grad:
        return torch.ops.tinycuda.relu_mask(x)[0]
    return torch.ops.tinycuda.relu(x)


def relu_backward(grad_out, x):
    """grad_out * [x > 0]."""
    return torch.ops.tinycuda.relu_backward(grad_out, x)


_fake.elementwise("tinycuda::relu")
_fake.elementwise("tinycuda::relu_backward", same=("grad_out", "x"))


@register_fake("tinycuda::relu_mask")
def _relu_mask_fake(x):
    return x.new_empty(x.shape), x.new_empty(((x.numel() + 7) // 8,), dtype=torch.uint8)


@register_fake("tinycuda::relu_mask_backward")
def _relu_mask_backward_fake(grad_out, mask):
    torch._check(mask.dtype == torch.uint8, lambda: "tinycuda::relu_mask_backward: mask must be uint8")
    torch._check(mask.numel() == (grad_out.numel() + 7) // 8,
                 lambda: "tinycuda::relu_mask_backward: mask must hold one bit per element")
    return grad_out.new_empty(grad_out.shape)


def _setup(ctx, inputs, output):
    ctx.save_for_backward(output)


def _backward(ctx, grad):
    (y,) = ctx.saved_tensors
    return torch.ops.tinycuda.relu_backward(grad, y)


def _setup_mask(ctx, inputs, output):
    ctx.save_for_backward(output[1])
    # The mask output never gets a gradient; materializing one would launch a
    # zero-fill of it on every backward (2-3 us at small sizes on an H100).
    ctx.set_materialize_grads(False)


def _backward_mask(ctx, grad, _grad_mask):
    if grad is None:  # unmaterialized: y did not reach the loss
        return None
    (mask,) = ctx.saved_tensors
    return torch.ops.tinycuda.relu_mask_backward(grad, mask)


torch.library.register_autograd("tinycuda::relu", _backward, setup_context=_setup)
torch.library.register_autograd("tinycuda::relu_mask", _backward_mask, setup_context=_setup_mask)
