"""The transpose family (permute_copy, transpose_copy, contiguous) beyond the op table (tests/test_ops.py):
every dtype, bit for bit (integers, bool, float64, complex: a copy moves bytes); contiguous's strides and
memory formats as torch's; the CPU's threaded paths; on CUDA every kernel path (the tile per element size,
packed and one element a unit, edge tiles, batches; the row copy in each unit width, short rows, gathers,
broadcasts, misaligned views; more than 2^31 elements) and the kept variants (naive, shared, padded); the C
door on arrays of any dtype and strides."""
import numpy as np
import pytest
import torch

import tinycuda
from conftest import requires_cuda
from tinycuda import capi, variants

pytestmark = pytest.mark.racecheck

# one dtype of each element size, and the rest of the kinds
DTYPES = [torch.uint8, torch.bool, torch.int8, torch.int16, torch.float16, torch.bfloat16, torch.int32, torch.float32,
          torch.int64, torch.float64, torch.complex64, torch.complex128]


def _id(dtype):
    return str(dtype).replace("torch.", "")


def _random(shape, dtype, device):
    """Fresh values of any dtype, every bit pattern of the integers' range (bool: 0 and 1)."""
    if dtype == torch.bool:
        return torch.rand(shape, device=device) < 0.5
    if dtype.is_complex:
        return torch.randn(shape, dtype=dtype, device=device)
    if dtype.is_floating_point:
        return torch.randn(shape, device=device).to(dtype)
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max, shape, dtype=dtype, device=device)


def _same(ours, ref):
    assert ours.shape == ref.shape and ours.dtype == ref.dtype and ours.is_contiguous()
    assert torch.equal(ours.view(torch.uint8) if ours.dtype == torch.bool else ours,
                       ref.view(torch.uint8) if ref.dtype == torch.bool else ref)


def _check(x, dims):
    _same(tinycuda.permute_copy(x, dims), x.permute(dims).contiguous())


# ---------------------------------------------------------------------------
# every dtype, bit for bit

DTYPE_CASES = [((5, 33), [1, 0]), ((64, 128), [1, 0]), ((3, 4, 5), [2, 0, 1]), ((2, 5, 3, 8), [0, 2, 1, 3]),
               ((7,), [0])]


@pytest.mark.parametrize("dtype", DTYPES, ids=_id)
def test_every_dtype_bit_for_bit(device, dtype):
    for shape, dims in DTYPE_CASES:
        x = _random(shape, dtype, device)
        _check(x, dims)
        _check(x.transpose(0, -1), dims)  # a view read in place
        _same(tinycuda.transpose_copy(x, 0, -1), torch.transpose_copy(x, 0, -1))


def test_nan_payloads_and_negative_zero_are_copied_bits(device):
    bits = np.array([0x7FC00001, 0x7F800001, 0xFFC12345, 0x80000000, 0x00000001], dtype=np.uint32)
    x = torch.from_numpy(bits.view(np.float32)).to(device).reshape(5, 1).expand(5, 3)
    ours = tinycuda.transpose_copy(x, 0, 1)
    assert torch.equal(ours.view(torch.int32), x.t().contiguous().view(torch.int32))


def test_many_dims(device):
    """Unit dims step nowhere (dropped before the core's 8 dims); an empty tensor has nothing to move."""
    x = torch.randn((2, 1, 3, 1, 2, 1, 3, 1, 2, 1, 2), device=device)
    _check(x, list(range(11))[::-1])
    _check(x.squeeze().unsqueeze(0).transpose(0, 3), [3, 1, 0, 2, 4, 5, 6])
    empty = torch.empty((0,) + (2,) * 9, device=device)
    _same(tinycuda.permute_copy(empty, list(range(10))[::-1]), empty.permute(*range(9, -1, -1)).contiguous())


# ---------------------------------------------------------------------------
# contiguous

def test_contiguous_is_torchs(device):
    x = torch.randn(6, 7, device=device)
    assert tinycuda.contiguous(x) is x
    nchw = torch.randn(2, 3, 4, 5, device=device)
    for v, fmt in ((x.t(), torch.contiguous_format), (x[:, ::2], torch.contiguous_format),
                   (nchw, torch.channels_last), (nchw.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2),
                                                 torch.contiguous_format),
                   (torch.randn(2, 3, 4, 5, 6, device=device), torch.channels_last_3d),
                   (torch.randn(2, 1, 3, 3, device=device), torch.channels_last)):  # already channels_last: itself
        ours, ref = tinycuda.contiguous(v, fmt), v.contiguous(memory_format=fmt)
        assert ours.stride() == ref.stride() and torch.equal(ours, ref)
        assert (ours is v) == (ref is v)


def test_contiguous_channels_last_gradient(device):
    x = torch.randn(2, 3, 4, 5, device=device, requires_grad=True)
    g = torch.randn(2, 3, 4, 5, device=device).contiguous(memory_format=torch.channels_last)
    (ours,) = torch.autograd.grad(tinycuda.contiguous(x, torch.channels_last), x, g)
    assert torch.equal(ours, g)


# ---------------------------------------------------------------------------
# the CPU's threaded paths (past ~1 MB) and edge blocks

@pytest.mark.parametrize("dtype", [torch.float32, torch.uint8, torch.complex128], ids=_id)
def test_cpu_threads_and_edge_blocks(dtype):
    x = _random((1000, 1100), dtype, "cpu")
    _check(x, [1, 0])                         # tiles: whole squares, and edge blocks on both sides
    _check(x[3:, 1:], [1, 0])                 # tiles of a slice
    _check(x.view(10, 100, 1100), [1, 0, 2])  # rows
    _check(x[:, ::3], [1, 0])                 # no dim of x stride 1: rows gathered 3300 apart
    _check(x[:, ::3], [0, 1])                 # rows gathered 3 apart
    _check(x.view(10, 100, 1100).permute(0, 2, 1), [2, 0, 1])  # tiles over a batch


def test_variants_are_ignored_on_the_cpu():
    x = torch.randn(33, 65)
    for v in variants.names("transpose_copy"):
        _same(variants.call("transpose_copy", v, x, 0, 1), x.t().contiguous())
    y = torch.randn(3, 4, 5)  # no 2-D layout: still copied
    _same(torch.ops.tinycuda.permute_copy(y, [2, 0, 1], algo=1), y.permute(2, 0, 1).contiguous())


# ---------------------------------------------------------------------------
# CUDA: every kernel path

def _offset(x):
    """x's values one element past an aligned start (off the 16-byte grid)."""
    flat = torch.empty(x.numel() + 1, dtype=x.dtype, device=x.device)
    flat[1:] = x.reshape(-1)
    return flat[1:].view(x.shape)


# (shape, dims, view): tiles whose sizes are multiples of every unit (256 x 384: packed for each element size;
# 264 x 136: packed with edge tiles), of 2 only (130 x 66) and of none (129 x 65: one element a unit), a tile
# with 3 rows or columns; batches before, between and after the tile dims; [B, S, H, D] -> [B, H, S, D] with
# rows of 256 B (16-byte units), of 16 B (a row a unit: a block takes 254 rows) and of 36 B (4-byte units);
# rows of a slice (x off the 16-byte grid: narrower units), of a broadcast (x stride 0) and gathers (no dim
# of x stride 1), a misaligned tile, empty dims; 4096 x 4096: thousands of tiles
CUDA_CASES = [((256, 384), [1, 0], None), ((264, 136), [1, 0], None), ((130, 66), [1, 0], None),
              ((129, 65), [1, 0], None), ((4096, 3), [1, 0], None), ((3, 4096), [1, 0], None),
              ((5, 96, 160), [0, 2, 1], None), ((96, 5, 160), [2, 1, 0], None), ((40, 48, 24), [1, 2, 0], None),
              ((2, 64, 8, 128), [0, 2, 1, 3], None), ((64, 33, 16, 4), [0, 2, 1, 3], None),
              ((3, 7, 5, 9), [0, 2, 1, 3], None), ((2, 64, 8, 128), [0, 3, 1, 2], None),
              ((2, 3, 4, 5, 6, 7), [5, 3, 1, 0, 2, 4], None), ((6, 1000), [0, 1], "slice"),
              ((64, 1000), [1, 0], "broadcast_rows"), ((64, 1000), [0, 1], "broadcast_inner"),
              ((300, 200), [0, 1], "gather"), ((300, 200), [1, 0], "gather"), ((264, 136), [1, 0], "offset"),
              ((0, 64), [1, 0], None), ((64, 0, 3), [2, 1, 0], None), ((4096, 4096), [1, 0], None)]


def _cuda_input(shape, dtype, how):
    if how == "slice":
        return _random((shape[0], shape[1] + 2), dtype, "cuda")[:, 1:-1]
    if how == "broadcast_rows":
        return _random((1, shape[1]), dtype, "cuda").expand(shape)
    if how == "broadcast_inner":
        return _random((shape[0], 1), dtype, "cuda").expand(shape)
    if how == "gather":
        return _random((2 * shape[0], 3 * shape[1]), dtype, "cuda")[::2, ::3]
    x = _random(shape, dtype, "cuda")
    return _offset(x) if how == "offset" else x


def _case_id(case):
    shape, dims, how = case
    return "x".join(map(str, shape)) + "-" + ".".join(map(str, dims)) + (f"-{how}" if how else "")


@requires_cuda
@pytest.mark.parametrize("case", CUDA_CASES, ids=_case_id)
@pytest.mark.parametrize("dtype", [torch.uint8, torch.float16, torch.bfloat16, torch.float32, torch.float64,
                                   torch.complex128], ids=_id)
def test_cuda_paths(dtype, case):
    shape, dims, how = case
    x = _cuda_input(shape, dtype, how)
    ours = tinycuda.permute_copy(x, dims)
    _same(ours, x.permute(dims).contiguous())
    _same(ours.cpu(), tinycuda.permute_copy(x.cpu(), dims))


@requires_cuda
@pytest.mark.parametrize("variant", variants.names("transpose_copy"))
@pytest.mark.parametrize("dtype", [torch.uint8, torch.float16, torch.float32, torch.float64, torch.complex128], ids=_id)
@pytest.mark.parametrize("shape", [(5, 33), (64, 64), (100, 257), (1024, 1000)], ids=lambda s: "x".join(map(str, s)))
def test_cuda_variants(variant, dtype, shape):
    x = _random(shape, dtype, "cuda")
    _same(variants.call("transpose_copy", variant, x, 0, 1), x.t().contiguous())
    if dtype.is_floating_point:  # autograd through a variant: the same kernel transposes the gradient back
        leaf = x.detach().requires_grad_()
        g = torch.randn(shape[::-1], device="cuda").to(dtype)
        (gx,) = torch.autograd.grad(variants.call("transpose_copy", variant, leaf, 0, 1), leaf, g)
        _same(gx, g.t().contiguous())


@requires_cuda
def test_cuda_variants_take_2d_transposes_only():
    x = torch.randn(4, 6, 8, device="cuda")
    for variant in variants.names("transpose_copy"):
        with pytest.raises(RuntimeError, match=r"tinycuda::transpose_copy: permute_copy: algo \d \(\w+\) takes a "
                                               r"2-D transpose"):
            variants.call("transpose_copy", variant, x, 0, 2)


@requires_cuda
@pytest.mark.large
def test_cuda_more_than_2_to_the_31_elements():
    """2^31 + 2^16 bytes transposed: int64 offsets in the tile kernel and its grid; and copied as rows."""
    x = torch.randint(0, 255, (2**16 + 2, 2**15), dtype=torch.uint8, device="cuda")
    ours = tinycuda.transpose_copy(x, 0, 1)
    assert torch.equal(ours, x.t().contiguous())
    del ours
    ours = tinycuda.permute_copy(x.view(2, 2**15 + 1, 2**15), [1, 0, 2])
    assert torch.equal(ours, x.view(2, 2**15 + 1, 2**15).permute(1, 0, 2).contiguous())


# ---------------------------------------------------------------------------
# the C door

CAPI_DTYPES = [np.uint8, np.bool_, np.int16, np.float16, np.int32, np.float32, np.int64, np.float64, np.complex64,
               np.complex128]


@pytest.mark.capi
@pytest.mark.parametrize("dtype", CAPI_DTYPES, ids=lambda d: np.dtype(d).name)
def test_capi_any_dtype_and_strides(dtype):
    a = (np.random.default_rng(0).standard_normal((6, 35, 20)) * 100).astype(dtype)
    for view, dims in ((a, [2, 0, 1]), (a[:, ::2, 1:], [1, 2, 0]), (a[::-1, :, ::-3], [2, 1, 0]),
                       (a.transpose(2, 0, 1), [0, 1, 2]), (a[0], [1, 0])):
        ours = capi.permute_copy(view, dims)
        assert ours.flags.c_contiguous and ours.dtype == view.dtype
        assert np.array_equal(ours, np.transpose(view, dims))
    assert np.array_equal(capi.transpose_copy(a, 0, -1), np.swapaxes(a, 0, -1))
    assert capi.contiguous(a) is a and np.array_equal(capi.contiguous(a[:, ::-1]), a[:, ::-1])


@pytest.mark.capi
def test_capi_bfloat16_and_out():
    x = torch.randn(9, 70, dtype=torch.bfloat16)
    _same(capi.transpose_copy(x, 0, 1), x.t().contiguous())  # a CPU torch tensor through DLPack
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    out = np.empty((4, 3), dtype=np.int32)
    assert capi.permute_copy(a, [1, 0], out=out) is out and np.array_equal(out, a.T)
    with pytest.raises(ValueError, match=r"tinycuda.capi.permute_copy: dims repeats a dim"):
        capi.permute_copy(a, [0, 0])
    with pytest.raises(ValueError, match=r"tinycuda.capi.transpose_copy: dim1 2 is out of range"):
        capi.transpose_copy(a, 0, 2)
    p = capi.ffi.new("tc_permute_copy_params*", dict(itemsize=3, ndim=1))
    assert capi.lib().tc_permute_copy_cpu(p) == capi.lib().TC_ERR_INVALID_ARGUMENT
    assert b"itemsize must be 1, 2, 4, 8 or 16, got 3" in capi.ffi.string(capi.lib().tc_last_error())
