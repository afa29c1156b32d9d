"""The elementwise family's binary ops (add, sub, mul, div, maximum, minimum,
pow) beyond the op table (tests/test_ops.py): Python numbers as operands and
torch's promotion, mixed dtypes (forward, gradients, opcheck; capi refuses
them), alpha, gradients summed to the operands' shapes (0-dim, (1, 1), a 0-dim
CPU tensor beside a device tensor), NaN, infinities, ties and pow's
conventions against torch, more than 8 dims, capi on strided views and its
errors, torch.compile with a number operand, the generated signatures."""
import inspect
import math

import numpy as np
import pytest
import torch

import tinycuda
from tinycuda import _build, capi
from conftest import HAS_CUDA, check_compiled, check_op
from tinycuda.optable import BINARY

OPS = _build.binary_ops()
T = torch.ops.tinycuda
inf, nan = math.inf, math.nan


def _same(got, ref):
    """Same dtype, shape and bits (NaNs in the same places)."""
    assert got.dtype == ref.dtype and got.shape == ref.shape, (got.dtype, got.shape, ref.dtype, ref.shape)
    torch.testing.assert_close(got, ref, rtol=0, atol=0, equal_nan=True)


def _grads(fn, *args, grad_out=None, **kw):
    """fn(*args, **kw) and the gradients of its tensor arguments (None for the others) for grad_out (ones)."""
    leaves = [a.detach().requires_grad_() if isinstance(a, torch.Tensor) else a for a in args]
    out = fn(*leaves, **kw)
    wrt = [a for a in leaves if isinstance(a, torch.Tensor)]
    gs = iter(torch.autograd.grad(out, wrt, torch.ones_like(out) if grad_out is None else grad_out))
    return out, [next(gs) if isinstance(a, torch.Tensor) else None for a in leaves]


def _operand(name, shape, device, dtype, which):
    return BINARY[name].operand(shape, device, dtype, which)


# ---------------------------------------------------------------------------
# numbers and promotion

EXACT = ("add", "sub", "mul", "div", "maximum", "minimum")  # one IEEE operation: torch's bits


@pytest.mark.parametrize("name", OPS)
def test_numbers_are_not_rounded_to_the_tensors_dtype(device, dtype, name):
    """x_bf16 + 0.1 computes with 0.1 itself, not with 0.1 rounded to bfloat16: torch's result dtype, and for
    one IEEE operation the bits of the op in float32 on the same values (on the CPU), rounded once to the dtype
    (pow: close to them), on either side, an int number too; torch's bits in float32 on the CPU. That is how torch's
    CUDA kernels take a number (but for x / s, which they compute as x * (1 / s)); torch's CPU kernels round
    it to a half-precision tensor's dtype first in some ops (add, sub, pow; mul and div with the number
    first): there x_bf16 + 0.1 is x_bf16 + 0.10009765625."""
    x = _operand(name, (5, 33), device, dtype, 0)
    e = _operand(name, (5, 33), device, dtype, 1)
    ref_fn = BINARY[name].ref
    for a, b in ((x, 0.1), (x, -3), (1 / 3, e), (2, e)):
        got = getattr(tinycuda, name)(a, b)
        torch_ = ref_fn(a, b)
        assert got.dtype == torch_.dtype == dtype, (got.dtype, torch_.dtype)
        # the op in float32 on the CPU, IEEE's bits (torch's CUDA x / s is x * (1 / s), a bit off)
        wide = ref_fn(*(t.float().cpu() if isinstance(t, torch.Tensor) else t for t in (a, b))).to(device, dtype)
        if name not in EXACT:
            torch.testing.assert_close(got, wide, equal_nan=True)
            continue
        _same(got, wide)
        if (device == "cpu" and dtype == torch.float32) or name in ("maximum", "minimum"):
            _same(got, torch_)
    if dtype == torch.bfloat16 and name == "add":
        y = torch.tensor([-0.1], device=device).to(dtype)  # -0.10009765625
        assert tinycuda.add(y, 0.1).item() == pytest.approx(0.1 - 0.10009765625, rel=1e-2)
        if device == "cpu":  # torch's CPU kernel: 0.1 rounded to bfloat16 first
            assert (y + 0.1).item() == 0


def test_a_number_beside_a_0dim_tensor_keeps_its_dtype(device):
    """torch.tensor(1.5) + 0.1 is float32 in torch: a number never promotes a float tensor, 0-dim or not."""
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.tensor(1.5, device=device, dtype=dtype)
        for name in OPS:
            assert getattr(tinycuda, name)(x, 0.1).dtype == BINARY[name].ref(x, 0.1).dtype == dtype, name
            assert getattr(tinycuda, name)(3, x).dtype == dtype, name


def test_an_integer_tensor_promotes_as_torchs(device):
    """An integer tensor with a float number or a float tensor: torch's float result, the integers converted."""
    i, x = torch.arange(-3, 4, device=device), torch.randn(7, device=device, dtype=torch.bfloat16)
    for a, b in ((i, 0.5), (2.5, i), (i, x), (x, i)):
        for name in ("add", "mul", "maximum"):
            _same(getattr(tinycuda, name)(a, b), BINARY[name].ref(a, b))


MIXED = [  # (a, b) dtypes and shapes: a tensor each; a 0-dim one (its dtype does not count beside a larger one)
    ((torch.float32, (5, 33)), (torch.bfloat16, (5, 33))),
    ((torch.bfloat16, (5, 33)), (torch.float16, (33,))),
    ((torch.float16, (4, 1)), (torch.float64, (3, 1, 5))),
    ((torch.bfloat16, (5, 33)), (torch.float32, ())),
    ((torch.float32, ()), (torch.float16, (5, 33))),
    ((torch.float16, ()), (torch.bfloat16, ())),
]


def _error(t, ref):
    return (t.double() - ref.double()).abs().max().item() if t.numel() else 0.0


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("da,db", MIXED, ids=lambda d: f"{str(d[0])[6:]}{list(d[1])}")
def test_mixed_dtypes_promote_as_torchs(device, name, da, db):
    """torch's result dtype (the operand of another dtype converted first); outputs and gradients (each in its
    operand's dtype, computed in the result's: a float32 operand beside a bfloat16 one gets a gradient of
    bfloat16 precision, as torch's) within 3x torch's own error against float64 plus a few roundings of the
    result dtype; opcheck of the mixed calls, the forward and the backward op."""
    a = _operand(name, da[1], device, da[0], 0)
    b = _operand(name, db[1], device, db[0], 1)
    f, ref_fn = getattr(tinycuda, name), BINARY[name].ref
    dtype = torch.result_type(a, b)
    g = torch.randn(torch.broadcast_shapes(a.shape, b.shape), device=device)
    out, grads = _grads(f, a, b, grad_out=g.to(dtype))
    lp, lp_grads = _grads(ref_fn, a, b, grad_out=g.to(dtype))
    ref, ref_grads = _grads(ref_fn, a.double(), b.double(), grad_out=g.double())
    assert out.dtype == lp.dtype == dtype and [t.dtype for t in grads] == [a.dtype, b.dtype]
    # a few roundings of the result dtype: a float64 result's gradient sums terms in another order than torch
    slack = 4 * torch.finfo(dtype).eps
    for got, same_precision, r in ((out, lp, ref), *zip(grads, lp_grads, ref_grads)):
        assert got.shape == r.shape and got.dtype == same_precision.dtype
        assert _error(got, r) <= 3 * _error(same_precision, r) + slack * (r.abs().max().item() + 0.3)
    for grad in (False, True):
        torch.library.opcheck(getattr(T, name).default, (a.detach().requires_grad_(grad), b))
    torch.library.opcheck(getattr(T, name + "_backward").default, (g.to(dtype), a, b, [True, True]))


def test_capi_does_not_promote():
    """The C door runs one dtype: arrays of two dtypes are refused, naming both; a 0-dim CPU array beside a
    larger one is a number (any dtype), as the torch layer reads a 0-dim CPU tensor."""
    x = np.random.randn(5, 33).astype(np.float32)
    with pytest.raises(TypeError, match=r"tinycuda.capi.add: b has dtype float16 but a has dtype float32"):
        capi.add(x, x.astype(np.float16))
    with pytest.raises(TypeError, match=r"tinycuda.capi.mul_backward: a has dtype float16 but grad_out has dtype "
                                        r"float32"):
        capi.mul_backward(x, x.astype(np.float16), x)
    h = x.astype(np.float16)
    for s in (np.array(0.1), np.array(3, np.int64), np.array(0.1, np.float32)):
        ref = T.add(torch.from_numpy(h), torch.from_numpy(s), alpha=2.0)
        assert np.array_equal(capi.add(h, s, alpha=2.0), ref.numpy())
        assert np.array_equal(capi.sub(s, h), T.sub(torch.from_numpy(s), torch.from_numpy(h)).numpy())


# ---------------------------------------------------------------------------
# alpha

@pytest.mark.parametrize("name", ["add", "sub"])
def test_alpha(device, dtype, name):
    """out = a +- alpha b, alpha any float (negative, 0, an int), with a number b too; d/db = +-alpha."""
    a, b = torch.randn(5, 33, device=device).to(dtype), torch.randn(33, device=device).to(dtype)
    for alpha in (2.5, -0.5, 0.0, 3):
        check_op(getattr(tinycuda, name), getattr(torch, name), (a, b), {"alpha": alpha})
        _same(getattr(tinycuda, name)(a, 1.5, alpha=alpha), getattr(torch, name)(a, 1.5, alpha=alpha))
    sign = 1 if name == "add" else -1
    _, (ga, gb) = _grads(getattr(tinycuda, name), a.float(), b.float(), alpha=2.5)
    _same(ga, torch.ones_like(ga))
    _same(gb, torch.full_like(gb, sign * 2.5 * 5))
    with pytest.raises(TypeError, match=rf"tinycuda.{name}: too many positional arguments"):
        getattr(tinycuda, name)(a, b, 2.0)  # keyword-only, as torch's


# ---------------------------------------------------------------------------
# gradients over broadcast dims

GRAD_SHAPES = [((5, 33), ()), ((), (3, 1, 5)), ((1, 1), (5, 33)), ((3, 1, 5), (4, 1)), ((1, 5), (2, 3, 4, 5)),
               ((2, 1, 3), (1, 1, 1))]


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("sa,sb", GRAD_SHAPES, ids=str)
def test_gradients_are_summed_to_the_operands_shapes(device, name, sa, sb):
    """Each gradient has its operand's shape (a 0-dim tensor's too), torch's values in float32."""
    a, b = _operand(name, sa, device, torch.float32, 0), _operand(name, sb, device, torch.float32, 1)
    g = torch.randn(torch.broadcast_shapes(sa, sb), device=device)
    _, (ga, gb) = _grads(getattr(tinycuda, name), a, b, grad_out=g)
    _, (ra, rb) = _grads(BINARY[name].ref, a, b, grad_out=g)
    assert ga.shape == a.shape and gb.shape == b.shape
    torch.testing.assert_close(ga, ra)
    torch.testing.assert_close(gb, rb)


# the CPU loop's runs along the inner dim (cpu/kit/pointwise.h's run_at): both operands contiguous along it, one
# constant (a row or column broadcast, a number), a strided one (an element at a time); large enough for two
# threads, whose ranges start mid-row (517 x 1031)
RUNS = {
    "rows": ((517, 1031), (1031,)), "columns": ((517, 1031), (517, 1)), "column first": ((517, 1), (517, 1031)),
    "number": ((517, 1031), None), "transposed": ((1031, 517), (517, 1031)),
}


@pytest.mark.parametrize("layout", RUNS)
@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", ["sub", "maximum", "pow"])
def test_cpu_runs_over_broadcasts(name, layout, dt):
    """Forward against torch's (the same bits but pow's: one IEEE operation, then one rounding to the dtype), where's
    too; float32 gradients (a broadcast operand's summed)."""
    sa, sb = RUNS[layout]
    a = _operand(name, sa, "cpu", dt, 0)
    b = 1.5 if sb is None else _operand(name, sb, "cpu", dt, 1)
    if layout == "transposed":
        a = a.t()
    out, grads = _grads(getattr(tinycuda, name), a, b)
    ref, ref_grads = _grads(BINARY[name].ref, a, b)
    exact = name in EXACT
    tol = dict(rtol=0, atol=0) if exact else dict(rtol=2e-2 if dt == torch.bfloat16 else 1e-5, atol=1e-5)
    torch.testing.assert_close(out, ref, equal_nan=True, **tol)
    for g, r in zip(grads, ref_grads):
        if g is not None and dt == torch.float32:
            torch.testing.assert_close(g, r, equal_nan=True, rtol=1e-5, atol=1e-4)
    c = torch.rand(a.shape) > 0.5
    _same(tinycuda.where(c, a, b), torch.where(c, a, b))


def test_empty_result_from_a_non_empty_operand(device):
    """(5, 1) with (0,) broadcast to (5, 0): empty gradients of the operands' shapes."""
    a, b = torch.randn(5, 1, device=device), torch.randn(0, device=device)
    out, (ga, gb) = _grads(tinycuda.mul, a, b)
    assert out.shape == (5, 0) and ga.shape == (5, 1) and gb.shape == (0,)
    _same(ga, torch.zeros(5, 1, device=device))


def test_a_gradient_summed_over_several_dims_rounds_once(device):
    """grad_a of a (1, 1) beside a (2, 2) in float16: 1024 + 0.5 + 0.5 + 0 is 1025, as torch sums it (once, in
    float32); summed over one dim, rounded (1024.5 -> 1024, ties to even), then the other, it is 1024."""
    a = torch.zeros(1, 1, device=device, dtype=torch.float16)
    b = torch.zeros(2, 2, device=device, dtype=torch.float16)
    g = torch.tensor([[1024.0, 0.5], [0.5, 0.0]], device=device, dtype=torch.float16)
    _, (ga, _) = _grads(tinycuda.add, a, b, grad_out=g)
    _, (ra, _) = _grads(torch.add, a, b, grad_out=g)
    assert ra.item() == 1025
    _same(ga, ra)


def test_cpu_scalar_tensor_requiring_grad(device):
    """A 0-dim CPU tensor beside a larger (or a CUDA) one is a host scalar, read once; its gradient is summed
    over everything and stays on the CPU in its dtype, as torch's."""
    for name in OPS:
        x = _operand(name, (5, 33), device, torch.float32, 0)
        for s in (torch.tensor(1.5), torch.tensor(0.75, dtype=torch.float64)):
            _, (gx, gs) = _grads(getattr(tinycuda, name), x, s)
            _, (rx, rs) = _grads(BINARY[name].ref, x, s)
            assert gs.device.type == "cpu" and gs.dtype == s.dtype and gs.shape == ()
            torch.testing.assert_close(gs, rs, rtol=1e-5, atol=1e-5)  # summed in float32, the result's dtype
            torch.testing.assert_close(gx, rx)


def test_cpu_scalar_tensor_as_a_requiring_grad(device):
    """The same host scalar as a (pow's base: torch's own pow backward fails on a CPU base beside a CUDA
    exponent, so the reference takes it moved to the device; the op table's sample is forward only)."""
    for name in OPS:
        x = _operand(name, (5, 33), device, torch.float32, 1)
        s = _operand(name, (), "cpu", torch.float32, 0)
        _, (gs, gx) = _grads(getattr(tinycuda, name), s, x)
        _, (rs, rx) = _grads(BINARY[name].ref, s.to(device), x)
        assert gs.device.type == "cpu" and gs.dtype == s.dtype and gs.shape == ()
        torch.testing.assert_close(gs, rs.cpu(), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(gx, rx)


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU and a CUDA build")
def test_cpu_and_cuda_tensors_of_more_dims_are_refused():
    for name in OPS:
        with pytest.raises(RuntimeError, match=rf"tinycuda::{name}: b is on cpu but a is on cuda:0"):
            getattr(tinycuda, name)(torch.randn(3, device="cuda"), torch.randn(1))


# ---------------------------------------------------------------------------
# special values: NaN, infinities, signed zeros, ties, pow's conventions

A = [nan, 1.0, nan, 0.0, -0.0, inf, -inf, 2.0, 0.0, 0.0, -2.0, 1.0, 3.0, -inf, 0.5, 0.0, 0.0]
B = [1.0, nan, nan, -0.0, 0.0, inf, 2.0, -inf, 0.0, -1.0, 0.5, nan, 3.0, 0.0, inf, 0.5, -2.0]


@pytest.mark.parametrize("name", OPS)
def test_special_values_are_torchs(device, name):
    """NaN propagates (maximum and minimum too), infinities, 0/0, 0^0, 1^NaN, (-2)^0.5, ties: torch's outputs
    and gradients (NaN where torch's is NaN, a tie halved) in float32."""
    a, b = torch.tensor(A, device=device), torch.tensor(B, device=device)
    out, (ga, gb) = _grads(getattr(tinycuda, name), a, b)
    ref, (ra, rb) = _grads(BINARY[name].ref, a, b)
    if name in EXACT:
        _same(out, ref)
    torch.testing.assert_close(out, ref, equal_nan=True)
    torch.testing.assert_close(ga, ra, equal_nan=True)
    torch.testing.assert_close(gb, rb, equal_nan=True)


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_ties_halve_the_gradient(device, dtype, name):
    """maximum(a, a) gives each operand half of grad_out, bit for bit as torch; a tie with a broadcast operand
    sums its halves."""
    a = torch.randn(4, 9, device=device).to(dtype)
    g = torch.randn(4, 9, device=device).to(dtype)
    for b in (a.clone(), a[1].clone()):
        _, (ga, gb) = _grads(getattr(tinycuda, name), a, b, grad_out=g)
        _, (ra, rb) = _grads(getattr(torch, name), a, b, grad_out=g)
        _same(ga, ra)
        torch.testing.assert_close(gb, rb)
    _, (ga, gb) = _grads(getattr(tinycuda, name), a, a.clone(), grad_out=g)
    _same(ga, g / 2)


def test_pow_conventions(device):
    """torch's pow: 0^0 = 1 with d/da = 0 (b = 0) and d/db = 0 (a = 0, b >= 0); 0^-1 = inf; (-8)^(1/3) = NaN;
    a number base or exponent; the gradients as torch's, infinities included."""
    a = torch.tensor([0.0, 0.0, 0.0, 0.0, 0.0, -8.0, -2.0, 2.0, 1.0, 0.0], device=device)
    b = torch.tensor([0.0, 1.0, 2.0, -1.0, 0.5, 1 / 3, 3.0, -0.5, nan, -2.0], device=device)
    for args in ((a, b), (a, 0.0), (a, 2), (0.0, b), (2.0, b), (a, -1)):
        out, grads = _grads(tinycuda.pow, *args)
        ref, refs = _grads(torch.pow, *args)
        torch.testing.assert_close(out, ref, equal_nan=True)
        for g, r in zip(grads, refs):
            if r is not None:
                torch.testing.assert_close(g, r, equal_nan=True)


# ---------------------------------------------------------------------------
# dims and views

def test_more_than_8_dims_are_refused():
    """The params hold 8 dims: both doors refuse 9, whichever operand has them (no silent flattening)."""
    nine, x = torch.randn((1,) * 9), torch.randn(3)
    for name in OPS:
        for args in ((nine, x), (x, nine)):
            with pytest.raises(RuntimeError, match=rf"tinycuda::{name}: at most 8 dims, got 9"):
                getattr(tinycuda, name)(*args)
            with pytest.raises(ValueError, match=rf"tinycuda.capi.{name}: at most 8 dims, got 9"):
                getattr(capi, name)(*(t.numpy() for t in args))
    eight = torch.randn((2, 1) * 4)
    _same(tinycuda.add(eight, x[:1]), eight + x[:1])


@pytest.mark.parametrize("name", OPS)
def test_permuted_bf16_views_are_read_in_place(device, name):
    """Permuted and expanded bfloat16 views give the bits of the op on contiguous copies, forward and
    backward; capi reads the same views through DLPack, strides and all."""
    a = _operand(name, (2, 3, 4, 5), device, torch.bfloat16, 0).permute(3, 1, 0, 2)
    b = _operand(name, (3, 1, 1), device, torch.bfloat16, 1).expand(3, 2, 4)
    assert not a.is_contiguous() and b.stride()[1:] == (0, 0)
    f = getattr(tinycuda, name)
    _same(f(a, b), f(a.contiguous(), b.contiguous()))
    g = torch.randn(5, 3, 2, 4, device=device).bfloat16()
    for got, ref in zip(_grads(f, a, b, grad_out=g)[1], _grads(f, a.contiguous(), b.contiguous(), grad_out=g)[1]):
        _same(got, ref)
    _same(getattr(capi, name)(a, b), f(a, b))


def test_capi_reads_numpy_views_in_place():
    """NumPy's byte strides, negative and 0 too, reach the kernel as element strides: the torch op's bits on
    copies; the backward reads a and b the same way and writes each gradient at the broadcast shape (the
    torch op's outputs)."""
    x = np.random.randn(6, 10).astype(np.float32)
    views = (x[::-1, ::2], x.T[:5], x[2:, 3:8], np.broadcast_to(x[:1, :5], (4, 5)), x[3, ::-2])
    for a in views:
        b = x[1, :a.shape[-1]][::-1]
        ta, tb = torch.from_numpy(a.copy()), torch.from_numpy(b.copy())
        for name in ("add", "div", "maximum"):
            assert np.array_equal(getattr(capi, name)(a, b), getattr(T, name)(ta, tb).numpy())
            assert np.array_equal(getattr(capi, name)(b, 2.0), getattr(T, name)(tb, torch.tensor(2.0,
                                                                                              dtype=torch.float64)))
        g = np.random.randn(*np.broadcast_shapes(a.shape, b.shape)).astype(np.float32)
        for mask in ((True, True), (False, True), (True, False)):
            got = capi.mul_backward(g, a, b, mask)
            ref = T.mul_backward(torch.from_numpy(g), ta, tb, list(mask))
            for gg, r, m in zip(got, ref, mask):
                assert (gg is None) == (not m)
                if m:
                    assert gg.shape == g.shape and np.array_equal(gg, r.numpy())


def test_capi_outputs_given_and_errors():
    a, b = np.random.randn(5, 33).astype(np.float32), np.random.randn(33).astype(np.float32)
    out = np.empty((5, 33), np.float32)
    assert capi.sub(a, b, alpha=0.5, out=out) is out
    assert np.array_equal(out, T.sub(torch.from_numpy(a), torch.from_numpy(b), alpha=0.5).numpy())
    ga, gb = np.empty((5, 33), np.float32), np.empty((5, 33), np.float32)
    got = capi.div_backward(a, a, b, grad_a=ga, grad_b=gb)
    assert got[0] is ga and got[1] is gb
    errors = [
        (ValueError, r"tinycuda.capi.add: a has shape \(5, 33\) and b has shape \(5,\), which do not broadcast",
         capi.add, (a, b[:5]), {}),
        (TypeError, r"tinycuda.capi.add: a and b must be arrays or numbers, at least one of them an array; got "
                    r"float and int", capi.add, (1.0, 2), {}),
        (TypeError, r"tinycuda.capi.add: a must be a NumPy array", capi.add, ("x", a), {}),
        (TypeError, r"tinycuda.capi.add: got an unexpected keyword argument 'beta'", capi.add, (a, b), {"beta": 1}),
        (TypeError, r"tinycuda.capi.mul: got an unexpected keyword argument 'alpha'", capi.mul, (a, b),
         {"alpha": 1}),
        (TypeError, r"tinycuda.capi.add: too many positional arguments", capi.add, (a, b, 2.0), {}),
        (TypeError, r"tinycuda.capi.add: alpha must be a float, got 'x'", capi.add, (a, b), {"alpha": "x"}),
        (TypeError, r"tinycuda.capi.add: a has dtype int64", capi.add, (np.arange(3), np.arange(3)), {}),
        (ValueError, r"tinycuda.capi.add: out must be a C-contiguous float32 cpu array of shape \(5, 33\)",
         capi.add, (a, b), {"out": np.empty((33, 5), np.float32)}),
        (ValueError, r"tinycuda.capi.add_backward: grad_out has shape \(33, 5\) but a and b broadcast to "
                     r"\(5, 33\)", capi.add_backward, (a.T.copy(), a, b), {}),
        (ValueError, r"tinycuda.capi.add_backward: grad_out must be C-contiguous", capi.add_backward,
         (np.asfortranarray(a), a, b), {}),
        (ValueError, r"tinycuda.capi.add_backward: output_mask must have 2 entries", capi.add_backward,
         (a, a, b, (True,)), {}),
        (ValueError, r"tinycuda.capi.add_backward: grad_b is given but output_mask skips it", capi.add_backward,
         (a, a, b, (True, False)), {"grad_b": np.empty((5, 33), np.float32)}),
    ]
    for exc, match, fn, args, kwargs in errors:
        with pytest.raises(exc, match=match):
            fn(*args, **kwargs)


# ---------------------------------------------------------------------------
# torch.compile, signatures

def test_compile_fullgraph_with_numbers(device):
    """Numbers as operands trace with no graph break (the number becomes a 0-dim tensor in the graph), with
    alpha, forward and backward: eager's bits."""
    x, y = torch.randn(5, 33, device=device), torch.randn(33, device=device)

    def f(x, y):
        h = tinycuda.add(x, 0.5, alpha=2.0)
        h = tinycuda.mul(3, tinycuda.maximum(h, y))
        return tinycuda.pow(tinycuda.sub(1.5, h.abs(), alpha=0.5).abs() + 0.1, 2)

    xs = [x.requires_grad_(), y.requires_grad_()]
    check_compiled(f, xs, wrt=xs, grad_out=torch.randn(5, 33, device=device), reps=2, rtol=0, atol=0)


def test_signatures():
    """tinycuda.<op> has the registered schema's arguments (alpha keyword-only with aten's add default, as
    torch.add's); capi's add the outputs, the stream and, for a backward, output_mask and the gradients."""
    assert str(inspect.signature(tinycuda.add)) == "(a, b, *, alpha=1.0)"
    assert str(inspect.signature(tinycuda.mul)) == "(a, b)"
    assert str(inspect.signature(capi.add)) == "(a, b, *, alpha=1.0, out=None, stream=None)"
    assert str(inspect.signature(capi.pow)) == "(a, b, *, out=None, stream=None)"
    assert str(inspect.signature(capi.sub_backward)) == (
        "(grad_out, a, b, output_mask=(True, True), *, alpha=1.0, grad_a=None, grad_b=None, stream=None)")
    for name in ("add", "sub"):
        alpha = next(a for a in getattr(torch.ops.aten, name).Tensor._schema.arguments if a.name == "alpha")
        assert alpha.kwarg_only and alpha.default_value == inspect.signature(getattr(tinycuda, name)).parameters[
            "alpha"].default
    for name in OPS:
        fn, schema = getattr(tinycuda, name), getattr(T, name).default._schema
        params = list(inspect.signature(fn).parameters.values())
        assert [(p.name, p.kind == p.KEYWORD_ONLY, None if p.default is p.empty else p.default) for p in params] == [
            (a.name, a.kwarg_only, a.default_value) for a in schema.arguments], name
        assert fn.__name__ == name and f"tinycuda::{name}_backward" in fn.__doc__
        ours = [p for p in inspect.signature(getattr(capi, name)).parameters.values()
                if p.name not in ("out", "stream")]
        assert [(p.name, p.kind) for p in ours] == [(p.name, p.kind) for p in params], name
        assert "does not promote" in getattr(capi, name).__doc__
        assert "sums it over" in getattr(capi, name + "_backward").__doc__
        # torch's positional order: tinycuda.<op>(x, y) is torch.<op>(x, y)
        a, b = _operand(name, (3,), "cpu", torch.float32, 0), _operand(name, (3,), "cpu", torch.float32, 1)
        torch.testing.assert_close(fn(a, b), BINARY[name].ref(a, b))
    assert set(OPS) <= set(tinycuda.ops.__all__) and set(OPS) <= set(capi.__all__)
    with pytest.raises(TypeError, match=r"tinycuda.add: a and b must be tensors or numbers"):
        tinycuda.add(2, 3)


# ---------------------------------------------------------------------------
# where (the op table has its entry; here the C door's particulars)

def test_capi_where_reads_views_and_numbers():
    """capi.where reads a bool condition and a, b through their strides (NumPy views, a transposed torch
    view through DLPack), takes numbers and 0-dim CPU arrays for a or b: the torch op's bits; bad input
    names the argument."""
    x = np.random.randn(6, 10).astype(np.float32)
    c = np.random.rand(10, 6) > 0.5
    for cond, a, b in ((c.T, x, x[0]), (c[::-2, :3].T, x[::2, ::-2], 0.5), (np.array(False), x.T, np.array(2.0))):
        ref = T.where(*(torch.from_numpy(np.ascontiguousarray(t)) if isinstance(t, np.ndarray)
                        else torch.tensor(t, dtype=torch.float64) for t in (cond, a, b)))
        assert np.array_equal(capi.where(cond, a, b), ref.numpy())
    t = torch.from_numpy(x).bfloat16().t()
    assert torch.equal(capi.where(torch.from_numpy(c), t, -1.0), T.where(torch.from_numpy(c), t, torch.tensor(-1.0)))
    with pytest.raises(TypeError, match=r"tinycuda.capi.where: condition must be bool, got float32"):
        capi.where(x, x, x)
    with pytest.raises(ValueError, match=r"tinycuda.capi.where: condition has shape \(10, 6\), a has shape "
                                         r"\(6, 10\) and b has shape \(6, 10\), which do not broadcast"):
        capi.where(c, x, x)
    with pytest.raises(TypeError, match=r"tinycuda.capi.where: b has dtype float16 but a has dtype float32"):
        capi.where(c.T, x, x.astype(np.float16))


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU and a CUDA build")
def test_capi_where_takes_a_cpu_condition_beside_cuda_arrays():
    x = torch.randn(5, 33, device="cuda")
    for value in (True, False):
        c = torch.tensor(value)
        assert torch.equal(capi.where(c, x, 0.5), T.where(c, x, torch.tensor(0.5, dtype=torch.float64)))
    with pytest.raises(ValueError, match=r"tinycuda.capi.where: condition is a cpu array but a and b are cuda"):
        capi.where(torch.ones(5, 33, dtype=torch.bool), x, x)
