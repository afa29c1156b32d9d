"""layer_norm: torch.nn.functional.layer_norm on tinycuda kernels. The
tinycuda::layer_norm op returns (y, mean, rstd) like native_layer_norm, the
statistics float32 (float64 for float64 x) with one entry per row; the
backward is the tinycuda::layer_norm_backward op, fed x and the statistics."""
import math

import torch

from ._fake import register_fake


__all__ = ["layer_norm"]


def _shape(normalized_shape):
    """An int or a sequence of ints (torch.Size included) as a list."""
    if isinstance(normalized_shape, (int, torch.SymInt)):
        return [normalized_shape]
    return list(normalized_shape)


def _rows(op, x, normalized_shape, **params):
    """Checks normalized_shape against x's trailing dims and the shapes of the
    affine params; returns the number of rows the op normalizes."""
    k = len(normalized_shape)
    torch._check(k >= 1, lambda: f"tinycuda::{op}: normalized_shape must have at least 1 dim, got []")
    torch._check(k <= x.dim() and list(x.shape[x.dim() - k:]) == list(normalized_shape),
                 lambda: f"tinycuda::{op}: normalized_shape {list(normalized_shape)} must equal the last "
                         f"dims of x, whose shape is {list(x.shape)}")
    for name, p in params.items():
        if p is not None:
            torch._check(list(p.shape) == list(normalized_shape),
                         lambda: f"tinycuda::{op}: {name} must have shape {list(normalized_shape)}")
    return math.prod(x.shape[:x.dim() - k])


def _stats_dtype(x):
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """F.layer_norm(x, normalized_shape, weight, bias, eps): normalized over
    the trailing dims normalized_shape, statistics in float32."""
    return torch.ops.tinycuda.layer_norm(x, _shape(normalized_shape), weight, bias, float(eps))[0]


@register_fake("tinycuda::layer_norm")
def _fake(x, normalized_shape, weight, bias, eps):
    rows = _rows("layer_norm", x, normalized_shape, weight=weight, bias=bias)
    return (x.new_empty(x.shape), x.new_empty((rows,), dtype=_stats_dtype(x)),
            x.new_empty((rows,), dtype=_stats_dtype(x)))


@register_fake("tinycuda::layer_norm_backward")
def _backward_fake(grad_out, x, normalized_shape, mean, rstd, weight, output_mask):
    return tuple(x.new_empty(shape if need else (0,))
                 for need, shape in zip(output_mask, (x.shape, normalized_shape, normalized_shape)))


def _setup(ctx, inputs, output):
    x, normalized_shape, weight, bias = (*inputs, None, None)[:4]
    _, mean, rstd = output
    ctx.mark_non_differentiable(mean, rstd)
    ctx.set_materialize_grads(False)  # mean and rstd get no zero-filled gradients
    ctx.save_for_backward(x, mean, rstd, weight)
    ctx.normalized_shape = list(normalized_shape)
    ctx.has = (True, False, weight is not None, bias is not None, False)


def _backward(ctx, grad, _grad_mean, _grad_rstd):
    x, mean, rstd, weight = ctx.saved_tensors
    n = len(ctx.needs_input_grad)  # an argument left at its default is no autograd input
    if grad is None:  # y unused (grads are not materialized)
        return (None,) * n
    need = [a and b for a, b in zip((*ctx.needs_input_grad, False, False, False), ctx.has)]
    gx, gw, gb = torch.ops.tinycuda.layer_norm_backward(grad, x, ctx.normalized_shape, mean, rstd, weight,
                                                        [need[0], need[2], need[3]])
    return (gx if need[0] else None, None, gw if need[2] else None, gb if need[3] else None, None)[:n]


torch.library.register_autograd("tinycuda::layer_norm", _backward, setup_context=_setup)
