"""Attention without the score matrix in memory: flash_attention on
[batch, seqlen, heads, head_dim] tensors (FlashAttention's layout and
options), and scaled_dot_product_attention with torch's signature on
[batch, heads, seqlen, head_dim], both through the tinycuda::flash_attention
op. The forward keeps the logsumexp of each query row; the backward,
tinycuda::flash_attention_backward, recomputes the probabilities from it."""
import torch

from ._fake import register_fake

__all__ = ["flash_attention", "flash_attention_qkvpacked", "scaled_dot_product_attention"]


def flash_attention(q, k, v, causal=False, scale=None, window=(-1, -1), softcap=0.0, cu_seqlens_q=None,
                    cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None, deterministic=None):
    """softmax(q k^T * scale) v per (batch, head): q [B, Sq, Hq, D], k and v
    [B, Sk, Hkv, D] with Hq a multiple of Hkv (grouped-query attention).
    causal: query i sees keys up to i + Sk - Sq (aligned bottom-right, as
    FlashAttention); window (left, right): only keys within that many of the
    diagonal (-1: no bound); softcap > 0: logits capped to softcap *
    tanh(logit / softcap). A query that sees no key gets zeros. scale: 1 / sqrt(D)
    by default.

    Variable lengths (FlashAttention's varlen): q [total_q, Hq, D], k and v
    [total_k, Hkv, D] hold the batch's sequences packed, sequence b being rows
    cu_seqlens_q[b]:cu_seqlens_q[b+1] of q and cu_seqlens_k[b]:cu_seqlens_k[b+1]
    of k and v (int32 [B + 1] on q's device); max_seqlen_q and max_seqlen_k,
    ints, are the longest lengths (they size the launch; given, as in
    FlashAttention, since reading them off the device would synchronize).
    Masks and causal alignment hold per sequence; rows in no sequence come out 0.

    deterministic: FlashAttention's flag. True: bit-identical gradients run
    to run (dQ and dK/dV each have one owner that adds in a fixed order).
    False: where CUDA's Hopper backward (fp16/bf16, head_dim <= 128) cannot
    keep dS (above 512 MiB of it, head_dim above 64, or varlen), it adds each
    block's share of dQ into a float32 accumulator, as FlashAttention does,
    which is faster but leaves dQ's last bits to the order of those adds;
    elsewhere both give the same bits. None (the default): True when
    torch.use_deterministic_algorithms(True) is set. (The CUDA kernels' kept
    variants: tinycuda.variants.)"""
    op = "tinycuda::flash_attention"
    deterministic = _deterministic(op, deterministic)
    if cu_seqlens_q is not None and (max_seqlen_q is None or max_seqlen_k is None):
        raise ValueError(f"{op}: max_seqlen_q and max_seqlen_k must be given with cu_seqlens_q/k")
    left, right = window
    return torch.ops.tinycuda.flash_attention(
        q, k, v, causal, scale, left, right, softcap, False, cu_seqlens_q, cu_seqlens_k,
        -1 if max_seqlen_q is None else max_seqlen_q, -1 if max_seqlen_k is None else max_seqlen_k,
        deterministic=deterministic)[0]


def flash_attention_qkvpacked(qkv, causal=False, scale=None, window=(-1, -1), softcap=0.0, deterministic=None):
    """flash_attention(q, k, v, ...) of qkv [B, S, 3, H, D] (FlashAttention's
    flash_attn_qkvpacked_func): q, k and v are its slices along dim 2, read in
    place, as one projection's output viewed gives them; the gradient is one
    tensor like qkv, so nothing stacks the three (an unbind's backward copies
    them). The options are flash_attention's."""
    deterministic = _deterministic("tinycuda::flash_attention_qkvpacked", deterministic)
    left, right = window
    return torch.ops.tinycuda.flash_attention_qkvpacked(qkv, causal, scale, left, right, softcap,
                                                        deterministic=deterministic)[0]


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """F.scaled_dot_product_attention on [B, H, S, D] (or [H, S, D]) tensors,
    through the flash kernels, read in place (no transposed copy). is_causal
    aligns top-left, as torch does. Not supported: attn_mask, dropout_p > 0,
    a value head dim other than the query's. The backward is bit-identical run
    to run when torch.use_deterministic_algorithms(True) is set (flash_attention's
    deterministic=None)."""
    op = "tinycuda::scaled_dot_product_attention"
    if attn_mask is not None:
        raise ValueError(f"{op}: attn_mask is not supported (use is_causal, or flash_attention's window)")
    if dropout_p != 0.0:
        raise ValueError(f"{op}: dropout_p must be 0.0, got {dropout_p}")
    for name, t in (("query", query), ("key", key), ("value", value)):
        if t.dim() not in (3, 4):
            raise ValueError(f"{op}: {name} must be 3-D or 4-D [batch, heads, seqlen, head_dim], got shape "
                             f"{tuple(t.shape)}")
    if not query.dim() == key.dim() == value.dim():
        raise ValueError(f"{op}: query, key and value must have the same number of dims")
    if value.shape[-1] != query.shape[-1]:
        raise ValueError(f"{op}: value's head dim ({value.shape[-1]}) must equal query's ({query.shape[-1]})")
    if query.shape[-3] != key.shape[-3] and not enable_gqa:
        raise ValueError(f"{op}: query has {query.shape[-3]} heads but key has {key.shape[-3]}: pass "
                         "enable_gqa=True for grouped-query attention")
    three = query.dim() == 3
    q, k, v = (t.unsqueeze(0) if three else t for t in (query, key, value))
    out = torch.ops.tinycuda.flash_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal,
                                             scale, -1, -1, 0.0, True,
                                             deterministic=_deterministic(op, None))[0].transpose(1, 2)
    return out.squeeze(0) if three else out


scaled_dot_product_attention.runs = "flash_attention"  # the op under it (tests/test_build.py)


def _deterministic(op, flag):
    """The backward's `deterministic`: the caller's bool, or with None torch's global setting."""
    if flag is None:
        return torch.are_deterministic_algorithms_enabled()
    if not isinstance(flag, bool):
        raise TypeError(f"{op}: deterministic must be a bool or None, got {type(flag).__name__}")
    return flag


def _check_shapes(op, q, k, v, cu_q):
    """The batch, Hq and Sq of the problem (varlen: len(cu_q) - 1 and max_seqlen_q come from the caller)."""
    rank, layout = (3, "[total, heads, head_dim]") if cu_q is not None else (4, "[batch, seqlen, heads, head_dim]")
    for name, t in (("q", q), ("k", k), ("v", v)):
        torch._check(t.dim() == rank, lambda: f"tinycuda::{op}: {name} must be {rank}-D {layout}")
    torch._check(k.shape == v.shape, lambda: f"tinycuda::{op}: v has shape {list(v.shape)} but k has shape "
                                             f"{list(k.shape)}")
    torch._check(rank == 3 or q.shape[0] == k.shape[0], lambda: f"tinycuda::{op}: q and k must have the same batch")
    torch._check(q.shape[-1] == k.shape[-1], lambda: f"tinycuda::{op}: q and k must have the same head_dim")
    torch._check(q.shape[-2] % k.shape[-2] == 0 if k.shape[-2] else q.shape[-2] == 0,
                 lambda: f"tinycuda::{op}: q's heads must be a multiple of k's and v's heads")


def _lse_shape(q, cu_q, max_q):
    return (cu_q.shape[0] - 1, q.shape[1], max_q) if cu_q is not None else (q.shape[0], q.shape[2], q.shape[1])


def _lse_dtype(q):
    return torch.float64 if q.dtype == torch.float64 else torch.float32


@register_fake("tinycuda::flash_attention")
def _flash_attention_fake(q, k, v, causal, scale, window_left, window_right, softcap, top_left, cu_seqlens_q=None,
                          cu_seqlens_k=None, max_seqlen_q=-1, max_seqlen_k=-1, **_keywords):  # algo, deterministic
    _check_shapes("flash_attention", q, k, v, cu_seqlens_q)
    return q.new_empty(q.shape), q.new_empty(_lse_shape(q, cu_seqlens_q, max_seqlen_q), dtype=_lse_dtype(q))


@register_fake("tinycuda::flash_attention_backward")
def _flash_attention_backward_fake(grad_out, q, k, v, out, lse, causal, scale, window_left, window_right, softcap,
                                   top_left, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=-1, max_seqlen_k=-1,
                                   **_keywords):
    op = "tinycuda::flash_attention_backward"
    _check_shapes("flash_attention_backward", q, k, v, cu_seqlens_q)
    shape = _lse_shape(q, cu_seqlens_q, max_seqlen_q)
    torch._check(lse.shape == shape and lse.dtype == _lse_dtype(q),
                 lambda: f"{op}: lse must be a {_lse_dtype(q)} tensor of shape {list(shape)}, got {lse.dtype} "
                         f"{list(lse.shape)}")
    torch._check(out.shape == q.shape and grad_out.shape == q.shape,
                 lambda: f"{op}: out and grad_out must have q's shape {list(q.shape)}")
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


@register_fake("tinycuda::flash_attention_qkvpacked")
def _flash_attention_qkvpacked_fake(qkv, causal, scale, window_left, window_right, softcap, top_left, **_keywords):
    torch._check(qkv.dim() == 5 and qkv.shape[2] == 3,
                 lambda: "tinycuda::flash_attention_qkvpacked: qkv must be 5-D [batch, seqlen, 3, heads, head_dim]")
    q = qkv[:, :, 0]
    return q.new_empty(q.shape), q.new_empty(_lse_shape(q, None, -1), dtype=_lse_dtype(q))


@register_fake("tinycuda::flash_attention_qkvpacked_backward")
def _flash_attention_qkvpacked_backward_fake(grad_out, qkv, out, lse, causal, scale, window_left, window_right,
                                             softcap, top_left, **_keywords):
    return qkv.new_empty(qkv.shape)


def _options(op, inputs):
    """The forward's options after its tensors, in the schema's order, with its defaults (read off the schema):
    what the backward is called with, for any the caller left out."""
    args = [a for a in op.default._schema.arguments if not a.kwarg_only]
    tensors = sum(1 for a in args if a.name in ("q", "k", "v", "qkv"))
    return {a.name: (inputs[i] if i < len(inputs) else a.default_value) for i, a in enumerate(args) if i >= tensors}


_DEFAULTS = _options(torch.ops.tinycuda.flash_attention, ())
_OFFSETS = ("cu_seqlens_q", "cu_seqlens_k")  # tensors: saved for backward, not kept on ctx
# the keyword-only options (algo, deterministic) and their defaults, read off the schema once
_KW_DEFAULTS = {a.name: a.default_value for a in torch.ops.tinycuda.flash_attention.default._schema.arguments
                if a.kwarg_only}


def _keywords(given):
    """The forward's keyword-only options (algo: a variant's backward runs the same one; deterministic), with the
    schema's defaults for any left out: what its backward is called with."""
    return {name: given.get(name, default) for name, default in _KW_DEFAULTS.items()}


def _setup(ctx, inputs, keyword_only_inputs, output):
    q, k, v, *rest = inputs
    out, lse = output
    ctx.mark_non_differentiable(lse)
    ctx.set_materialize_grads(False)
    args = {**_DEFAULTS, **dict(zip(_DEFAULTS, rest))}
    ctx.save_for_backward(q, k, v, out, lse, *(args.pop(name) for name in _OFFSETS))
    ctx.args = args
    ctx.kw = _keywords(keyword_only_inputs)


def _backward(ctx, grad, _grad_lse):
    if grad is None:
        return None, None, None, *(None,) * (len(ctx.needs_input_grad) - 3)
    q, k, v, out, lse, *offsets = ctx.saved_tensors
    gq, gk, gv = torch.ops.tinycuda.flash_attention_backward(grad, q, k, v, out, lse, **ctx.args,
                                                             **dict(zip(_OFFSETS, offsets)), **ctx.kw)
    return gq, gk, gv, *(None,) * (len(ctx.needs_input_grad) - 3)


torch.library.register_autograd("tinycuda::flash_attention", _backward, setup_context=_setup)


def _setup_packed(ctx, inputs, keyword_only_inputs, output):
    out, lse = output
    ctx.mark_non_differentiable(lse)
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(inputs[0], out, lse)
    ctx.args = _options(torch.ops.tinycuda.flash_attention_qkvpacked, inputs)
    ctx.kw = _keywords(keyword_only_inputs)


def _backward_packed(ctx, grad, _grad_lse):
    rest = (None,) * (len(ctx.needs_input_grad) - 1)
    if grad is None:
        return None, *rest
    qkv, out, lse = ctx.saved_tensors
    return torch.ops.tinycuda.flash_attention_qkvpacked_backward(grad, qkv, out, lse, **ctx.args,
                                                                 **ctx.kw), *rest


torch.library.register_autograd("tinycuda::flash_attention_qkvpacked", _backward_packed, setup_context=_setup_packed)
