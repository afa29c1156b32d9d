"""What the op table (tinycuda/optable.py: embedding) does not cover: the
weight gradient exact and bit-identical run to run under heavy collisions,
the errors naming the position, the CUDA device-side assert, the workspace
query, and tinycuda.nn.Embedding as a drop-in for torch.nn.Embedding."""
import pytest
import torch
import torch.nn.functional as F

import tinycuda
import tinycuda.nn
from conftest import assert_device_assert, requires_cuda

T = torch.ops.tinycuda


def _ids(n, v, device, same=False):
    return torch.full((n,), v // 2, device=device) if same else torch.randint(0, v, (n,), device=device)


# (positions, num_embeddings, embedding_dim, one id everywhere): on CUDA 8192 positions take the sort's radix
# passes (past its 4096-element block sort) and every id spans several chunks of 32 sorted positions (their
# partial sums carried); 70000 ids take int32 sort keys; D = 24 in 16-bit types is the scalar path (not a
# multiple of 8), 64 the vector one
COLLISIONS = [(8192, 50, 64, False), (8192, 50, 24, False), (3000, 7, 40, True), (4096, 70000, 8, False),
              (5000, 3, 1, False)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64],
                         ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("n,v,d,same", COLLISIONS)
def test_weight_gradient_is_exact_for_integer_gradients(device, dtype, n, v, d, same):
    """grad_out of -1, 0 and 1: every id's sum is an integer well inside the dtype's exact range, so any order of
    adds gives it exactly, and tinycuda's gradient equals torch's bit for bit, padding row (zero) included."""
    input = _ids(n, v, device, same)
    pad = int(input[1])  # an id that occurs
    weight = torch.randn(v, d, device=device, dtype=dtype, requires_grad=True)
    g = torch.randint(-1, 2, (n, d), device=device).to(dtype)
    for padding_idx in (None, pad):
        ours, = torch.autograd.grad(tinycuda.embedding(input, weight, padding_idx), weight, g)
        ref, = torch.autograd.grad(F.embedding(input, weight.double(), padding_idx), weight, g.double())
        assert torch.equal(ours, ref.to(dtype)), (ours.double() - ref).abs().max()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=lambda d: str(d)[6:])
def test_weight_gradient_is_bit_identical_run_to_run(device, dtype):
    """Random float gradients (whose sums round differently in every order) over heavy collisions: repeated
    backwards give the same bits (no float atomics; on CUDA a fixed order of chunks and partial sums)."""
    for n, v, d, same in COLLISIONS[:3]:
        input = _ids(n, v, device, same)
        g = torch.randn(n, d, device=device, dtype=dtype)
        first = T.embedding_backward(g, input, v, None)
        for _ in range(4):
            assert torch.equal(T.embedding_backward(g, input, v, None), first)
        w = torch.zeros(v, d, device=device, dtype=torch.float64, requires_grad=True)
        ref, = torch.autograd.grad(F.embedding(input, w), w, g.double())
        tol = 1e-5 if dtype == torch.float32 else 1e-2  # one rounding of sums of ~160 (3000) terms
        torch.testing.assert_close(first.double(), ref, rtol=tol, atol=tol * 3)


def test_out_of_range_names_the_position_in_the_flattened_input():
    w = torch.randn(6, 4)
    bad = torch.tensor([[[0, 1, 2], [3, 4, 5]], [[5, 4, 6], [0, 0, 0]]])  # the 6 is element 8 of the flattening
    with pytest.raises(RuntimeError, match=r"tinycuda::embedding: index 6 at position 8 of input \(flattened\) "
                                           r"is out of range \[0, num_embeddings = 6\)"):
        tinycuda.embedding(bad, w)
    with pytest.raises(RuntimeError, match=r"tinycuda::embedding_backward: index 6 at position 8 of input"):
        T.embedding_backward(torch.randn(2, 2, 3, 4), bad, 6)
    with pytest.raises(RuntimeError, match=r"tinycuda::embedding: index -7 at position 0"):
        tinycuda.embedding(torch.tensor(-7), w)  # a 0-dim input is position 0
    # F.embedding's positional signature: max_norm, norm_type, scale_grad_by_freq, sparse
    with pytest.raises(NotImplementedError, match=r"tinycuda::embedding: max_norm is not supported"):
        tinycuda.embedding(bad.clamp(max=5), w, None, 1.0)
    with pytest.raises(NotImplementedError, match=r"tinycuda::embedding: sparse=True is not supported"):
        tinycuda.embedding(bad.clamp(max=5), w, None, None, 2.0, False, True)


def test_capi_errors():
    from tinycuda import capi
    w = torch.randn(6, 4).numpy()
    with pytest.raises(capi.CapiError, match=r"index 9 at position 1 of input \(flattened\) is out of range"):
        capi.embedding(torch.tensor([0, 9]).numpy(), w)
    with pytest.raises(ValueError, match=r"tinycuda.capi.embedding: input must be a C-contiguous int64 cpu array"):
        capi.embedding(torch.tensor([0, 1]).int().numpy(), w)
    with pytest.raises(ValueError, match=r"capi.embedding_backward: padding_idx must be in .* = \[-6, 6\), got 6"):
        capi.embedding_backward(torch.randn(2, 4).numpy(), torch.tensor([0, 1]).numpy(), 6, 6)
    with pytest.raises(ValueError, match=r"grad_out must have shape input.shape \+ \(embedding_dim,\)"):
        capi.embedding_backward(torch.randn(3, 4).numpy(), torch.tensor([0, 1]).numpy(), 6)


def test_workspace_is_a_pure_function_of_the_sizes():
    """tc_embedding_backward_workspace_size answers without a device: none without indices; for GPT-2's 8 x 1024
    tokens, D 768: int16 keys and their sorted copy, int64 positions, the sort's scratch, 2 float partial rows a
    chunk of 32 positions (1.5 MB)."""
    from tinycuda import capi
    lib, ffi = capi.lib(), capi.ffi

    def size(n, v, d, dtype="TC_BFLOAT16"):
        p = ffi.new("tc_embedding_backward_params*")
        p.dtype, p.num_indices, p.num_embeddings, p.embedding_dim, p.padding_idx = getattr(lib, dtype), n, v, d, -1
        if n:
            p.input = p.grad_out = ffi.cast("void*", 256)  # never read: the query only checks they are set
        p.grad_weight = ffi.cast("void*", 256)
        return lib.tc_embedding_backward_workspace_size(p)

    n, v, d = 8192, 50304, 768
    partials = n // 32 * 2 * d * 4
    assert size(0, v, d) == 0 and size(n, v, 0) == 0
    assert n * (2 + 2 + 8) + partials <= size(n, v, d) < n * (2 + 2 + 8) + partials + 2**20
    assert size(n, v, d, "TC_FLOAT64") - size(n, v, d) == partials  # double partials
    assert size(n, 70000, d) > size(n, v, d)                          # int32 keys past 65535 ids


# ---------------------------------------------------------------------------
# CUDA: an index out of range is a device-side assert (the context is lost after it: a child process)

@requires_cuda
@pytest.mark.device_assert
def test_cuda_out_of_range_index_is_a_device_assert():
    assert_device_assert("embedding", "w = torch.randn(10, 8, device='cuda')",
                         "i = torch.tensor([[0, 3], [10, 1]], device='cuda')", "torch.ops.tinycuda.embedding(i, w)")


@requires_cuda
@pytest.mark.device_assert
def test_cuda_backward_out_of_range_index_is_a_device_assert():
    assert_device_assert("embedding_backward", "g = torch.randn(3, 8, device='cuda')",
                         "i = torch.tensor([0, -1, 2], device='cuda')",
                         "torch.ops.tinycuda.embedding_backward(g, i, 10)")


# ---------------------------------------------------------------------------
# tinycuda.nn.Embedding

def test_module_is_torchs_with_tinycuda_kernels(device):
    torch.manual_seed(0)
    ref = torch.nn.Embedding(50, 16, padding_idx=3, device=device)
    ours = tinycuda.nn.Embedding(50, 16, padding_idx=3, device=device)
    assert list(ours.state_dict()) == list(ref.state_dict()) == ["weight"]
    assert torch.equal(ours.weight[3], torch.zeros(16, device=device))  # torch's init zeroes the padding row
    assert repr(ours) == repr(ref)
    ours.load_state_dict(ref.state_dict())
    x = torch.randint(0, 50, (4, 7), device=device)
    x[0, 0] = 3
    y, r = ours(x), ref(x)
    assert torch.equal(y, r)
    g = torch.randn_like(r)
    y.backward(g)
    r.backward(g)
    torch.testing.assert_close(ours.weight.grad, ref.weight.grad, rtol=1e-6, atol=1e-6)
    assert torch.equal(ours.weight.grad[3], torch.zeros(16, device=device))
    # and back: torch's module loads ours
    ours2 = tinycuda.nn.Embedding(50, 16, device=device)
    ref2 = torch.nn.Embedding(50, 16, device=device)
    ref2.load_state_dict(ours2.state_dict())
    assert torch.equal(ref2(x), ours2(x))


def test_module_from_pretrained_and_negative_padding_idx():
    w = torch.randn(8, 5)
    ours = tinycuda.nn.Embedding.from_pretrained(w, padding_idx=-1)
    ref = torch.nn.Embedding.from_pretrained(w, padding_idx=-1)
    assert type(ours) is tinycuda.nn.Embedding and ours.padding_idx == ref.padding_idx == 7
    assert not ours.weight.requires_grad
    x = torch.tensor([7, 0, 7, 2])
    assert torch.equal(ours(x), ref(x))


def test_module_refuses_what_the_kernels_do_not_have():
    for kw, what in (({"max_norm": 1.0}, "max_norm"), ({"scale_grad_by_freq": True}, "scale_grad_by_freq"),
                     ({"sparse": True}, "sparse")):
        with pytest.raises(NotImplementedError, match=rf"tinycuda.nn.Embedding: {what}"):
            tinycuda.nn.Embedding(10, 4, **kw)


def test_module_compiles_fullgraph():
    """A GPT-2 style input embedding (token + position) under torch.compile(fullgraph=True): the fakes and the
    autograd formula trace, and the compiled forward and backward give eager's bits."""
    wte, wpe = tinycuda.nn.Embedding(100, 32), tinycuda.nn.Embedding(16, 32)

    def embed(idx):
        pos = torch.arange(idx.shape[1])
        return wte(idx) + wpe(pos)

    idx = torch.randint(0, 100, (3, 16))
    eager = embed(idx)
    g = torch.randn_like(eager)
    ge = torch.autograd.grad(eager, [wte.weight, wpe.weight], g)
    compiled = torch.compile(embed, fullgraph=True)(idx)
    gc = torch.autograd.grad(compiled, [wte.weight, wpe.weight], g)
    assert torch.equal(compiled, eager)
    for a, b in zip(gc, ge):
        assert torch.equal(a, b)
