"""The triangle family (triu, tril) beyond the op table (tests/test_ops.py): every dtype torch has (bool,
integers, complex: elements move by size), diagonals far past the matrix, views, each CUDA instance (16-byte
vectors whose rows are whole vectors, crossing the diagonal or not; words otherwise, 16-byte elements as two)
and a grid of many blocks, the C door in any dtype, and the generated signatures."""
import inspect

import pytest
import torch

import tinycuda
from conftest import requires_cuda

OPS = tinycuda.ops.triangle.__all__

DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16, torch.bfloat16,
          torch.float32, torch.float64, torch.complex64, torch.complex128]


def _random(shape, device, dtype):
    if dtype == torch.bool:
        return torch.rand(shape, device=device) > 0.5
    if dtype.is_complex or dtype.is_floating_point:
        return torch.randn(shape, device=device, dtype=dtype)
    return torch.randint(-100 if dtype != torch.uint8 else 0, 100, shape, device=device, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("name", OPS)
def test_every_dtype(device, name, dtype):
    """torch's bits in every dtype, on rows of 16-byte multiples (CUDA: vectors) and odd rows (words)."""
    for shape in ((6, 16), (3, 5, 7), (2, 33, 64)):
        x = _random(shape, device, dtype)
        for d in (0, 2, -3):
            assert torch.equal(getattr(tinycuda, name)(x, d), getattr(torch, name)(x, d)), (shape, d)


@pytest.mark.parametrize("name", OPS)
def test_diagonals_past_every_edge(device, name):
    """Any int64 diagonal: past the matrix a row keeps everything or nothing (no overflow at 2^63 - 1)."""
    x = torch.randn(4, 6, device=device)
    for d in (6, 7, -4, -5, 2**62, -(2**62), 2**63 - 1, -(2**63)):
        ref = getattr(torch, name)(x, max(-4, min(6, d)))  # the same as d there; torch's own i + d may overflow
        assert torch.equal(getattr(tinycuda, name)(x, d), ref), d


@pytest.mark.parametrize("name", OPS)
def test_views(device, name):
    """Batch dims permuted, a transposed matrix, a sliced one: a contiguous copy's result."""
    x = torch.randn(3, 4, 8, 9, device=device)
    for v in (x.permute(2, 0, 3, 1), x.transpose(-1, -2), x[:, 1:, 2:7, ::2]):
        assert torch.equal(getattr(tinycuda, name)(v, 1), getattr(torch, name)(v, 1))


# ---------------------------------------------------------------------------
# the CUDA instances, against the CPU

# (shape, dtype): 16-byte rows in every element size (bool 16 wide, fp16 8, fp32 4, fp64 2, complex128 1), one
# element off (words), a matrix of 2^24 fp32 (2^22 vectors: many blocks) and a batch of 2^21-byte matrices
CUDA_CASES = [((37, 16), torch.bool), ((37, 17), torch.bool), ((40, 24), torch.float16), ((40, 25), torch.float16),
              ((9, 4, 36), torch.float32), ((9, 4, 37), torch.float32), ((30, 30), torch.float64),
              ((31, 31), torch.float64), ((11, 13), torch.complex128), ((4096, 4096), torch.float32),
              ((3, 1024, 512), torch.int32)]


@requires_cuda
@pytest.mark.parametrize("shape,dtype", CUDA_CASES, ids=lambda v: str(v))
@pytest.mark.parametrize("name", OPS)
def test_cuda_instances_match_the_cpu(name, shape, dtype):
    x = _random(shape, "cuda", dtype)
    for d in (0, 1, -1, 5, -7, shape[-1] // 2):
        assert torch.equal(getattr(tinycuda, name)(x, d).cpu(), getattr(torch, name)(x.cpu(), d)), d
    flat = _random((x.numel() + 1,), "cuda", dtype)
    off = flat[1:].view(shape)  # one element past the 16-byte grid: words
    assert torch.equal(getattr(tinycuda, name)(off, 2).cpu(), getattr(torch, name)(off.cpu(), 2))


# ---------------------------------------------------------------------------
# the C door, the torch door's signatures and op list

@pytest.mark.capi
@pytest.mark.parametrize("name", OPS)
def test_capi_any_dtype(device, name):
    """Any dtype through the C door: NumPy arrays (bool, int16, complex128, a transposed view) on the CPU, and
    torch tensors (DLPack; on CUDA __cuda_array_interface__, whose "<i2" and "<c16" torch has no name for)."""
    import numpy as np
    from tinycuda import capi
    fn, ref = getattr(capi, name), getattr(torch, name)
    if device == "cpu":
        for dtype in (np.bool_, np.int16, np.complex128, np.float32):
            x = (np.random.default_rng(0).standard_normal((5, 7)) * 10).astype(dtype)
            for a in (x, x.T):
                assert np.array_equal(fn(a, -1), ref(torch.from_numpy(np.ascontiguousarray(a)), -1).numpy())
    for dtype in (torch.int8, torch.int16, torch.bool, torch.complex128, torch.bfloat16):
        t = _random((2, 5, 7), device, dtype)
        got = fn(t, 1)
        assert isinstance(got, torch.Tensor) and torch.equal(got, ref(t, 1)), dtype


@pytest.mark.parametrize("name", OPS)
def test_signature(name):
    """torch's (x, diagonal=0); the fake gives x's shape and dtype."""
    assert str(inspect.signature(getattr(tinycuda, name))) == "(x, diagonal=0)"
    x = torch.empty(2, 3, 4, device="meta", dtype=torch.int16)
    y = getattr(tinycuda, name)(x, 1)
    assert y.shape == (2, 3, 4) and y.dtype == torch.int16


def test_op_list_is_the_cores():
    assert OPS == ["triu", "tril"]
    assert not any(hasattr(torch.ops.tinycuda, n + "_backward") for n in OPS)
