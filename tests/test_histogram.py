"""The histogram family (histc, bincount) beyond the op table (tests/test_ops.py): float64, torch's bins on edge
values bit for bit, no gradient (as torch's), determinism, each CUDA path against the CPU (shared-memory
sub-histograms up to their limit and global atomics past it, many blocks, 16-byte and misaligned loads; weighted
sums in one range of bins and several), torch.compile with bincount's data-dependent length, and the workspace
queries."""
import math

import pytest
import torch

import tinycuda
from conftest import check_compiled, requires_cuda, run_child
from tinycuda.optable import view

pytestmark = pytest.mark.racecheck

# shared/histogram_plan.h: counts in shared memory up to 48 KB / 4 B bins, past it uint64 atomics in global
# memory; weighted sums a warp's histogram of 48 KB / 4 warps, so 3072 float32 or 1536 float64 bins a range
COUNT_SHARED_MAX = 12288
WEIGHT_RANGE = {torch.float32: 3072, torch.float64: 1536}


def _histc_ref(x, *args):
    return torch.histc(x.cpu(), *args).to(x.device)


# ---------------------------------------------------------------------------
# histc

def test_histc_float64(device):
    """float64 x: torch's float64 bins, exactly (data range, a given one, values on every edge)."""
    x = torch.randn(5000, device=device, dtype=torch.float64)
    edges = torch.linspace(-2, 2, 41, device=device, dtype=torch.float64)
    for args in ((), (40, -2, 2), (7, -1.0, 0.5), (1,)):
        for t in (x, edges):
            torch.testing.assert_close(tinycuda.histc(t, *args), _histc_ref(t, *args), rtol=0, atol=0)


def _neighbours(e):
    """e and the floats one step below and above each element (its bits -1 and +1)."""
    ints = {2: torch.int16, 4: torch.int32, 8: torch.int64}[e.element_size()]
    bits = e.view(ints)
    return torch.cat([e, (bits - 1).view(e.dtype), (bits + 1).view(e.dtype)])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_histc_edges_are_torchs(device, dtype):
    """Every bin edge of a range, and the floats a step either side of it, land in torch's bins: torch's float32
    kernel (for 16-bit x, whose values and range it holds exactly: the kernels round the range to x's dtype)."""
    for bins, lo, hi in ((10, -1.0, 1.0), (37, -3.3, 2.9), (256, -4.0, 4.0), (3, 0.1, 0.7)):
        lo, hi = (torch.tensor(v, dtype=dtype).item() for v in (lo, hi))
        x = _neighbours(torch.linspace(lo, hi, bins + 1, dtype=torch.float64).to(dtype))
        ref = torch.histc(x.float(), bins, lo, hi).to(dtype)
        torch.testing.assert_close(tinycuda.histc(x.to(device), bins, lo, hi).cpu(), ref, rtol=0, atol=0)


def test_histc_range_of_the_data(device):
    """min == max takes the data's range, a flat x is widened by 1 each way, an empty x counts nothing;
    infinities outside a given range count nowhere, NaN nowhere."""
    x = torch.tensor([3.0, -1.0, 2.0, 3.0, 0.5], device=device)
    torch.testing.assert_close(tinycuda.histc(x, 4), torch.tensor([1.0, 1.0, 0.0, 3.0], device=device))
    torch.testing.assert_close(tinycuda.histc(x, 4, 7, 7), tinycuda.histc(x, 4, -1, 3))
    torch.testing.assert_close(tinycuda.histc(torch.full((3,), 5.0, device=device), 2),
                               torch.tensor([0.0, 3.0], device=device))
    torch.testing.assert_close(tinycuda.histc(x[:0], 3), torch.zeros(3, device=device))
    y = torch.tensor([math.inf, -math.inf, math.nan, 0.0, 1.0], device=device)
    torch.testing.assert_close(tinycuda.histc(y, 2, 0, 1), torch.tensor([1.0, 1.0], device=device))
    with pytest.raises(RuntimeError, match=r"tinycuda::histc: range of \[-inf, 1\] is not finite"):
        tinycuda.histc(y[[1, 4]], 3)


def test_histc_has_no_gradient(device):
    """As torch.histc: the result of an x that requires grad does not (no grad_fn)."""
    x = torch.randn(50, device=device, requires_grad=True)
    out = tinycuda.histc(x, 5)
    assert not out.requires_grad and out.grad_fn is None
    assert not torch.histc(x, 5).requires_grad


# ---------------------------------------------------------------------------
# bincount

def test_bincount_weights_dtypes(device):
    """torch's result dtype: int64 counts; float32 weights sum in float32; float16, bfloat16, float64, integer
    and bool weights in float64."""
    x = torch.randint(0, 9, (300,), device=device)
    for w in (None, *(torch.randn(300, device=device).to(dt) for dt in
                      (torch.float32, torch.float16, torch.bfloat16, torch.float64)),
              torch.randint(-3, 4, (300,), device=device), torch.rand(300, device=device) > 0.5):
        ours, ref = tinycuda.bincount(x, w), torch.bincount(x, w)
        assert ours.dtype == ref.dtype
        torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-5)


def test_bincount_has_no_gradient(device):
    """As torch.bincount: backpropagating into the weights raises."""
    w = torch.randn(10, device=device, requires_grad=True)
    out = tinycuda.bincount(torch.arange(10, device=device) % 3, w)
    with pytest.raises(RuntimeError):
        out.sum().backward()
    assert w.grad is None


def test_bincount_deterministic(device):
    """Weighted sums in a fixed order: the same bits every run."""
    n = 3_000_000 if device == "cuda" else 300_000
    x = torch.randint(0, 1000, (n,), device=device)
    w = torch.randn(n, device=device)
    first = tinycuda.bincount(x, w)
    for _ in range(2):
        assert torch.equal(tinycuda.bincount(x, w), first)


@pytest.mark.compile
def test_bincount_compiles_with_its_data_dependent_length(device):
    """The fake's length is a dynamic size: no graph break, and the ops after it see the real length."""
    x = torch.randint(0, 50, (1000,), device=device)
    w = torch.randn(1000, device=device)
    check_compiled(lambda x, w: tinycuda.bincount(x, w, 10) * 2 + 1, [x, w], reps=2, rtol=0, atol=0)
    check_compiled(lambda x: tinycuda.bincount(x[:0], None, 4), [x], reps=2, rtol=0, atol=0)


# ---------------------------------------------------------------------------
# the CUDA paths, against the CPU

# (n, bins): one block; many blocks (rows: 4096 elements at least a block); 256 bins (8 sub-histograms);
# the largest shared-memory histogram (1 sub-histogram) and one bin past it (global atomics)
COUNT_CASES = [(1000, 1), (3_000_001, 37), (2_000_003, 256), (1_000_000, COUNT_SHARED_MAX),
               (1_000_000, COUNT_SHARED_MAX + 1)]


@requires_cuda
@pytest.mark.parametrize("n,bins", COUNT_CASES, ids=lambda v: str(v))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64], ids=str)
def test_histc_cuda_paths_match_the_cpu(n, bins, dtype):
    """Counts are exact on both devices: equal, on 16-byte loads and on a misaligned view (scalar loads)."""
    x = (torch.randn(n + 1, device="cuda") * 2).to(dtype)
    for t in (x[:n], x[1:]):
        assert torch.equal(tinycuda.histc(t, bins, -3, 3).cpu(), tinycuda.histc(t.cpu(), bins, -3, 3))
    assert torch.equal(tinycuda.histc(x, bins).cpu(), tinycuda.histc(x.cpu(), bins))


@requires_cuda
@pytest.mark.parametrize("n,bins", COUNT_CASES, ids=lambda v: str(v))
def test_bincount_counts_cuda_paths_match_the_cpu(n, bins):
    x = torch.randint(0, bins, (n + 1,), device="cuda")
    for t in (x[:n], x[1:], view(x, "strided")):
        assert torch.equal(tinycuda.bincount(t).cpu(), torch.bincount(t.cpu()))


@requires_cuda
@pytest.mark.parametrize("wdtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("ranges", [1, 2, 7])
def test_bincount_weights_cuda_paths(wdtype, ranges):
    """One range of bins (a block holds them all), its limit, and several ranges (x read once a range); many
    blocks; weights off the 16-byte grid. Against float64 sums, to float32's accumulation error."""
    bins = WEIGHT_RANGE[wdtype] * ranges - (ranges > 1)
    for n in (5000, 2_000_001):
        x = torch.randint(0, bins, (n + 1,), device="cuda")
        w = torch.randn(n + 1, device="cuda", dtype=wdtype)
        for xs, ws in ((x[:n], w[:n]), (x[1:], w[1:])):
            ours = tinycuda.bincount(xs, ws)
            ref = torch.bincount(xs.cpu(), ws.cpu().double())
            assert ours.dtype == wdtype and ours.shape == ref.shape
            tol = 1e-12 if wdtype == torch.float64 else 1e-6 * math.sqrt(n / bins + 1)
            torch.testing.assert_close(ours.cpu().double(), ref, rtol=tol, atol=tol)


@requires_cuda
def test_bincount_cuda_minlength_and_empty():
    x = torch.randint(0, 5, (100,), device="cuda")
    for args in ((None, 20), (None, 2), (torch.randn(100, device="cuda"), 20)):
        torch.testing.assert_close(tinycuda.bincount(x, *args), torch.bincount(x, *args))
    torch.testing.assert_close(tinycuda.bincount(x[:0], None, 6), torch.zeros(6, dtype=torch.long, device="cuda"))


@requires_cuda
@pytest.mark.device_assert
def test_cuda_value_past_bins_is_a_device_assert():
    """Through the C door (the torch door sizes bins from the data), a value past bins: CUDA cannot check it
    without a sync, so the kernel stops with a device-side assert naming the op; the context is lost after it,
    hence the subprocess."""
    code = "\n".join([
        "import torch",
        "from tinycuda import capi",
        "so, ffi = capi.lib(), capi.ffi",
        "x, out = torch.tensor([0, 1, 7], device='cuda'), torch.empty(4, dtype=torch.long, device='cuda')",
        "p = ffi.new('tc_bincount_params*')",
        "p.n, p.bins, p.x, p.out = 3, 4, ffi.cast('int64_t*', x.data_ptr()), ffi.cast('void*', out.data_ptr())",
        "ws = torch.empty(so.tc_bincount_workspace_size(p), dtype=torch.uint8, device='cuda')",
        "p.workspace, p.workspace_bytes = ffi.cast('void*', ws.data_ptr()), ws.numel()",
        "p.stream = ffi.cast('void*', torch.cuda.current_stream().cuda_stream)",
        "assert so.tc_bincount_cuda(p) == 0",
        "torch.cuda.synchronize()",
        "print('no error')",
    ])
    r = run_child(code)
    assert r.returncode != 0 and "no error" not in r.stdout, (r.stdout, r.stderr)
    assert "tinycuda::bincount: x holds a value outside [0, bins)" in r.stderr + r.stdout, (r.stdout, r.stderr)


def test_cpu_value_past_bins_is_named():
    """The CPU names the first bad element (the C door: bins is the caller's)."""
    import numpy as np
    from tinycuda import capi
    so, ffi = capi.lib(), capi.ffi
    x, out = np.array([0, 1, 7, 2], dtype=np.int64), np.empty(4, dtype=np.int64)
    p = ffi.new("tc_bincount_params*")
    p.n, p.bins, p.x, p.out = 4, 4, ffi.cast("int64_t*", x.ctypes.data), ffi.cast("void*", out.ctypes.data)
    assert so.tc_bincount_cpu(p) == so.TC_ERR_INVALID_ARGUMENT
    assert capi.ffi.string(so.tc_last_error()).decode() == "bincount: x[2] = 7 is not below bins (4)"


# ---------------------------------------------------------------------------
# the C door's workspace queries

def test_workspace_queries_need_no_device():
    """Pure functions of the params: rows of partials for shared-memory counts, [bins] uint64 past them; rows
    of partial sums for weights; 16 bytes a block for the range pass."""
    from tinycuda import capi
    so, ffi = capi.lib(), capi.ffi
    some = ffi.cast("void*", 16)
    h = ffi.new("tc_histc_params*")
    h.dtype, h.n, h.min, h.max, h.x, h.out = so.TC_FLOAT32, 2**28, -1.0, 1.0, some, some
    h.bins = 256
    assert so.tc_histc_workspace_size(h) == 2048 * 256 * 4  # the most rows: 2048
    h.bins = COUNT_SHARED_MAX + 1
    assert so.tc_histc_workspace_size(h) == (COUNT_SHARED_MAX + 1) * 8
    h.n = 0
    assert so.tc_histc_workspace_size(h) == 0
    b = ffi.new("tc_bincount_params*")
    b.dtype, b.n, b.bins, b.x, b.out, b.weights = so.TC_FLOAT64, 100_000, 1000, ffi.cast("int64_t*", 16), some, some
    assert so.tc_bincount_workspace_size(b) == 25 * 1000 * 8  # a block takes 4096 elements at least: 25 rows
    r = ffi.new("tc_histogram_range_params*")
    r.x_int64, r.n, r.x, r.out = 1, 2**28, some, some
    assert so.tc_histogram_range_workspace_size(r) == 1024 * 16


def test_capi_bincount_integer_dtypes_and_range():
    """The C door converts x (int32, uint8) to int64 and non-float32 weights to float64, as the torch door."""
    import numpy as np
    from tinycuda import capi
    x = np.array([3, 0, 3, 7], dtype=np.int32)
    assert capi.bincount(x).tolist() == [1, 0, 0, 2, 0, 0, 0, 1]
    got = capi.bincount(x.astype(np.uint8), np.array([1, 2, 3, 4], dtype=np.float16), 10)
    assert got.dtype == np.float64 and got.tolist() == [2, 0, 0, 4, 0, 0, 0, 4, 0, 0]
    assert capi.histc(np.array([1.0, 2.0, 5.0], dtype=np.float32), 4).tolist() == [1, 1, 0, 1]
