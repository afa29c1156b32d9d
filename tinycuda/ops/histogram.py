"""The histogram family: tinycuda.histc(x, bins=100, min=0, max=0) and tinycuda.bincount(x, weights=None,
minlength=0), torch's signatures and semantics (the math: csrc/include/tinycuda/histogram.h). Neither has a
gradient, as torch's: histc's result has no grad_fn (the C++ layer lets autograd pass it through), and
backpropagating into bincount's weights raises (its autograd formula here says so, where torch.library's fallback
would warn and give no gradient).

histc with min == max and bincount take sizes from the data (the range pass, then a device sync on CUDA, as
torch's). Their fakes (torch.compile, meta tensors): histc's result is [bins]; bincount's length is a dynamic
size (torch.library's ctx.new_dynamic_size), so torch.compile(fullgraph=True) traces it, and what follows sees an
unbacked length.
"""
import torch

from .. import _loader  # noqa: F401  (the kernels are loaded by tinycuda.ops)
from ._fake import register_fake
from .elementwise import _c10, _public
from .reduce import _check_x

__all__ = ["histc", "bincount"]

histc = _public("histc", torch.ops.tinycuda.histc, __name__, lambda sig: (
    f"torch.histc{sig} on tinycuda's kernels (the math: tinycuda/histogram.h): the counts of x's values in bins "
    f"equal bins over [min, max] (min == max: the data's range), in x's dtype; x: a float tensor of any shape and "
    f"strides. No gradient, as torch's."))

bincount = _public("bincount", torch.ops.tinycuda.bincount, __name__, lambda sig: (
    f"torch.bincount{sig} on tinycuda's kernels (the math: tinycuda/histogram.h): how often each value of the 1-D "
    f"non-negative integer x occurs (int64), or the sum of its weights (float32 weights: float32; any other: "
    f"float64), max(max(x) + 1, minlength) long. Deterministic: no float atomics. No gradient, as torch's."))


@register_fake("tinycuda::histc")
def _histc_fake(x, bins, min, max):
    _check_x("histc", x)
    torch._check(bins > 0, lambda: f"tinycuda::histc: bins must be > 0, got {bins}")
    return x.new_empty(bins)


@register_fake("tinycuda::bincount")
def _bincount_fake(x, weights, minlength):
    op = "tinycuda::bincount"
    torch._check(not (x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool),
                 lambda: f"{op}: x must be an integer tensor (uint8, int8, int16, int32 or int64), got {_c10(x.dtype)}")
    torch._check(x.dim() == 1, lambda: f"{op}: x must be 1-D, got {x.dim()} dims")
    torch._check(minlength >= 0, lambda: f"{op}: minlength must be >= 0, got {minlength}")
    if weights is not None:
        torch._check(weights.dim() == 1 and weights.shape[0] == x.shape[0],
                     lambda: f"{op}: weights must be 1-D and as long as x ({x.shape[0]}), got shape "
                             f"{list(weights.shape)}")
    if x.shape[0] == 0:
        return x.new_empty(minlength, dtype=torch.int64)
    dtype = torch.int64 if weights is None else torch.float32 if weights.dtype == torch.float32 else torch.float64
    return x.new_empty(torch.library.get_ctx().new_dynamic_size(min=max(minlength, 1)), dtype=dtype)


def _bincount_backward(ctx, grad):
    raise RuntimeError("tinycuda::bincount: bincount has no gradient (torch.bincount has no derivative either)")


torch.library.register_autograd("tinycuda::bincount", _bincount_backward)
