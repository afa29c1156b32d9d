"""The losses family (mse_loss ... triplet_margin_loss) beyond the op table (tests/test_ops.py): torch's values at
the edges (kl_div's zero targets, bce's large logits, the clamps' and kinks' gradients, ties of triplet's swap,
NaN), empty inputs of each reduction, the legacy size_average / reduce, long inputs on each path (the CPU's
chunks; CUDA's vectors, tails, broadcasts, blocks and the second stage, rows of a warp and of a block) against
float64, determinism, CUDA against the CPU, options through torch.compile, the generated signatures, and the
workspace query."""
import contextlib
import inspect
import itertools
import math

import pytest
import torch
import torch.nn.functional as F

import tinycuda
from conftest import DTYPES, assert_matches, check_compiled, requires_cuda
from tinycuda.optable import LOSSES

pytestmark = pytest.mark.racecheck

OPS = tinycuda.ops.losses.__all__
inf, nan = math.inf, math.nan


def _grads(fn, args, kwargs, wrt, grad_out=None):
    """fn's output and the gradients of the args at indices wrt (a fresh copy of each)."""
    args = [a.detach().clone().requires_grad_(i in wrt) if isinstance(a, torch.Tensor) else a
            for i, a in enumerate(args)]
    out = fn(*args, **kwargs)
    g = torch.ones_like(out) if grad_out is None else grad_out
    return out.detach(), torch.autograd.grad(out, [args[i] for i in wrt], g)


def _same_as_torch(name, args, kwargs=None, wrt=(0, 1), **tol):
    """tinycuda's output and gradients against torch.nn.functional's on the same args (NaN equal)."""
    kwargs = kwargs or {}
    ours, gours = _grads(getattr(tinycuda, name), args, kwargs, wrt)
    ref, gref = _grads(getattr(F, name), args, kwargs, wrt)
    torch.testing.assert_close(ours, ref, equal_nan=True, **tol)
    for a, b in zip(gours, gref, strict=True):
        torch.testing.assert_close(a, b, equal_nan=True, **tol)


def _operands(name, shape, device, dtype, kw=None):
    return LOSSES[name].make((shape,), device, dtype, dict(kw or {}))


# ---------------------------------------------------------------------------
# torch's values at the edges

def test_kl_div_zero_targets(device):
    """t = 0 adds nothing (t log t's 0); its target gradient is NaN there, as torch's xlogy's."""
    x = torch.log_softmax(torch.randn(4, 6, device=device, dtype=torch.float64), -1)
    t = torch.softmax(torch.randn(4, 6, device=device, dtype=torch.float64), -1)
    t[0, 1] = t[2, 5] = 0
    for red in ("sum", "batchmean", "none"):
        _same_as_torch("kl_div", (x, t), {"reduction": red})


def test_bce_large_logits_stay_finite(device):
    x = torch.tensor([-200.0, -30.0, -1.0, 0.0, 1.0, 30.0, 200.0], device=device)
    t = torch.tensor([0.0, 1.0, 0.5, 1.0, 0.0, 0.0, 1.0], device=device)
    pw = torch.full((7,), 2.5, device=device)
    for kw in ({}, {"pos_weight": pw}, {"weight": pw, "pos_weight": pw}):
        for red in ("sum", "none"):
            _same_as_torch("binary_cross_entropy_with_logits", (x, t), {"reduction": red, **kw},
                           rtol=1e-5, atol=1e-5)


def test_kinks_and_clamps_pass_torchs_gradient(device):
    """d = 0 (l1, smooth_l1 with beta 0: sign 0), |d| = beta and delta, a clamp's argument exactly 0
    (margin_ranking, hinge: the gradient passes, as torch's clamp_min), hinge's targets other than +-1."""
    dt = torch.float64
    x = torch.tensor([1.0, 0.5, -0.5, 2.0, 0.0], device=device, dtype=dt)
    t = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.0], device=device, dtype=dt)
    _same_as_torch("l1_loss", (x, t), {"reduction": "sum"})
    for beta in (0.0, 0.5, 1.0):
        _same_as_torch("smooth_l1_loss", (x, t), {"reduction": "sum", "beta": beta})
    for delta in (0.5, 1.0):
        _same_as_torch("huber_loss", (x, t), {"reduction": "sum", "delta": delta})
    y = torch.tensor([1.0, -1.0, 1.0, -1.0, 0.5], device=device, dtype=dt)
    _same_as_torch("margin_ranking_loss", (x, x.clone(), y), {"margin": 0.0, "reduction": "sum"}, wrt=(0, 1, 2))
    _same_as_torch("hinge_embedding_loss", (x, torch.tensor([-1.0, -1.0, 1.0, 0.5, 2.0], device=device, dtype=dt)),
                   {"margin": 1.0, "reduction": "sum"}, wrt=(0,))


def test_hinge_target_gets_no_gradient(device):
    x = torch.randn(5, device=device, requires_grad=True)
    y = torch.tensor([1.0, -1.0, 1.0, -1.0, 1.0], device=device, requires_grad=True)
    gx, gy = torch.autograd.grad(tinycuda.hinge_embedding_loss(x, y), [x, y], allow_unused=True)
    assert gx is not None and gy is None


def test_triplet_swap_ties_split_the_gradient(device):
    """d(a, n) == d(p, n): torch.minimum's gradient halves between them."""
    dt = torch.float64
    a = torch.tensor([[0.0, 0.0], [1.0, 2.0]], device=device, dtype=dt)
    p = torch.tensor([[0.0, 0.0], [1.0, 2.5]], device=device, dtype=dt)
    n = torch.tensor([[0.3, 0.4], [2.0, 2.0]], device=device, dtype=dt)
    for kw in ({"swap": True, "eps": 0.0}, {"swap": True}, {"swap": True, "p": 1.0, "eps": 0.0}):
        _same_as_torch("triplet_margin_loss", (a, p, n), {"reduction": "sum", **kw}, wrt=(0, 1, 2))


def test_triplet_p0_counts_nonzero_differences(device):
    """p = 0: the count of nonzero differences (torch's forward); its gradient is 0 (torch's graph stops)."""
    a, p, n = (torch.randn(4, 7, device=device) for _ in range(3))
    p[0, :3] = a[0, :3]
    for red in ("none", "sum"):
        kw = {"p": 0.0, "eps": 0.0, "reduction": red}
        torch.testing.assert_close(tinycuda.triplet_margin_loss(a, p, n, **kw), F.triplet_margin_loss(a, p, n, **kw))
    a.requires_grad_()
    (g,) = torch.autograd.grad(tinycuda.triplet_margin_loss(a, p, n, p=0.0), [a])
    assert torch.equal(g, torch.zeros_like(g))


@pytest.mark.parametrize("name", OPS)
def test_nan_propagates(device, name):
    args = list(_operands(name, (3, 5), device, torch.float32))
    args[0][1, 2] = nan
    for red in ("none", "sum"):
        ours, ref = getattr(tinycuda, name)(*args, reduction=red), getattr(F, name)(*args, reduction=red)
        torch.testing.assert_close(ours, ref, equal_nan=True)


# ---------------------------------------------------------------------------
# empty inputs, legacy reductions

@pytest.mark.parametrize("name", OPS)
def test_empty_inputs(device, name):
    """mean of nothing is NaN, sum 0, none empty (triplet: rows of no element are margin each)."""
    for shape in ((0,), (0, 3), (3, 0)):
        args = _operands(name, shape, device, torch.float32)
        for red in LOSSES[name].reductions:
            ours, ref = getattr(tinycuda, name)(*args, reduction=red), getattr(F, name)(*args, reduction=red)
            assert ours.shape == ref.shape
            torch.testing.assert_close(ours, ref, equal_nan=True)


@pytest.mark.parametrize("name", [n for n in OPS if "size_average" in inspect.signature(getattr(F, n)).parameters])
def test_legacy_reduction(name):
    """size_average and reduce, when either is given, decide the reduction (torch's legacy rule)."""
    args = _operands(name, (4, 6), "cpu", torch.float32)
    for size_average, reduce in itertools.product((None, True, False), repeat=2):
        kw = {"size_average": size_average, "reduce": reduce, "reduction": "sum"}
        with pytest.warns(UserWarning) if (size_average, reduce) != (None, None) else contextlib.nullcontext():
            ref = getattr(F, name)(*args, **kw)
        torch.testing.assert_close(getattr(tinycuda, name)(*args, **kw), ref)


# ---------------------------------------------------------------------------
# long inputs, each path, against float64

def _path_cases(device):
    """(shape, kwargs): one dim past the CPU's 4096-element chunks and (CUDA) many blocks: odd (the vector tail) and
    whole vectors, past 1024 blocks of 4096 (the cap: the grid strides) on CUDA; rows with a broadcast over the
    last dim (bce's pos_weight, the vector path's broadcast load) and over rows (a stride-0 inner dim: scalar
    loads); a strided view."""
    if device == "cuda":
        return [((2**23 + 3,), {}), ((1000, 40), {}), ((257, 64), {"strided": True})]
    # under torch's 32768-element grain: its reference on one thread (its threads wait on each other here)
    return [((30001,), {}), ((700, 40), {}), ((257, 64), {"strided": True})]


def _against_float64(name, args, kwargs, wrt, normwise, scale=0.0):
    """Output and gradients against torch's in float64 on the same values: max |ours - ref| <= normwise * max |ref|
    (the output's: or `scale`, where it is a difference of larger terms: triplet's distances)."""
    ours, gours = _grads(getattr(tinycuda, name), args, kwargs, wrt)
    ref, gref = _grads(getattr(F, name), [a.double() if isinstance(a, torch.Tensor) else a for a in args],
                       {k: v.double() if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}, wrt)
    for what, a, b, s in (("output", ours, ref, scale), *(("gradient", x, y, 0.0) for x, y in zip(gours, gref))):
        err = (a.double() - b).abs().max().item() if a.numel() else 0.0
        assert err <= normwise * max(b.abs().max().item() if b.numel() else 0.0, s, 1e-30), (what, err)


@pytest.mark.parametrize("red", ["mean", "none"])
@pytest.mark.parametrize("name", OPS)
def test_paths_against_float64(device, name, red):
    for shape, kw in _path_cases(device):
        if name == "triplet_margin_loss" and len(shape) == 1:
            shape = (shape[0] // 64, 64)
        kw = dict(kw)
        strided = kw.pop("strided", False)
        args = _operands(name, shape, device, torch.float32)
        if strided:
            args = [torch.stack([t, t], -1)[..., 0] for t in args]
        _against_float64(name, args, {"reduction": red}, LOSSES[name].grad or tuple(range(len(args))), 1e-5)


@pytest.mark.parametrize("name", [n for n in OPS if LOSSES[n].broadcasts])
def test_broadcasts_against_float64(device, name):
    """The op table's broadcasts (forward only there) with every reduction and their gradients, summed to each
    operand's shape; and on each CUDA path: over rows of 64 (the vector path, a broadcast operand's one load a
    vector), of 63 (scalar), over the last dim (stride 0 inside a row)."""
    rows = 3000 if device == "cuda" else 300
    paths = [((rows, 64), (64,)), ((rows, 63), (63,)), ((rows, 64), (rows, 1))]
    if name == "margin_ranking_loss":  # one number of dims
        paths = [(a, a, (1,) * (2 - len(b)) + b) for a, b in paths]
    wrt = LOSSES[name].grad or (0, 1, 2)
    for shapes in (*LOSSES[name].broadcasts, *paths):
        for red in LOSSES[name].reductions:
            if name == "binary_cross_entropy_with_logits":
                kw = shapes[-1] if isinstance(shapes[-1], dict) else {"pos_weight": shapes[1], "weight": shapes[1]}
                kw = {**kw, "reduction": red}
                args = LOSSES[name].make(shapes[:1], device, torch.float32, kw)
            else:
                kw, args = {"reduction": red}, LOSSES[name].make(shapes, device, torch.float32, {})
            _against_float64(name, args, kw, wrt[:len(args)], 1e-5)


@pytest.mark.parametrize("cols", [7, 64, 4097, 5000])
def test_triplet_rows_paths(device, cols):
    """Rows a warp takes (up to 4096: vectors where the width allows) and a block takes (past 4096)."""
    rows = 600 if device == "cuda" else 30000 // cols
    args = _operands("triplet_margin_loss", (rows, cols), device, torch.float32)
    for kw in ({}, {"swap": True, "p": 1.0}, {"p": 3.0}):
        # the loss is a difference of two distances: its rounding is theirs (sums of up to 5000 terms, 8 lanes of
        # 625 one after another on the CPU)
        scale = F.pairwise_distance(args[0].double(), args[2].double(), kw.get("p", 2.0)).max().item()
        for red in ("mean", "none"):
            _against_float64("triplet_margin_loss", args, {"reduction": red, **kw}, (0, 1, 2), 1e-5, scale)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).replace("torch.", ""))
@pytest.mark.parametrize("name", OPS)
def test_long_inputs_within_torchs_error(device, dtype, name):
    """A long sum in every dtype: within the conftest rule of torch's own error in that dtype."""
    shape = (256, 1024) if device == "cuda" else (64, 512)
    args = _operands(name, shape, device, dtype)
    for red in ("mean", "none"):
        ours, ref = getattr(tinycuda, name)(*args, reduction=red), getattr(F, name)(*args, reduction=red)
        exact = getattr(F, name)(*(a.double() for a in args), reduction=red)
        assert_matches(ours, ref, exact, rtol32=1e-4, atol32=1e-4)


@pytest.mark.parametrize("name", OPS)
def test_float64_accumulates_in_float64(device, name):
    args = _operands(name, (3000 if device == "cuda" else 900, 33), device, torch.float64)
    _against_float64(name, args, {"reduction": "mean"}, LOSSES[name].grad or tuple(range(len(args))), 1e-12)


@pytest.mark.parametrize("name", OPS)
def test_deterministic(device, name):
    """The same bits on every run."""
    shape = (4096, 512) if device == "cuda" else (512, 256)
    args = _operands(name, shape, device, torch.float32)
    wrt = LOSSES[name].grad or tuple(range(len(args)))
    first = _grads(getattr(tinycuda, name), args, {}, wrt)
    for _ in range(2):
        again = _grads(getattr(tinycuda, name), args, {}, wrt)
        assert torch.equal(first[0], again[0]) and all(torch.equal(a, b) for a, b in zip(first[1], again[1]))


@requires_cuda
@pytest.mark.parametrize("name", OPS)
def test_cuda_matches_cpu(name):
    for shape in ((2**20 + 5,), (3000, 64)):
        if name == "triplet_margin_loss" and len(shape) == 1:
            shape = (shape[0] // 33, 33)
        args = _operands(name, shape, "cuda", torch.float32)
        wrt = LOSSES[name].grad or tuple(range(len(args)))
        for red in ("mean", "none"):
            gpu = _grads(getattr(tinycuda, name), args, {"reduction": red}, wrt)
            cpu = _grads(getattr(tinycuda, name), [a.cpu() for a in args], {"reduction": red}, wrt)
            for a, b in zip((gpu[0], *gpu[1]), (cpu[0], *cpu[1])):
                torch.testing.assert_close(a.cpu(), b, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------
# the torch door: options through compile, signatures, the op list; the C door's workspace query

@pytest.mark.compile
def test_compile_with_options(device):
    a, p, n = (torch.randn(5, 33, device=device, requires_grad=True) for _ in range(3))
    check_compiled(tinycuda.triplet_margin_loss, [a, p, n, 0.5, 1.0, 1e-3, True], {"reduction": "sum"},
                   wrt=[a, p, n], reps=2, rtol=0, atol=0)
    x, t = torch.randn(5, 33, device=device, requires_grad=True), torch.randn(5, 33, device=device)
    check_compiled(tinycuda.kl_div, [x, t], {"reduction": "batchmean", "log_target": True}, wrt=[x], reps=2,
                   rtol=0, atol=0)


@pytest.mark.parametrize("name", OPS)
def test_signature_is_torchs(name):
    """torch.nn.functional's parameters, in order, with its defaults (recent torch's per-element weight of mse_loss,
    l1_loss and huber_loss too: refused when given)."""
    ours, ref = inspect.signature(getattr(tinycuda, name)), inspect.signature(getattr(F, name))
    assert list(ours.parameters) == list(ref.parameters)
    for k, p in ref.parameters.items():
        assert ours.parameters[k].default == p.default, k


def test_op_list_is_the_cores():
    assert OPS == ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy_with_logits",
                   "kl_div", "margin_ranking_loss", "hinge_embedding_loss", "triplet_margin_loss"]
    assert set(OPS) == set(LOSSES)


def test_workspace_for_reductions_of_several_blocks():
    """tc_loss_workspace_size: 0 for 'none' and one block (4096 elements), a float a block past it (no device)."""
    from tinycuda import capi
    so, p = capi.lib(), capi.ffi.new("tc_loss_params*")
    p.dtype, p.op, p.ndim = so.TC_FLOAT32, so.TC_LOSS_MSE_LOSS, 1
    p.operands = [capi.ffi.cast("void*", 16)] * 2 + [capi.ffi.NULL] * 2
    p.out = capi.ffi.cast("void*", 16)
    for n, red, blocks in ((10**6, so.TC_LOSS_REDUCTION_NONE, 0), (4096, so.TC_LOSS_REDUCTION_MEAN, 0),
                           (4097, so.TC_LOSS_REDUCTION_SUM, 2), (2**26, so.TC_LOSS_REDUCTION_MEAN, 1024)):
        p.sizes[0], p.reduction = n, red
        assert so.tc_loss_workspace_size(p) == 4 * blocks, (n, red)
