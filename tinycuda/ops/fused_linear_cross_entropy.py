"""fused_linear_cross_entropy: cross_entropy(hidden @ weight.T + bias, target)
without ever holding the [N, V] logits (an LLM's lm_head and loss in one op).

The torch layer (csrc/torch/fused_linear_cross_entropy.cpp) walks chunks of
tokens: one matmul into a reused [chunk, V] buffer, the cross_entropy kernel
writing the gradient over it, two matmuls for grad_hidden and grad_weight.
The gradients are made in the forward when needed; the backward scales them
in place by grad_loss (nothing to do when it is exactly 1), so as with
cross_entropy a graph through it can be backpropagated once.

reduction='none' works without gradients only (torch.no_grad, or inputs
that do not require grad): grad_weight sums every row in the forward, so a
per-row grad_loss cannot be applied afterwards; with gradients it raises.
grad_weight accumulates in accum_dtype: by default the weight's (as
Liger's; one rounding per chunk, so with fp16/bf16 its error grows with the
number of chunks), or torch.float32 (a [V, H] fp32 buffer, rounded once: as
accurate as torch's unchunked matmul, for 2 bytes more per weight element
than the default).
Targets outside [0, V) other than ignore_index: an error naming the row on
the CPU, a NaN loss and gradient row on CUDA (as cross_entropy).
"""
import torch

from ._fake import register_fake

from .cross_entropy import check_reduction, check_target, scale_saved


__all__ = ["fused_linear_cross_entropy"]


def fused_linear_cross_entropy(hidden, weight, target, bias=None, ignore_index=-100, reduction="mean",
                               label_smoothing=0.0, chunk_size=0, accum_dtype=None):
    """Loss of F.cross_entropy(hidden @ weight.T + bias, target, ...).

    hidden [N, H], weight [V, H], target [N] int64, bias [V] or None.
    chunk_size: tokens per chunk; 0 picks Liger's next_pow2(ceil(N / ceil(V / H))).
    accum_dtype: grad_weight's accumulator, None (the weight's dtype) or torch.float32.
    """
    needs_grad = hidden.requires_grad or weight.requires_grad or (bias is not None and bias.requires_grad)
    loss, *_ = torch.ops.tinycuda.fused_linear_cross_entropy(
        hidden, weight, target, bias, ignore_index, reduction, label_smoothing,
        torch.is_grad_enabled() and needs_grad, chunk_size, accum_dtype)
    return loss


@register_fake("tinycuda::fused_linear_cross_entropy")
def _fused_linear_cross_entropy_fake(hidden, weight, target, bias, ignore_index, reduction,
                                     label_smoothing, compute_grad, chunk_size, accum_dtype):
    op = "fused_linear_cross_entropy"
    torch._check(hidden.dim() == 2, lambda: f"tinycuda::{op}: hidden must be 2-D [tokens, hidden]")
    torch._check(weight.dim() == 2 and weight.shape[1] == hidden.shape[1] and weight.shape[0] >= 1,
                 lambda: f"tinycuda::{op}: weight must be 2-D [classes, hidden's last dim]")
    torch._check(bias is None or tuple(bias.shape) == (weight.shape[0],),
                 lambda: f"tinycuda::{op}: bias must have shape [weight's rows]")
    check_target(op, hidden.shape[0], target)
    check_reduction(op, reduction, label_smoothing)
    torch._check(accum_dtype in (None, weight.dtype) or (accum_dtype == torch.float32 and weight.dtype != torch.float64),
                 lambda: f"tinycuda::{op}: accum_dtype must be None, the weight's dtype or Float")
    torch._check(not (compute_grad and reduction == "none"),
                 lambda: f"tinycuda::{op}: reduction='none' has no gradient here")
    loss = hidden.new_empty((hidden.shape[0],) if reduction == "none" else ())
    return (loss, hidden.new_empty(hidden.shape if compute_grad else (0,)),
            weight.new_empty(weight.shape if compute_grad else (0,)),
            hidden.new_empty(bias.shape if compute_grad and bias is not None else (0,)))


def _setup(ctx, inputs, output):
    grads = output[1:]
    ctx.mark_non_differentiable(*grads)
    ctx.set_materialize_grads(False)  # no zero-filled tensors for the gradients' gradients (1 GB for grad_weight)
    ctx.save_for_backward(*grads)
    ctx.compute_grad = inputs[7]


def _backward(ctx, grad_loss, *_):
    if not ctx.compute_grad:
        raise RuntimeError("tinycuda::fused_linear_cross_entropy: the forward ran with compute_grad=False, so "
                           "there is no gradient to backpropagate (the functional API sets it when needed)")
    # A bias=None left at its default is not among the autograd inputs at all.
    n_inputs = len(ctx.needs_input_grad)
    if grad_loss is None:  # the loss unused (grads are not materialized)
        return (None,) * n_inputs
    need_h, need_w, _, need_b = (*ctx.needs_input_grad, False, False)[:4]
    grad_hidden, grad_weight, grad_bias = ctx.saved_tensors
    out = []
    for need, g in ((need_h, grad_hidden), (need_w, grad_weight), (False, None), (need_b, grad_bias)):
        if need:
            scale_saved(g, grad_loss)
        out.append(g if need else None)
    return (*out, None, None, None, None, None, None)[:n_inputs]


torch.library.register_autograd("tinycuda::fused_linear_cross_entropy", _backward, setup_context=_setup)
