"""flash_attention beyond the op table (tests/test_ops.py): the CUDA kernels'
kept variants over the issue's accuracy cases (head dims 64, 96, 128, 256;
sequence lengths 1 to 2049, equal and different; causal, GQA 8:1 and MQA,
windows, softcap; batch 1 and 4), the saved logsumexp, determinism, and the
refusals of the mma variant."""
import math

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from conftest import HAS_CUDA, check_op, requires_cuda
from tinycuda import ops, variants
from tinycuda.optable import _attention_ref

pytestmark = pytest.mark.racecheck

# (batch, seqlen_q, seqlen_k, heads_q, heads_kv, options)
CASES = [
    (1, 1, 1, 2, 2, {}),
    (4, 17, 17, 2, 1, {"causal": True}),
    (1, 113, 256, 8, 1, {"causal": True}),            # GQA 8:1
    (1, 256, 113, 2, 2, {"causal": True}),            # queries past the keys: rows that see nothing
    (2, 129, 200, 4, 2, {"softcap": 2.0, "window": (32, 32)}),
    (1, 1023, 1023, 1, 1, {"window": (100, 0)}),
    (1, 2049, 2049, 1, 1, {"causal": True}),
    (1, 300, 300, 3, 1, {}),                          # MQA, not causal
]


def _qkv(b, sq, sk, hq, hkv, d, device, dtype):
    return [torch.randn(shape, device=device).to(dtype) for shape in ((b, sq, hq, d), (b, sk, hkv, d), (b, sk, hkv, d))]


def _first(fn):
    return lambda *a, **kw: fn(*a, **kw)[0]


def _case_id(c):
    b, sq, sk, hq, hkv, kw = c
    return f"{b}-{sq}-{sk}-{hq}-{hkv}" + "".join(f"-{k}{v}" for k, v in kw.items())


@requires_cuda
@pytest.mark.parametrize("variant", variants.names("flash_attention"))
@pytest.mark.parametrize("head_dim", [64, 96, 128, 256])
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_flash_attention_cuda_variants(dtype, variant, head_dim, case):
    b, sq, sk, hq, hkv, kw = case
    q, k, v = _qkv(b, sq, sk, hq, hkv, head_dim, "cuda", dtype)
    left, right = kw.get("window", (-1, -1))
    args = dict(causal=kw.get("causal", False), softcap=kw.get("softcap", 0.0), window_left=left,
                window_right=right)
    fn = _first(variants.get("flash_attention", variant))
    if variant == "mma" and dtype == torch.float32:
        with pytest.raises(RuntimeError, match=r"tinycuda::flash_attention: .*mma"):
            fn(q, k, v, **args)
        return
    check_op(lambda q, k, v: fn(q, k, v, **args), lambda q, k, v: _attention_ref(q, k, v, **kw), [q, k, v],
             rtol32=1e-4, atol32=1e-4, grad_atol32=5e-4)


def _devices():
    return ["cpu"] + (["cuda"] if HAS_CUDA else [])


@pytest.mark.parametrize("device", _devices())
def test_flash_attention_lse(device, dtype):
    """The saved lse is log sum exp of the scaled, masked logits (float32, as
    FlashAttention's); +inf for a query that sees no key."""
    q, k, v = _qkv(2, 37, 20, 4, 2, 32, device, dtype)
    out, lse = torch.ops.tinycuda.flash_attention(q, k, v, True, 0.25)
    assert lse.dtype == torch.float32 and lse.shape == (2, 4, 37)
    s = torch.einsum("bihd,bjhd->bhij", q.double(), k.double().repeat_interleave(2, 2)) * 0.25
    i, j = torch.arange(37, device=device)[:, None] + 20 - 37, torch.arange(20, device=device)[None, :]
    ref = s.masked_fill(j > i, -math.inf).logsumexp(-1)
    seen = (i >= 0).squeeze(-1)  # rows 0..16 see no key (bottom-right alignment)
    assert torch.isinf(lse[:, :, ~seen]).all() and (lse[:, :, ~seen] > 0).all()
    assert (out[:, ~seen] == 0).all()
    torch.testing.assert_close(lse[:, :, seen].double(), ref[:, :, seen], rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("device", _devices())
def test_flash_attention_backward_is_deterministic(device):
    q, k, v = (t.requires_grad_() for t in _qkv(2, 150, 190, 8, 2, 64, device, torch.bfloat16))
    g = torch.randn(2, 150, 8, 64, device=device).bfloat16()
    grads = [torch.autograd.grad(ops.flash_attention(q, k, v, causal=True), (q, k, v), g) for _ in range(2)]
    for a, b in zip(*grads):
        assert torch.equal(a, b)


@requires_cuda
def test_flash_attention_mma_refusals():
    mma = variants.get("flash_attention", "mma")
    q, k, v = _qkv(1, 8, 8, 1, 1, 20, "cuda", torch.float16)
    with pytest.raises(RuntimeError, match=r"tinycuda::flash_attention: .*mma.*head_dim"):
        mma(q, k, v)
    q, k, v = _qkv(1, 8, 8, 1, 1, 264, "cuda", torch.float16)
    with pytest.raises(RuntimeError, match=r"tinycuda::flash_attention: .*mma.*head_dim"):
        mma(q, k, v)
    flat = torch.randn(8 * 64 + 1, device="cuda").half()
    q = flat[1:].view(1, 8, 1, 64)  # 2 bytes past the 16-byte grid
    with pytest.raises(RuntimeError, match=r"tinycuda::flash_attention: .*mma.*align"):
        mma(q, q, q)
    # auto takes the naive kernel for both, and still matches
    check_op(ops.flash_attention, _attention_ref, [q, q.clone(), q.clone()], grad=False)


class _Record(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == "tinycuda":
            self.args = args
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("device", _devices())
def test_sdpa_reads_bhsd_in_place(device):
    """torch's [B, H, S, D] layout reaches the op as a transposed view (the
    kernels read it through its strides): no copy of q, k or v."""
    q, k, v = (torch.randn(2, 4, 33, 16, device=device) for _ in range(3))
    with _Record() as rec:
        out = ops.scaled_dot_product_attention(q, k, v, is_causal=True)
    for given, t in zip(rec.args[:3], (q, k, v)):
        assert given.data_ptr() == t.data_ptr() and given.stride() == t.transpose(1, 2).stride()
    torch.testing.assert_close(out, torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True))
