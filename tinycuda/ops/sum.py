"""sum: over all elements (dim=None) or one dim, accumulated in float32
(float64 for double); the backward broadcast is the tinycuda::sum_backward op."""
import torch

from ._fake import register_fake


__all__ = ["sum"]


def sum(x, dim=None, keepdim=False):  # noqa: A001  (mirrors torch.sum)
    """torch.sum(x) or torch.sum(x, dim, keepdim) for a single int dim."""
    return torch.ops.tinycuda.sum(x, dim, keepdim)


def _out_shape(shape, dim, keepdim):
    if dim is None:
        return (1,) * len(shape) if keepdim else ()
    nd = len(shape)
    lim = max(nd, 1)
    torch._check(-lim <= dim < lim, lambda: f"tinycuda::sum: dim {dim} is out of range for {nd} dims")
    if nd == 0:
        return ()
    d = dim % nd
    return tuple(1 if i == d else s for i, s in enumerate(shape) if keepdim or i != d)


@register_fake("tinycuda::sum")
def _sum_fake(x, dim, keepdim):
    return x.new_empty(_out_shape(x.shape, dim, keepdim))


@register_fake("tinycuda::sum_backward")
def _sum_backward_fake(grad_out, input_shape, dim, keepdim):
    return grad_out.new_empty(input_shape)


def _setup(ctx, inputs, output):
    x, dim, keepdim = inputs
    ctx.shape, ctx.dim, ctx.keepdim = list(x.shape), dim, keepdim


def _backward(ctx, grad):
    return torch.ops.tinycuda.sum_backward(grad, ctx.shape, ctx.dim, ctx.keepdim), None, None


torch.library.register_autograd("tinycuda::sum", _backward, setup_context=_setup)
