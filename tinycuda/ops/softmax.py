"""softmax and log_softmax along one dim (torch semantics, -inf included);
the backward of both is the tinycuda::softmax_backward op, fed the output."""
import torch

from ._fake import register_fake

__all__ = ["softmax", "log_softmax"]


def softmax(x, dim=-1):
    """exp(x - max) / sum(exp(x - max)) along `dim`, statistics in float32.
    (The CUDA forward's kept variants, online and registers: tinycuda.variants.)"""
    return torch.ops.tinycuda.softmax(x, dim)


def log_softmax(x, dim=-1):
    """x - max - log(sum(exp(x - max))) along `dim`."""
    return torch.ops.tinycuda.log_softmax(x, dim)


def _check_dim(op, x, dim):
    nd = max(x.dim(), 1)
    torch._check(-nd <= dim < nd, lambda: f"tinycuda::{op}: dim {dim} is out of range for {x.dim()} dims")


@register_fake("tinycuda::softmax")
def _softmax_fake(x, dim, algo):
    _check_dim("softmax", x, dim)
    return x.new_empty(x.shape)


@register_fake("tinycuda::log_softmax")
def _log_softmax_fake(x, dim, algo):
    _check_dim("log_softmax", x, dim)
    return x.new_empty(x.shape)


@register_fake("tinycuda::softmax_backward")
def _softmax_backward_fake(grad_out, out, dim, log):
    torch._check(grad_out.shape == out.shape,
                 lambda: "tinycuda::softmax_backward: grad_out and out must have the same shape")
    return out.new_empty(out.shape)


def _setup(ctx, inputs, keyword_only_inputs, output):
    ctx.save_for_backward(output)
    ctx.dim = inputs[1] if len(inputs) > 1 else -1


def _backward(log):
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return torch.ops.tinycuda.softmax_backward(grad, y, ctx.dim, log), None
    return backward


torch.library.register_autograd("tinycuda::softmax", _backward(False), setup_context=_setup)
torch.library.register_autograd("tinycuda::log_softmax", _backward(True), setup_context=_setup)
