"""embedding: torch.nn.functional.embedding on tinycuda kernels, a lookup of
weight's rows by int64 index (GPT-2's token and position embeddings):

    out[..., :] = weight[input[...], :]        input any shape, weight [num_embeddings, embedding_dim]

The gradient of weight (tinycuda::embedding_backward) is the sum of the
output gradient's rows over the positions of each id, zero rows for ids no
position names and for padding_idx; it is deterministic (no float atomics:
on CUDA the positions are sorted by id, stably, and each id's rows added in
position order; bit-identical run to run), accumulated in float32 (float64
for double) and rounded once. Autograd saves input, not weight.

An index outside [0, num_embeddings) raises: on the CPU an error naming its
position in the flattened input; on CUDA, as torch, a device-side assert
naming the op, reported at the next synchronization (the CUDA context is
unusable after it).

F.embedding's max_norm (which renormalizes weight's rows in place),
scale_grad_by_freq and sparse are not supported: passing them raises.
"""
import torch

from ._fake import register_fake
from .elementwise import _c10

__all__ = ["embedding"]

_FLOATS = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    """F.embedding(input, weight, padding_idx): weight's rows at the int64 indices of input, out of shape
    input.shape + [embedding_dim]; padding_idx's row gets no gradient (a negative one counts from the end).
    max_norm, scale_grad_by_freq and sparse (F.embedding's) raise NotImplementedError."""
    _unsupported("tinycuda::embedding", max_norm, scale_grad_by_freq, sparse)
    return torch.ops.tinycuda.embedding(input, weight, padding_idx)


def _unsupported(who, max_norm, scale_grad_by_freq, sparse):
    """F.embedding's (and torch.nn.Embedding's) options that tinycuda's kernels do not have, named by `who`
    ("tinycuda::embedding", "tinycuda.nn.Embedding")."""
    if max_norm is not None:
        raise NotImplementedError(f"{who}: max_norm is not supported (torch renormalizes weight's rows in place), "
                                  f"got max_norm={max_norm!r}")
    if scale_grad_by_freq:
        raise NotImplementedError(f"{who}: scale_grad_by_freq=True is not supported")
    if sparse:
        raise NotImplementedError(f"{who}: sparse=True is not supported (the gradient is a dense "
                                  f"[num_embeddings, embedding_dim] tensor)")


# ---------------------------------------------------------------------------
# fakes: the checks the C++ layer makes (csrc/torch/embedding.cpp), in its words

def _check_input(op, input, name, other):
    torch._check(input.dtype == torch.int64, lambda: f"tinycuda::{op}: input must be int64 indices, got "
                                                     f"{_c10(input.dtype)}")
    torch._check(input.device == other.device, lambda: f"tinycuda::{op}: input is on {input.device} but {name} is "
                                                       f"on {other.device}")


def _check_float(op, name, t):
    torch._check(t.dtype in _FLOATS, lambda: f"tinycuda::{op}: {name} must be float32, float16, bfloat16 or "
                                             f"float64, got {_c10(t.dtype)}")


def _check_padding(op, padding_idx, num_embeddings):
    if padding_idx is not None:
        torch._check(-num_embeddings <= padding_idx < num_embeddings,
                     lambda: f"tinycuda::{op}: padding_idx must be in [-num_embeddings, num_embeddings) = "
                             f"[{-num_embeddings}, {num_embeddings}), got {padding_idx}")


@register_fake("tinycuda::embedding")
def _embedding_fake(input, weight, padding_idx):
    op = "embedding"
    _check_float(op, "weight", weight)
    torch._check(weight.dim() == 2, lambda: f"tinycuda::{op}: weight must be 2-D [num_embeddings, embedding_dim], "
                                            f"got shape {list(weight.shape)}")
    _check_input(op, input, "weight", weight)
    _check_padding(op, padding_idx, weight.shape[0])
    return weight.new_empty((*input.shape, weight.shape[1]))


@register_fake("tinycuda::embedding_backward")
def _embedding_backward_fake(grad_out, input, num_embeddings, padding_idx):
    op = "embedding_backward"
    _check_float(op, "grad_out", grad_out)
    _check_input(op, input, "grad_out", grad_out)
    torch._check(num_embeddings >= 0, lambda: f"tinycuda::{op}: num_embeddings must be >= 0, got {num_embeddings}")
    torch._check(grad_out.dim() == input.dim() + 1 and grad_out.shape[:-1] == input.shape,
                 lambda: f"tinycuda::{op}: grad_out must have shape input.shape + [embedding_dim] = "
                         f"{list(input.shape)} + [D], got {list(grad_out.shape)}")
    _check_padding(op, padding_idx, num_embeddings)
    return grad_out.new_empty((num_embeddings, grad_out.shape[-1]))


# ---------------------------------------------------------------------------
# autograd: weight's gradient from grad_out and the saved input (weight itself is not kept)

def _setup(ctx, inputs, output):
    input, weight, padding_idx = (*inputs, None)[:3]  # padding_idx left at its default is not among the inputs
    ctx.save_for_backward(input)
    ctx.num_embeddings, ctx.padding_idx = weight.shape[0], padding_idx


def _backward(ctx, grad_out):
    (input,) = ctx.saved_tensors
    grad_weight = None
    if ctx.needs_input_grad[1]:
        grad_weight = torch.ops.tinycuda.embedding_backward(grad_out, input, ctx.num_embeddings, ctx.padding_idx)
    return (None, grad_weight, *(None,) * (len(ctx.needs_input_grad) - 2))


torch.library.register_autograd("tinycuda::embedding", _backward, setup_context=_setup)
