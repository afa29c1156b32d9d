"""add_rms_norm: a pre-norm block's residual add fused with the RMSNorm that
follows, s = x + residual and y = rms_norm(s) * weight in one pass. The
tinycuda::add_rms_norm op returns (y, s, rstd), rstd float32 (float64 for
float64 x) one per row; the backward is tinycuda::add_rms_norm_backward, fed
s, rstd and the gradients of both y and s (the residual stream goes on to
the next block, so both are usually live)."""
import torch

from ._fake import register_fake

from .layer_norm import _rows, _shape, _stats_dtype
from .rms_norm import _check_options


__all__ = ["add_rms_norm"]


def add_rms_norm(x, residual, weight=None, eps=None, *, offset=0.0, casting_mode="gemma"):
    """(rms_norm(x + residual) * weight, x + residual), normalized over
    weight's dims (the last dim of x when weight is None); x + residual is
    rounded to x's dtype before its statistics, as the unfused pair computes
    it. eps=None is torch's rms_norm default (float32's epsilon for 16-bit x);
    offset and casting_mode as rms_norm's."""
    shape = _shape(weight.shape if weight is not None else x.shape[-1:])
    y, s, _ = torch.ops.tinycuda.add_rms_norm(x, residual, shape, weight, None if eps is None else float(eps),
                                              float(offset), casting_mode)
    return y, s


@register_fake("tinycuda::add_rms_norm")
def _fake(x, residual, normalized_shape, weight, eps, offset, casting_mode):
    _check_options("add_rms_norm", weight, offset, casting_mode)
    torch._check(residual.shape == x.shape, lambda: f"tinycuda::add_rms_norm: residual has shape "
                                                    f"{list(residual.shape)} but x has shape {list(x.shape)}")
    rows = _rows("add_rms_norm", x, normalized_shape, weight=weight)
    return x.new_empty(x.shape), x.new_empty(x.shape), x.new_empty((rows,), dtype=_stats_dtype(x))


@register_fake("tinycuda::add_rms_norm_backward")
def _backward_fake(grad_out, grad_residual_out, residual_out, normalized_shape, rstd, weight, output_mask, offset,
                   casting_mode):
    return (residual_out.new_empty(residual_out.shape if output_mask[0] else (0,)),
            residual_out.new_empty(normalized_shape if output_mask[1] else (0,)))


def _setup(ctx, inputs, output):
    normalized_shape, weight, _eps, offset, casting_mode = (*inputs, None, None, 0.0, "gemma")[2:7]
    ctx.mark_non_differentiable(output[2])
    ctx.set_materialize_grads(False)  # no zero-filled gradients for an unused y or s
    ctx.save_for_backward(output[1], output[2], weight)
    ctx.normalized_shape = list(normalized_shape)
    ctx.has_weight = weight is not None
    ctx.options = (offset, casting_mode)


def _backward(ctx, grad, grad_s, _grad_rstd):
    s, rstd, weight = ctx.saved_tensors
    n = len(ctx.needs_input_grad)  # an argument left at its default is no autograd input
    need_x = ctx.needs_input_grad[0] or ctx.needs_input_grad[1]
    need_w = n > 3 and ctx.needs_input_grad[3] and ctx.has_weight
    if grad is None:  # y unused: s passes its gradient on to x and residual
        return (grad_s, grad_s, None, None, None, None, None)[:n]
    gx, gw = torch.ops.tinycuda.add_rms_norm_backward(grad, grad_s, s, ctx.normalized_shape, rstd, weight,
                                                      [need_x, need_w], *ctx.options)
    gx = gx if need_x else None
    return (gx if ctx.needs_input_grad[0] else None, gx if ctx.needs_input_grad[1] else None, None,
            gw if need_w else None, None, None, None)[:n]


torch.library.register_autograd("tinycuda::add_rms_norm", _backward, setup_context=_setup)
