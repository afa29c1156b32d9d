"""The scan family (cumsum, cumprod, logcumsumexp) beyond the op table (tests/test_ops.py): cumprod's gradient
at zeros, infinities and NaN, long rows (the CPU's chunks; CUDA's tiles chained by look-back, many rows of
them, warp rows at their limit, columns of odd widths) against float64, determinism, CUDA against the CPU,
the flags through torch.compile, the generated signatures, and the workspace query."""
import inspect
import math

import pytest
import torch

import tinycuda
from conftest import DTYPES, assert_matches, check_compiled, requires_cuda
from tinycuda.optable import SCAN, SCAN_FLAGS

pytestmark = pytest.mark.racecheck

OPS = tinycuda.ops.scan.__all__
inf, nan = math.inf, math.nan


def _flag_params(names=OPS):
    return [pytest.param(name, kw, id=name + "".join(f"-{k}" for k in kw) or name)
            for name in names for kw in SCAN_FLAGS]


def _run(fn, x, dim, grad_out, **kw):
    x = x.detach().requires_grad_()
    y = fn(x, dim, **kw)
    return y.detach(), torch.autograd.grad(y, x, grad_out)[0]


def _against_float64(name, x, dim, kw, normwise=None, **tol):
    """tinycuda's output and gradient on x against the reference's on x in float64 (NaN equal): elementwise
    (tol: assert_close's), or normwise: max |ours - ref| <= normwise * max |ref|, for long rows, whose gradients
    are sums of many terms of either sign (small results of large terms)."""
    g = torch.randn(x.shape, device=x.device).to(x.dtype)
    y, gx = _run(getattr(tinycuda, name), x, dim, g, **kw)
    ry, rgx = _run(SCAN[name].ref, x.double(), dim, g.double(), **kw)
    for what, ours, ref in (("output", y, ry), ("gradient", gx, rgx)):
        if normwise is None:
            torch.testing.assert_close(ours.double(), ref, equal_nan=True, **tol)
        else:
            finite = ref.isfinite()
            assert torch.equal(ours.isfinite(), finite), what
            err = (ours.double() - ref)[finite].abs().max().item()
            assert err <= normwise * ref[finite].abs().max().item(), (what, err, ref[finite].abs().max().item())


# ---------------------------------------------------------------------------
# cumprod's zeros, infinities, NaN

def _with_zeros(device, dtype):
    """Rows of factors near 1 holding no zero, one (first, inside, last) and two zeros."""
    x = (1 + 0.1 * torch.randn(6, 9, device=device)).to(dtype)
    x[1, 0] = x[2, 4] = x[3, 8] = x[4, 2] = x[4, 6] = x[5, 3] = x[5, 4] = 0
    return x


@pytest.mark.parametrize("kw", SCAN_FLAGS, ids=lambda kw: "".join(f"-{k}" for k in kw) or "inclusive")
def test_cumprod_gradient_at_zeros_is_torchs(device, kw):
    for dtype, tol in ((torch.float64, {}), (torch.float32, {"rtol": 1e-5, "atol": 1e-5})):
        for dim in (0, 1):
            _against_float64("cumprod", _with_zeros(device, dtype), dim, kw, **tol)


@pytest.mark.parametrize("kw", SCAN_FLAGS, ids=lambda kw: "".join(f"-{k}" for k in kw) or "inclusive")
def test_cumprod_gradcheck_at_zeros(kw):
    x = _with_zeros("cpu", torch.float64).requires_grad_()
    assert torch.autograd.gradcheck(lambda t: tinycuda.cumprod(t, 1, **kw), [x])


def test_cumprod_zeros_half(device):
    for dtype in (torch.float16, torch.bfloat16):
        x = _with_zeros(device, dtype).requires_grad_()
        g = torch.randn(x.shape, device=device).to(dtype)
        y = tinycuda.cumprod(x, 1)
        (gx,) = torch.autograd.grad(y, x, g)
        xr = x.detach().double().requires_grad_()
        yr = torch.cumprod(xr, 1)
        (gr,) = torch.autograd.grad(yr, xr, g.double())
        xl = x.detach().clone().requires_grad_()
        yl = torch.cumprod(xl, 1)
        (gl,) = torch.autograd.grad(yl, xl, g)
        assert_matches(y.detach(), yl.detach(), yr.detach())
        assert_matches(gx, gl, gr, grad=True)


@pytest.mark.parametrize("name,kw", _flag_params())
def test_infinities_and_nan(device, name, kw):
    """-inf, +inf and NaN in a row: the forward as torch's (NaN equal); logcumsumexp's all -inf prefix is -inf."""
    x = torch.tensor([[-inf, -inf, 1.0, 2.0], [0.5, inf, 1.0, -inf], [1.0, nan, -2.0, 3.0], [-inf] * 4],
                     device=device)
    torch.testing.assert_close(getattr(tinycuda, name)(x, 1, **kw), SCAN[name].ref(x, 1, **kw), equal_nan=True)


def test_logcumsumexp_exclusive_gradcheck():
    """An exclusive logcumsumexp starts at -inf (no finite differences there: test_ops skips it); the rest."""
    x = torch.randn(3, 7, dtype=torch.float64, requires_grad=True)
    for reverse in (False, True):
        first = 6 if reverse else 0
        assert torch.autograd.gradcheck(
            lambda t: tinycuda.logcumsumexp(t, 1, reverse=reverse, exclusive=True)[:, torch.arange(7) != first], [x])


def test_logcumsumexp_gradient_of_zero_and_negative_grads(device):
    """torch's formula splits grad_out by sign: zeros enter neither side, negatives the second."""
    x = torch.randn(4, 50, device=device, dtype=torch.float64)
    g = torch.randn(4, 50, device=device, dtype=torch.float64)
    g[:, ::3] = 0
    for kw in SCAN_FLAGS:
        _, gx = _run(tinycuda.logcumsumexp, x, 1, g, **kw)
        _, rgx = _run(SCAN["logcumsumexp"].ref, x, 1, g, **kw)
        torch.testing.assert_close(gx, rgx)


# ---------------------------------------------------------------------------
# long rows, the CUDA paths' edges

# (shape, dim): warp rows at their limit (2048) and the first tiled length; a row of several tiles (fp32: 4096
# elements a tile), 37 rows of 3 tiles (look-back within each row, rows interleaved), columns 2 and 3 wide, one
# long row past the CPU's 65536-element chunks
PATH_CASES = [((5, 2048), 1), ((5, 2049), 1), ((3, 4 * 4096 + 1), -1), ((37, 10000), 1), ((4000, 2), 0),
              ((3, 3001, 3), 1), ((150001,), 0)]


def _long_input(name, shape, device, dtype):
    return SCAN[name].input(shape, device, dtype)


def _tol(n):
    """float32 against float64 over rows of n, normwise: a running sum's error grows as n eps / 2 (CPU: one add
    after another) against sums of ~sqrt(n); a product's relative error as sqrt(n) eps."""
    return {"normwise": math.sqrt(n) * 1e-6}


def _path_params():
    """Every op and flag set on every path, but the longest row with the default flags only (CI time)."""
    return [pytest.param(*p.values, shape, dim, id=f"{p.id}-{shape}-{dim}")
            for shape, dim in PATH_CASES for p in _flag_params() if math.prod(shape) <= 100000 or not p.values[1]]


@pytest.mark.parametrize("name,kw,shape,dim", _path_params())
def test_paths_against_float64(device, name, kw, shape, dim):
    x = _long_input(name, shape, device, torch.float32)
    _against_float64(name, x, dim, kw, **_tol(shape[dim]))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).replace("torch.", ""))
@pytest.mark.parametrize("name", OPS)
def test_paths_half_within_torchs_error(device, dtype, name):
    """The tiled and column paths in every dtype: within the conftest rule of torch's own error."""
    for shape, dim in ((3, 9000), 1), ((9, 2, 5), 1):
        x = _long_input(name, shape, device, dtype)
        for kw in ({}, {"reverse": True, "exclusive": True}):
            y = getattr(tinycuda, name)(x, dim, **kw)
            assert_matches(y, SCAN[name].ref(x, dim, **kw), SCAN[name].ref(x.double(), dim, **kw),
                           rtol32=1e-4, atol32=2e-3)


@pytest.mark.parametrize("name,kw", _flag_params())
def test_float64_accumulates_in_float64(device, name, kw):
    """float64 in, float64 accumulation: the reference's values to ~1e-12, on each path."""
    for shape, dim in PATH_CASES[:-1]:
        x = _long_input(name, shape, device, torch.float64)
        _against_float64(name, x, dim, kw, normwise=1e-12)


@pytest.mark.parametrize("name,kw", _flag_params())
def test_deterministic(device, name, kw):
    """The same bits on every run (CUDA: whichever predecessor the look-back meets first)."""
    n = 3_000_000 if device == "cuda" else 200_000
    x = _long_input(name, (n,), device, torch.float32).requires_grad_()
    g = torch.randn(n, device=device)
    y0 = getattr(tinycuda, name)(x, 0, **kw)
    (g0,) = torch.autograd.grad(y0, x, g)
    for _ in range(2):
        y1 = getattr(tinycuda, name)(x, 0, **kw)
        (g1,) = torch.autograd.grad(y1, x, g)
        assert torch.equal(y0, y1) and torch.equal(g0, g1)


@requires_cuda
@pytest.mark.parametrize("name,kw", _flag_params())
def test_cuda_matches_cpu(name, kw):
    for shape, dim in PATH_CASES:
        x = _long_input(name, shape, "cuda", torch.float32)
        ours, ref = getattr(tinycuda, name)(x, dim, **kw).cpu(), getattr(tinycuda, name)(x.cpu(), dim, **kw)
        finite = ref.isfinite()
        assert torch.equal(ours.isfinite(), finite)
        assert (ours - ref)[finite].abs().max() <= _tol(shape[dim])["normwise"] * ref[finite].abs().max()


# ---------------------------------------------------------------------------
# the torch door: compile with flags, signatures, the op list; the C door's workspace query

@pytest.mark.compile
@pytest.mark.parametrize("name", OPS)
def test_compile_with_flags(device, name):
    x = SCAN[name].input((5, 33), device, torch.float32).requires_grad_()
    kw = {"reverse": True, "exclusive": True}
    g = torch.randn(5, 33, device=device)
    check_compiled(getattr(tinycuda, name), [x, 1], kw, wrt=[x], grad_out=g, reps=2, rtol=0, atol=0)


@pytest.mark.parametrize("name", OPS)
def test_signature(name):
    """torch's (x, dim), plus the keyword-only flags; the fake and the kernel agree on the result."""
    sig = inspect.signature(getattr(tinycuda, name))
    assert str(sig) == "(x, dim, *, reverse=False, exclusive=False)"
    x = torch.empty(3, 4, device="meta")
    assert getattr(tinycuda, name)(x, -1, reverse=True).shape == (3, 4)


def test_op_list_is_the_cores():
    assert OPS == ["cumsum", "cumprod", "logcumsumexp"]
    assert all(hasattr(torch.ops.tinycuda, n + "_backward") for n in OPS)


def test_workspace_only_for_tiled_rows():
    """tc_scan_workspace_size: 0 for columns and warp rows, the tile status for rows past 2048 (no device)."""
    from tinycuda import capi
    so, p = capi.lib(), capi.ffi.new("tc_scan_params*")
    p.dtype, p.op, p.x, p.y = so.TC_FLOAT32, so.TC_SCAN_CUMSUM, capi.ffi.cast("void*", 16), capi.ffi.cast("void*", 16)
    for (outer, n, inner), tiled in (((4, 100, 3), False), ((4, 2048, 1), False), ((4, 2049, 1), True),
                                     ((1, 2**28, 1), True)):
        p.outer, p.n, p.inner = outer, n, inner
        size = so.tc_scan_workspace_size(p)
        assert (size > 0) == tiled, (outer, n, inner, size)
        if tiled:  # a flag and two fp32 states a tile of 4096, in 256-byte pieces
            tiles = outer * -(-n // 4096)
            assert 12 * tiles <= size <= 12 * tiles + 1024
