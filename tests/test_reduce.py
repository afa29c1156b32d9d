"""The reduce family (mean ... min) beyond the op table (tests/test_ops.py): NaN and infinities, empty
slices, ties (argmax's and max's first index, amax's gradient split evenly, max's to one element), var and
std with no degrees of freedom left, prod's zeros, determinism, more than 8 dims, the forms dim takes, 0-dim
tensors, the generated signatures against torch's, long slices across the CPU's chunks and the CUDA split,
the column layout and permuted views, max's and min's every CUDA kernel path and the backward's bad index.
max and min return (values, indices): the helpers compare every output."""
import inspect
import math
import warnings

import pytest
import torch

import tinycuda
from conftest import assert_device_assert, outputs, requires_cuda
from tinycuda.optable import REDUCE

pytestmark = pytest.mark.racecheck

OPS = tinycuda.ops.reduce.__all__
GRAD_OPS = [name for name in OPS if hasattr(torch.ops.tinycuda, name + "_backward")]
INDEX_OPS = [name for name in OPS if name not in GRAD_OPS]  # argmax, argmin: int64 results
PAIR_OPS = [name for name in OPS if len(getattr(torch.ops.tinycuda, name).default._schema.returns) == 2]
inf, nan = math.inf, math.nan


def _ref(name):
    return REDUCE[name].ref


def _variants(names=OPS):
    return [pytest.param(name, kw, id=name + "".join(f"-{k}={v}" for k, v in kw.items()))
            for name in names for kw in REDUCE[name].kwargs]


def _detached(out):
    """out's tensor, or the tuple of max's (values, indices), without their graph."""
    return tuple(o.detach() for o in out) if isinstance(out, tuple) else out.detach()


def _equal(a, b):
    """The same bits in every output."""
    return all(torch.equal(p, q) for p, q in zip(outputs(a), outputs(b), strict=True))


def _run(fn, x, *args, grad_out=None, **kwargs):
    """fn's output (max's: a tuple of values and indices), and x's gradient for grad_out (ones by default) of the
    first output, where fn has one."""
    x = x.detach().requires_grad_(x.is_floating_point())
    out = fn(x, *args, **kwargs)
    y = outputs(out)[0]
    if not y.requires_grad:
        return _detached(out), None
    g = torch.ones_like(y) if grad_out is None else grad_out
    gx = torch.autograd.grad(y, x, g, allow_unused=True)[0]  # torch's ord-0 norm: no graph back to x
    return _detached(out), torch.zeros_like(x) if gx is None else gx


def _same_as_torch(name, x, *args, exact=False, grad=True, **kwargs):
    """tinycuda.<name> and torch's on x: the same output and gradient (NaN equal; bits where `exact`)."""
    tol = {"rtol": 0, "atol": 0} if exact else {}
    with warnings.catch_warnings():  # torch's var warns of no degrees of freedom left
        warnings.simplefilter("ignore")
        y, gx = _run(getattr(tinycuda, name), x, *args, **kwargs)
        ry, rgx = _run(_ref(name), x, *args, **kwargs)
    torch.testing.assert_close(y, ry, equal_nan=True, **tol)
    if grad and rgx is not None:
        torch.testing.assert_close(gx, rgx, equal_nan=True, **tol)
    return y, gx


# ---------------------------------------------------------------------------
# NaN, infinities, empty slices, ties

def test_amax_amin_propagate_nan(device, dtype):
    """A NaN anywhere in a slice makes its amax and amin NaN, wherever it sits, as torch's."""
    x = torch.tensor([[1.0, nan, 3.0], [2.0, 5.0, -1.0], [nan, nan, 0.0], [-inf, 4.0, nan]], device=device).to(dtype)
    for name in ("amax", "amin"):
        for dim in (0, 1, [], (0, 1)):
            _same_as_torch(name, x, dim, exact=True, grad=False)
    assert torch.isnan(tinycuda.amax(x, 1)[[0, 2, 3]]).all() and tinycuda.amax(x, 1)[1] == 5


@pytest.mark.parametrize("name,kw", _variants(GRAD_OPS))
def test_gradient_through_nan_is_torchs(device, name, kw):
    """A slice holding a NaN (and one holding +-inf) gets torch's gradient, NaN where torch's is NaN and a number
    where torch's is one (torch's amax: NaN over the whole slice, 0 / 0; its ord-1 norm: 0 at the NaN); the
    slices without one are unaffected."""
    x = torch.tensor([[1.0, nan, -3.0, 0.5], [2.0, 5.0, -1.0, 0.5], [inf, -2.0, 1.0, 0.5]], device=device)
    _same_as_torch(name, x, dim=1, **kw)


def test_logsumexp_infinities_and_empty(device):
    """+inf anywhere makes +inf (with -inf or another +inf beside it too), all -inf makes -inf, NaN makes NaN, an
    empty slice -inf; the gradient is torch's (e^(x - y): 0 at -inf beside finite values)."""
    x = torch.tensor([[inf, 1.0, 2.0], [-inf, -inf, -inf], [inf, inf, 0.0], [inf, -inf, 0.0], [nan, 1.0, 2.0],
                      [inf, nan, 0.0], [-inf, 0.0, 1.0], [1.0, 2.0, -inf]], device=device)
    y, gx = _same_as_torch("logsumexp", x, 1)
    assert y[:4].tolist() == [inf, -inf, inf, inf] and torch.isnan(y[4:6]).all()
    assert gx[6, 0] == 0 and gx[7, 2] == 0
    _same_as_torch("logsumexp", x, 0, grad=False)
    for shape, dim in (((3, 0), 1), ((0,), 0), ((2, 0, 3), (1, 2))):
        y = tinycuda.logsumexp(torch.empty(shape, device=device), dim)
        assert y.numel() and (y == -inf).all()
        _same_as_torch("logsumexp", torch.empty(shape, device=device), dim)


def test_mean_and_var_of_an_empty_slice_are_nan(device):
    """0 / 0, as torch's: mean, var and std of an empty slice; vector_norm's is 0, as torch's, but for ord=+-inf,
    which has no identity: an error, as torch's ("does not have an identity")."""
    x = torch.empty(3, 0, device=device)
    for name in ("mean", "var", "std"):
        y, _ = _same_as_torch(name, x, 1)
        assert y.shape == (3,) and torch.isnan(y).all()
    for kw in REDUCE["vector_norm"].kwargs:
        if kw.get("ord") not in (inf, -inf):
            y, _ = _same_as_torch("vector_norm", x, dim=1, **kw)
            assert (y == 0).all()
    for o in (inf, -inf):
        with pytest.raises(RuntimeError, match="does not have an identity"):
            torch.linalg.vector_norm(x, o, 1)
        with pytest.raises(RuntimeError, match=r"tinycuda::vector_norm: cannot reduce an empty slice"):
            tinycuda.vector_norm(x, o, 1)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_nan_and_ties(device, dtype, name):
    """NaN counts as the largest and the smallest (its first occurrence wins); among equal values the first index
    wins, over one dim, every dim (the row-major index), and a stride-0 view."""
    f = getattr(tinycuda, name)
    x = torch.tensor([[1.0, nan, 3.0, nan], [3.0, -1.0, 3.0, -1.0], [2.0, 2.0, 2.0, 2.0]], device=device).to(dtype)
    assert f(x, 1).tolist() == [1, 0 if name == "argmax" else 1, 0]
    assert f(x).item() == 1 and f(x[1:]).item() == (0 if name == "argmax" else 1)
    assert f(x, 0).tolist() == ([1, 0, 0, 0] if name == "argmax" else [0, 0, 2, 0])
    for dim in (None, 0, 1, -1):
        for keepdim in (False, True):
            _same_as_torch(name, x, dim, keepdim, exact=True)
    e = torch.full((5, 1), 1.5, device=device, dtype=dtype).expand(5, 33)
    assert (f(e, 1) == 0).all() and f(e).item() == 0


# torch's CPU answers, the contract on every device (torch's CUDA kernel may pick another element among
# ties): torch.max([1, 3, 3, 0], 0) = (3, 1), the first; a NaN is the max and the min, at the first NaN
_PAIR_X = [[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0], [nan, 1.0, nan, 5.0], [1.0, nan, 3.0, nan],
           [-inf, -inf, -inf, -inf], [inf, 1.0, inf, -inf], [-0.0, 0.0, -0.0, 0.0], [0.0, -0.0, -1.0, -1.0]]


def _torch_cpu(name, x, *args, grad_out=None, **kwargs):
    """torch's result and gradient on the CPU (the contract on ties), moved to x's device."""
    y, gx = _run(_ref(name), x.cpu(), *args, grad_out=None if grad_out is None else grad_out.cpu(), **kwargs)
    return tuple(o.to(x.device) for o in y), gx.to(x.device)


@pytest.mark.parametrize("dt", [torch.float32, torch.float16, torch.bfloat16, torch.float64],
                         ids=lambda d: str(d).replace("torch.", ""))
@pytest.mark.parametrize("name", PAIR_OPS)
def test_max_min_ties_nan_infinities(device, dt, name):
    """The first extreme on ties (-0.0 and 0.0 tie: the first, its sign kept), NaN the max and the min at its first
    occurrence, +-inf, each dtype: torch's CPU values (bits), indices and gradient (g at the index alone), over
    each dim, negative dims, keepdim both ways."""
    x = torch.tensor(_PAIR_X, device=device).to(dt)
    y = getattr(tinycuda, name)(x, 1)
    want = [1, 0, 0, 1, 0, 0, 0, 0] if name == "max" else [3, 0, 0, 1, 0, 3, 0, 2]
    assert y.indices.tolist() == want
    assert torch.isnan(y.values[2:4]).all() and y.values[0] == (3.0 if name == "max" else 0.0)
    assert math.copysign(1, y.values[6].item()) == -1  # -0.0, the first of the tie
    for dim in (0, 1, -1, -2):
        for keepdim in (False, True):
            g = torch.randn(x.shape[1 - dim % 2], device=device).to(dt)
            g = g.unsqueeze(dim % 2) if keepdim else g
            ours, gx = _run(getattr(tinycuda, name), x, dim, keepdim, grad_out=g)
            theirs, rgx = _torch_cpu(name, x, dim, keepdim, grad_out=g)
            torch.testing.assert_close(ours, theirs, rtol=0, atol=0, equal_nan=True)
            torch.testing.assert_close(gx, rgx, rtol=0, atol=0, equal_nan=True)
            assert (gx != 0).sum() <= g.numel()  # one element a slice, at most
    # rows of 100, past the CPU's 32 lanes: ties in one lane (38, 70) behind an earlier one (33), NaNs at 90 and 50,
    # zeros of both signs (the first, +0.0 or -0.0, is the answer)
    sign = 1.0 if name == "max" else -1.0
    x = torch.randn(4, 100, device=device).clamp(-2, 2)
    x[0, [70, 38, 33]] = 3.0
    x[1, [90, 50]] = nan
    x[2:] = 0.0
    x[2, [3, 64]] = -0.0
    x[3, 0] = -0.0
    x = (sign * x).to(dt)
    ours, theirs = getattr(tinycuda, name)(x, 1), _ref(name)(x.cpu(), 1)
    torch.testing.assert_close(tuple(ours), tuple(o.to(device) for o in theirs), rtol=0, atol=0, equal_nan=True)
    assert ours.indices.tolist() == [33, 50, 0, 0]
    assert [math.copysign(1, v) for v in ours.values[2:].tolist()] == [sign, -sign]


@pytest.mark.parametrize("name", PAIR_OPS)
def test_max_min_gradient_goes_to_one_element(device, dtype, name):
    """Ties across the CPU's 4096-element chunks and the CUDA split (a row of 9001 whose extreme sits at 5, 4095,
    4096, 8191, 8192 and 9000) and in the column layout: the index is the first (5), and g goes there alone, not
    split as amax's: torch's CPU result."""
    ext = 3.0 if name == "max" else -3.0
    long = torch.randn(2, 9001, device=device).clamp(-2, 2).to(dtype)
    long[:, [5, 4095, 4096, 8191, 8192, 9000]] = ext
    g = torch.tensor([1.5, -2.0], device=device).to(dtype)
    for x, dim in ((long, 1), (long.t().contiguous(), 0)):  # rows, columns
        ours, gx = _run(getattr(tinycuda, name), x, dim, grad_out=g)
        theirs, rgx = _torch_cpu(name, x, dim, grad_out=g)
        torch.testing.assert_close(ours, theirs, rtol=0, atol=0)
        torch.testing.assert_close(gx, rgx, rtol=0, atol=0)
        assert ours[1].tolist() == [5, 5] and (gx != 0).sum() == 2


@pytest.mark.parametrize("name", PAIR_OPS)
def test_max_min_strided_and_0dim(device, dtype, name):
    """Views read in place (every other column, a transpose, an offset slice): torch's values and indices
    and the gradient in x's shape; a 0-dim x over dim 0 and -1 gives 0-dim (x, 0) and the gradient g."""
    f = getattr(tinycuda, name)
    base = torch.randn(6, 40, device=device).to(dtype)
    for x in (base[:, ::2], base.t(), base[1:, 3:37]):
        for dim in (0, 1, -1):
            ours, gx = _run(f, x, dim, True)
            theirs, rgx = _torch_cpu(name, x, dim, True)
            torch.testing.assert_close(ours, theirs, rtol=0, atol=0)
            torch.testing.assert_close(gx, rgx, rtol=0, atol=0)
    x = torch.tensor(1.5, device=device).to(dtype)
    for dim in (0, -1):
        for keepdim in (False, True):
            (v, i), gx = _run(f, x, dim, keepdim, grad_out=torch.tensor(2.0, device=device).to(dtype))
            assert v.shape == i.shape == () and v.item() == 1.5 and i.item() == 0 and gx.item() == 2.0


def test_empty_reduced_dim_is_refused():
    """torch's rule for an op with no identity: a reduced dim of size 0 is refused, also where no output is left
    ([0, 0] over dim 1, where the check once looked at the outputs only); an empty kept dim is fine."""
    for name in ("max", "min", "amax", "argmax"):
        for shape, dim in (((3, 0), 1), ((0, 0), 1), ((0,), 0), ((0, 4), -2)):
            with pytest.raises(IndexError, match="Expected reduction dim"):
                _ref(name)(torch.empty(shape), dim)
            for device in ("cpu", "meta"):
                with pytest.raises(RuntimeError, match=rf"tinycuda::{name}: cannot reduce an empty slice"):
                    getattr(tinycuda, name)(torch.empty(shape, device=device), dim)
    y = tinycuda.max(torch.empty(0, 3), 1)
    assert y.values.shape == y.indices.shape == (0,) and y.indices.dtype == torch.int64


@pytest.mark.parametrize("name", PAIR_OPS)
def test_max_min_backward_refuses_a_bad_index(name):
    """The backward's indices come from the caller through the backward op or the C door: one outside its slice
    is refused on the CPU, naming the output, before grad_x is written (CUDA: test_cuda_bad_index_...)."""
    from tinycuda import capi
    op = getattr(torch.ops.tinycuda, name + "_backward")
    g, x = torch.ones(3), torch.randn(3, 4)
    for bad in (4, -1):
        indices = torch.tensor([0, bad, 2])
        with pytest.raises(RuntimeError, match=rf"tinycuda::{name}_backward: indices\[1\] is {bad}, outside the "
                                               rf"slice of 4 elements"):
            op(g, x, indices, 1)
        with pytest.raises(capi.CapiError, match=rf"{name}_backward: indices\[1\] is {bad}, outside the slice"):
            getattr(capi, name + "_backward")(g.numpy(), x.numpy(), indices.numpy(), 1)
    torch.testing.assert_close(op(g, x, torch.tensor([3, 0, 1]), 1),
                               torch.zeros(3, 4).scatter_(1, torch.tensor([[3], [0], [1]]), 1.0))


def test_vector_norm_zeros(device):
    """ord 0 counts the nonzero elements (NaN counts, as torch's); at x = 0 every ord's gradient is torch's: 0 (the
    sign of 0 is 0; for ord < 2, x |x|^(p-2) at x = 0 is 0, not 0 * inf), and 0 everywhere at a zero norm."""
    x = torch.tensor([[0.0, 1.5, 0.0, -2.0, nan], [0.0, 0.0, 0.0, 0.0, 0.0], [0.0, -0.0, 3.0, 0.0, 1.0]], device=device)
    y, _ = _same_as_torch("vector_norm", x, 0.0, 1, grad=False)
    assert y.tolist() == [3.0, 0.0, 2.0]
    z = x[1:]
    for kw in (*REDUCE["vector_norm"].kwargs, {"ord": 1.5}):
        y, gx = _run(tinycuda.vector_norm, z, dim=1, **kw)
        ry, rgx = _run(torch.linalg.vector_norm, z, dim=1, **kw)
        torch.testing.assert_close(y, ry)
        finite = torch.isfinite(rgx)  # where torch's own gradient is defined (not 0^(p-1) / 0)
        torch.testing.assert_close(gx[finite], rgx[finite])
        assert y[0] == 0 and torch.equal(gx[0], torch.zeros_like(gx[0])), kw  # a zero norm: a zero gradient


def test_prod_zeros(device, dtype):
    """torch's gradient of prod at zeros: a slice's only zero gets the product of the others, two zeros give 0
    everywhere; the rest g y / x. Also a zero past the CPU's chunks (a long slice) and in the column layout."""
    x = torch.tensor([[1.5, 0.0, -2.0, 3.0], [0.0, 2.0, 0.0, 1.0], [1.0, 2.0, -3.0, 0.5], [0.0, 0.0, 0.0, 0.0]],
                     device=device).to(dtype)
    for dim in (0, 1):
        _same_as_torch("prod", x, dim)
    if dtype != torch.float32:
        return
    long = REDUCE["prod"].input((2, 9001), device, dtype)
    long[0, 8999] = 0
    long[1, [5, 8192]] = 0
    for x, dim in ((long, 1), (long.t().contiguous(), 0)):  # rows, columns: against float64
        y, gx = _run(tinycuda.prod, x, dim)
        ry, rgx = _run(torch.prod, x.double(), dim)
        torch.testing.assert_close(y.double(), ry, rtol=REDUCE["prod"].rtol, atol=0)
        torch.testing.assert_close(gx.double(), rgx, rtol=REDUCE["prod"].rtol, atol=0)
    assert (gx[:, 1] == 0).all() and (gx[:8999, 0] == 0).all() and gx[8999, 0] != 0


def test_prod_gradient_with_nan_beside_zeros(device):
    """A NaN in a slice with zeros: torch's gradient is each element's product of the others, NaN and 0 as IEEE
    makes them: one zero, 0 at the NaN (its others' product holds the zero); two zeros, NaN everywhere but at
    the NaN (0). (One slice a call: torch takes that path for every slice once any slice of x holds a zero.)"""
    for x in ([2.0, nan, 0.0, 1.0], [0.0, 2.0, nan, 0.0], [1.0, nan, 3.0, 0.5]):
        _same_as_torch("prod", torch.tensor(x, device=device), 0)


@pytest.mark.parametrize("name,kw", [("amax", {}), ("amin", {}), ("vector_norm", {"ord": inf}),
                                     ("vector_norm", {"ord": -inf})])
def test_ties_split_the_gradient_evenly(device, dtype, name, kw):
    """Every element equal to the result gets g / k (k of them: torch's even split; vector_norm's inf with the
    signs of x), also across the CPU's chunks and the CUDA split (a long slice) and in the column layout."""
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0], [-3.0, 3.0, 1.0, -1.0], [-1.0, 0.5, -3.0, 4.0]],
                     device=device).to(dtype)
    g = torch.tensor([1.0, 3.0, 0.5, 2.0], device=device).to(dtype)
    _same_as_torch(name, x, dim=1, grad_out=g, **kw)
    _same_as_torch(name, x, dim=0, grad_out=g, **kw)
    long = torch.randn(2, 9001, device=device).clamp(-2, 2)
    if kw.get("ord") == -inf:  # |x| >= 0.5 but at the ties
        long = torch.where(long < 0, long - 0.5, long + 0.5)
    long = long.to(dtype)
    long[:, [5, 4095, 4096, 8191, 8192, 9000]] = -3.0 if name == "amin" else 0.25 if kw.get("ord") == -inf else 3.0
    _, gx = _same_as_torch(name, long, dim=1, **kw)
    torch.testing.assert_close(gx[0, [5, 9000]], torch.full((2,), 1 / 6, device=device).to(dtype))
    _same_as_torch(name, long.t().contiguous(), dim=0, **kw)  # columns


@pytest.mark.parametrize("name", ["var", "std"])
def test_correction_at_or_past_the_count(device, name):
    """correction >= n: torch divides by max(0, n - correction): inf (NaN for a constant slice); its gradient
    divides by n - correction unclamped (a negative divisor past n). Ours the same, NaN equal."""
    x = torch.tensor([[1.0, 2.0, 4.0], [1.0, 1.0, 1.0], [0.5, -2.0, 3.0]], device=device)
    for c in (2.0, 3.0, 4.0, 5.5):
        y, _ = _same_as_torch(name, x, 1, correction=c)
        if c >= 3:
            assert y[0] == inf and torch.isnan(y[1])
    _same_as_torch(name, x[:, :1], 1)  # one element, the default correction: NaN
    _same_as_torch(name, torch.tensor(2.5, device=device), correction=1.0)


# ---------------------------------------------------------------------------
# determinism, layouts, long slices

def _inputs(name, device):
    """A long row (the CPU's chunks, the CUDA split), the column layout (cut in chunks on CUDA), a full reduction."""
    u = REDUCE[name]
    return [(u.input((3, 9001), device, torch.float32), 1), (u.input((5000, 7), device, torch.float32), 0),
            (u.input((40001,), device, torch.float32), u.every_dim if u.every else 0)]


@pytest.mark.parametrize("name,kw", _variants())
def test_deterministic(device, name, kw):
    """Two runs give the same bits, forward and backward (a fixed-order fold, no float atomics)."""
    f = getattr(tinycuda, name)
    for x, dim in _inputs(name, device):
        g = torch.randn(outputs(f(x, dim=dim, **kw))[0].shape, device=device)
        (y1, g1), (y2, g2) = (_run(f, x, grad_out=g, dim=dim, **kw) for _ in range(2))
        assert _equal(y1, y2) and (g1 is None or torch.equal(g1, g2)), (name, kw, dim)


@requires_cuda
@pytest.mark.parametrize("name,kw", _variants())
def test_cuda_matches_cpu(name, kw):
    """The CUDA split and column chunks against the CPU kernel: indices exactly, values to float32 rounding."""
    f, u = getattr(tinycuda, name), REDUCE[name]
    for x, dim in _inputs(name, "cpu"):
        y, gx = _run(f, x, dim=dim, **kw)
        yc, gxc = _run(f, x.cuda(), dim=dim, **kw)
        exact = name in INDEX_OPS + PAIR_OPS or name in ("amax", "amin")
        torch.testing.assert_close(tuple(o.cpu() for o in outputs(yc)), outputs(y), rtol=0 if exact else u.rtol,
                                   atol=0 if exact else u.atol)
        if gx is not None:
            torch.testing.assert_close(gxc.cpu(), gx, rtol=u.rtol, atol=u.atol)


# (shape, dim, view) -> the CUDA path max and min take (csrc/cuda/reduce.cu, shared/reduce_plan.h)
_CUDA_PAIR_CASES = [
    ((1000, 50), 1, "rows: 8 threads a slice, 16-byte vectors"),
    ((300, 1000), 1, "rows: a warp a slice"),
    ((4, 300001), 1, "rows: a block a slice, cut in segments (merge_kernel)"),
    ((2**21 + 3,), 0, "a full reduction: a long row, ~1024 segments"),
    ((300, 2000), -1, "rows, strided (every other element): no vectors"),
    ((5000, 33), 0, "columns: one element a thread (33 is no multiple of the vector), cut in chunks"),
    ((3000, 64), 0, "columns: 16-byte vectors, cut in chunks"),
    ((8, 1000, 16), 1, "columns over a middle dim"),
    ((33, 1, 65), 1, "a unit reduced dim"),
]


@requires_cuda
@pytest.mark.parametrize("name", PAIR_OPS)
def test_cuda_max_min_every_path(name, dtype):
    """Each CUDA path (the case's words) against the CPU kernel and torch's CPU: values, indices and the gradient
    bit for bit, with the extreme planted in every slice four times across segment and chunk boundaries (the
    first must win) and a NaN in one slice; the backward's scatter over rows, columns, a middle dim and a
    strided x."""
    ext = 9.0 if name == "max" else -9.0
    for shape, dim, path in _CUDA_PAIR_CASES:
        x = torch.randn(shape).clamp(-4, 4)
        if path.endswith("no vectors"):
            x = torch.randn(shape[0], 2 * shape[1]).clamp(-4, 4)[:, ::2]
        d, n = dim % x.dim(), shape[dim]
        if n > 4:
            for at in (n - 1, n // 2 + 1, n // 2, 1):  # in every slice; the first extreme at 1
                x.select(d, at).fill_(ext)
        if x.dim() > 1 and n > 4:  # slice 0 holds a NaN: NaN at n - 2, not the planted extremes
            x[tuple(n - 2 if k == d else 0 for k in range(x.dim()))] = nan
        x = x.to(dtype)
        g = torch.randn(torch.max(x, dim).values.shape).to(dtype)
        cpu, gcpu = _run(getattr(tinycuda, name), x, dim, grad_out=g)
        ref, rg = _run(_ref(name), x, dim, grad_out=g)
        ours, gx = _run(getattr(tinycuda, name), x.cuda(), dim, grad_out=g.cuda())
        if n > 4:
            assert (cpu[1].flatten()[1:] == 1).all() and cpu[1].flatten()[0] == (1 if x.dim() == 1 else n - 2), path
        for a, b, c in zip(ours, cpu, ref, strict=True):
            torch.testing.assert_close(a.cpu(), b, rtol=0, atol=0, equal_nan=True, msg=lambda m: f"{path}: {m}")
            torch.testing.assert_close(b, c, rtol=0, atol=0, equal_nan=True, msg=lambda m: f"{path}: {m}")
        torch.testing.assert_close(gx.cpu(), gcpu, rtol=0, atol=0, equal_nan=True, msg=lambda m: f"{path}: {m}")
        torch.testing.assert_close(gcpu, rg, rtol=0, atol=0, equal_nan=True, msg=lambda m: f"{path}: {m}")


@requires_cuda
@pytest.mark.large
def test_cuda_max_min_past_2_31():
    """A row of 2^31 + 4099 bf16 elements: indices past 2^31 (int64 all through: the segments, the merge, the
    backward's walk), the first of two planted maxima, and the gradient at that one element alone."""
    n = 2**31 + 4099
    x = torch.zeros(n, dtype=torch.bfloat16, device="cuda")
    x[n - 7] = x[n - 3] = 2.5
    x[5] = -1.5
    v, i = tinycuda.max(x, 0)
    assert v.item() == 2.5 and i.item() == n - 7
    v, i = tinycuda.min(x, 0, True)
    assert v.shape == i.shape == (1,) and v.item() == -1.5 and i.item() == 5
    x.requires_grad_()
    gx = torch.autograd.grad(tinycuda.max(x, 0).values, x, torch.tensor(3.0, dtype=x.dtype, device="cuda"))[0]
    assert gx[n - 7].item() == 3.0 and gx.count_nonzero().item() == 1


@requires_cuda
@pytest.mark.device_assert
@pytest.mark.parametrize("name", PAIR_OPS)
def test_cuda_bad_index_is_a_device_assert(name):
    """The backward's indices, read only on the device: one outside its slice stops the kernel with a device-side
    assert naming the op (the context is lost after it, hence the child process)."""
    assert_device_assert(f"{name}_backward: an index is outside its slice",
                         "g, x = torch.ones(3, device='cuda'), torch.randn(3, 4, device='cuda')",
                         f"torch.ops.tinycuda.{name}_backward(g, x, torch.tensor([0, 4, 2], device='cuda'), 1)")


@pytest.mark.parametrize("name,kw", _variants())
def test_long_slices_against_float64(device, name, kw):
    """Odd slices longer than the CPU's 4096-element chunks (a row of 12345, every dim of 12347) and the column
    layout (dim 0 of 2000 x 33) against torch in float64, and extrema planted at the chunk boundaries."""
    u = REDUCE[name]
    cases = [(u.input((2, 12345), device, torch.float32), 1), (u.input((2000, 33), device, torch.float32), 0)]
    if not u.one_dim:
        cases.append((u.input((12347,), device, torch.float32), u.every_dim))
    for x, dim in cases:
        y, gx = _run(getattr(tinycuda, name), x, dim=dim, **kw)
        ry, rgx = _run(u.ref, x.double(), dim=dim, **kw)
        # float32 sums of n terms: |err| ~ sqrt(n) eps |terms| (prod's products: its rtol); indices exact
        for a, r in zip(outputs(y), outputs(ry), strict=True):
            torch.testing.assert_close(a.double(), r.double(), rtol=u.rtol, atol=1e-5)
        if gx is not None:
            torch.testing.assert_close(gx.double(), rgx, rtol=u.rtol, atol=1e-6)
    if name in ("amax", "amin", "argmax", "argmin", "max", "min"):
        sign = 1 if name in ("amax", "argmax", "max") else -1
        for at in (4095, 4096, 8192, 12344):
            x = torch.randn(2, 12345, device=device).clamp(-3, 3)
            x[1, at] = 5.0 * sign
            y = getattr(tinycuda, name)(x, dim=1)
            if name in PAIR_OPS:
                assert y.values[1].item() == 5.0 * sign and y.indices[1].item() == at
            else:
                assert y[1].item() == (at if name.startswith("arg") else 5.0 * sign)


@pytest.mark.parametrize("name,kw", _variants())
def test_permuted_view_non_adjacent_dims(device, name, kw):
    """A permuted 4-D view read in place, over non-adjacent dims (one dim for argmax, argmin, prod), keepdim both ways:
    torch's results and gradients on the same values in float64."""
    u = REDUCE[name]
    x = u.input((4, 5, 6, 7), device, torch.float32).permute(2, 0, 3, 1)
    for dim in ([1] if u.one_dim else [(0, 2), (1, 3), (-1, 0, 2)]):
        for keepdim in (False, True):
            y, gx = _run(getattr(tinycuda, name), x, dim=dim, keepdim=keepdim, **kw)
            ry, rgx = _run(u.ref, x.double(), dim=dim, keepdim=keepdim, **kw)
            for a, r in zip(outputs(y), outputs(ry), strict=True):
                assert a.is_contiguous() and a.shape == r.shape
                torch.testing.assert_close(a.double(), r.double(), rtol=1e-5, atol=1e-5)
            if gx is not None:
                assert gx.shape == x.shape
                torch.testing.assert_close(gx.double(), rgx, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", OPS)
def test_more_than_8_dims(device, name):
    """A larger x is copied contiguous and its neighbouring kept (reduced) dims merged: 10 dims, and a permuted
    9-dim view; torch's results and gradients."""
    u = REDUCE[name]
    kw = u.kwargs[0]
    x10 = u.input((2, 1, 3, 1, 2, 1, 2, 1, 3, 2), device, torch.float32)
    x9 = u.input((2, 1, 3, 2, 2, 1, 2, 1, 3), device, torch.float32).transpose(0, 3)
    cases = [(x10, 4), (x9, -1)] + ([(x10, u.every_dim)] if u.every else [])
    if not u.one_dim:
        cases += [(x10, (0, 1, 9)), (x10, (2, 3, 4, 5)), (x9, (0, 3, 8))]
    for x, dim in cases:
        _same_as_torch(name, x, dim=dim, **kw)
        _same_as_torch(name, x, dim=dim, keepdim=True, **kw)


def test_fake_refuses_more_than_8_alternating_dims():
    """Past 8 dims the C++ layer merges neighbouring kept (reduced) dims and refuses more than 8 runs; the fake
    kernel (torch.compile, meta tensors) must refuse the same, not trace a shape the kernel then rejects."""
    for device in ("cpu", "meta"):
        with pytest.raises(RuntimeError, match=r"tinycuda::mean: x has 10 dims whose reduced and kept ones alternate "
                                               r"10 times; at most 8"):
            tinycuda.mean(torch.zeros((1, 2) * 5, device=device), dim=(0, 2, 4, 6, 8))


def test_sum_half_accumulates_in_float32(device):
    """4096 x 8.0 = 32768, exact in fp16. A fp16 accumulator stalls once its spacing (16 above 16384) makes
    "+ 8" a tie that rounds back down."""
    x = torch.full((4096,), 8.0, device=device, dtype=torch.float16)
    assert tinycuda.sum(x).item() == 32768.0


# ---------------------------------------------------------------------------
# arguments: dim's forms, 0-dim tensors, the result, signatures

@pytest.mark.parametrize("name", [n for n in OPS if not REDUCE[n].one_dim])
def test_dim_forms(device, name):
    """dim as an int, a list, a tuple: the same bits; [] reduces every dim, as None (the default) does."""
    f = getattr(tinycuda, name)
    x = REDUCE[name].input((3, 4, 5), device, torch.float32)
    one = f(x, dim=1)
    for d in ([1], (1,), [-2], (-2,)):
        assert torch.equal(f(x, dim=d), one), d
    assert torch.equal(f(x, dim=[0, 2]), f(x, dim=(2, 0)))
    every = f(x, dim=[])
    assert every.shape == () and torch.equal(f(x, dim=(0, 1, 2)), every)
    if name != "logsumexp":  # its dim has no default
        assert torch.equal(f(x), every)
    if name not in ("amax", "amin", "logsumexp"):  # int[1]: no None
        assert torch.equal(f(x, dim=None), every)
    torch.testing.assert_close(every, _ref(name)(x, dim=(0, 1, 2)))


@pytest.mark.parametrize("name", [n for n in OPS if REDUCE[n].one_dim])
def test_dim_is_one_int(name):
    """argmax's, argmin's, prod's, max's and min's dim is one int (or None but for max and min), as torch's: a
    list is refused."""
    x = torch.randn(3, 4)
    assert _equal(getattr(tinycuda, name)(x, 1), _ref(name)(x, 1))
    with pytest.raises((RuntimeError, TypeError)):
        getattr(tinycuda, name)(x, [0, 1])


@pytest.mark.parametrize("name,kw", _variants())
def test_0dim(device, name, kw):
    """A 0-dim x takes dim 0 and -1 (and every dim) and reduces its one element, keepdim or not: torch's result,
    and the gradient of its one-element slice (torch's on the 0-dim tensor is NaN for var, at any correction,
    where a [1] tensor's is -0 past the count); dim 1 is out of range."""
    u = REDUCE[name]
    f, x = getattr(tinycuda, name), u.input((), device, torch.float32)
    _, slice_grad = _run(u.ref, x.reshape(1), dim=0, **kw)
    for dim in (0, -1, u.every_dim, [0]) if not u.one_dim else (0, -1, None) if u.every else (0, -1):
        for keepdim in (False, True):
            y, _ = _same_as_torch(name, x, dim=dim, keepdim=keepdim, grad=False, **kw)
            assert all(o.shape == () for o in outputs(y))
            _, gx = _run(f, x, dim=dim, keepdim=keepdim, **kw)
            if gx is not None:
                torch.testing.assert_close(gx, slice_grad.reshape(()), equal_nan=True)
    with pytest.raises(RuntimeError, match=rf"tinycuda::{name}: dim 1 is out of range for a tensor of 0 dims"):
        getattr(tinycuda, name)(x, dim=1, **kw)


@pytest.mark.parametrize("name", OPS)
def test_result_is_contiguous_and_typed(device, dtype, name):
    """A new contiguous tensor, keepdim or not, from a transposed view: x's dtype, int64 for argmax and argmin;
    max's and min's values in x's dtype and indices int64 (torch.return_types)."""
    f = getattr(tinycuda, name)
    x = REDUCE[name].input((6, 5, 4), device, dtype).transpose(0, 2)
    for keepdim in (False, True):
        out = f(x, dim=1, keepdim=keepdim)
        dtypes = (dtype, torch.int64) if name in PAIR_OPS else (torch.int64 if name in INDEX_OPS else dtype,)
        assert type(out) is (getattr(torch.return_types, name) if name in PAIR_OPS else torch.Tensor)
        for y, want in zip(outputs(out), dtypes, strict=True):
            assert y.is_contiguous() and y.shape == ((4, 1, 6) if keepdim else (4, 6))
            assert y.dtype == want and y.device == x.device


# torch's schema for each op's function (aten's overload that takes dims)
TORCH_SCHEMAS = {"mean": "mean.dim", "amax": "amax.default", "amin": "amin.default", "logsumexp": "logsumexp.default",
                 "var": "var.correction", "std": "std.correction", "vector_norm": "linalg_vector_norm.default",
                 "argmax": "argmax.default", "argmin": "argmin.default", "prod": "prod.dim_int",
                 "sum": "sum.dim_IntList", "max": "max.dim", "min": "min.dim"}
# torch's defaults that mean a value: var's and std's correction None is 1
TORCH_DEFAULTS = {("var", "correction"): 1, ("std", "correction"): 1}


@pytest.mark.parametrize("name", OPS)
def test_signature_is_torchs(name):
    """The generated function takes torch's arguments after x (aten's schema, less its dtype), in torch's order,
    keyword-only where torch's are, with torch's defaults where torch has one; positional calls as torch's."""
    op, overload = TORCH_SCHEMAS[name].split(".")
    theirs = [a for a in getattr(getattr(torch.ops.aten, op), overload)._schema.arguments[1:] if a.name != "dtype"]
    ours = list(inspect.signature(getattr(tinycuda, name)).parameters.values())
    assert ours[0].name == "x" and ours[0].default is inspect.Parameter.empty
    assert [(p.name, p.kind == p.KEYWORD_ONLY) for p in ours[1:]] == [(a.name, a.kwarg_only) for a in theirs]
    for p, a in zip(ours[1:], theirs):
        if a.has_default_value():
            assert p.default == TORCH_DEFAULTS.get((name, a.name), a.default_value), (name, a.name)
    assert getattr(tinycuda, name).__name__ == name
    f, x = getattr(tinycuda, name), REDUCE[name].input((3, 4), "cpu", torch.float32)
    if name in ("var", "std"):  # correction is keyword-only
        torch.testing.assert_close(f(x, 1, correction=0, keepdim=True), _ref(name)(x, 1, correction=0, keepdim=True))
        with pytest.raises(RuntimeError, match=r"takes 2 positional argument\(s\) but 3 was/were given"):
            f(x, 1, 0.0)
    args = (3.0, 1, True) if name == "vector_norm" else (1,) if name in ("var", "std") else (1, True)
    torch.testing.assert_close(f(x, *args), _ref(name)(x, *args))


def test_op_list_is_the_cores():
    """The functions are the core's op list, in its order, each with its op-table entry."""
    from tinycuda import _build
    assert OPS == _build.op_names("tc_reduce_op") and list(REDUCE) == OPS
    assert set(OPS) <= set(tinycuda.ops.__all__)
    assert set(INDEX_OPS) == {"argmax", "argmin"} and set(PAIR_OPS) == {"max", "min"}
