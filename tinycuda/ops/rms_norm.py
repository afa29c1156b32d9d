"""rms_norm: torch.nn.functional.rms_norm on tinycuda kernels. The
tinycuda::rms_norm op returns (y, rstd), rstd float32 (float64 for float64
x) with one entry per row; the backward is the tinycuda::rms_norm_backward
op, fed x and rstd. eps=None is torch's default: the machine epsilon of the
statistics' type (float32 for float16/bfloat16 x, as torch documents).

offset and casting_mode follow Hugging Face's models and Liger-Kernel:
offset=1.0 with casting_mode="gemma" is Gemma's RMSNorm (x * (1 + weight),
all in float32, rounded once: also the default, offset 0), "llama" is
LLaMA's (the normalized x rounded to x's dtype, then times the weight),
"none" rounds rstd too (the module written without casts). rms_norm_ is
the in-place forward, for inference."""
import torch

from ._fake import register_fake

from .layer_norm import _rows, _shape, _stats_dtype


__all__ = ["rms_norm", "rms_norm_"]

CASTING_MODES = ("gemma", "llama", "none")


def rms_norm(x, normalized_shape, weight=None, eps=None, *, offset=0.0, casting_mode="gemma"):
    """F.rms_norm(x, normalized_shape, weight, eps): x / sqrt(mean(x^2) + eps)
    * (offset + weight) over the trailing dims normalized_shape, statistics
    in float32; casting_mode: where x's dtype rounds (the module docstring)."""
    return torch.ops.tinycuda.rms_norm(x, _shape(normalized_shape), weight, None if eps is None else float(eps),
                                       float(offset), casting_mode)[0]


def rms_norm_(x, normalized_shape, weight=None, eps=None, *, offset=0.0, casting_mode="gemma"):
    """rms_norm written over x (contiguous), which it returns: for inference,
    so x must not need a gradient."""
    torch._check(not (torch.is_grad_enabled() and x.requires_grad),
                 lambda: "tinycuda::rms_norm_: x requires grad; the in-place form has no backward (use rms_norm)")
    torch.ops.tinycuda.rms_norm_(x, _shape(normalized_shape), weight, None if eps is None else float(eps),
                                 float(offset), casting_mode)
    return x


def _check_options(op, weight, offset, casting_mode):
    torch._check(casting_mode in CASTING_MODES, lambda: f"tinycuda::{op}: casting_mode must be 'gemma', 'llama' "
                                                        f"or 'none', got '{casting_mode}'")
    torch._check(offset == 0 or weight is not None, lambda: f"tinycuda::{op}: offset {offset:g} needs a weight")


@register_fake("tinycuda::rms_norm")
def _fake(x, normalized_shape, weight, eps, offset, casting_mode):
    rows = _rows("rms_norm", x, normalized_shape, weight=weight)
    _check_options("rms_norm", weight, offset, casting_mode)
    return x.new_empty(x.shape), x.new_empty((rows,), dtype=_stats_dtype(x))


@register_fake("tinycuda::rms_norm_")
def _inplace_fake(x, normalized_shape, weight, eps, offset, casting_mode):
    _rows("rms_norm_", x, normalized_shape, weight=weight)
    _check_options("rms_norm_", weight, offset, casting_mode)


@register_fake("tinycuda::rms_norm_backward")
def _backward_fake(grad_out, x, normalized_shape, rstd, weight, output_mask, offset, casting_mode):
    return (x.new_empty(x.shape if output_mask[0] else (0,)),
            x.new_empty(normalized_shape if output_mask[1] else (0,)))


def _setup(ctx, inputs, output):
    x, normalized_shape, weight, _eps, offset, casting_mode = (*inputs, None, None, 0.0, "gemma")[:6]
    ctx.mark_non_differentiable(output[1])
    ctx.set_materialize_grads(False)  # rstd gets no zero-filled gradient
    ctx.save_for_backward(x, output[1], weight)
    ctx.normalized_shape = list(normalized_shape)
    ctx.has_weight = weight is not None
    ctx.options = (offset, casting_mode)


def _backward(ctx, grad, _grad_rstd):
    x, rstd, weight = ctx.saved_tensors
    n = len(ctx.needs_input_grad)  # an argument left at its default is no autograd input
    if grad is None:  # y unused (grads are not materialized)
        return (None,) * n
    need_x, need_w = ctx.needs_input_grad[0], n > 2 and ctx.needs_input_grad[2] and ctx.has_weight
    gx, gw = torch.ops.tinycuda.rms_norm_backward(grad, x, ctx.normalized_shape, rstd, weight, [need_x, need_w],
                                                  *ctx.options)
    return (gx if need_x else None, None, gw if need_w else None, None, None, None)[:n]


torch.library.register_autograd("tinycuda::rms_norm", _backward, setup_context=_setup)
