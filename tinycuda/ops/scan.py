"""The scan family: prefix scans along one dim, tinycuda.cumsum(x, dim) ...
tinycuda.logcumsumexp(x, dim), one public function per op, with torch's
signatures plus two keyword-only flags: reverse (the scan runs from the end)
and exclusive (y_i leaves x_i out; the first output is the identity).

The op list is declared once, in the core: tc_scan_op
(csrc/include/tinycuda/scan.h) names the ops and the core's schema list
(csrc/shared/scan.cpp) gives each its arguments and defaults, which the torch
layer registers as torch.ops.tinycuda.<name> and <name>_backward. This module
reads the names from the header and the rest from the registered schemas: each
function's signature, its fake kernel and its autograd formula. A new op is a
line in the core's list; nothing here names one.

x may be any strided view (the kernels read a contiguous copy); the result is
a new contiguous tensor of x's shape. The backward reads the forward's input
and output, <name>_backward(grad_out, x, y, <the same arguments>).
"""
import torch

from .. import _build, _loader  # noqa: F401  (_loader: the kernels are loaded by tinycuda.ops)
from ._fake import register_fake
from .elementwise import _public
from .reduce import _check_x

_OPS = _build.op_names("tc_scan_op")


def _op(name):
    return getattr(torch.ops.tinycuda, name)


def _function(name):
    return _public(name, _op(name), __name__, lambda sig: (
        f"torch.{name}{sig} on tinycuda's kernels (the math: tinycuda/scan.h), plus reverse (scan from the end: "
        f"torch.flip, scan, flip) and exclusive (each output leaves its own element out).\n\nx: a float tensor of "
        f"any strides; the result is a new contiguous tensor of x's shape. Its gradient runs "
        f"tinycuda::{name}_backward on the saved x and result."))


# ---------------------------------------------------------------------------
# fakes: the checks the C++ layer makes (csrc/torch/scan.cpp), in its words

def _check_dim(op, x, dim):
    nd, lim = x.dim(), max(x.dim(), 1)
    torch._check(-lim <= dim < lim, lambda: f"tinycuda::{op}: dim {dim} is out of range for a tensor of {nd} dims")


def _register_fakes(name):
    @register_fake(f"tinycuda::{name}")
    def forward(x, dim, *, reverse, exclusive):
        _check_x(name, x)
        _check_dim(name, x, dim)
        return x.new_empty(x.shape)

    @register_fake(f"tinycuda::{name}_backward")
    def backward(grad_out, x, y, dim, *, reverse, exclusive):
        op = name + "_backward"
        for arg, t in (("grad_out", grad_out), ("y", y)):
            torch._check(t.shape == x.shape, lambda: f"tinycuda::{op}: {arg} has shape {list(t.shape)} but x has "
                                                     f"shape {list(x.shape)}")
        _check_dim(op, x, dim)
        return x.new_empty(x.shape)


def _register_autograd(name):
    backward_op = _op(name + "_backward")

    # torch.library passes the schema's keyword-only arguments (reverse, exclusive) apart
    def setup_context(ctx, inputs, output, keyword_only_inputs=None):
        ctx.save_for_backward(inputs[0], output)
        ctx.dim, ctx.flags = inputs[1], dict(keyword_only_inputs or {})

    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        return backward_op(grad, x, y, ctx.dim, **ctx.flags), None

    torch.library.register_autograd(f"tinycuda::{name}", backward, setup_context=setup_context)


__all__ = list(_OPS)
for _name in _OPS:
    globals()[_name] = _function(_name)
    _register_fakes(_name)
    _register_autograd(_name)
