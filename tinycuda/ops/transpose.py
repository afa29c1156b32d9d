"""The transpose family: contiguous copies of permuted views, torch's
permute_copy and transpose_copy, and contiguous (Tensor.contiguous as a
function) on the same kernel (the math: tinycuda/transpose.h).

x is read in place through its strides, so a permuted, transposed or sliced
view costs one copy; any dense dtype (floating, integer, bool, complex). The
gradient of a permutation is the inverse permutation, the same op; the
tinycuda::permute_copy and transpose_copy ops take a keyword-only `algo` that
only tinycuda.variants passes (the CUDA kernel's teaching steps).
"""
import torch

from ._fake import register_fake

__all__ = ["permute_copy", "transpose_copy", "contiguous"]

# memory format -> the order of dims its layout stores contiguously
_FORMATS = {torch.channels_last: (0, 2, 3, 1), torch.channels_last_3d: (0, 2, 3, 4, 1)}


def permute_copy(x, dims):
    """torch.permute_copy: x.permute(dims), contiguous, in one copy."""
    return torch.ops.tinycuda.permute_copy(x, dims)


def transpose_copy(x, dim0, dim1):
    """torch.transpose_copy: x.transpose(dim0, dim1), contiguous, in one copy. (The CUDA kernel's
    teaching steps, naive, shared and padded: tinycuda.variants.)"""
    return torch.ops.tinycuda.transpose_copy(x, dim0, dim1)


def contiguous(x, memory_format=torch.contiguous_format):
    """x.contiguous(memory_format): x itself where it is laid out so already, else one copy of the view
    (tinycuda::permute_copy; channels_last: the copy in NHWC order, viewed NCHW, as torch's)."""
    if x.is_contiguous(memory_format=memory_format):
        return x
    if memory_format == torch.contiguous_format:
        return permute_copy(x, list(range(x.dim())))
    if memory_format not in _FORMATS:
        raise RuntimeError(f"tinycuda::contiguous: {memory_format} is unsupported by the contiguous operator")
    order = _FORMATS[memory_format]
    if x.dim() != len(order):
        raise RuntimeError(f"tinycuda::contiguous: required rank {len(order)} tensor to use {memory_format} format")
    return permute_copy(x, list(order)).permute(_inverse(order))


contiguous.runs = "permute_copy"


def _inverse(order):
    inv = [0] * len(order)
    for k, d in enumerate(order):
        inv[d] = k
    return inv


# ---------------------------------------------------------------------------
# fakes: the checks the C++ layer makes (csrc/torch/transpose.cpp), in its words

def _wrap(op, arg, dim, nd):
    lim = max(nd, 1)
    torch._check(-lim <= dim < lim, lambda: f"tinycuda::{op}: {arg} {dim} is out of range for a tensor of {nd} dims")
    return dim % nd if nd else 0


def _permuted(op, x, order):
    big = sum(1 for d in order if x.shape[d] != 1)
    torch._check(x.numel() == 0 or big <= 8, lambda: f"tinycuda::{op}: at most 8 dims of size > 1, got {big}")
    return x.new_empty([x.shape[d] for d in order])


def _order(op, x, dims):
    nd = x.dim()
    torch._check(len(dims) == nd, lambda: f"tinycuda::{op}: dims must list each of x's {nd} dims once, got "
                                          f"{len(dims)} dims")
    order = []
    for dim in dims:
        d = _wrap(op, "dims entry", dim, nd)
        torch._check(d not in order, lambda: f"tinycuda::{op}: dims repeats dim {d}")
        order.append(d)
    return order


@register_fake("tinycuda::permute_copy")
def _permute_copy_fake(x, dims, *, algo):
    return _permuted("permute_copy", x, _order("permute_copy", x, dims))


def _swap(op, x, dim0, dim1):
    nd = x.dim()
    d0, d1 = _wrap(op, "dim0", dim0, nd), _wrap(op, "dim1", dim1, nd)
    return [d1 if d == d0 else d0 if d == d1 else d for d in range(nd)]


@register_fake("tinycuda::transpose_copy")
def _transpose_copy_fake(x, dim0, dim1, *, algo):
    return _permuted("transpose_copy", x, _swap("transpose_copy", x, dim0, dim1))


# ---------------------------------------------------------------------------
# autograd: a permutation's gradient is the inverse permutation (a transposition is its own), on the same algo

def _setup_permute(ctx, inputs, output, keyword_only_inputs=None):
    x, dims = inputs
    ctx.inverse = _inverse(_order("permute_copy", x, dims))
    ctx.algo = (keyword_only_inputs or {}).get("algo", 0)


def _backward_permute(ctx, grad):
    return torch.ops.tinycuda.permute_copy(grad, ctx.inverse, algo=ctx.algo), None


def _setup_transpose(ctx, inputs, output, keyword_only_inputs=None):
    ctx.dims = inputs[1:]
    ctx.algo = (keyword_only_inputs or {}).get("algo", 0)


def _backward_transpose(ctx, grad):
    return torch.ops.tinycuda.transpose_copy(grad, *ctx.dims, algo=ctx.algo), None, None


torch.library.register_autograd("tinycuda::permute_copy", _backward_permute, setup_context=_setup_permute)
torch.library.register_autograd("tinycuda::transpose_copy", _backward_transpose, setup_context=_setup_transpose)
