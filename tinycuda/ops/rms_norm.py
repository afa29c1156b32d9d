"""rms_norm: torch.nn.functional.rms_norm on tinycuda kernels. The
tinycuda::rms_norm op returns (y, rstd), rstd float32 (float64 for float64
x) with one entry per row; the backward is the tinycuda::rms_norm_backward
op, fed x and rstd. eps=None is torch's default: the machine epsilon of the
statistics' type (float32 for float16/bfloat16 x, as torch documents)."""
import torch

from ._fake import register_fake

from .layer_norm import _rows, _shape, _stats_dtype


__all__ = ["rms_norm"]


def rms_norm(x, normalized_shape, weight=None, eps=None):
    """F.rms_norm(x, normalized_shape, weight, eps): x / sqrt(mean(x^2) + eps)
    * weight over the trailing dims normalized_shape, statistics in float32."""
    return torch.ops.tinycuda.rms_norm(x, _shape(normalized_shape), weight,
                                       None if eps is None else float(eps))[0]


@register_fake("tinycuda::rms_norm")
def _fake(x, normalized_shape, weight, eps):
    rows = _rows("rms_norm", x, normalized_shape, weight=weight)
    return x.new_empty(x.shape), x.new_empty((rows,), dtype=_stats_dtype(x))


@register_fake("tinycuda::rms_norm_backward")
def _backward_fake(grad_out, x, normalized_shape, rstd, weight, output_mask):
    return (x.new_empty(x.shape if output_mask[0] else (0,)),
            x.new_empty(normalized_shape if output_mask[1] else (0,)))


def _setup(ctx, inputs, output):
    x, normalized_shape, weight = (*inputs, None)[:3]
    ctx.mark_non_differentiable(output[1])
    ctx.set_materialize_grads(False)  # rstd gets no zero-filled gradient
    ctx.save_for_backward(x, output[1], weight)
    ctx.normalized_shape = list(normalized_shape)
    ctx.has_weight = weight is not None


def _backward(ctx, grad, _grad_rstd):
    x, rstd, weight = ctx.saved_tensors
    n = len(ctx.needs_input_grad)  # an argument left at its default is no autograd input
    if grad is None:  # y unused (grads are not materialized)
        return (None,) * n
    need_x, need_w = ctx.needs_input_grad[0], n > 2 and ctx.needs_input_grad[2] and ctx.has_weight
    gx, gw = torch.ops.tinycuda.rms_norm_backward(grad, x, ctx.normalized_shape, rstd, weight, [need_x, need_w])
    return (gx if need_x else None, None, gw if need_w else None, None)[:n]


torch.library.register_autograd("tinycuda::rms_norm", _backward, setup_context=_setup)
