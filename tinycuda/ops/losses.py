"""The losses family: torch.nn.functional's losses with torch's reductions, tinycuda.mse_loss(input, target) ...
tinycuda.triplet_margin_loss(anchor, positive, negative), one public function per op, with
torch.nn.functional's signatures (the deprecated size_average and reduce included).

The op list is declared once, in the core: tc_loss_op (csrc/include/tinycuda/losses.h) names the ops and the
core's schema list (csrc/shared/losses.cpp) gives each its arguments and defaults, which the torch layer
registers as torch.ops.tinycuda.<name> and <name>_backward. This module reads the names from the header and the
rest from the registered schemas: each function's signature, its fake kernel and its autograd formula (which
operands get a gradient: the backward schema's returns, grad_<operand>). A new op is a line in the core's
list; nothing here names one.

The tensor arguments may be any strided views, broadcast as torch broadcasts them (read in place); the result is
a new contiguous tensor: the loss of each element (reduction='none'), or one value. The backward reads the
forward's arguments, <name>_backward(grad_out, <the same arguments>, output_mask), and writes each gradient at
the broadcast shape; the autograd formula sums it to its operand's shape with tinycuda.sum. Refused, with an
error naming the argument: mse_loss's, l1_loss's and huber_loss's per-element weight (recent torch's), triplet's
p = +-inf, shapes torch would broadcast that its checks or this family's rule (tc_loss_shape) refuse.
"""
import torch

from .. import _build, _loader
from ._fake import register_fake
from .elementwise import _c10, _public, _sum_to

_OPS = _build.op_names("tc_loss_op")
_REDUCTIONS = _build.op_names("tc_loss_reduction")
_RULES = [n.removeprefix("TC_LOSS_SHAPE_").lower() for n in _build.enum_names("tc_loss_shape_rule")]
_FLOATS = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def _op(name):
    return getattr(torch.ops.tinycuda, name)


def _is_tensor(arg):
    t = arg.type.getElementType() if isinstance(arg.type, torch.OptionalType) else arg.type
    return isinstance(t, torch.TensorType)


def _tensor_names(name):
    return [a.name for a in _op(name).default._schema.arguments if _is_tensor(a)]


def _grad_names(name):
    """The operands that get a gradient, in order: the backward's returns grad_<operand>."""
    return [r.name.removeprefix("grad_") for r in _op(name + "_backward").default._schema.returns]


def _function(name):
    grads = " and ".join(_grad_names(name))
    return _public(name, _op(name), __name__, lambda sig: (
        f"torch.nn.functional.{name}{sig} on tinycuda's kernels (the math: tinycuda/losses.h).\n\nThe tensors: "
        f"float tensors of one dtype and device, any strides, broadcast as torch broadcasts them; the result is "
        f"a new contiguous tensor. Its gradients ({grads}) run tinycuda::{name}_backward on the saved arguments."))


# ---------------------------------------------------------------------------
# fakes: the checks the C++ layer makes (csrc/torch/losses.cpp), in its words

def _shapes(named):
    return ", ".join(f"{n} has shape {list(t.shape)}" for n, t in named if t is not None)


def _same_kind(op, named):
    """Float tensors of the first one's dtype and device (the None of an optional one left out)."""
    first, x = named[0]
    for n, t in named:
        if t is None:
            continue
        torch._check(t.dtype in _FLOATS, lambda: f"tinycuda::{op}: {n} must be float32, float16, bfloat16 or "
                                                 f"float64, got {_c10(t.dtype)}")
        torch._check(t.device == x.device, lambda: f"tinycuda::{op}: {n} is on {t.device} but {first} is on "
                                                   f"{x.device}")
        torch._check(t.dtype == x.dtype, lambda: f"tinycuda::{op}: {n} has dtype {_c10(t.dtype)} but {first} has "
                                                 f"dtype {_c10(x.dtype)}")


def _rule(name):
    """The op's tc_loss_shape rule, lower case: "broadcast", "same_ndim", "target_as_input" or "rows"."""
    return _RULES[_loader.module.loss_shape(_OPS.index(name))]


def _broadcast(op, index, named):
    """The operands' broadcast shape, checked as tc_loss_shape says."""
    rule = _rule(_OPS[index])
    (first, x), given = named[0], [(n, t) for n, t in named if t is not None]
    _same_kind(op, named)
    for k, (n, t) in enumerate(named):
        if t is None:
            continue
        if rule in ("same_ndim", "rows"):
            torch._check(t.dim() == x.dim(), lambda: f"tinycuda::{op}: every tensor must have as many dims as "
                                                     f"{first}: {_shapes(named)}")
        if rule == "rows" or (rule == "target_as_input" and k == 1):
            torch._check(t.shape == x.shape, lambda: f"tinycuda::{op}: {n} must have {first}'s shape "
                                                     f"{list(x.shape)}, got {list(t.shape)}")
        if rule == "target_as_input" and k > 1:  # torch scales the loss in place: input's shape stays
            fits = t.dim() <= x.dim() and all(s in (1, x.shape[d - t.dim()]) for d, s in enumerate(t.shape))
            torch._check(fits, lambda: f"tinycuda::{op}: {n} has shape {list(t.shape)}, which does not broadcast to "
                                       f"{first}'s shape {list(x.shape)}")
    nd = max(t.dim() for _, t in given)
    torch._check(nd <= 8, lambda: f"tinycuda::{op}: at most 8 dims, got {nd}")
    shape = [1] * nd
    for _, t in given:
        for d, s in enumerate(t.shape, nd - t.dim()):
            torch._check(s == shape[d] or s == 1 or shape[d] == 1,
                         lambda: f"tinycuda::{op}: {_shapes(named)}, which do not broadcast")
            shape[d] = s if shape[d] == 1 else shape[d]
    return shape, rule


def _result(op, index, named, args):
    """(the broadcast shape, the result's shape)."""
    shape, rule = _broadcast(op, index, named)
    reduction = _REDUCTIONS[_loader.module.loss_reduction(op, index, args["reduction"], args.get("size_average"),
                                                          args.get("reduce"))]
    if reduction != "none":
        return shape, []
    return shape, shape[:-1] if rule == "rows" else shape


def _register_fakes(name):
    index, tensors, grads = _OPS.index(name), _tensor_names(name), _grad_names(name)

    @register_fake(f"tinycuda::{name}")
    def forward(**args):
        named = [(n, args[n]) for n in tensors]
        _, out = _result(name, index, named, args)
        return named[0][1].new_empty(out)

    @register_fake(f"tinycuda::{name}_backward")
    def backward(grad_out, output_mask, **args):
        op = name + "_backward"
        named = [(n, args[n]) for n in tensors]
        shape, out = _result(op, index, named, args)
        x = named[0][1]
        _same_kind(op, [(tensors[0], x), ("grad_out", grad_out)])
        torch._check(list(grad_out.shape) == out, lambda: f"tinycuda::{op}: grad_out must have shape {out}, got "
                                                          f"{list(grad_out.shape)}")
        torch._check(len(output_mask) == len(grads), lambda: f"tinycuda::{op}: output_mask must have {len(grads)} "
                                                             f"entries, got {len(output_mask)}")
        res = tuple(x.new_empty(shape if want else [0]) for want in output_mask)
        return res[0] if len(res) == 1 else res


def _register_autograd(name):
    schema, backward_op = _op(name).default._schema, _op(name + "_backward")
    names = [a.name for a in schema.arguments]
    tensors, grads = _tensor_names(name), _grad_names(name)
    optional = {a.name for a in schema.arguments if isinstance(a.type, torch.OptionalType) and _is_tensor(a)}

    def setup_context(ctx, inputs, output):
        args = dict(zip(names, inputs))
        for n in optional - set(grads):  # torch refuses these too (bce_with_logits' weight and pos_weight)
            if args[n] is not None and args[n].requires_grad:
                raise RuntimeError(f"tinycuda::{name}: {n} gets no gradient (torch's {name} is not differentiable "
                                   f"with respect to it)")
        ctx.save_for_backward(*(args[n] for n in tensors))
        ctx.options = {n: v for n, v in args.items() if n not in tensors}

    def backward(ctx, grad):
        saved = dict(zip(tensors, ctx.saved_tensors))
        want = [ctx.needs_input_grad[names.index(n)] for n in grads]
        out = dict.fromkeys(names)
        if any(want):
            got = backward_op(grad, **saved, **ctx.options, output_mask=want)
            for n, g, w in zip(grads, (got,) if isinstance(got, torch.Tensor) else got, want):
                out[n] = _sum_to(g, saved[n]) if w else None
        return tuple(out[n] for n in names)

    torch.library.register_autograd(f"tinycuda::{name}", backward, setup_context=setup_context)


__all__ = list(_OPS)
for _name in _OPS:
    globals()[_name] = _function(_name)
    _register_fakes(_name)
    _register_autograd(_name)
