"""add_layer_norm: a pre-LayerNorm block's residual add fused with the
LayerNorm that follows (GPT-2's blocks), s = x + residual and
y = layer_norm(s) * weight + bias in one pass. The tinycuda::add_layer_norm op
returns (y, s, mean, rstd), the statistics float32 (float64 for float64 x) one
per row; the backward is tinycuda::add_layer_norm_backward, fed s, the
statistics and the gradients of both y and s, which it adds as it writes
grad_x (autograd would otherwise sum the residual stream's two gradients in a
pass of its own)."""
import torch

from ._fake import register_fake

from .layer_norm import _rows, _shape, _stats_dtype


__all__ = ["add_layer_norm"]


def add_layer_norm(x, residual, normalized_shape, weight=None, bias=None, eps=1e-5):
    """(F.layer_norm(x + residual, normalized_shape, weight, bias, eps), x + residual); x + residual is
    rounded to x's dtype before its statistics, as the unfused pair computes it. x and residual: one
    shape and dtype."""
    y, s, _, _ = torch.ops.tinycuda.add_layer_norm(x, residual, _shape(normalized_shape), weight, bias, float(eps))
    return y, s


@register_fake("tinycuda::add_layer_norm")
def _fake(x, residual, normalized_shape, weight, bias, eps):
    torch._check(residual.shape == x.shape, lambda: f"tinycuda::add_layer_norm: residual has shape "
                                                    f"{list(residual.shape)} but x has shape {list(x.shape)}")
    torch._check(residual.dtype == x.dtype, lambda: f"tinycuda::add_layer_norm: residual has dtype "
                                                    f"{residual.dtype} but x has dtype {x.dtype}")
    rows = _rows("add_layer_norm", x, normalized_shape, weight=weight, bias=bias)
    stats = x.new_empty((rows,), dtype=_stats_dtype(x))
    return x.new_empty(x.shape), x.new_empty(x.shape), stats, stats.new_empty(stats.shape)


@register_fake("tinycuda::add_layer_norm_backward")
def _backward_fake(grad_out, grad_residual_out, residual_out, normalized_shape, mean, rstd, weight, output_mask):
    return tuple(residual_out.new_empty(shape if need else (0,))
                 for need, shape in zip(output_mask, (residual_out.shape, normalized_shape, normalized_shape)))


def _setup(ctx, inputs, output):
    normalized_shape, weight = inputs[2], (*inputs, None)[3]
    ctx.mark_non_differentiable(output[2], output[3])
    ctx.set_materialize_grads(False)  # no zero-filled gradients for an unused y or s
    ctx.save_for_backward(output[1], output[2], output[3], weight)
    ctx.normalized_shape = list(normalized_shape)
    ctx.has_weight = weight is not None


def _backward(ctx, grad, grad_s, _grad_mean, _grad_rstd):
    s, mean, rstd, weight = ctx.saved_tensors
    n = len(ctx.needs_input_grad)  # an argument left at its default is no autograd input
    need_x = ctx.needs_input_grad[0] or ctx.needs_input_grad[1]
    need_w = n > 3 and ctx.needs_input_grad[3] and ctx.has_weight
    need_b = n > 4 and ctx.needs_input_grad[4]
    if grad is None:  # y unused: s passes its gradient on to x and residual
        return (grad_s, grad_s, None, None, None, None)[:n]
    gx, gw, gb = torch.ops.tinycuda.add_layer_norm_backward(grad, grad_s, s, ctx.normalized_shape, mean, rstd,
                                                            weight, [need_x, need_w, need_b])
    gx = gx if need_x else None
    return (gx if ctx.needs_input_grad[0] else None, gx if ctx.needs_input_grad[1] else None, None,
            gw if need_w else None, gb if need_b else None, None)[:n]


torch.library.register_autograd("tinycuda::add_layer_norm", _backward, setup_context=_setup)
