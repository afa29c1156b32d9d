"""The triangle family: tinycuda.triu(x, diagonal=0) and tinycuda.tril(x, diagonal=0), torch's: x with the
elements on one side of a diagonal of its last two dims zeroed (the math: csrc/include/tinycuda/triangle.h).

The op list is declared once, in the core: tc_triangle_op names the ops and the core's schema list
(csrc/shared/triangle.cpp) gives each its arguments and defaults, which the torch layer registers as
torch.ops.tinycuda.<name>. This module reads the names from the header and the rest from the registered
schemas: each function's signature, its fake kernel and its autograd formula, the op itself on grad_out (no
backward op). A new op is a line in the core's list; nothing here names one.

x: any dtype (bool, integers, floats, complex: elements move by their size), at least 2 dims, any strides (the
kernels read a contiguous copy); the result is a new contiguous tensor of x's shape and dtype.
"""
import torch

from .. import _build, _loader  # noqa: F401  (_loader: the kernels are loaded by tinycuda.ops)
from ._fake import register_fake
from .elementwise import _op, _public

_OPS = _build.op_names("tc_triangle_op")


def _function(name):
    return _public(name, _op(name), __name__, lambda sig: (
        f"torch.{name}{sig} on tinycuda's kernels (the math: tinycuda/triangle.h). x: any dtype, at least 2 dims, "
        f"any strides; the result is a new contiguous tensor. Its gradient is tinycuda::{name} of grad_out."))


def _register_fake(name):
    @register_fake(f"tinycuda::{name}")
    def forward(x, diagonal):
        torch._check(x.dim() >= 2, lambda: f"tinycuda::{name}: x must have at least 2 dims, got {x.dim()}")
        return x.new_empty(x.shape)


def _register_autograd(name):
    op = _op(name)

    def setup_context(ctx, inputs, output):
        ctx.diagonal = inputs[1]

    def backward(ctx, grad):
        return op(grad, ctx.diagonal), None

    torch.library.register_autograd(f"tinycuda::{name}", backward, setup_context=setup_context)


__all__ = list(_OPS)
for _name in _OPS:
    globals()[_name] = _function(_name)
    _register_fake(_name)
    _register_autograd(_name)
