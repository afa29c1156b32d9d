"""The elementwise family: the unary math and activation functions y = f(x),
tinycuda.sigmoid(x) ... tinycuda.rsqrt(x), one public function per op.

The op list is declared once, in the core: tc_unary_op
(csrc/include/tinycuda/elementwise.h) names the ops, and the core's schema
list (csrc/shared/elementwise.cpp) gives each its float arguments and their
defaults, which the torch layer registers as torch.ops.tinycuda.<name> and
<name>_backward. This module reads the names from the header
(tinycuda._build.unary_ops) and the rest from the registered schemas: each
function's signature and defaults, its fake kernels and its autograd formula.
A new op is a line in the core's list; nothing here names one.

x may be any strided view (read in place, up to 8 dims); the result is a new
contiguous tensor. The backward reads the forward's input x, or its output y
where that is cheaper (sigmoid, tanh, exp, sqrt, rsqrt): the name of the
second argument of <name>_backward's schema says which.
"""
import inspect

import torch

from .. import _build
from ._fake import register_fake


def _op(name):
    return getattr(torch.ops.tinycuda, name)


def _signature(schema):
    """The Python signature of a schema: its arguments, with their defaults."""
    return inspect.Signature([
        inspect.Parameter(a.name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                          default=a.default_value if a.has_default_value() else inspect.Parameter.empty)
        for a in schema.arguments])


def _reference(name):
    """Where torch has the op, for the docstring: torch.<name>, else torch.nn.functional.<name>."""
    return f"torch.{name}" if hasattr(torch, name) else f"torch.nn.functional.{name}"


def _function(name):
    op, backward = _op(name), _op(name + "_backward")
    sig = _signature(op.default._schema)
    saved = backward.default._schema.arguments[1].name

    def fn(*args, **kwargs):
        return op(*args, **kwargs)

    fn.__name__ = fn.__qualname__ = name
    fn.__module__ = __name__
    fn.__signature__ = sig
    fn.__doc__ = (f"{_reference(name)}{sig} on tinycuda's kernels (the math: tinycuda/elementwise.h).\n\n"
                  f"x: a float tensor of any strides, read in place; the result is a new contiguous tensor. Its "
                  f"gradient runs tinycuda::{name}_backward on the saved {saved}.")
    return fn


def _check_bounds(op, schema, args):
    """A schema whose floats are all optional (clamp's min and max) needs one of them, as the C++ kernel."""
    optional = [a.name for a in schema.arguments if isinstance(a.type, torch.OptionalType)]
    torch._check(not optional or any(args[n] is not None for n in optional),
                 lambda: f"tinycuda::{op}: at least one of {' and '.join(optional)} must be given")


def _register_fakes(name):
    schema, bschema = _op(name).default._schema, _op(name + "_backward").default._schema
    saved = bschema.arguments[1].name

    @register_fake(f"tinycuda::{name}")
    def forward(**args):
        _check_bounds(name, schema, args)
        return args["x"].new_empty(args["x"].shape)

    @register_fake(f"tinycuda::{name}_backward")
    def backward(**args):
        _check_bounds(name + "_backward", bschema, args)
        g, s = args["grad_out"], args[saved]
        torch._check(g.shape == s.shape, lambda: f"tinycuda::{name}_backward: grad_out has shape {list(g.shape)} "
                                                 f"but {saved} has shape {list(s.shape)}")
        return s.new_empty(s.shape)


def _register_autograd(name):
    schema, backward_op = _op(name).default._schema, _op(name + "_backward")
    # the backward reads the forward's input when its second argument bears the input's name, else the output
    reads_input = backward_op.default._schema.arguments[1].name == schema.arguments[0].name

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0] if reads_input else output)
        ctx.floats = inputs[1:]  # the schema's defaults filled in by torch.library

    def backward(ctx, grad):
        (saved,) = ctx.saved_tensors
        return backward_op(grad, saved, *ctx.floats), *(None for _ in ctx.floats)

    torch.library.register_autograd(f"tinycuda::{name}", backward, setup_context=setup_context)


__all__ = _build.unary_ops()
for _name in __all__:
    # module globals named abs, exp, log...: this module calls none of the builtins they shadow
    globals()[_name] = _function(_name)
    _register_fakes(_name)
    _register_autograd(_name)
