"""linear: torch.nn.functional.linear on tinycuda kernels.

Forward and backward are the CUDA/CPU kernels of csrc/*/linear.*; this file
adds the fake (shape) kernels torch.compile traces with, and the autograd
formula, whose backward is the tinycuda::linear_backward op.
"""
import torch

from .. import _build
from ._fake import register_fake

__all__ = ["linear", "linear_act"]

# tc_activation's names (linear.h): "none", then the activations linear_act takes
_NAMES = [n.removeprefix("TC_ACT_").lower() for n in _build.enum_names("tc_activation")]


def _one_of(names):
    quoted = [f"'{n}'" for n in names]
    return ", ".join(quoted[:-1]) + " or " + quoted[-1]


def linear(x, weight, bias=None):
    """y = x @ weight.T + bias; x [..., in], weight [out, in], bias [out] or None.
    (The CUDA GEMM's kept variants, naive to wgmma: tinycuda.variants.)"""
    return torch.ops.tinycuda.linear(x, weight, bias)


def linear_act(x, weight, bias=None, activation="gelu"):
    """act(x @ weight.T + bias) in one GEMM with the activation in its epilogue:
    F.gelu(F.linear(x, weight, bias)) for activation="gelu", "gelu_tanh" is
    approximate="tanh", and "relu". The kernel also keeps the pre-activation
    product when autograd will need it (the activation's backward reads it)."""
    need = torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad or
                                        (bias is not None and bias.requires_grad))
    return torch.ops.tinycuda.linear_act(x, weight, bias, activation, save_pre=need)[0]


@register_fake("tinycuda::linear")
def _linear_fake(x, weight, bias, algo, op="tinycuda::linear"):
    torch._check(weight.dim() == 2, lambda: f"{op}: weight must be 2-D [out, in]")
    torch._check(x.dim() >= 1, lambda: f"{op}: x must have at least 1 dim")
    torch._check(x.shape[-1] == weight.shape[1], lambda: f"{op}: x's last dim must equal weight's in_features")
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


@register_fake("tinycuda::linear_act")
def _linear_act_fake(x, weight, bias, activation, save_pre, algo):
    torch._check(activation in _NAMES[1:],
                 lambda: f"tinycuda::linear_act: activation must be {_one_of(_NAMES[1:])}, got '{activation}'")
    y = _linear_fake(x, weight, bias, algo, "tinycuda::linear_act")
    return y, y.new_empty(y.shape if save_pre else (0,))


@register_fake("tinycuda::linear_backward")
def _linear_backward_fake(grad_out, x, weight, output_mask, pre, activation, algo):
    op = "tinycuda::linear_backward"
    torch._check(activation in _NAMES, lambda: f"{op}: activation must be {_one_of(_NAMES)}, got '{activation}'")
    torch._check((activation == "none") == (pre is None),
                 lambda: f"{op}: pre (the forward's P) is given with an activation, and only then")
    if pre is not None:  # as the torch door checks it (csrc/torch/linear.cpp)
        torch._check(pre.shape == grad_out.shape,
                     lambda: f"{op}: pre must have grad_out's shape {list(grad_out.shape)}, got {list(pre.shape)}")
        torch._check(pre.dtype == grad_out.dtype,
                     lambda: f"{op}: pre has dtype {pre.dtype} but grad_out has dtype {grad_out.dtype}")
    return (
        x.new_empty(x.shape if output_mask[0] else (0,)),
        x.new_empty(weight.shape if output_mask[1] else (0,)),
        x.new_empty((weight.shape[0],) if output_mask[2] else (0,)),
    )


def _setup(ctx, inputs, keyword_only_inputs, output):
    x, weight, bias = inputs
    ctx.save_for_backward(x, weight)
    ctx.has_bias = bias is not None
    ctx.algo = keyword_only_inputs.get("algo", 0)


def _backward(ctx, grad):
    x, weight = ctx.saved_tensors
    # A bias=None left at its default is not among the autograd inputs at all.
    n_inputs = len(ctx.needs_input_grad)
    need_x, need_w, need_b = (*ctx.needs_input_grad, False)[:3]
    need_b = need_b and ctx.has_bias
    gx, gw, gb = torch.ops.tinycuda.linear_backward(grad, x, weight, [need_x, need_w, need_b],
                                                    algo=ctx.algo)
    return (gx if need_x else None, gw if need_w else None, gb if need_b else None)[:n_inputs]


torch.library.register_autograd("tinycuda::linear", _backward, setup_context=_setup)


def _setup_act(ctx, inputs, keyword_only_inputs, output):
    x, weight, bias, activation = inputs
    pre = output[1]
    ctx.mark_non_differentiable(pre)  # P is the backward's input, not a result to differentiate
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(x, weight, pre)
    ctx.has_bias = bias is not None
    ctx.activation = activation
    ctx.algo = keyword_only_inputs.get("algo", 0)


def _backward_act(ctx, grad, _grad_pre):
    x, weight, pre = ctx.saved_tensors
    need_x, need_w, need_b = ctx.needs_input_grad[:3]
    need_b = need_b and ctx.has_bias
    if grad is None or not (need_x or need_w or need_b):  # grad None: y unused (grads not materialized)
        return None, None, None, None
    if pre.shape != grad.shape:
        raise RuntimeError("tinycuda::linear_act: the backward needs the pre-activation product, which the "
                           "forward kept only with save_pre=True (tinycuda.linear_act sets it when a gradient "
                           "is needed)")
    # the activation's backward, grad_P = grad * act'(P), in the op's first pass with the bias's sums
    gx, gw, gb = torch.ops.tinycuda.linear_backward(grad, x, weight, [need_x, need_w, need_b], pre=pre,
                                                    activation=ctx.activation, algo=ctx.algo)
    return gx if need_x else None, gw if need_w else None, gb if need_b else None, None


torch.library.register_autograd("tinycuda::linear_act", _backward_act, setup_context=_setup_act)
