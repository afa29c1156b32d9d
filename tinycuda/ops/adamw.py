"""adamw_: one AdamW step over lists of tensors, in place (torch.optim.AdamW's
update; tinycuda.optim.AdamW is the optimizer around it), with
clip_grad_norm_'s clipping folded in; multi_tensor_l2norm: the L2 norm of
many tensors together (clip_grad_norm_'s total norm). The math:
csrc/include/tinycuda/adamw.h."""
import torch

from ._fake import register_fake

__all__ = ["adamw_", "multi_tensor_l2norm"]


def norm_dtype(dtype):
    """multi_tensor_l2norm's result dtype (and adamw_'s grad_norm's) for tensors of `dtype`."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def adamw_(params, grads, exp_avgs, exp_avg_sqs, lr, beta1, beta2, eps, weight_decay, step, grad_norm=None,
           max_grad_norm=0.0, masters=()):
    """For every i, with g = grads[i] * min(1, max_grad_norm / (grad_norm + 1e-6)) (g = grads[i]
    without grad_norm): params[i] *= 1 - lr * weight_decay; exp_avgs[i] += (1 - beta1) * (g -
    exp_avgs[i]); exp_avg_sqs[i] = beta2 * exp_avg_sqs[i] + (1 - beta2) * g * g; params[i] -=
    lr / (1 - beta1^step) * exp_avgs[i] / (sqrt(exp_avg_sqs[i]) / sqrt(1 - beta2^step) + eps).

    One dtype and device for every tensor; params, exp_avgs and exp_avg_sqs contiguous; step the
    count after this step (>= 1). grad_norm: multi_tensor_l2norm's 0-dim result, read on the
    device (no sync). masters: master weights: float32 copies of float16/bfloat16 params (and
    exp_avgs, exp_avg_sqs float32); the step runs on them and writes each param as its master
    rounded to nearest."""
    if not any((params, grads, exp_avgs, exp_avg_sqs)):  # nothing to update, and no tensor to dispatch on
        return
    torch.ops.tinycuda.adamw_(params, grads, exp_avgs, exp_avg_sqs, lr=float(lr), beta1=float(beta1),
                              beta2=float(beta2), eps=float(eps), weight_decay=float(weight_decay), step=int(step),
                              grad_norm=grad_norm, max_grad_norm=float(max_grad_norm), masters=list(masters) or None)


def multi_tensor_l2norm(tensors):
    """sqrt(sum of every element squared, over every tensor): a 0-dim float32 tensor (float64 for
    float64 tensors) on the tensors' device, summed in a fixed order (bit-identical run to run).
    No gradient."""
    tensors = list(tensors)
    if not tensors:  # the dispatcher needs one to find the device
        raise RuntimeError("tinycuda::multi_tensor_l2norm: tensors must hold at least one tensor (its device and "
                           "dtype are the result's)")
    return torch.ops.tinycuda.multi_tensor_l2norm(tensors)


def _same(op, tensors, name, first):
    for i, t in enumerate(tensors):
        torch._check(t.dtype == first.dtype and t.device == first.device,
                     lambda: f"tinycuda::{op}: {name}[{i}] has dtype {t.dtype} on {t.device} but the first "
                             f"tensor has {first.dtype} on {first.device}")


@register_fake("tinycuda::adamw_")
def _adamw_fake(params, grads, exp_avgs, exp_avg_sqs, lr, beta1, beta2, eps, weight_decay, step, grad_norm,
                max_grad_norm, masters=None):
    masters = masters or ()
    torch._check(len(grads) == len(exp_avgs) == len(exp_avg_sqs) == len(params),
                 lambda: "tinycuda::adamw_: params, grads, exp_avgs and exp_avg_sqs must have one tensor each alike")
    torch._check(len(masters) in (0, len(params)),
                 lambda: "tinycuda::adamw_: masters must be empty or have one tensor a parameter")
    if masters:
        torch._check(params[0].dtype in (torch.float16, torch.bfloat16) and masters[0].dtype == torch.float32,
                     lambda: "tinycuda::adamw_: master weights go with float16 or bfloat16 params and float32 masters")
    state = masters[0] if masters else params[0]
    for name, ts, like in (("grads", grads, params[0]), ("exp_avgs", exp_avgs, state),
                           ("exp_avg_sqs", exp_avg_sqs, state), ("masters", masters, state)):
        _same("adamw_", ts, name, like)
        for i, t in enumerate(ts):
            torch._check(t.shape == params[i].shape,
                         lambda: f"tinycuda::adamw_: {name}[{i}] must have params[{i}]'s shape")


@register_fake("tinycuda::multi_tensor_l2norm")
def _multi_tensor_l2norm_fake(tensors):
    torch._check(len(tensors) > 0, lambda: "tinycuda::multi_tensor_l2norm: tensors must hold at least one tensor")
    _same("multi_tensor_l2norm", tensors, "tensors", tensors[0])
    return tensors[0].new_empty((), dtype=norm_dtype(tensors[0].dtype))
