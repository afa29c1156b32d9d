"""cross_entropy: torch.nn.functional.cross_entropy for class-index targets
(2-D logits [N, V], or 1-D [V] with a 0-dim target), with class weights and
label smoothing; softcap, z-loss and token accuracy as Liger-Kernel's.

The gradient comes from the forward pass itself: when gradients are needed
the forward kernel writes d loss / d logits (for grad_loss = 1) while it
computes the loss, so neither the float softmax nor a second pass over the
logits exists (llm.c's fused classifier), and saves it with the logits (an
input: nothing copied). The first backward, tinycuda::cross_entropy_backward
with the logits, leaves the rows whose grad_loss is exactly 1 (read on the
device: no host sync) and recomputes the others over it from the logits,
times grad_loss before the one rounding (scaling the rounded gradient
rounded twice: with bf16 logits that was 1.3-2x as far from a float64
reference as torch's own gradient). Bytes: 2 N V s for forward and
loss.backward() of a mean or sum, 4 N V s for another grad_loss.

The saved gradient then holds the first backward's result, which is also
what it returned, so a later backward of the same graph (retain_graph=True)
recomputes every row from the logits into a new tensor: 2 N V s more, the
right gradient for its own grad_loss, and the first one's left as it was.
"""
import torch

from ._fake import register_fake

__all__ = ["cross_entropy"]


REDUCTIONS = ("mean", "sum", "none")


def cross_entropy(logits, target, ignore_index=-100, reduction="mean", label_smoothing=0.0, *, weight=None,
                  softcap=None, lse_square_scale=0.0, return_z_loss=False, return_token_accuracy=False):
    """F.cross_entropy(logits, target, weight=..., ignore_index=..., reduction=..., label_smoothing=...).

    weight: class weights [V] of logits' dtype (torch's `weight`; keyword-only
    here, so the positional arguments stay as they were). 'mean' divides by
    the sum of weight[target] over the rows not ignored, as torch. The weights
    get no gradient: one requiring grad, with grad mode on, raises.

    softcap (Gemma 2): logits become softcap * tanh(logits / softcap) first.
    lse_square_scale (PaLM's z-loss): each row's loss gains lse_square_scale *
    logsumexp(row)^2; with return_z_loss, (loss, z_loss) where z_loss is that
    term alone, reduced as the loss, for logging (no gradient of its own: it
    is part of loss). With weight, as Liger-Kernel: the z terms are not
    weighted, and 'mean' divides them by the count of rows not ignored.

    return_token_accuracy (Liger-Kernel's): also the token accuracy, from the
    same pass, float32 and without gradient: for 'mean' and 'sum' alike the
    fraction of rows not ignored whose argmax is the target (NaN when every
    row is ignored), for 'none' a 1 or 0 per row (0 on ignored rows). The
    argmax is torch.argmax's over the raw logits (the first largest, NaN the
    largest; softcap's tanh keeps the order): (logits.argmax(-1) ==
    target)[target != ignore_index].float().mean().

    Returns the loss, or with either flag a tuple: (loss, z_loss),
    (loss, token_accuracy) or (loss, z_loss, token_accuracy), the extras in
    that order, each only when asked for (a plain tuple: no None to skip, and
    torch.compile traces it as is).

    logits [N, V] (or [V] with a 0-dim target), target int64 class indices;
    the loss has logits' dtype, computed in float32 (float64 for double).
    A target outside [0, V) other than ignore_index raises: on the CPU an error
    naming the row; on CUDA, as torch, a device-side assert naming the op,
    reported at the next synchronization (the CUDA context is lost after it).
    """
    if weight is not None and torch.is_grad_enabled() and weight.requires_grad:
        raise RuntimeError("tinycuda::cross_entropy: weight (the class weights) gets no gradient (detach it, or "
                           "keep it a buffer, as torch.nn.CrossEntropyLoss does)")
    single = logits.dim() == 1
    if single:
        torch._check(target.dim() == 0, lambda: "tinycuda::cross_entropy: 1-D logits need a 0-dim target")
        logits, target = logits.unsqueeze(0), target.reshape(1)
    compute_grad = torch.is_grad_enabled() and logits.requires_grad
    loss, _, z, acc = torch.ops.tinycuda.cross_entropy(logits, target, ignore_index, reduction, label_smoothing,
                                                       compute_grad, float(softcap or 0.0), float(lse_square_scale),
                                                       return_z_loss, weight, return_token_accuracy)
    if single and reduction == "none":  # the per-row outputs of the one row, 0-dim
        loss = loss.reshape(())
        z = z.reshape(()) if return_z_loss else z
        acc = acc.reshape(()) if return_token_accuracy else acc
    return with_extras(loss, z if return_z_loss else None, acc if return_token_accuracy else None)


def with_extras(loss, z_loss, token_accuracy):
    """The public return value: the loss alone, or (loss, *the extras asked for (not None), in order)."""
    extras = tuple(e for e in (z_loss, token_accuracy) if e is not None)
    return (loss, *extras) if extras else loss


def check_target(op, rows, target):
    torch._check(target.dtype == torch.int64,
                 lambda: f"tinycuda::{op}: target must be int64 class indices, got {target.dtype}")
    torch._check(target.dim() == 1 and target.shape[0] == rows,
                 lambda: f"tinycuda::{op}: target must have shape [{rows}], got {list(target.shape)}")


def check_float_like(op, t, name, like, like_name):
    """A floating tensor argument on `like`'s device and of its dtype (the C++ layer's order)."""
    floats = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
    torch._check(t.dtype in floats,
                 lambda: f"{op}: {name} must be float32, float16, bfloat16 or float64, got {t.dtype}")
    torch._check(t.device == like.device, lambda: f"{op}: {name} is on {t.device} but {like_name} is on {like.device}")
    torch._check(t.dtype == like.dtype,
                 lambda: f"{op}: {name} has dtype {t.dtype} but {like_name} has dtype {like.dtype}")


def check_class_weight(op, weight, name, like, like_name, classes=None):
    """The C++ layer's class_weight() checks, in its order (cross_entropy_args.h)."""
    if weight is None:
        return
    classes = like.shape[1] if classes is None else classes
    check_float_like(f"tinycuda::{op}", weight, name, like, like_name)
    torch._check(weight.dim() == 1 and weight.shape[0] == classes,
                 lambda: f"tinycuda::{op}: {name} must have shape [{classes}] (one weight per class), got "
                         f"{list(weight.shape)}")


def check_reduction(op, reduction, label_smoothing, softcap=0.0, lse_square_scale=0.0):
    torch._check(reduction in REDUCTIONS,
                 lambda: f"tinycuda::{op}: reduction must be 'mean', 'sum' or 'none', got '{reduction}'")
    torch._check(0.0 <= label_smoothing <= 1.0,
                 lambda: f"tinycuda::{op}: label_smoothing must be in [0, 1], got {label_smoothing}")
    torch._check(softcap >= 0.0, lambda: f"tinycuda::{op}: softcap must be >= 0 (0: off), got {softcap:g}")
    torch._check(lse_square_scale >= 0.0,
                 lambda: f"tinycuda::{op}: lse_square_scale must be >= 0, got {lse_square_scale:g}")


@register_fake("tinycuda::cross_entropy")
def _cross_entropy_fake(logits, target, ignore_index, reduction, label_smoothing, compute_grad, softcap,
                        lse_square_scale, return_z_loss, weight, return_token_accuracy, grad_loss=None):
    torch._check(logits.dim() == 2 and logits.shape[1] >= 1,
                 lambda: "tinycuda::cross_entropy: logits must be 2-D [rows, classes] with at least one class")
    check_target("cross_entropy", logits.shape[0], target)
    check_class_weight("cross_entropy", weight, "weight", logits, "logits")
    check_reduction("cross_entropy", reduction, label_smoothing, softcap, lse_square_scale)
    shape = (logits.shape[0],) if reduction == "none" else ()
    check_grad_loss(grad_loss, compute_grad, logits, shape)
    return (logits.new_empty(shape), logits.new_empty(logits.shape if compute_grad else (0,)),
            logits.new_empty(shape if return_z_loss else (0,)),
            token_accuracy_fake(logits, shape, return_token_accuracy))


def check_grad_loss(grad_loss, compute_grad, logits, shape):
    """The C++ layer's grad_loss checks, in its order: compute_grad, then as check_args, then the loss's shape."""
    if grad_loss is None:
        return
    op = "tinycuda::cross_entropy"
    torch._check(compute_grad,
                 lambda: f"{op}: grad_loss is given but compute_grad is False (grad_loss scales the gradient)")
    check_float_like(op, grad_loss, "grad_loss", logits, "logits")
    torch._check(tuple(grad_loss.shape) == shape,
                 lambda: f"{op}: grad_loss must have shape {list(shape)} (the loss's), got {list(grad_loss.shape)}")


def token_accuracy_fake(like, shape, asked):
    """token_accuracy's fake: float32 whatever the logits' dtype, empty when not asked for."""
    return like.new_empty(shape if asked else (0,), dtype=torch.float32)


@register_fake("tinycuda::cross_entropy_backward")
def _cross_entropy_backward_fake(grad_logits, grad_loss, logits=None, target=None, ignore_index=-100,
                                 reduction="mean", label_smoothing=0.0, softcap=0.0, lse_square_scale=0.0,
                                 weight=None):
    """The C++ layer's checks, in its order (the dtype and device ones aside: every tensor here comes from
    cross_entropy's forward)."""
    op = "tinycuda::cross_entropy_backward"
    if logits is None:
        torch._check(grad_loss.dim() == 0 or tuple(grad_loss.shape) == tuple(grad_logits.shape[:-1]),
                     lambda: f"{op}: grad_loss must be 0-dim or have grad_logits' rows")
        return
    torch._check(target is not None, lambda: f"{op}: logits is given without target (both make the gradient)")
    torch._check(logits.dim() == 2 and logits.shape[1] >= 1,
                 lambda: f"{op}: logits must be 2-D [rows, classes] with at least one class, got {list(logits.shape)}")
    check_target("cross_entropy_backward", logits.shape[0], target)
    check_reduction("cross_entropy_backward", reduction, label_smoothing, softcap, lse_square_scale)
    check_class_weight("cross_entropy_backward", weight, "weight", logits, "logits")
    torch._check(grad_logits.shape == logits.shape,
                 lambda: f"{op}: grad_logits has shape {list(grad_logits.shape)} but logits has shape "
                         f"{list(logits.shape)}")
    shape = (logits.shape[0],) if reduction == "none" else ()
    torch._check(tuple(grad_loss.shape) == shape,
                 lambda: f"{op}: grad_loss must have shape {list(shape)} (the loss's), got {list(grad_loss.shape)}")


# the schema's arguments after target, in order, with their defaults
_OPTIONS = dict(ignore_index=-100, reduction="mean", label_smoothing=0.0, compute_grad=False, softcap=0.0,
                lse_square_scale=0.0, return_z_loss=False, weight=None, return_token_accuracy=False,
                grad_loss=None)


def _setup(ctx, inputs, output):
    _, grad, z, acc = output
    ctx.mark_non_differentiable(grad, z, acc)  # token accuracy is a metric
    # no zero-filled [N, V] tensor as the (unused) gradient of grad_logits:
    # materialized, it cost a 2 GB fill (0.64 ms) per backward at 8192 x 128256
    ctx.set_materialize_grads(False)
    ctx.opts = {**_OPTIONS, **dict(zip(_OPTIONS, inputs[2:]))}
    # the gradient for grad_loss = 1 (compute_grad without grad_loss), which the first backward updates in place;
    # the logits are an input: saving them copies nothing
    ctx.grad_for_one = ctx.opts["compute_grad"] and ctx.opts["grad_loss"] is None
    ctx.save_for_backward(inputs[0], inputs[1], ctx.opts["weight"], grad if ctx.grad_for_one else None)


def _backward(ctx, grad_loss, _grad, _z, _acc):
    n_inputs = len(ctx.needs_input_grad)  # trailing arguments left at their defaults are not among the inputs
    if grad_loss is None or not ctx.needs_input_grad[0]:  # the loss unused (grads are not materialized)
        return (None,) * n_inputs
    logits, target, weight, grad = ctx.saved_tensors
    o = ctx.opts
    if ctx.grad_for_one:
        # the first backward: rows of grad_loss 1 kept, the others recomputed over them (the module's docstring);
        # a later one finds grad_loss's rows in the buffer, so recomputes every row into a new tensor
        ctx.grad_for_one = False
        torch.ops.tinycuda.cross_entropy_backward(grad, grad_loss, logits, target, o["ignore_index"], o["reduction"],
                                                  o["label_smoothing"], o["softcap"], o["lse_square_scale"], weight)
    else:
        o = {**o, "compute_grad": True, "return_z_loss": False, "weight": weight, "return_token_accuracy": False,
             "grad_loss": grad_loss}
        _, grad, *_ = torch.ops.tinycuda.cross_entropy(logits, target, *o.values())
    return (grad,) + (None,) * (n_inputs - 1)


torch.library.register_autograd("tinycuda::cross_entropy", _backward, setup_context=_setup)
