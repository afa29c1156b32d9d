"""A GPT-2-style decoder: token and position embeddings, pre-LayerNorm blocks of
causal self-attention and a GELU (tanh) MLP, a final LayerNorm and an LM head
tied to the token embedding (Radford et al. 2019; the module names are
nanoGPT's and Hugging Face's GPT-2 `transformer.*` names, with torch.nn.Linear
weights [out, in]).

The parameters live in plain torch.nn modules, so a state_dict is the same
whichever kernels run the model and loads into the model built on torch's. What
runs the forward and backward is a kernel set (`kernels=`):

    tinycuda  every op a tinycuda kernel: embedding, add_layer_norm (each
              residual add with the LayerNorm after it, whose backward also
              sums the stream's two gradients), linear, linear_act (bias +
              GELU in the GEMM's epilogue), flash_attention,
              fused_linear_cross_entropy (the head and the loss in one op,
              its gradients made in the forward; the [tokens, vocab] logits
              in one chunk up to loss_chunk_bytes, in several past it)
    torch     torch.nn.functional: the baseline (torch.compile it for the
              compiled baseline)

`forward(idx, targets)` returns the mean loss; `forward(idx)` the logits of
the last position. `decode(idx, cache, pos)` runs positions pos.. of a KV cache
(`new_cache`) for generation.
"""
import dataclasses
import math

import torch
import torch.nn.functional as F

__all__ = ["GPT", "GPTConfig", "PRESETS"]


@dataclasses.dataclass
class GPTConfig:
    vocab_size: int = 256   # the byte tokenizer's
    context: int = 128      # longest sequence (the position table's rows)
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 128

    def __post_init__(self):
        if self.n_embd % self.n_head:
            raise ValueError(f"GPTConfig: n_embd ({self.n_embd}) must be a multiple of n_head ({self.n_head})")


# The most the head's logits take at once in the tinycuda kernel set (the torch backends hold them whole):
# GPT-2's 16 x 1024 tokens x 50,304 bf16 logits take 1.65 GB, one chunk.
LOSS_CHUNK_BYTES = 4 << 30


def loss_chunk_bytes(device):
    """LOSS_CHUNK_BYTES, or a sixteenth of a smaller GPU's memory (a 16 GB card: 1 GiB). The chunk's logits
    and their gradient sit beside the step's activations. The total, not the free memory, sets it: the
    chunk, and with it the rounding (accum_dtype below), stay the same every step and under graph capture."""
    if device.type != "cuda":
        return LOSS_CHUNK_BYTES
    return min(LOSS_CHUNK_BYTES, torch.cuda.get_device_properties(device).total_memory // 16)


PRESETS = {
    # trains to a visibly lower loss on 2 CPU cores in about a minute
    "tiny": GPTConfig(),
    # GPT-2 124M's shape; the vocabulary padded to 50,304 (a multiple of 128) as
    # llm.c and nanoGPT pad 50,257 (the byte tokenizer uses the first 256 ids)
    "gpt2": GPTConfig(vocab_size=50304, context=1024, n_layer=12, n_head=12, n_embd=768),
}


# ---------------------------------------------------------------------------
# kernel sets: the few functions the model's forward calls

class _TorchKernels:
    embedding = staticmethod(F.embedding)
    linear = staticmethod(F.linear)
    add = staticmethod(torch.add)

    @staticmethod
    def layer_norm(x, ln):
        return F.layer_norm(x, ln.normalized_shape, ln.weight, ln.bias, ln.eps)

    @classmethod
    def add_layer_norm(cls, x, r, ln):
        """(layer_norm(x + r), x + r): the residual stream's next value and its norm (r None: x as it is)."""
        s = x if r is None else cls.add(x, r)
        return cls.layer_norm(s, ln), s

    @staticmethod
    def linear_gelu(x, weight, bias):
        return F.gelu(F.linear(x, weight, bias), approximate="tanh")

    @staticmethod
    def attention(q, k, v):
        """q, k, v [B, T, H, D] -> [B, T, H, D]; causal aligned bottom-right (only
        T_q == T_k, or one query seeing every key, occur here)."""
        causal = q.shape[1] == k.shape[1]
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal)
        return y.transpose(1, 2)

    @classmethod
    def attention_packed(cls, qkv):
        """qkv [B, T, 3, H, D] (training: no cache) -> [B, T, H, D], causal."""
        return cls.attention(*qkv.unbind(2))

    @staticmethod
    def loss(h, weight, targets):
        return F.cross_entropy(F.linear(h, weight).float(), targets)


class _TinycudaKernels:
    def __init__(self):
        from .. import ops
        self.ops = ops
        self.embedding, self.linear, self.add = ops.embedding, ops.linear, ops.add  # F's signatures

    def layer_norm(self, x, ln):
        return self.ops.layer_norm(x, ln.normalized_shape, ln.weight, ln.bias, ln.eps)

    def add_layer_norm(self, x, r, ln):
        # one kernel for the add and the norm, whose backward also adds the residual stream's two gradients
        if r is not None and r.dtype == x.dtype:
            return self.ops.add_layer_norm(x, r, ln.normalized_shape, ln.weight, ln.bias, ln.eps)
        # no residual yet, or (autocast) a float32 stream meeting a bf16 branch: the add promotes first
        s = x if r is None else self.add(x, r)
        return self.layer_norm(s, ln), s

    def linear_gelu(self, x, weight, bias):
        return self.ops.linear_act(x, weight, bias, "gelu_tanh")

    def attention(self, q, k, v):
        # [B, T, H, D] views of the qkv product are read in place; causal is
        # bottom-right aligned (FlashAttention's), so one new query sees the cache
        return self.ops.flash_attention(q, k, v, causal=True)

    def attention_packed(self, qkv):
        # the gradient comes back as one tensor like qkv: nothing stacks q's, k's and v's
        return self.ops.flash_attention_qkvpacked(qkv, causal=True)

    def loss(self, h, weight, targets):
        # The head's [tokens, vocab] logits in one chunk where they take at most loss_chunk_bytes, as the torch
        # backends hold them whole: the op's own rule (Liger's, memory first) cuts GPT-2's 16 x 1024 tokens into
        # 16 chunks of 1024, whose products are short GEMMs (K = 1024 for grad_weight, which reads and writes
        # its float32 accumulator 16 times). H200, gpt train --preset gpt2 --batch-size 16 --master-weights:
        # 477k tokens/s at 1024 rows a chunk, 494k at 4096, 502k in one chunk (BENCHMARKS, GPT step 15).
        n, vocab = h.shape[0], weight.shape[0]
        chunk = max(1, min(n, loss_chunk_bytes(h.device) // max(1, vocab * h.element_size())))
        # several chunks sum the weight gradient in float32 (a bf16 weight's own dtype would round once a
        # chunk, where torch's one GEMM rounds once); one chunk rounds once either way
        accum = torch.float32 if chunk < n and weight.dtype != torch.float64 else None
        return self.ops.fused_linear_cross_entropy(h, weight, targets, chunk_size=chunk, accum_dtype=accum)


def kernel_set(name):
    if name == "torch":
        return _TorchKernels()
    if name == "tinycuda":
        return _TinycudaKernels()
    raise ValueError(f"GPT: kernels must be 'tinycuda' or 'torch', got {name!r}")


# ---------------------------------------------------------------------------
# the model

class Block(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        c = cfg.n_embd
        self.n_head = cfg.n_head
        self.ln_1 = torch.nn.LayerNorm(c)
        self.attn = torch.nn.Module()
        self.attn.c_attn = torch.nn.Linear(c, 3 * c)
        self.attn.c_proj = torch.nn.Linear(c, c)
        self.ln_2 = torch.nn.LayerNorm(c)
        self.mlp = torch.nn.Module()
        self.mlp.c_fc = torch.nn.Linear(c, 4 * c)
        self.mlp.c_proj = torch.nn.Linear(4 * c, c)

    def forward(self, x, pending, K, cache=None, pos=0):
        """x + pending is the residual stream entering the block (pending: the last block's MLP output, not
        yet added, or None): each add goes into the LayerNorm after it. Returns (stream, the MLP's output)."""
        B, T, C = x.shape
        h, x = K.add_layer_norm(x, pending, self.ln_1)
        qkv = K.linear(h, self.attn.c_attn.weight, self.attn.c_attn.bias).view(B, T, 3, self.n_head, C // self.n_head)
        if cache is None:
            y = K.attention_packed(qkv)
        else:  # [B, context, H, D] each; positions pos.. are new
            q, k, v = qkv.unbind(2)
            cache[0][:, pos:pos + T] = k
            cache[1][:, pos:pos + T] = v
            y = K.attention(q, cache[0][:, :pos + T], cache[1][:, :pos + T])
        y = y.reshape(B, T, C)
        h, x = K.add_layer_norm(x, K.linear(y, self.attn.c_proj.weight, self.attn.c_proj.bias), self.ln_2)
        h = K.linear_gelu(h, self.mlp.c_fc.weight, self.mlp.c_fc.bias)
        return x, K.linear(h, self.mlp.c_proj.weight, self.mlp.c_proj.bias)


class GPT(torch.nn.Module):
    def __init__(self, cfg, kernels="tinycuda"):
        super().__init__()
        self.cfg = cfg
        self.kernels = kernel_set(kernels)
        self.transformer = torch.nn.Module()
        self.transformer.wte = torch.nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.transformer.wpe = torch.nn.Embedding(cfg.context, cfg.n_embd)
        self.transformer.h = torch.nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.transformer.ln_f = torch.nn.LayerNorm(cfg.n_embd)
        self.lm_head = torch.nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tied
        # the position ids, made once (not a torch.arange kernel a step); not in the state_dict
        self.register_buffer("positions", torch.arange(cfg.context), persistent=False)
        # GPT-2's init: N(0, 0.02), the projections into the residual stream
        # scaled by 1/sqrt(2 n_layer), biases 0, LayerNorms 1 and 0
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * cfg.n_layer))
            elif name.endswith(".weight") and p.dim() == 2:
                torch.nn.init.normal_(p, 0.0, 0.02)
            elif name.endswith(".bias"):
                torch.nn.init.zeros_(p)

    def num_params(self):
        """Parameters without the position table (GPT-2's count: 124M for its preset)."""
        return sum(p.numel() for p in self.parameters()) - self.transformer.wpe.weight.numel()

    def _hidden(self, idx, caches=None, pos=0):
        K, t = self.kernels, self.transformer
        T = idx.shape[1]
        if pos + T > self.cfg.context:
            raise ValueError(f"GPT: positions up to {pos + T} exceed the context ({self.cfg.context})")
        x = K.add(K.embedding(idx, t.wte.weight), K.embedding(self.positions[pos:pos + T], t.wpe.weight))
        pending = None
        for i, block in enumerate(t.h):
            x, pending = block(x, pending, K, None if caches is None else caches[i], pos)
        return K.add_layer_norm(x, pending, t.ln_f)[0]

    def forward(self, idx, targets=None):
        """idx [B, T] int64 token ids. With targets [B, T]: the mean next-token
        loss (float32). Without: the logits of the last position [B, vocab]."""
        h = self._hidden(idx)
        if targets is None:
            return self.kernels.linear(h[:, -1], self.lm_head.weight)
        return self.kernels.loss(h.reshape(-1, h.shape[-1]), self.lm_head.weight, targets.reshape(-1))

    def new_cache(self, batch, dtype=None, device=None):
        """Per layer, (k, v) [batch, context, heads, head_dim] for decode()."""
        p = self.lm_head.weight
        shape = (batch, self.cfg.context, self.cfg.n_head, self.cfg.n_embd // self.cfg.n_head)
        kw = dict(dtype=dtype or p.dtype, device=device or p.device)
        return [(torch.empty(shape, **kw), torch.empty(shape, **kw)) for _ in range(self.cfg.n_layer)]

    @torch.no_grad()
    def decode(self, idx, cache, pos):
        """Logits [B, vocab] of the last of positions pos .. pos + T - 1 (idx
        [B, T]), whose keys and values join the cache. The prompt goes in whole
        at pos = 0, then one token a call."""
        if pos and idx.shape[1] != 1:
            raise ValueError("GPT.decode: after the prompt (pos > 0) one token a call")
        h = self._hidden(idx, cache, pos)
        return self.kernels.linear(h[:, -1], self.lm_head.weight)
