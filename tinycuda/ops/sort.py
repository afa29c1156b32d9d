"""The sort family: tinycuda.sort, argsort and topk with torch's signatures, on
one stable sort (tinycuda/sort.h): equal elements keep their order, so indices
are those of torch.sort(stable=True) and topk's ties go to the lower index.
NaN sorts as the largest value and -0.0 ties with 0.0, as in torch. Every
float and integer dtype, and bool (not topk's, as torch's).

The gradient of sort's and topk's values goes back through one op,
tinycuda::sort_backward(grad_values, indices, dim, n): zeros of the input's
shape (n along dim) with grad_values scattered to the indices.
"""
import torch

from ._fake import register_fake
from .elementwise import _c10

__all__ = ["sort", "argsort", "topk"]

_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.int16, torch.int32,
           torch.int64, torch.uint8, torch.bool)


def sort(x, dim=-1, descending=False, *, stable=False):
    """torch.sort on tinycuda's kernels: (values, indices) along dim, ascending (descending); always stable,
    which stable=False allows."""
    return torch.return_types.sort(torch.ops.tinycuda.sort(x, dim, descending, stable=stable))


def argsort(x, dim=-1, descending=False, *, stable=False):
    """torch.argsort on tinycuda's kernels: sort's indices alone (int64, no gradient)."""
    return torch.ops.tinycuda.argsort(x, dim, descending, stable=stable)


def topk(x, k, dim=-1, largest=True, sorted=True):
    """torch.topk on tinycuda's kernels: the k largest (smallest) elements along dim and their indices, always in
    order (which sorted=False allows), ties to the lower index."""
    return torch.return_types.topk(torch.ops.tinycuda.topk(x, k, dim, largest, sorted))


# ---------------------------------------------------------------------------
# fakes: the checks the C++ layer makes (csrc/torch/sort.cpp), in its words

def _wrap(op, x, dim):
    nd = x.dim()
    torch._check(-max(nd, 1) <= dim < max(nd, 1),
                 lambda: f"tinycuda::{op}: dim {dim} is out of range for a tensor of {nd} dims")
    return dim % nd if nd else 0


def _check_x(op, x, bool_ok=True):
    torch._check(bool_ok or x.dtype != torch.bool, lambda: f"tinycuda::{op}: x must not be bool (as torch.topk)")
    torch._check(x.dtype in _DTYPES, lambda: f"tinycuda::{op}: x must be float32, float16, bfloat16, float64, int8, "
                                             f"int16, int32, int64, uint8 or bool, got {_c10(x.dtype)}")


def _outputs(x, d, k):
    shape = list(x.shape)
    if shape:
        shape[d] = k
    return x.new_empty(shape), x.new_empty(shape, dtype=torch.long)


@register_fake("tinycuda::sort")
def _sort_fake(x, dim, descending, stable):
    _check_x("sort", x)
    d = _wrap("sort", x, dim)
    return _outputs(x, d, x.shape[d] if x.dim() else 1)


@register_fake("tinycuda::argsort")
def _argsort_fake(x, dim, descending, stable):
    _check_x("argsort", x)
    _wrap("argsort", x, dim)
    return x.new_empty(x.shape, dtype=torch.long)


@register_fake("tinycuda::topk")
def _topk_fake(x, k, dim, largest, sorted):
    _check_x("topk", x, bool_ok=False)
    d = _wrap("topk", x, dim)
    n = x.shape[d] if x.dim() else 1
    torch._check(0 <= k <= n, lambda: f"tinycuda::topk: k must be in [0, {n}] (the size of dim {d}), got {k}")
    return _outputs(x, d, k)


@register_fake("tinycuda::sort_backward")
def _sort_backward_fake(grad_values, indices, dim, n):
    op = "tinycuda::sort_backward"
    torch._check(grad_values.dtype in _DTYPES[:4], lambda: f"{op}: grad_values must be float32, float16, bfloat16 "
                                                           f"or float64, got {_c10(grad_values.dtype)}")
    torch._check(indices.dtype == torch.long, lambda: f"{op}: indices must be int64, got {_c10(indices.dtype)}")
    torch._check(indices.shape == grad_values.shape, lambda: f"{op}: indices has shape {list(indices.shape)} but "
                                                             f"grad_values has shape {list(grad_values.shape)}")
    d = _wrap("sort_backward", grad_values, dim)
    k = grad_values.shape[d] if grad_values.dim() else 1
    torch._check(n >= k and (grad_values.dim() > 0 or n == 1), lambda: f"{op}: n must be >= {k}")
    return _outputs(grad_values, d, n)[0]


# ---------------------------------------------------------------------------
# autograd: the values' gradient scattered to the indices

def _setup(dim_at):
    def setup_context(ctx, inputs, output, keyword_only_inputs=None):
        x, dim = inputs[0], inputs[dim_at]
        ctx.dim, ctx.n = dim, x.shape[dim] if x.dim() else 1
        ctx.save_for_backward(output[1])
    return setup_context


def _backward(*tail):
    def backward(ctx, grad_values, grad_indices):
        (indices,) = ctx.saved_tensors
        return (torch.ops.tinycuda.sort_backward(grad_values, indices, ctx.dim, ctx.n), *tail)
    return backward


# a gradient for each positional input: sort's (x, dim, descending), topk's (x, k, dim, largest, sorted)
torch.library.register_autograd("tinycuda::sort", _backward(None, None), setup_context=_setup(1))
torch.library.register_autograd("tinycuda::topk", _backward(None, None, None, None), setup_context=_setup(2))
