"""The elementwise family: the unary math and activation functions y = f(x),
tinycuda.sigmoid(x) ... tinycuda.rsqrt(x), and the binary ops with
broadcasting, tinycuda.add(a, b) ... tinycuda.pow(a, b), one public function
per op.

The op lists are declared once, in the core: tc_unary_op and tc_binary_op
(csrc/include/tinycuda/elementwise.h) name the ops, and the core's schema
lists (csrc/shared/elementwise.cpp) give each its float arguments and their
defaults, which the torch layer registers as torch.ops.tinycuda.<name> and
<name>_backward. This module reads the names from the header
(tinycuda._build.unary_ops, binary_ops) and the rest from the registered
schemas: each function's signature and defaults, its fake kernels and its
autograd formula. A new op is a line in the core's list; nothing here names one.

x may be any strided view (read in place, up to 8 dims); the result is a new
contiguous tensor. The backward reads the forward's input x, or its output y
where that is cheaper (sigmoid, tanh, exp, sqrt, rsqrt): the name of the
second argument of <name>_backward's schema says which.

A binary op broadcasts a and b and promotes their dtypes as torch does; a
Python number is a scalar operand (a 0-dim CPU tensor, which the kernels take
as a host scalar, as torch does beside CUDA tensors). Its backward writes each
wanted gradient at the broadcast shape; the autograd formula sums it over a's
(b's) broadcast dims with tinycuda.sum and casts it to a's (b's) dtype.
"""
import inspect
import numbers

import torch

from .. import _build, _loader
from ._fake import register_fake


def _op(name):
    return getattr(torch.ops.tinycuda, name)


def _signature(schema):
    """The Python signature of a schema: its arguments (keyword-only after its *), with their defaults."""
    P = inspect.Parameter
    return inspect.Signature([
        P(a.name, P.KEYWORD_ONLY if a.kwarg_only else P.POSITIONAL_OR_KEYWORD,
          default=a.default_value if a.has_default_value() else P.empty)
        for a in schema.arguments])


def _reference(name):
    """Where torch has the op, for the docstring: torch.<name>, else torch.nn.functional.<name>."""
    return f"torch.{name}" if hasattr(torch, name) else f"torch.nn.functional.{name}"


def _public(name, op, module, doc):
    """The Python function `name` of a family's torch op `op`: it calls the op, with the schema's signature and
    the docstring doc(signature)."""
    sig = _signature(op.default._schema)

    def fn(*args, **kwargs):
        return op(*args, **kwargs)

    fn.__name__ = fn.__qualname__ = name
    fn.__module__ = module
    fn.__signature__ = sig
    fn.__doc__ = doc(sig)
    return fn


def _function(name):
    saved = _op(name + "_backward").default._schema.arguments[1].name
    return _public(name, _op(name), __name__, lambda sig: (
        f"{_reference(name)}{sig} on tinycuda's kernels (the math: tinycuda/elementwise.h).\n\n"
        f"x: a float tensor of any strides, read in place; the result is a new contiguous tensor. Its "
        f"gradient runs tinycuda::{name}_backward on the saved {saved}."))


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


# ---------------------------------------------------------------------------
# binary ops

def _operands(op, a, b, select=False):
    """a and b as tensors, and the dtype to cast the result to (or None): a Python number becomes a 0-dim CPU
    tensor, which the kernels read as a host scalar.

    torch promotes as if the number had no dtype: beside a float tensor it is computed with at the tensor's
    compute precision, and never changes the result's dtype. Beside a larger float tensor the number is float64
    (a 0-dim tensor does not promote a larger one, and the kernels read it at their compute precision); beside
    a 0-dim float tensor (which a float64 one would promote) it takes that tensor's dtype, and for float16 and
    bfloat16, whose compute precision is float32, both go to float32 and the result back (select: where, which
    computes nothing, takes the tensor's dtype). Beside an integer tensor it has torch's result type."""
    def scalar(v, other):
        if not other.is_floating_point():
            return other, torch.tensor(v, dtype=torch.result_type(other, v)), None
        if other.dim():
            return other, torch.tensor(v, dtype=torch.float64), None
        if other.dtype in (torch.float32, torch.float64) or select:
            return other, torch.tensor(v, dtype=other.dtype), None
        return other.float(), torch.tensor(v, dtype=torch.float32), other.dtype

    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a, b, None
    if isinstance(a, torch.Tensor) and isinstance(b, numbers.Number):
        return scalar(b, a)
    if isinstance(b, torch.Tensor) and isinstance(a, numbers.Number):
        b, a, cast = scalar(a, b)
        return a, b, cast
    raise TypeError(f"tinycuda.{op}: a and b must be tensors or numbers, at least one a tensor; got "
                    f"{type(a).__name__} and {type(b).__name__}")


def _binary_function(name):
    op = _op(name)
    sig = _signature(op.default._schema)

    def fn(*args, **kwargs):
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"tinycuda.{name}: {e}") from None
        bound.arguments["a"], bound.arguments["b"], cast = _operands(name, bound.arguments["a"], bound.arguments["b"])
        out = op(*bound.args, **bound.kwargs)
        return out if cast is None else out.to(cast)

    fn.__name__ = fn.__qualname__ = name
    fn.__module__ = __name__
    fn.__signature__ = sig
    fn.__doc__ = (f"torch.{name}{sig} on tinycuda's kernels (the math: tinycuda/elementwise.h).\n\n"
                  f"a, b: tensors of any strides, read in place, broadcast and promoted as torch does (float "
                  f"results), or one of them a number. The result is a new contiguous tensor. Its gradients run "
                  f"tinycuda::{name}_backward, then tinycuda.sum over broadcast dims.")
    return fn


_C10_NAMES = {torch.float32: "Float", torch.float64: "Double", torch.float16: "Half", torch.bfloat16: "BFloat16",
              torch.int64: "Long", torch.int32: "Int", torch.int16: "Short", torch.int8: "Char", torch.uint8: "Byte",
              torch.bool: "Bool"}


def _c10(dtype):
    """dtype as the C++ layer's messages name it (c10's ScalarType names: Float, BFloat16, Long)."""
    return _C10_NAMES.get(dtype, str(dtype).removeprefix("torch."))


def _host_scalar(t, other):
    """A 0-dim CPU tensor beside a tensor that is not one: the kernels read it as a number (as torch does)."""
    return t.dim() == 0 and t.device.type == "cpu" and not (other.dim() == 0 and other.device.type == "cpu")


def _broadcast(op, a, b, condition=None):
    """(shape, dtype, device) of the result, checked as the C++ layer checks (csrc/torch/elementwise.cpp)."""
    dtype = torch.result_type(a, b)
    torch._check(dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64),
                 lambda: f"tinycuda::{op}: the result dtype {_c10(dtype)} (of a {_c10(a.dtype)} and b {_c10(b.dtype)}) is not "
                         f"supported: float32, float16, bfloat16 or float64")
    sa, sb = _host_scalar(a, b), _host_scalar(b, a)
    torch._check(sa or sb or a.device == b.device, lambda: f"tinycuda::{op}: b is on {b.device} but a is on {a.device}")
    named = {"condition": condition, "a": a, "b": b} if condition is not None else {"a": a, "b": b}
    nd = max(t.dim() for t in named.values())
    torch._check(nd <= 8, lambda: f"tinycuda::{op}: at most 8 dims, got {nd}")
    shape = [1] * nd
    for t in named.values():
        for d, n in enumerate(t.shape, nd - t.dim()):
            torch._check(n == shape[d] or n == 1 or shape[d] == 1, lambda: f"tinycuda::{op}: " + ", ".join(
                f"{k} has shape {list(v.shape)}" for k, v in named.items()).replace(", b has", " and b has")
                + ", which do not broadcast")
            shape[d] = n if shape[d] == 1 else shape[d]
    return shape, dtype, (b if sa else a).device


def _register_binary_fakes(name):
    @register_fake(f"tinycuda::{name}")
    def forward(a, b, **floats):
        shape, dtype, device = _broadcast(name, a, b)
        return torch.empty(shape, dtype=dtype, device=device)

    @register_fake(f"tinycuda::{name}_backward")
    def backward(grad_out, a, b, output_mask, **floats):
        op = name + "_backward"
        shape, dtype, device = _broadcast(op, a, b)
        torch._check(list(grad_out.shape) == shape, lambda: f"tinycuda::{op}: grad_out has shape "
                                                             f"{list(grad_out.shape)} but a and b broadcast to {shape}")
        torch._check(grad_out.dtype == dtype and grad_out.device == device,
                     lambda: f"tinycuda::{op}: grad_out ({_c10(grad_out.dtype)} on {grad_out.device}) must match the "
                             f"result ({_c10(dtype)} on {device})")
        return tuple(torch.empty(shape if want else [0], dtype=dtype, device=device) for want in output_mask)


def _sum_to(g, t):
    """The gradient g of a broadcast result, summed to t's shape (one tinycuda::sum over every broadcast dim,
    accumulated in float32 and rounded once, as torch's) and cast to its dtype and device."""
    lead = g.dim() - t.dim()
    dims = [*range(lead), *(lead + d for d, n in enumerate(t.shape) if n == 1 and g.shape[lead + d] != 1)]
    if dims:
        g = torch.ops.tinycuda.sum(g, dims, True)
        g = g.reshape(g.shape[lead:])
    return g.to(dtype=t.dtype, device=t.device)


def _register_binary_autograd(name):
    backward_op, index = _op(name + "_backward"), _build.binary_ops().index(name)

    # torch.library passes the schema's keyword-only arguments (add's alpha) apart, and wants no gradient for them
    def setup_context(ctx, inputs, output, keyword_only_inputs=None):
        ctx.save_for_backward(*inputs[:2])
        ctx.floats, ctx.keywords = inputs[2:], keyword_only_inputs or {}

    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        want = ctx.needs_input_grad[:2]
        # a constant partial (add, sub: 1, alpha, -alpha) scales grad after the sum over broadcast dims, and
        # where it is 1 passes grad on as torch does: no kernel, no copy
        alpha = {**dict(zip(("alpha",), ctx.floats)), **ctx.keywords}.get("alpha", 1.0)
        const = [_loader.module.binary_constant_partial(index, k, alpha) if want[k] else None for k in (0, 1)]
        kernel = [bool(want[k] and const[k] is None) for k in (0, 1)]
        grads = backward_op(grad, a, b, kernel, *ctx.floats, **ctx.keywords) if any(kernel) else (None, None)
        out = []
        for k, t in enumerate((a, b)):
            if not want[k]:
                out.append(None)
            elif kernel[k]:
                out.append(_sum_to(grads[k], t))
            else:
                g = _sum_to(grad, t)
                out.append(g if const[k] == 1 else _mul(g, const[k]))
        return *out, *(None for _ in ctx.floats)

    torch.library.register_autograd(f"tinycuda::{name}", backward, setup_context=setup_context)


# ---------------------------------------------------------------------------
# where

def where(condition, a, b):
    """torch.where(condition, a, b) on tinycuda's kernels: condition ? a : b, broadcast over all three.

    condition: a bool tensor (a 0-dim CPU one may go with CUDA a and b); a, b: as a binary op's (tensors of any
    strides, promoted as torch does, or one of them a number). The result is a new contiguous tensor. Its
    gradients are where again (grad where the condition holds, else 0, and the other way round), summed over
    broadcast dims with tinycuda.sum."""
    a, b, _ = _operands("where", a, b, select=True)
    return torch.ops.tinycuda.where(condition, a, b)


@register_fake("tinycuda::where")
def _where_fake(condition, a, b):
    torch._check(condition.dtype == torch.bool,
                 lambda: f"tinycuda::where: condition must be bool, got {_c10(condition.dtype)}")
    shape, dtype, device = _broadcast("where", a, b, condition)
    torch._check(condition.device == device or (condition.dim() == 0 and condition.device.type == "cpu"),
                 lambda: f"tinycuda::where: condition is on {condition.device} but a and b are on {device}")
    return torch.empty(shape, dtype=dtype, device=device)


def _where_setup(ctx, inputs, output):
    condition, a, b = inputs
    ctx.save_for_backward(condition, a, b)


def _where_backward(ctx, grad):
    condition, a, b = ctx.saved_tensors
    zero = torch.zeros((), dtype=grad.dtype)  # a host scalar beside grad (or, 0-dim on the CPU, its like)
    ga = _sum_to(torch.ops.tinycuda.where(condition, grad, zero), a) if ctx.needs_input_grad[1] else None
    gb = _sum_to(torch.ops.tinycuda.where(condition, zero, grad), b) if ctx.needs_input_grad[2] else None
    return None, ga, gb


torch.library.register_autograd("tinycuda::where", _where_backward, setup_context=_where_setup)


__all__ = _build.unary_ops() + _build.binary_ops() + ["where"]
# module globals named abs, exp, log, pow...: this module calls none of the builtins they shadow
for _name in _build.unary_ops():
    globals()[_name] = _function(_name)
    _register_fakes(_name)
    _register_autograd(_name)
for _name in _build.binary_ops():
    globals()[_name] = _binary_function(_name)
_mul = globals()["mul"]
for _name in _build.binary_ops():
    _register_binary_fakes(_name)
    _register_binary_autograd(_name)
