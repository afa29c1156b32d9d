"""Rotary position embedding: rope(q, k, cos, sin, position_ids=None,
unsqueeze_dim=1, interleaved=False) -> (q_out, k_out), a drop-in for Hugging
Face's apply_rotary_pos_emb (transformers' llama modeling), with real
position ids and the interleaved (GPT-J) layout:

    q_out = q * cos + rotate_half(q) * sin        (rotate_every_two when interleaved)
    k_out = k * cos + rotate_half(k) * sin

q [B, Hq, S, D] and k [B, Hk, S, D] (unsqueeze_dim=1), or [B, S, H, D]
(unsqueeze_dim=2); cos, sin [S, D], [1, S, D] or [B, S, D]; with
position_ids ([B, S], [1, S] or [S], int64) tables [P, D] or [1, P, D] whose
row position_ids[b, s] token (b, s) reads. q and k are read in place with
their strides (a transposed projection costs no copy); q_out and k_out are
new contiguous tensors. One kernel launch rotates q and k.

cos and sin get no gradient (Hugging Face computes them under no_grad):
passing ones that require grad, with grad mode on, raises. The backward
(tinycuda::rope_backward) is the same kernel with the transposed rotation.
rope_ rotates q and k in place (inference, KV caches), without autograd."""
import torch

from ._fake import register_fake


__all__ = ["rope", "rope_"]


def rope(q, k, cos, sin, position_ids=None, unsqueeze_dim=1, interleaved=False):
    """(q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin), cos and
    sin gathered by position_ids if given and unsqueezed at unsqueeze_dim."""
    if torch.is_grad_enabled() and (cos.requires_grad or sin.requires_grad):
        raise RuntimeError("tinycuda::rope: cos and sin get no gradient (compute them under torch.no_grad(), as "
                           "Hugging Face's rotary embeddings do, or detach them)")
    return torch.ops.tinycuda.rope(q, k, cos, sin, position_ids, unsqueeze_dim, interleaved)


def rope_(q, k, cos, sin, position_ids=None, unsqueeze_dim=1, interleaved=False):
    """rope written over q and k; returns (q, k). No autograd: q or k
    requiring grad, with grad mode on, raises (use rope)."""
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad):
        raise RuntimeError("tinycuda::rope_: q or k requires grad; the in-place rotation has no backward "
                           "(use tinycuda.rope, or run under torch.no_grad())")
    torch.ops.tinycuda.rope_(q, k, cos, sin, position_ids, unsqueeze_dim, interleaved)
    return q, k


def _check(op, q, k, cos, sin, position_ids, unsqueeze_dim, names=("q", "k")):
    """The torch layer's shape checks (csrc/torch/rope.cpp), for fake tensors."""
    torch._check(unsqueeze_dim in (1, 2),
                 lambda: f"tinycuda::{op}: unsqueeze_dim must be 1 (q, k [B, H, S, D]) or 2 ([B, S, H, D]), "
                         f"got {unsqueeze_dim}")
    torch._check(q.dim() == 4 and k.dim() == 4, lambda: f"tinycuda::{op}: {names[0]} and {names[1]} must be 4-D")
    sd = 3 - unsqueeze_dim
    for name, t in ((names[1], k), ("cos", cos), ("sin", sin)):
        torch._check(t.dtype == q.dtype,
                     lambda: f"tinycuda::{op}: {name} has dtype {t.dtype} but {names[0]} has dtype {q.dtype}")
    torch._check(k.shape[0] == q.shape[0] and k.shape[sd] == q.shape[sd] and k.shape[3] == q.shape[3],
                 lambda: f"tinycuda::{op}: {names[1]} has shape {list(k.shape)} but {names[0]} has shape "
                         f"{list(q.shape)}: they must share batch, seqlen and head_dim")
    torch._check(q.shape[3] % 2 == 0, lambda: f"tinycuda::{op}: head_dim D must be even, got D = {q.shape[3]}")
    torch._check(cos.shape == sin.shape,
                 lambda: f"tinycuda::{op}: sin has shape {list(sin.shape)} but cos has shape {list(cos.shape)}")
    torch._check(cos.dim() in (2, 3) and cos.shape[-1] == q.shape[3],
                 lambda: f"tinycuda::{op}: cos must be [S, D] or [B, S, D] (a [P, D] table with position_ids)")
    if position_ids is not None:
        torch._check(position_ids.dtype == torch.int64,
                     lambda: f"tinycuda::{op}: position_ids must be int64, got {position_ids.dtype}")


@register_fake("tinycuda::rope")
def _rope_fake(q, k, cos, sin, position_ids, unsqueeze_dim, interleaved):
    _check("rope", q, k, cos, sin, position_ids, unsqueeze_dim)
    return q.new_empty(q.shape), k.new_empty(k.shape)


@register_fake("tinycuda::rope_backward")
def _rope_backward_fake(grad_q_out, grad_k_out, cos, sin, position_ids, unsqueeze_dim, interleaved):
    _check("rope_backward", grad_q_out, grad_k_out, cos, sin, position_ids, unsqueeze_dim,
           ("grad_q_out", "grad_k_out"))
    return grad_q_out.new_empty(grad_q_out.shape), grad_k_out.new_empty(grad_k_out.shape)


@register_fake("tinycuda::rope_")
def _rope_inplace_fake(q, k, cos, sin, position_ids, unsqueeze_dim, interleaved):
    _check("rope_", q, k, cos, sin, position_ids, unsqueeze_dim)


def _setup(ctx, inputs, output):
    # arguments left at their defaults are not among the inputs
    _, _, cos, sin, position_ids, unsqueeze_dim, interleaved = (*inputs, None, 1, False)[:7]
    ctx.save_for_backward(cos, sin, position_ids)
    ctx.unsqueeze_dim, ctx.interleaved = unsqueeze_dim, interleaved


def _backward(ctx, grad_q, grad_k):
    n = len(ctx.needs_input_grad)
    if any(ctx.needs_input_grad[2:4]):  # the raw op, called with cos or sin requiring grad
        raise RuntimeError("tinycuda::rope: cos and sin get no gradient (compute them under torch.no_grad(), or "
                           "detach them)")
    cos, sin, position_ids = ctx.saved_tensors
    gq, gk = torch.ops.tinycuda.rope_backward(grad_q, grad_k, cos, sin, position_ids, ctx.unsqueeze_dim,
                                              ctx.interleaved)
    return (gq if ctx.needs_input_grad[0] else None, gk if ctx.needs_input_grad[1] else None, *(None,) * (n - 2))


torch.library.register_autograd("tinycuda::rope", _backward, setup_context=_setup)
