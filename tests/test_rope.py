"""rope beyond the op table (tests/test_ops.py): the in-place variant, the
RotaryEmbedding module against Hugging Face's formulas written out here
(transformers is not a dependency), position ids against tables gathered by
hand, transposed views read without a copy, cos and sin getting no gradient,
and, on CUDA, an out-of-range position id stopping the kernel."""
import pytest
import torch

import tinycuda
from conftest import assert_device_assert, requires_cuda
from tinycuda.optable import _rope_args


# ---------------------------------------------------------------------------
# Hugging Face's formulas (transformers' llama modeling), written out

def hf_rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def hf_apply_rotary_pos_emb(q, k, cos, sin, position_ids=None, unsqueeze_dim=1):
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    return (q * cos) + (hf_rotate_half(q) * sin), (k * cos) + (hf_rotate_half(k) * sin)


def hf_rotary_cos_sin(x, position_ids, head_dim, base=10000.0):
    """LlamaRotaryEmbedding.forward (default rope type, attention_scaling 1): cos, sin [B, S, D] in x's dtype."""
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).to(device=x.device, dtype=torch.float)
                               / head_dim))
    inv_freq_expanded = inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
    position_ids_expanded = position_ids[:, None, :].float()
    freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype=x.dtype), emb.sin().to(dtype=x.dtype)


def rotate_every_two(x):
    return torch.stack((-x[..., 1::2], x[..., ::2]), -1).flatten(-2)


# ---------------------------------------------------------------------------

INPLACE_CASES = [  # (shape (B, S, Hq, Hk, D), cos table, unsqueeze_dim, layout, interleaved)
    ((2, 5, 4, 2, 64), "1S", 1, "contig", False),
    ((2, 7, 3, 1, 96), "ids-BS", 2, "contig", True),
    ((1, 4, 2, 2, 128), "BS", 1, "transposed", False),
    ((2, 3, 2, 1, 8), "S", 2, "strided", True),
    ((1, 6, 2, 1, 16), "ids-S", 1, "offset", False),
    ((0, 3, 2, 1, 8), "1S", 1, "contig", False),
]


@pytest.mark.parametrize("case", INPLACE_CASES, ids=lambda c: f"{c[1]}-dim{c[2]}-{c[3]}-{'il' if c[4] else 'half'}")
def test_inplace_equals_out_of_place(device, dtype, case):
    """rope_ writes rope's results over q and k (bit for bit, whatever their layout) and returns them."""
    shape, table, ud, layout, inter = case
    q, k, cos, sin, ids = _rope_args(shape, device, dtype, table, ud, layout)
    want = tinycuda.rope(q, k, cos, sin, ids, ud, inter)
    strides = q.stride(), k.stride()
    got = tinycuda.rope_(q, k, cos, sin, ids, ud, inter)
    assert got[0] is q and got[1] is k and (q.stride(), k.stride()) == strides
    torch.testing.assert_close(q, want[0], rtol=0, atol=0)
    torch.testing.assert_close(k, want[1], rtol=0, atol=0)


def test_inplace_under_no_grad_and_refused_with_grad(device):
    q, k, cos, sin, _ = _rope_args((1, 3, 2, 1, 8), device, torch.float32)
    q.requires_grad_()
    with pytest.raises(RuntimeError, match=r"tinycuda::rope_: q or k requires grad"):
        tinycuda.rope_(q, k, cos, sin)
    q2 = q.detach().clone()
    want = tinycuda.rope(q2, k, cos, sin)[0]
    tinycuda.rope_(q2, k.clone(), cos, sin)
    torch.testing.assert_close(q2, want, rtol=0, atol=0)


@pytest.mark.parametrize("unsqueeze_dim", (1, 2))
def test_position_ids_equal_tables_gathered_by_hand(device, unsqueeze_dim):
    """Token (b, s) reads row position_ids[b, s]: the same bits as cos[position_ids] passed as [B, S, D]."""
    b, s, d, p = 3, 7, 32, 20
    shape = lambda h: (b, h, s, d) if unsqueeze_dim == 1 else (b, s, h, d)  # noqa: E731
    q, k = torch.randn(shape(4), device=device), torch.randn(shape(2), device=device)
    cos, sin = torch.randn(p, d, device=device), torch.randn(p, d, device=device)
    for ids in (torch.randint(0, p, (b, s), device=device), torch.randint(0, p, (1, s), device=device),
                torch.randint(0, p, (s,), device=device)):
        for inter in (False, True):
            got = tinycuda.rope(q, k, cos, sin, ids, unsqueeze_dim, inter)
            gathered = cos[ids].expand(b, s, d) if ids.dim() == 2 else cos[ids]
            gathered_sin = sin[ids].expand(b, s, d) if ids.dim() == 2 else sin[ids]
            want = tinycuda.rope(q, k, gathered, gathered_sin, None, unsqueeze_dim, inter)
            for g, w in zip(got, want):
                torch.testing.assert_close(g, w, rtol=0, atol=0)
            # and the table form of cos ([1, P, D]) reads the same rows
            got3 = tinycuda.rope(q, k, cos[None], sin[None], ids, unsqueeze_dim, inter)
            for g, w in zip(got3, want):
                torch.testing.assert_close(g, w, rtol=0, atol=0)


@pytest.mark.parametrize("interleaved", (False, True))
def test_rotary_embedding_module_matches_hugging_face(device, interleaved):
    """RotaryEmbedding(q, k, position_ids) against LlamaRotaryEmbedding + apply_rotary_pos_emb (rotate half),
    or their interleaved analogue (repeat_interleave(2), rotate_every_two); the state_dict is empty."""
    b, s, hq, hk, d = 2, 9, 4, 2, 64
    mod = tinycuda.nn.RotaryEmbedding(d, max_position_embeddings=64, interleaved=interleaved, device=device)
    assert list(mod.state_dict()) == [] and "interleaved" in repr(mod)
    q = torch.randn(b, s, hq, d, device=device).transpose(1, 2)  # HF: a projection viewed and transposed
    k = torch.randn(b, s, hk, d, device=device).transpose(1, 2)
    position_ids = torch.stack([torch.arange(s), torch.arange(10, 10 + s)]).to(device)
    cos, sin = hf_rotary_cos_sin(q, position_ids, d)
    if interleaved:  # the same angles, each repeated in place: cat(freqs, freqs) -> repeat_interleave(2)
        half = d // 2
        cos, sin = (t[..., :half].repeat_interleave(2, -1) for t in (cos, sin))
        cs, sn = cos.unsqueeze(1), sin.unsqueeze(1)
        want = (q * cs + rotate_every_two(q) * sn, k * cs + rotate_every_two(k) * sn)
    else:
        want = hf_apply_rotary_pos_emb(q, k, cos, sin)
    got = mod(q, k, position_ids)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
    # no position ids: positions 0 .. S-1, one table row each
    cos0, sin0 = hf_rotary_cos_sin(q, torch.arange(s, device=device)[None], d)
    if not interleaved:
        for g, w in zip(mod(q, k), hf_apply_rotary_pos_emb(q, k, cos0, sin0)):
            torch.testing.assert_close(g, w)
    # half precision: the float32 tables cast to q's dtype, as HF casts cos and sin to x's
    mod16 = mod.to(torch.bfloat16)
    got16 = mod16(q.bfloat16(), k.bfloat16(), position_ids)
    for g, w in zip(got16, want):
        torch.testing.assert_close(g.float(), w, rtol=2e-2, atol=5e-2)


def test_rotary_embedding_rejects_odd_head_dim():
    with pytest.raises(ValueError, match=r"tinycuda.nn.RotaryEmbedding: head_dim must be even and > 0, got 7"):
        tinycuda.nn.RotaryEmbedding(7)


def test_cos_and_sin_get_no_gradient(device):
    q, k, cos, sin, _ = _rope_args((1, 3, 2, 1, 8), device, torch.float32)
    q.requires_grad_()
    cos.requires_grad_()
    with pytest.raises(RuntimeError, match=r"tinycuda::rope: cos and sin get no gradient"):
        tinycuda.rope(q, k, cos, sin)
    with torch.no_grad():  # no grad mode, no gradient: accepted
        tinycuda.rope(q, k, cos, sin)
    # the raw op (no check before the call) refuses in the backward, never a silent None
    out = torch.ops.tinycuda.rope(q, k, cos, sin)
    with pytest.raises(RuntimeError, match=r"tinycuda::rope: cos and sin get no gradient"):
        out[0].sum().backward()


def _copies(fn):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn()
    return [e.name for e in prof.events() if e.name in ("aten::copy_", "aten::clone", "aten::contiguous")]


def test_transposed_views_are_read_in_place():
    """A [B, S, H, D] projection transposed to [B, H, S, D] costs no copy; a strided head dim does."""
    q, k, cos, sin, _ = _rope_args((2, 5, 4, 2, 64), "cpu", torch.float32, "1S", 1, "transposed")
    assert not q.is_contiguous()
    assert _copies(lambda: tinycuda.rope(q, k, cos, sin)) == []
    qs, ks, *_ = _rope_args((2, 5, 4, 2, 64), "cpu", torch.float32, "1S", 1, "strided")
    assert _copies(lambda: tinycuda.rope(qs, ks, cos, sin))


@requires_cuda
@pytest.mark.device_assert
def test_cuda_out_of_range_position_id_is_a_device_assert():
    """CUDA cannot check ids without a synchronization: the kernel stops with a device-side assert naming the
    op, reported at the next synchronization. The context is lost after it, hence the subprocess."""
    assert_device_assert("rope", "q = torch.randn(1, 2, 3, 8, device='cuda')",
                         "cos = torch.randn(4, 8, device='cuda')", "ids = torch.tensor([0, 1, 4], device='cuda')",
                         "tinycuda.rope(q, q.clone(), cos, cos, ids)")


def test_capi_rope_in_place_and_errors():
    """The C ABI door: rope and rope_ on NumPy arrays give the torch op's bits; bad ids and shapes are named."""
    import numpy as np

    from tinycuda import capi
    q, k, cos, sin, ids = (t.numpy() for t in _rope_args((2, 5, 4, 2, 32), "cpu", torch.float32, "ids-BS"))
    want = torch.ops.tinycuda.rope(*(torch.from_numpy(t) for t in (q, k, cos, sin, ids)), 1, True)
    got = capi.rope(q, k, cos, sin, ids, 1, True)
    for g, w in zip(got, want):
        assert np.array_equal(g, w.numpy())
    q2, k2 = q.copy(), k.copy()
    assert all(a is b for a, b in zip(capi.rope_(q2, k2, cos, sin, ids, 1, True), (q2, k2)))
    assert np.array_equal(q2, got[0]) and np.array_equal(k2, got[1])
    bad = ids.copy()
    bad[1, 3] = cos.shape[0]
    with pytest.raises(capi.CapiError, match=r"tinycuda.capi.rope: .*position_ids\[1, 3\] = 8 is out of range"):
        capi.rope(q, k, cos, sin, bad)
    with pytest.raises(ValueError, match=r"tinycuda.capi.rope: cos must have shape \(S, D\), \(1, S, D\) or"):
        capi.rope(q, k, cos[:4], sin[:4])
    with pytest.raises(ValueError, match=r"tinycuda.capi.rope_backward: grad_q_out .* must share batch, seqlen"):
        capi.rope_backward(q, k[:, :, :3].copy(), cos[:5], sin[:5])
