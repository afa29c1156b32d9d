"""Drop-in modules. Linear, Embedding, ReLU, GELU, the elementwise activations (Sigmoid,
Tanh, SiLU, Mish, LeakyReLU, ELU, SELU, Softplus, Softsign, Hardsigmoid,
Hardtanh), LayerNorm, RMSNorm, AddRMSNorm, CrossEntropyLoss and
MultiheadAttention subclass their torch.nn counterparts, so constructor,
initialization, state_dict keys and repr are torch's own; only forward runs
tinycuda kernels. RotaryEmbedding follows Hugging Face's LlamaRotaryEmbedding
(torch has none)."""
import torch

from .. import ops
from ..ops.embedding import _unsupported as _embedding_unsupported


class Linear(torch.nn.Linear):
    """torch.nn.Linear whose forward and backward are tinycuda kernels."""

    def forward(self, x):
        return ops.linear(x, self.weight, self.bias)


class LayerNorm(torch.nn.LayerNorm):
    """torch.nn.LayerNorm (same constructor, init and state_dict) whose forward
    and backward are tinycuda kernels."""

    def forward(self, x):
        return ops.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


class RMSNorm(torch.nn.RMSNorm):
    """torch.nn.RMSNorm (same constructor, init and state_dict) whose forward
    and backward are tinycuda kernels."""

    def forward(self, x):
        return ops.rms_norm(x, self.normalized_shape, self.weight, self.eps)


class AddRMSNorm(torch.nn.RMSNorm):
    """The residual add of a pre-norm block fused with the RMSNorm after it:
    forward(x, residual) returns (rms_norm(x + residual), x + residual), the
    normalized input of the next sublayer and the new residual stream.
    torch.nn.RMSNorm's constructor, init and state_dict (`weight`), so a
    model's RMSNorm weights load as they are."""

    def forward(self, x, residual):
        y, s, _ = torch.ops.tinycuda.add_rms_norm(x, residual, list(self.normalized_shape), self.weight, self.eps)
        return y, s


class Embedding(torch.nn.Embedding):
    """torch.nn.Embedding (same constructor, init, from_pretrained and
    state_dict: `weight`) whose forward and backward are tinycuda kernels
    (tinycuda.embedding: a deterministic gradient, zero at padding_idx).
    max_norm, scale_grad_by_freq and sparse=True are not supported: the
    constructor raises NotImplementedError."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, sparse=False, _weight=None, _freeze=False, device=None, dtype=None):
        _embedding_unsupported("tinycuda.nn.Embedding", max_norm, scale_grad_by_freq, sparse)
        super().__init__(num_embeddings, embedding_dim, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
                         _weight, _freeze, device, dtype)

    def forward(self, input):  # noqa: A002  (torch's argument name)
        return ops.embedding(input, self.weight, self.padding_idx)


class ReLU(torch.nn.ReLU):
    """torch.nn.ReLU on tinycuda kernels. `inplace=True` is accepted for
    drop-in use but the result is a new tensor (same values)."""

    def forward(self, x):
        return ops.relu(x)


class GELU(torch.nn.GELU):
    """torch.nn.GELU(approximate='none' | 'tanh') on tinycuda kernels."""

    def forward(self, x):
        return ops.gelu(x, self.approximate)


def _elementwise(module, fn, x, *args):
    """fn(x, *args); with the module's `inplace` (torch's flag, where torch has
    one) the result is written over x, which is returned, as torch.nn's."""
    if not getattr(module, "inplace", False):
        return fn(x, *args)
    # tinycuda has no in-place kernels: computed out of place, then copied into
    # x (torch's semantics, not its memory saving). The backward of these ops
    # reads the saved input, which the copy overwrites (autograd would refuse
    # it): while autograd records, the op reads a clone of x.
    src = x.clone() if torch.is_grad_enabled() and x.requires_grad else x
    return x.copy_(fn(src, *args))


class Sigmoid(torch.nn.Sigmoid):
    """torch.nn.Sigmoid on tinycuda kernels."""

    def forward(self, x):
        return _elementwise(self, ops.sigmoid, x)


class Tanh(torch.nn.Tanh):
    """torch.nn.Tanh on tinycuda kernels."""

    def forward(self, x):
        return _elementwise(self, ops.tanh, x)


class SiLU(torch.nn.SiLU):
    """torch.nn.SiLU(inplace=False) on tinycuda kernels."""

    def forward(self, x):
        return _elementwise(self, ops.silu, x)


class Mish(torch.nn.Mish):
    """torch.nn.Mish(inplace=False) on tinycuda kernels."""

    def forward(self, x):
        return _elementwise(self, ops.mish, x)


class LeakyReLU(torch.nn.LeakyReLU):
    """torch.nn.LeakyReLU(negative_slope=0.01, inplace=False) on tinycuda kernels."""

    def forward(self, x):
        return _elementwise(self, ops.leaky_relu, x, self.negative_slope)


class ELU(torch.nn.ELU):
    """torch.nn.ELU(alpha=1.0, inplace=False) on tinycuda kernels."""

    def forward(self, x):
        return _elementwise(self, ops.elu, x, self.alpha)


class SELU(torch.nn.SELU):
    """torch.nn.SELU(inplace=False) on tinycuda kernels."""

    def forward(self, x):
        return _elementwise(self, ops.selu, x)


class Softplus(torch.nn.Softplus):
    """torch.nn.Softplus(beta=1.0, threshold=20.0) on tinycuda kernels."""

    def forward(self, x):
        return _elementwise(self, ops.softplus, x, self.beta, self.threshold)


class Softsign(torch.nn.Softsign):
    """torch.nn.Softsign on tinycuda kernels."""

    def forward(self, x):
        return _elementwise(self, ops.softsign, x)


class Hardsigmoid(torch.nn.Hardsigmoid):
    """torch.nn.Hardsigmoid(inplace=False) on tinycuda kernels."""

    def forward(self, x):
        return _elementwise(self, ops.hardsigmoid, x)


class Hardtanh(torch.nn.Hardtanh):
    """torch.nn.Hardtanh(min_val=-1.0, max_val=1.0, inplace=False) on tinycuda kernels."""

    def forward(self, x):
        return _elementwise(self, ops.hardtanh, x, self.min_val, self.max_val)


class SwiGLU(torch.nn.Module):
    """silu(a) * b where a, b = x.chunk(2, dim=-1): the gate of a LLaMA-style
    MLP applied to the output of one fused up/gate projection (torch has no
    such module). The last dim of x must be even; the output has half of it.
    The halves are strided views, which the op copies to contiguous tensors
    first: to avoid those copies, call tinycuda.swiglu(a, b) on separate
    contiguous projections. No parameters."""

    def forward(self, x):
        if x.dim() == 0 or x.shape[-1] % 2:
            raise ValueError(f"tinycuda.nn.SwiGLU: the last dim of x must be even, got shape {list(x.shape)}")
        a, b = x.chunk(2, dim=-1)
        return ops.swiglu(a, b)


class ScaleBiasReLU(torch.nn.Module):
    """relu(x * scale + bias) with a learnable bias over the last dim
    (initialized to zeros) and a fixed float scale."""

    def __init__(self, num_features, scale=1.0, device=None, dtype=None):
        super().__init__()
        self.num_features = num_features
        self.scale = float(scale)
        self.bias = torch.nn.Parameter(torch.zeros(num_features, device=device, dtype=dtype))

    def forward(self, x):
        return ops.scale_bias_relu(x, self.bias, self.scale)

    def extra_repr(self):
        return f"{self.num_features}, scale={self.scale}"


class CrossEntropyLoss(torch.nn.CrossEntropyLoss):
    """torch.nn.CrossEntropyLoss (same constructor, buffers and state_dict: the
    class weights are the `weight` buffer) on tinycuda's kernel, for
    class-index targets of [N, V] or [V] logits."""

    def forward(self, input, target):  # noqa: A002  (torch's argument names)
        return ops.cross_entropy(input, target, self.ignore_index, self.reduction, self.label_smoothing,
                                 weight=self.weight)


class FusedLinearCrossEntropyLoss(torch.nn.Module):
    """cross_entropy(hidden @ weight.T + bias, target) without the [N, V]
    logits. forward(weight, hidden, target, bias=None) takes Liger's
    LigerFusedLinearCrossEntropyLoss order (lin_weight, _input, target, bias).
    reduction='none' works without gradients only; accum_dtype=torch.float32
    accumulates grad_weight in float32 (see ops.fused_linear_cross_entropy).
    ce_weight: class weights [V] (torch's CrossEntropyLoss `weight`, Liger's
    ce_weight), kept as the buffer `ce_weight` (in the state_dict when given)."""

    def __init__(self, ignore_index=-100, reduction="mean", label_smoothing=0.0, accum_dtype=None, ce_weight=None):
        super().__init__()
        self.register_buffer("ce_weight", ce_weight)
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"tinycuda.nn.FusedLinearCrossEntropyLoss: reduction must be 'mean', 'sum' or "
                             f"'none', got {reduction!r}")
        if not 0.0 <= label_smoothing <= 1.0:
            raise ValueError(f"tinycuda.nn.FusedLinearCrossEntropyLoss: label_smoothing must be in [0, 1], "
                             f"got {label_smoothing}")
        self.ignore_index, self.reduction, self.label_smoothing = ignore_index, reduction, label_smoothing
        self.accum_dtype = accum_dtype

    def forward(self, weight, hidden, target, bias=None):
        return ops.fused_linear_cross_entropy(hidden, weight, target, bias, self.ignore_index, self.reduction,
                                              self.label_smoothing, accum_dtype=self.accum_dtype,
                                              ce_weight=self.ce_weight)

    def extra_repr(self):
        return (f"ignore_index={self.ignore_index}, reduction={self.reduction!r}, "
                f"label_smoothing={self.label_smoothing}, accum_dtype={self.accum_dtype}")


class MultiheadAttention(torch.nn.MultiheadAttention):
    """torch.nn.MultiheadAttention (same constructor, init, state_dict and
    batch_first) whose need_weights=False forward runs tinycuda kernels: the
    input projections (one linear for self-attention), flash_attention on the
    projected heads read in place, the output projection. is_causal (with
    its attn_mask hint, as torch requires) is the causal mask, aligned
    top-left as torch's. What flash attention cannot give runs torch's own
    forward: need_weights=True (torch's default: the attention weights),
    key_padding_mask, any other attn_mask, dropout while training,
    bias_k/bias_v, add_zero_attn, kdim/vdim other than embed_dim."""

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        if (need_weights or key_padding_mask is not None or (attn_mask is not None and not is_causal)
                or (is_causal and attn_mask is None) or (self.training and self.dropout > 0)
                or self.bias_k is not None or self.add_zero_attn or not self._qkv_same_embed_dim):
            return super().forward(query, key, value, key_padding_mask, need_weights, attn_mask,
                                   average_attn_weights, is_causal)
        batched, self_attention = query.dim() == 3, query is key and key is value
        if not batched:  # [L, E]: one sequence
            query, key, value = (t.unsqueeze(0 if self.batch_first else 1) for t in (query, key, value))
        if not self.batch_first:  # [L, B, E] -> [B, L, E] views
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        b, lq, e = query.shape
        h, d = self.num_heads, self.head_dim
        if self_attention:  # one projection; q, k, v are strided views of it
            qkv = ops.linear(query, self.in_proj_weight, self.in_proj_bias).view(b, lq, 3, h, d)
            q, k, v = qkv.unbind(2)
        else:
            ws = self.in_proj_weight.chunk(3)
            bs = self.in_proj_bias.chunk(3) if self.in_proj_bias is not None else (None,) * 3
            q, k, v = (ops.linear(t, w, bias).view(t.shape[0], t.shape[1], h, d)
                       for t, w, bias in zip((query, key, value), ws, bs))
        o = torch.ops.tinycuda.flash_attention(q, k, v, is_causal, None, -1, -1, 0.0, True,
                                               deterministic=torch.are_deterministic_algorithms_enabled())[0]
        out = ops.linear(o.reshape(b, lq, e), self.out_proj.weight, self.out_proj.bias)
        if not self.batch_first:
            out = out.transpose(0, 1)
        return (out if batched else out.squeeze(0 if self.batch_first else 1)), None


class RotaryEmbedding(torch.nn.Module):
    """Rotary position embedding applied to q and k: forward(q, k, position_ids=None,
    unsqueeze_dim=1) is tinycuda.rope(q, k, cos, sin, position_ids, unsqueeze_dim,
    interleaved) on tables of max_position_embeddings rows built as Hugging Face's
    LlamaRotaryEmbedding builds its cos and sin (in float32, then cast): inv_freq =
    1 / base^(arange(0, D, 2) / D), freqs = outer(positions, inv_freq), emb =
    cat(freqs, freqs) (repeat_interleave(2) when interleaved). position_ids None:
    positions 0 .. S-1. The tables are non-persistent buffers, as HF's inv_freq:
    the state_dict is empty; they follow .to(device / dtype), and forward casts
    them to q's dtype."""

    def __init__(self, head_dim, max_position_embeddings=2048, base=10000.0, interleaved=False, device=None,
                 dtype=None):
        super().__init__()
        if head_dim <= 0 or head_dim % 2:
            raise ValueError(f"tinycuda.nn.RotaryEmbedding: head_dim must be even and > 0, got {head_dim}")
        self.head_dim, self.max_position_embeddings = head_dim, max_position_embeddings
        self.base, self.interleaved = float(base), bool(interleaved)
        inv_freq = 1.0 / (self.base ** (torch.arange(0, head_dim, 2, dtype=torch.int64, device=device).float()
                                        / head_dim))
        freqs = torch.outer(torch.arange(max_position_embeddings, device=device).float(), inv_freq)
        emb = freqs.repeat_interleave(2, -1) if interleaved else torch.cat((freqs, freqs), -1)
        dtype = dtype or torch.get_default_dtype()
        self.register_buffer("cos_cached", emb.cos().to(dtype), persistent=False)
        self.register_buffer("sin_cached", emb.sin().to(dtype), persistent=False)

    def forward(self, q, k, position_ids=None, unsqueeze_dim=1):
        cos, sin = self.cos_cached.to(q.dtype), self.sin_cached.to(q.dtype)
        if position_ids is None:  # rows 0 .. S-1, S q's token dim
            s = q.shape[2 if unsqueeze_dim == 1 else 1]
            cos, sin = cos[:s], sin[:s]
        return ops.rope(q, k, cos, sin, position_ids, unsqueeze_dim, self.interleaved)

    def extra_repr(self):
        return (f"{self.head_dim}, max_position_embeddings={self.max_position_embeddings}, base={self.base}, "
                f"interleaved={self.interleaved}")


__all__ = ["AddRMSNorm", "CrossEntropyLoss", "ELU", "Embedding", "FusedLinearCrossEntropyLoss", "GELU", "Hardsigmoid",
           "Hardtanh", "LayerNorm", "LeakyReLU", "Linear", "Mish", "MultiheadAttention", "ReLU", "RMSNorm",
           "RotaryEmbedding", "ScaleBiasReLU", "SELU", "Sigmoid", "SiLU", "Softplus", "Softsign", "SwiGLU", "Tanh"]
