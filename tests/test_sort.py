"""The sort family (sort, argsort, topk) beyond the op table (tests/test_ops.py): ties (stability) in every
dtype, the integers' and bool's extremes, NaN, infinities and -0.0 bit for bit, topk's ties at the k-th value,
the gradient's zeros, the CPU's selection pieces and radix passes, every CUDA path (block sort at each group
size, radix rows of a few tiles and of chunks of many, the radix select with its k sorted either way) against
torch and against the CPU, the device assert of a bad index, the C door's integer dtypes, and the workspace
query."""
import math

import numpy as np
import pytest
import torch

import tinycuda
from conftest import assert_device_assert, requires_cuda

pytestmark = pytest.mark.racecheck

INTS = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8]
ALL = [torch.float32, torch.float16, torch.bfloat16, torch.float64, *INTS, torch.bool]
inf, nan = math.inf, math.nan


def _id(dtype):
    return str(dtype).removeprefix("torch.")


def _with_ties(shape, device, dtype, distinct=8):
    """Values from `distinct` levels (both signs for the signed types): most elements tie with many others."""
    if dtype == torch.bool:
        return torch.rand(shape, device=device) < 0.5
    level = torch.randint(0, distinct, shape, device=device)
    if dtype == torch.uint8:
        return (level * 31).to(dtype)
    if dtype.is_floating_point:
        return ((level - distinct // 2) * 0.75).to(dtype)
    return (level - distinct // 2).to(dtype) * 3


def _bits(t):
    """A tensor's elements as integers of their width: equal bits, not merely equal values (-0.0 is not 0.0).
    Gather the bits, not the floats: torch 2.11's CPU gather of bfloat16 rewrites a NaN's payload."""
    if t.dtype == torch.bool:
        return t.to(torch.uint8)
    if not t.dtype.is_floating_point:
        return t
    return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def _assert_sorted_like_torch(x, dim=-1, descending=False, device=None):
    """tinycuda.sort and argsort of x: torch's stable sort bit for bit (values and indices)."""
    v, i = tinycuda.sort(x, dim, descending)
    rv, ri = torch.sort(x.cpu(), dim=dim, descending=descending, stable=True)
    assert torch.equal(i.cpu(), ri), (x.dtype, dim, descending)
    assert torch.equal(_bits(v.cpu()), _bits(x.cpu()).gather(dim, ri)), (x.dtype, dim, descending)
    assert torch.equal(_bits(v.cpu()), _bits(rv)) or x.dtype.is_floating_point  # torch's NaN bits may differ
    assert torch.equal(tinycuda.argsort(x, dim, descending).cpu(), ri)


def _assert_topk_like_torch(x, k, dim=-1, largest=True):
    """tinycuda.topk: torch.topk's values, and indices that are the first k of the stable sort."""
    v, i = tinycuda.topk(x, k, dim, largest)
    _, ri = torch.sort(x.cpu(), dim=dim, descending=largest, stable=True)
    ri = ri.narrow(dim, 0, k)
    assert torch.equal(i.cpu(), ri), (x.dtype, x.shape, k, dim, largest)
    assert torch.equal(_bits(v.cpu()), _bits(x.cpu()).gather(dim, ri))
    tv, _ = torch.topk(x.cpu(), k, dim, largest)
    torch.testing.assert_close(v.cpu(), tv, rtol=0, atol=0, equal_nan=True)


# ---------------------------------------------------------------------------
# order: ties, every dtype, extremes, NaN, infinities, -0.0

@pytest.mark.parametrize("dtype", ALL, ids=_id)
def test_ties_are_stable_in_every_dtype(device, dtype):
    """Rows full of ties along each dim, either direction: the indices of torch's stable sort."""
    x = _with_ties((6, 50), device, dtype)
    for dim in (0, 1):
        for descending in (False, True):
            _assert_sorted_like_torch(x, dim, descending)


@pytest.mark.parametrize("dtype", ALL[:-1], ids=_id)
def test_topk_ties_go_to_the_lower_index(device, dtype):
    """A k-th value that ties with others: the tied ones taken are those of lowest index."""
    x = _with_ties((5, 200), device, dtype, distinct=5)
    for k in (1, 37, 100, 199):
        for largest in (True, False):
            _assert_topk_like_torch(x, k, 1, largest)


@pytest.mark.parametrize("dtype", INTS + [torch.bool], ids=_id)
def test_integer_extremes(device, dtype):
    info = torch.iinfo(dtype) if dtype != torch.bool else None
    vals = [0, 1] if info is None else [info.min, info.max, 0, 1, info.min + 1, info.max - 1, 0, info.min]
    x = torch.tensor(vals * 3, device=device).to(dtype)
    for descending in (False, True):
        _assert_sorted_like_torch(x, 0, descending)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64], ids=_id)
def test_nan_inf_and_signed_zeros(device, dtype):
    """NaN last (descending: first), -inf and inf at their ends, -0.0 tied with 0.0 (their order kept), every
    value's bits kept (-0.0 stays -0.0); topk takes NaN as the largest, as torch."""
    x = torch.tensor([3.0, nan, -0.0, 0.0, -inf, inf, 1.0, -0.0, 0.0, nan, -2.5, -0.0], device=device).to(dtype)
    x = torch.stack([x, x.flip(0)])
    for descending in (False, True):
        _assert_sorted_like_torch(x, 1, descending)
    for k in (1, 3, 6, 12):
        for largest in (True, False):
            v, i = tinycuda.topk(x, k, 1, largest)
            _, ri = torch.sort(x.cpu(), dim=1, descending=largest, stable=True)
            assert torch.equal(i.cpu(), ri[:, :k])
            assert torch.equal(_bits(v.cpu()), _bits(x.cpu()).gather(1, ri[:, :k]))


def test_sort_of_every_float_bit_pattern():
    """Every float16 bit pattern (NaNs, infinities, subnormals, both zeros) in a shuffled row: torch's order."""
    x = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(torch.float16)
    x = x[torch.randperm(x.numel())]
    for descending in (False, True):
        v, i = tinycuda.sort(x, descending=descending)
        _, ri = torch.sort(x, descending=descending, stable=True)
        assert torch.equal(i, ri)
        assert torch.equal(_bits(v), _bits(x[ri]))


# ---------------------------------------------------------------------------
# the CPU's paths: insertion and radix rows, a pass skipped, the selection's pieces

@pytest.mark.parametrize("n", [1, 31, 32, 33, 1000, 70000])
def test_cpu_row_lengths(n):
    """Insertion sort up to 32 elements, radix sort past it (70000: split across threads), descending too."""
    for dtype in (torch.float32, torch.int16):
        x = _with_ties((3, n), "cpu", dtype, distinct=n // 3 + 2)
        _assert_sorted_like_torch(x, 1, n % 2 == 0)


def test_cpu_radix_skips_bytes_all_keys_share():
    """int64 of small magnitude, one sign: six of the eight key bytes are one digit for every key."""
    x = torch.randint(0, 1000, (4, 3000), dtype=torch.int64)
    _assert_sorted_like_torch(x, 1)
    _assert_sorted_like_torch(-x, 1, True)


def test_cpu_topk_selection_in_pieces():
    """A row long enough to be cut across threads (4k <= n): each piece's k least, then theirs; with ties at the
    k-th value across the pieces' boundary."""
    x = _with_ties((1, 600000), "cpu", torch.int32, distinct=50)
    for largest in (True, False):
        _, ri = torch.sort(x, dim=1, descending=largest, stable=True)
        for k in (1, 10, 5000, 150000):
            v, i = tinycuda.topk(x, k, 1, largest)
            assert torch.equal(i, ri[:, :k]) and torch.equal(v, x.gather(1, ri[:, :k])), (k, largest)


# ---------------------------------------------------------------------------
# the gradient

def test_topk_gradient_is_zero_off_the_selection(device):
    x = torch.randn(4, 300, device=device, requires_grad=True)
    v, i = tinycuda.topk(x, 7, 1)
    g = torch.randn_like(v)
    (gx,) = torch.autograd.grad(v, x, g)
    ref = torch.zeros_like(x).scatter(1, i, g)
    assert torch.equal(gx, ref)
    assert (gx != 0).sum() == 4 * 7


def test_sort_gradient_along_a_middle_dim(device):
    x = torch.randn(3, 40, 5, device=device, dtype=torch.float64, requires_grad=True)
    v, i = tinycuda.sort(x, 1, True)
    g = torch.randn_like(v)
    (gx,) = torch.autograd.grad(v, x, g)
    assert torch.equal(gx, torch.zeros_like(x).scatter(1, i, g))


def test_integer_sort_has_no_gradient(device):
    v, i = tinycuda.sort(torch.arange(5, device=device).flip(0))
    assert not v.requires_grad and not i.requires_grad and v.dtype == torch.int64


# ---------------------------------------------------------------------------
# CUDA: every path, against torch and the CPU

def _against_cpu(x, k=None, dim=-1, descending=False):
    """The CUDA kernels' results equal the CPU kernels' bit for bit (both the first k of one stable sort) and
    torch's stable sort."""
    if k is None:
        out = tinycuda.sort(x, dim, descending)
        ref = tinycuda.sort(x.cpu(), dim, descending)
        assert torch.equal(tinycuda.argsort(x, dim, descending).cpu(), ref[1])
    else:
        out, ref = tinycuda.topk(x, k, dim, descending), tinycuda.topk(x.cpu(), k, dim, descending)
    assert torch.equal(out[1].cpu(), ref[1]), (x.shape, x.dtype, k, descending)
    assert torch.equal(_bits(out[0].cpu()), _bits(ref[0])), (x.shape, x.dtype, k, descending)
    _, ri = torch.sort(x.cpu(), dim=dim, descending=descending, stable=True)
    assert torch.equal(ref[1], ri if k is None else ri.narrow(dim, 0, k))


# the block sort's group sizes: a warp and 4 items (n <= 128), a warp and 16 (<= 512), 4 warps (<= 2048), 8 warps
# (<= 4096), each at its edges; many short rows (4 rows a block of one-warp groups, a grid-stride loop)
BLOCK_CASES = [(3, 1), (5, 2), (9, 127), (9, 128), (9, 129), (7, 512), (7, 513), (5, 2047), (5, 2048), (3, 2049),
               (3, 4095), (3, 4096), (20000, 24)]


@requires_cuda
@pytest.mark.parametrize("rows,n", BLOCK_CASES, ids=[f"{r}x{n}" for r, n in BLOCK_CASES])
def test_cuda_block_sort(rows, n):
    for dtype in (torch.float32, torch.float16, torch.int8, torch.float64):
        x = _with_ties((rows, n), "cuda", dtype, distinct=max(2, n // 4))
        for descending in (False, True):
            _against_cpu(x, None, 1, descending)
    _against_cpu(torch.randn(rows, n, device="cuda"), min(n, 5), 1, True)


# the radix sort: rows of 2 tiles (4097, 5000), 37 rows of 5 tiles, and one row of 257 tiles (> 256 chunks:
# chunks of 2 tiles, a block carrying its offsets across them); every key width (1, 2, 4, 8 bytes: 1 pass, first
# and last at once, to 8), argsort (no values: buffer B in the workspace), topk with 2k > n (the first k)
RADIX_CASES = [(3, 4097), (2, 5000), (37, 20000), (1, 256 * 4096 + 1)]


@requires_cuda
@pytest.mark.parametrize("rows,n", RADIX_CASES, ids=[f"{r}x{n}" for r, n in RADIX_CASES])
def test_cuda_radix_sort(rows, n):
    dtypes = (torch.float32, torch.bfloat16, torch.int8, torch.float64, torch.bool) if n < 100000 else (
        torch.float32, torch.int8)
    for dtype in dtypes:
        x = _with_ties((rows, n), "cuda", dtype, distinct=n // 7)
        _against_cpu(x, None, 1, dtype != torch.bfloat16)
    x = torch.randn(rows, n, device="cuda")
    _against_cpu(x, n - n // 3, 1, True)
    _against_cpu(x.t().contiguous().t(), None, 1, False)  # a strided view: copied contiguous first


# the radix select: k = 1, 10, 1000 (its k by the block sort) and 5000 (by the radix sort), one row and several;
# keys tied at the k-th value (a few levels), where the first ones by index are taken
SELECT_CASES = [(1, 2**20 + 3), (3, 30000)]


@requires_cuda
@pytest.mark.parametrize("rows,n", SELECT_CASES, ids=[f"{r}x{n}" for r, n in SELECT_CASES])
def test_cuda_topk_select(rows, n):
    for dtype in (torch.float32, torch.float16, torch.int64, torch.uint8):
        for x in (torch.randn(rows, n, device="cuda").to(dtype) if dtype.is_floating_point else
                  torch.randint(-100, 100, (rows, n), device="cuda").to(dtype),
                  _with_ties((rows, n), "cuda", dtype, distinct=6)):
            for k in (1, 10, 1000, 5000):
                for largest in (True, False):
                    _against_cpu(x, k, 1, largest)


@requires_cuda
def test_cuda_topk_select_bench_shape():
    """The bench's rows of 32768 with k = 10 and 1000, on distinct and on tied values."""
    x = torch.randn(64, 32768, device="cuda")
    for k in (10, 1000):
        _against_cpu(x, k, 1, True)
        _against_cpu(x.round(), k, 1, False)


@requires_cuda
def test_cuda_results_repeat_bit_for_bit():
    x = torch.randn(1, 3 * 2**20, device="cuda").half()
    a, b = tinycuda.sort(x, 1), tinycuda.sort(x, 1)
    assert torch.equal(a[1], b[1]) and torch.equal(_bits(a[0]), _bits(b[0]))


@requires_cuda
def test_cuda_sort_backward_of_each_path():
    for rows, n, k in ((5, 300, 300), (2, 5000, 5000), (1, 2**20, 10), (2, 6000, 4000)):
        x = torch.randn(rows, n, device="cuda", requires_grad=True)
        v, i = tinycuda.topk(x, k, 1, False)
        g = torch.randn_like(v)
        (gx,) = torch.autograd.grad(v, x, g)
        assert torch.equal(gx, torch.zeros_like(x).scatter(1, i, g))


@requires_cuda
@pytest.mark.device_assert
def test_cuda_out_of_range_index_is_a_device_assert():
    """CUDA cannot check the indices without a synchronization: a device-side assert naming the op, as torch's.
    The context is lost after it, hence the subprocess."""
    assert_device_assert("sort_backward", "g = torch.randn(2, 3, device='cuda')",
                         "i = torch.tensor([[0, 1, 2], [0, 7, 1]], device='cuda')",
                         "torch.ops.tinycuda.sort_backward(g, i, 1, 4)")


# ---------------------------------------------------------------------------
# the C door, the workspace query, the signatures

@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.bool_, np.float64],
                         ids=lambda d: np.dtype(d).name)
def test_capi_every_dtype(dtype):
    """capi.sort, argsort, topk on NumPy arrays of each dtype, along each dim: the torch op's bits."""
    from tinycuda import capi
    x = _with_ties((4, 9, 6), "cpu", torch.float64 if dtype == np.float64 else torch.int16, 10).numpy().astype(dtype)
    t = torch.from_numpy(x)
    for dim in (0, 1, -1):
        v, i = capi.sort(x, dim, True)
        rv, ri = torch.ops.tinycuda.sort(t, dim, True)
        assert np.array_equal(v, rv.numpy()) and np.array_equal(i, ri.numpy())
        assert np.array_equal(capi.argsort(x, dim), torch.ops.tinycuda.argsort(t, dim).numpy())
        if dtype != np.bool_:
            v, i = capi.topk(x, 3, dim, False)
            rv, ri = torch.ops.tinycuda.topk(t, 3, dim, False)
            assert np.array_equal(v, rv.numpy()) and np.array_equal(i, ri.numpy())
    if dtype == np.bool_:
        with pytest.raises(TypeError, match=r"tinycuda.capi.topk: x must not be bool"):
            capi.topk(x, 1)


def test_capi_outputs_passed_in_and_errors():
    from tinycuda import capi
    x = np.random.randn(5, 7).astype(np.float32)
    values, indices = np.empty((3, 7), np.float32), np.empty((3, 7), np.int64)
    v, i = capi.topk(x, 3, 0, values=values, indices=indices)
    rv, ri = torch.ops.tinycuda.topk(torch.from_numpy(x), 3, 0)
    assert v is values and i is indices and np.array_equal(v, rv.numpy()) and np.array_equal(i, ri.numpy())
    with pytest.raises(ValueError, match=r"tinycuda.capi.topk: k must be in \[0, 7\] \(the size of dim 1\), got 8"):
        capi.topk(x, 8)
    with pytest.raises(ValueError, match=r"tinycuda.capi.sort: dim 2 is out of range for a tensor of 2 dims"):
        capi.sort(x, 2)
    with pytest.raises(capi.CapiError, match=r"indices\[1\] = 9 is out of range \[0, 7\)"):
        capi.sort_backward(np.ones((1, 2), np.float32), np.array([[0, 9]]), 1, 7)


def test_workspace_query_is_a_pure_function_of_the_params():
    """None for the block sort; the radix sort's buffers (one fewer when the outputs hold B); the select's."""
    from tinycuda import capi
    so = capi.lib()
    p = capi.ffi.new("tc_sort_params*")
    p.dtype, p.x, p.indices = so.TC_FLOAT32, capi.ffi.cast("void*", 16), capi.ffi.cast("int64_t*", 16)

    def size(rows, n, k, values=True):
        p.rows, p.n, p.k = rows, n, k
        p.values = capi.ffi.cast("void*", 16) if values else capi.ffi.NULL
        return so.tc_sort_workspace_size(p)

    assert size(1000, 4096, 4096) == 0 and size(1000, 4096, 3) == 0
    sort, argsort = size(1, 2**20, 2**20), size(1, 2**20, 2**20, False)
    assert sort >= 2**20 * 8 and argsort >= sort + 2**20 * 8
    assert 0 < size(1, 2**20, 10) < sort  # the select: histograms, counts and k gathered pairs
    assert size(1, 2**20, 10) == size(1, 2**20, 10)
    p.k = 5
    p.n = 4
    assert so.tc_sort_workspace_size(p) == 0  # a bad call: 0, its error from the entry point


def test_signatures_and_result_types():
    """torch's argument order, defaults and keyword-only stable; torch's named results (values, indices)."""
    import inspect
    assert str(inspect.signature(tinycuda.sort)) == "(x, dim=-1, descending=False, *, stable=False)"
    assert str(inspect.signature(tinycuda.argsort)) == "(x, dim=-1, descending=False, *, stable=False)"
    assert str(inspect.signature(tinycuda.topk)) == "(x, k, dim=-1, largest=True, sorted=True)"
    out = tinycuda.sort(torch.tensor([2.0, 1.0]))
    assert isinstance(out, torch.return_types.sort) and torch.equal(out.indices, torch.tensor([1, 0]))
    assert isinstance(tinycuda.topk(torch.tensor([2.0, 1.0]), 1), torch.return_types.topk)
