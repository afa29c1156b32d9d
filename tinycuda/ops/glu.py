"""Gated linear units: swiglu(a, b) = silu(a) * b and geglu(a, b) =
gelu(a) * b (tanh form by default, as in GeGLU models), for a and b of one
shape and dtype. Nothing but a and b is saved: the backward ops
(tinycuda::swiglu_backward, tinycuda::geglu_backward) recompute the
activation and write grad_a and grad_b in one pass."""
import torch

from ._fake import register_fake

from .gelu import _check_approximate


__all__ = ["swiglu", "geglu"]


def swiglu(a, b):
    """silu(a) * b = a / (1 + exp(-a)) * b."""
    return torch.ops.tinycuda.swiglu(a, b)


def geglu(a, b, approximate="tanh"):
    """F.gelu(a, approximate=approximate) * b."""
    return torch.ops.tinycuda.geglu(a, b, approximate)


def _check_pair(op, a, b):
    torch._check(a.shape == b.shape,
                 lambda: f"tinycuda::{op}: a has shape {list(a.shape)} but b has shape {list(b.shape)}")
    torch._check(a.dtype == b.dtype, lambda: f"tinycuda::{op}: a has dtype {a.dtype} but b has dtype {b.dtype}")


@register_fake("tinycuda::swiglu")
def _swiglu_fake(a, b):
    _check_pair("swiglu", a, b)
    return a.new_empty(a.shape)


@register_fake("tinycuda::geglu")
def _geglu_fake(a, b, approximate):
    _check_approximate("geglu", approximate)
    _check_pair("geglu", a, b)
    return a.new_empty(a.shape)


def _backward_fake(op, grad_out, a, b):
    _check_pair(op, a, b)
    torch._check(grad_out.shape == a.shape,
                 lambda: f"tinycuda::{op}: grad_out and a must have the same shape")
    return a.new_empty(a.shape), a.new_empty(a.shape)


@register_fake("tinycuda::swiglu_backward")
def _swiglu_backward_fake(grad_out, a, b):
    return _backward_fake("swiglu_backward", grad_out, a, b)


@register_fake("tinycuda::geglu_backward")
def _geglu_backward_fake(grad_out, a, b, approximate):
    _check_approximate("geglu_backward", approximate)
    return _backward_fake("geglu_backward", grad_out, a, b)


def _setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], inputs[1])
    ctx.approximate = inputs[2] if len(inputs) > 2 else "tanh"


def _swiglu_backward(ctx, grad):
    a, b = ctx.saved_tensors
    return torch.ops.tinycuda.swiglu_backward(grad, a, b)


def _geglu_backward(ctx, grad):
    a, b = ctx.saved_tensors
    return (*torch.ops.tinycuda.geglu_backward(grad, a, b, ctx.approximate), None)


torch.library.register_autograd("tinycuda::swiglu", _swiglu_backward, setup_context=_setup)
torch.library.register_autograd("tinycuda::geglu", _geglu_backward, setup_context=_setup)
