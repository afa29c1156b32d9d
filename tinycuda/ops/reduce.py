"""The reduce family: reductions over any set of dims, tinycuda.mean(x, dim) ...
tinycuda.min(x, dim), one public function per op, with torch's signatures.

The op list is declared once, in the core: tc_reduce_op
(csrc/include/tinycuda/reduce.h) names the ops and the core's schema list
(csrc/shared/reduce.cpp) gives each its arguments and defaults, which the torch
layer registers as torch.ops.tinycuda.<name> and <name>_backward. This module
reads the names from the header and the rest from the registered schemas: each
function's signature, its fake kernel and its autograd formula. A new op is a
line in the core's list; nothing here names one.

x may be any strided view (read in place); the result is a new contiguous
tensor (int64 for argmax and argmin), or for an op of two outputs (max, min:
"-> (Tensor values, Tensor indices)") torch.return_types.<name> of the values
and their int64 indices. dim None (or [], torch.amax's default) reduces every
dim. The backward reads the forward's input and (last) output,
<name>_backward(grad_out, x, y, <the same arguments>) (max's, min's: indices in
y's place; grad_out the values').

This module's max and min are the ops: builtins.max is Python's.
"""
import builtins
import functools

import torch

from .. import _build, _loader  # noqa: F401  (_loader: the kernels are loaded by tinycuda.ops)
from ._fake import register_fake
from .elementwise import _c10, _public

_OPS = _build.op_names("tc_reduce_op")


def _op(name):
    return getattr(torch.ops.tinycuda, name)


def _differentiable(name):
    return hasattr(torch.ops.tinycuda, name + "_backward")


def _outputs(name):
    """The tensors the op returns: 1, or 2 for max and min (values, indices)."""
    return len(_op(name).default._schema.returns)


def _reference(name):
    return "torch.linalg.vector_norm" if name == "vector_norm" else f"torch.{name}"


def _function(name):
    grad = (f"Its gradient runs tinycuda::{name}_backward on the saved x and result." if _differentiable(name)
            else "The result is int64 and has no gradient.")
    if _outputs(name) == 2:
        grad = (f"The result is torch.return_types.{name}(values, indices), indices int64 (the first extreme on "
                f"ties; a NaN counts as the extreme); the values' gradient goes to the element each index names "
                f"(tinycuda::{name}_backward on the saved indices).")
    fn = _public(name, _op(name), __name__, lambda sig: (
        f"{_reference(name)}{sig} on tinycuda's kernels (the math: tinycuda/reduce.h).\n\n"
        f"x: a float tensor of any strides, read in place; dim: an int, a list of ints, or None (every "
        f"dim), as the signature allows. The result is a new contiguous tensor. {grad}"))
    if _outputs(name) == 1:
        return fn
    op, result = _op(name), getattr(torch.return_types, name)

    @functools.wraps(fn)
    def pair(*args, **kwargs):
        return result(op(*args, **kwargs))
    return pair


# ---------------------------------------------------------------------------
# fakes: the checks the C++ layer makes (csrc/torch/reduce.cpp), in its words

def _mask(op, nd, dim):
    """The reduced dims of a tensor of nd dims, as a set."""
    dims = [] if dim is None else [dim] if isinstance(dim, int) else list(dim)
    if not dims:
        return set(range(nd))
    lim, out = builtins.max(nd, 1), set()
    for d in dims:
        torch._check(-lim <= d < lim, lambda: f"tinycuda::{op}: dim {d} is out of range for a tensor of {nd} dims")
        if nd:
            w = d % nd
            torch._check(w not in out, lambda: f"tinycuda::{op}: dim {w} appears more than once in the list of dims")
            out.add(w)
    return out


_NO_IDENTITY = {"amax", "amin", "argmax", "argmin", "max", "min"}


def _out_shape(op, x, dim, keepdim, ord=None):
    mask = _mask(op, x.dim(), dim)
    if x.dim() > 8:  # the C++ layer merges neighbouring kept (reduced) dims: at most 8 runs
        runs = len([d for d in range(x.dim()) if d == 0 or (d in mask) != (d - 1 in mask)])  # (sum: ours)
        torch._check(runs <= 8, lambda: f"tinycuda::{op}: x has {x.dim()} dims whose reduced and kept ones alternate "
                                        f"{runs} times; at most 8")
    shape = [1 if d in mask else n for d, n in enumerate(x.shape) if keepdim or d not in mask]
    empty_slice = any(x.shape[d] == 0 for d in mask)
    no_identity = op.removesuffix("_backward") in _NO_IDENTITY or ord in (float("inf"), float("-inf"))
    # torch's rule: a reduced dim of size 0 is refused even where no output is left
    torch._check(not (no_identity and empty_slice),
                 lambda: f"tinycuda::{op}: cannot reduce an empty slice (the reduced dims hold no element), the op "
                         f"has no identity")
    return shape


def _check_x(op, x):
    torch._check(x.dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64),
                 lambda: f"tinycuda::{op}: x must be float32, float16, bfloat16 or float64, got {_c10(x.dtype)}")


def _register_fakes(name):
    @register_fake(f"tinycuda::{name}")
    def forward(x, dim, keepdim, **scalar):
        _check_x(name, x)
        shape = _out_shape(name, x, dim, keepdim, scalar.get("ord"))
        y = x.new_empty(shape, dtype=x.dtype if _differentiable(name) else torch.int64)
        return y if _outputs(name) == 1 else (y, x.new_empty(shape, dtype=torch.int64))

    if not _differentiable(name):
        return

    # the saved output is y, or (max, min) indices
    @register_fake(f"tinycuda::{name}_backward")
    def backward(grad_out, x, dim, keepdim, y=None, indices=None, **scalar):
        op = name + "_backward"
        shape = _out_shape(op, x, dim, keepdim, scalar.get("ord"))
        torch._check(list(grad_out.shape) == shape,
                     lambda: f"tinycuda::{op}: grad_out must have shape {shape}, got {list(grad_out.shape)}")
        torch._check(indices is None or indices.dtype == torch.int64,
                     lambda: f"tinycuda::{op}: indices must be int64, got {_c10(indices.dtype)}")
        return x.new_empty(x.shape)


def _register_sum_autograd():
    """sum's gradient is grad_out broadcast back over the reduced dims: a stride-0 view, as torch's, no kernel
    (tinycuda::sum_backward writes it out, for the C door and for callers that want it dense), and x is not
    kept alive for it."""
    def setup_context(ctx, inputs, output):
        x, dim, keepdim = inputs
        ctx.shape, ctx.mask = x.shape, _mask("sum", x.dim(), dim)

    def backward(ctx, grad):
        kept = [1 if d in ctx.mask else n for d, n in enumerate(ctx.shape)]
        return grad.reshape(kept).expand(ctx.shape), None, None

    torch.library.register_autograd("tinycuda::sum", backward, setup_context=setup_context)


def _register_autograd(name):
    if name == "sum":
        return _register_sum_autograd()
    backward_op = _op(name + "_backward")
    names = [a.name for a in _op(name).default._schema.arguments[1:]]

    # torch.library passes the schema's keyword-only arguments (var's correction, keepdim) apart; the backward
    # reads x and the last output (y; max's, min's indices) for the first output's gradient
    def setup_context(ctx, inputs, output, keyword_only_inputs=None):
        ctx.save_for_backward(inputs[0], output if isinstance(output, torch.Tensor) else output[-1])
        ctx.args = dict(zip(names, inputs[1:]), **(keyword_only_inputs or {}))
        ctx.npos = len(inputs) - 1

    def backward(ctx, grad, *_):
        x, saved = ctx.saved_tensors
        return backward_op(grad, x, saved, **ctx.args), *(None for _ in range(ctx.npos))

    torch.library.register_autograd(f"tinycuda::{name}", backward, setup_context=setup_context)


__all__ = list(_OPS)
for _name in _OPS:
    globals()[_name] = _function(_name)
    _register_fakes(_name)
    if _differentiable(_name):
        _register_autograd(_name)
