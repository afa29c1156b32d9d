"""fused_linear_cross_entropy: cross_entropy(hidden @ weight.T + bias, target)
without ever holding the [N, V] logits (an LLM's lm_head and loss in one op).

The torch layer (csrc/torch/fused_linear_cross_entropy.cpp) walks chunks of
tokens: one matmul into a reused [chunk, V] buffer, the cross_entropy kernel
writing the gradient over it, two matmuls for grad_hidden and grad_weight.
The gradients are made in the forward when needed; the backward scales them
in place by grad_loss (nothing to do when it is exactly 1), so a graph
through it can be backpropagated once.

reduction='none' cannot make its gradients in the forward (grad_weight
sums every row, so a per-row grad_loss cannot be applied afterwards): its
forward computes the loss only and its backward runs the chunks again with
grad_loss scaling each row's gradient (row_scale), one more product.
softcap and lse_square_scale (z-loss, return_z_loss) and return_token_accuracy
as cross_entropy's.
ce_weight: cross_entropy's class weights [V] (torch's `weight`, named apart
from the projection's weight, as Liger's ce_weight; 'mean' divides by the
batch's sum of ce_weight[target]).
grad_weight accumulates in accum_dtype: by default the weight's (as
Liger's; one rounding per chunk, so with fp16/bf16 its error grows with the
number of chunks), or torch.float32 (a [V, H] fp32 buffer, rounded once: as
accurate as torch's unchunked matmul, for 2 bytes more per weight element
than the default).
Targets outside [0, V) other than ignore_index: an error naming the row on
the CPU, a device-side assert on CUDA (as cross_entropy).
"""
import torch

from ._fake import register_fake

from .cross_entropy import check_class_weight, check_reduction, check_target, token_accuracy_fake, with_extras


__all__ = ["fused_linear_cross_entropy"]


def fused_linear_cross_entropy(hidden, weight, target, bias=None, ignore_index=-100, reduction="mean",
                               label_smoothing=0.0, chunk_size=0, accum_dtype=None, *, softcap=None,
                               lse_square_scale=0.0, return_z_loss=False, ce_weight=None, return_token_accuracy=False):
    """Loss of F.cross_entropy(hidden @ weight.T + bias, target, ...).

    hidden [N, H], weight [V, H], target [N] int64, bias [V] or None.
    chunk_size: tokens per chunk; 0 picks Liger's next_pow2(ceil(N / ceil(V / H))), but at least
    512 (1024 with a float32 accumulator; tc_fused_linear_cross_entropy_chunk in cross_entropy.h says why).
    accum_dtype: grad_weight's accumulator, None (the weight's dtype) or torch.float32.
    softcap, lse_square_scale, return_z_loss: as tinycuda.cross_entropy's ((loss, z_loss) with the last).
    return_token_accuracy: as tinycuda.cross_entropy's (float32, no gradient; the fraction of rows not
    ignored whose argmax is the target, per row for 'none'), after z_loss when both are asked for.
    ce_weight: class weights [V] (tinycuda.cross_entropy's weight), no gradient.
    """
    if ce_weight is not None and torch.is_grad_enabled() and ce_weight.requires_grad:
        raise RuntimeError("tinycuda::fused_linear_cross_entropy: ce_weight (the class weights) gets no gradient "
                           "(detach it)")
    needs_grad = hidden.requires_grad or weight.requires_grad or (bias is not None and bias.requires_grad)
    compute_grad = torch.is_grad_enabled() and needs_grad and reduction != "none"  # 'none': in the backward
    loss, *_, z, acc = torch.ops.tinycuda.fused_linear_cross_entropy(
        hidden, weight, target, bias, ignore_index, reduction, label_smoothing, compute_grad, chunk_size,
        accum_dtype, float(softcap or 0.0), float(lse_square_scale), return_z_loss, None, ce_weight,
        return_token_accuracy)
    return with_extras(loss, z if return_z_loss else None, acc if return_token_accuracy else None)


@register_fake("tinycuda::fused_linear_cross_entropy")
def _fused_linear_cross_entropy_fake(hidden, weight, target, bias, ignore_index, reduction,
                                     label_smoothing, compute_grad, chunk_size, accum_dtype, softcap,
                                     lse_square_scale, return_z_loss, row_scale, ce_weight, return_token_accuracy):
    op = "fused_linear_cross_entropy"
    torch._check(hidden.dim() == 2, lambda: f"tinycuda::{op}: hidden must be 2-D [tokens, hidden]")
    torch._check(weight.dim() == 2 and weight.shape[1] == hidden.shape[1] and weight.shape[0] >= 1,
                 lambda: f"tinycuda::{op}: weight must be 2-D [classes, hidden's last dim]")
    torch._check(bias is None or tuple(bias.shape) == (weight.shape[0],),
                 lambda: f"tinycuda::{op}: bias must have shape [weight's rows]")
    check_target(op, hidden.shape[0], target)
    check_class_weight(op, ce_weight, "ce_weight", hidden, "hidden", weight.shape[0])
    check_reduction(op, reduction, label_smoothing, softcap, lse_square_scale)
    torch._check(accum_dtype in (None, weight.dtype) or (accum_dtype == torch.float32 and weight.dtype != torch.float64),
                 lambda: f"tinycuda::{op}: accum_dtype must be None, the weight's dtype or Float")
    torch._check(not (compute_grad and reduction == "none") or row_scale is not None,
                 lambda: f"tinycuda::{op}: reduction='none' makes its gradient from a per-row grad_loss, which "
                         "must be given as row_scale")
    shape = (hidden.shape[0],) if reduction == "none" else ()
    return (hidden.new_empty(shape), hidden.new_empty(hidden.shape if compute_grad else (0,)),
            weight.new_empty(weight.shape if compute_grad else (0,)),
            hidden.new_empty(bias.shape if compute_grad and bias is not None else (0,)),
            hidden.new_empty(shape if return_z_loss else (0,)),
            token_accuracy_fake(hidden, shape, return_token_accuracy))


# the schema's arguments after target, in order, with their defaults
_OPTIONS = dict(bias=None, ignore_index=-100, reduction="mean", label_smoothing=0.0, compute_grad=False, chunk_size=0,
                accum_dtype=None, softcap=0.0, lse_square_scale=0.0, return_z_loss=False, row_scale=None,
                ce_weight=None, return_token_accuracy=False)


def _setup(ctx, inputs, output):
    grads = output[1:]
    ctx.mark_non_differentiable(*grads)
    ctx.set_materialize_grads(False)  # no zero-filled tensors for the gradients' gradients (1 GB for grad_weight)
    opts = dict(zip(_OPTIONS, inputs[3:]))
    ctx.opts = {**_OPTIONS, **opts}
    ctx.recompute = ctx.opts["reduction"] == "none"  # its gradient is made in the backward, from the inputs
    ctx.save_for_backward(*(inputs[:3] + (ctx.opts["bias"], ctx.opts["ce_weight"]) if ctx.recompute
                            else output[1:4]))
    ctx.compute_grad = ctx.opts["compute_grad"]


def _backward(ctx, grad_loss, *_):
    # A bias=None left at its default is not among the autograd inputs at all.
    n_inputs = len(ctx.needs_input_grad)
    if grad_loss is None:  # the loss unused (grads are not materialized)
        return (None,) * n_inputs
    need_h, need_w, _, need_b = (*ctx.needs_input_grad, False, False)[:4]
    if ctx.recompute:  # reduction='none': the chunks again, each row's gradient scaled by its grad_loss
        hidden, weight, target, bias, ce_weight = ctx.saved_tensors
        o = {**ctx.opts, "compute_grad": True, "return_z_loss": False, "row_scale": grad_loss.contiguous(),
             "ce_weight": ce_weight, "return_token_accuracy": False}
        _, gh, gw, gb, *_ = torch.ops.tinycuda.fused_linear_cross_entropy(
            hidden, weight, target, bias, *[o[k] for k in list(_OPTIONS)[1:]])
        return (gh if need_h else None, gw if need_w else None, None, gb if need_b else None,
                *(None,) * (len(_OPTIONS) - 1))[:n_inputs]
    if not ctx.compute_grad:
        raise RuntimeError("tinycuda::fused_linear_cross_entropy: the forward ran with compute_grad=False, so "
                           "there is no gradient to backpropagate (the functional API sets it when needed)")
    grad_hidden, grad_weight, grad_bias = ctx.saved_tensors
    out = []
    for need, g in ((need_h, grad_hidden), (need_w, grad_weight), (False, None), (need_b, grad_bias)):
        if need:
            scale_saved(g, grad_loss)
        out.append(g if need else None)
    return (*out, *(None,) * (len(_OPTIONS) - 1))[:n_inputs]


def scale_saved(grad, grad_loss):
    """grad *= grad_loss in place (tinycuda::cross_entropy_backward), and a new
    version for autograd: unpacking the saved gradient again (a second
    backward) then raises torch's "modified by an inplace operation" error."""
    torch.ops.tinycuda.cross_entropy_backward(grad, grad_loss)
    torch.autograd.graph.increment_version(grad)


torch.library.register_autograd("tinycuda::fused_linear_cross_entropy", _backward, setup_context=_setup)
