"""The elementwise family (sigmoid ... rsqrt) beyond the op table
(tests/test_ops.py): NaN and infinities, the one-sided derivatives at the
kinks, softplus's threshold, more than 8 dims, permuted views read in place,
defaults that are torch's, the generated signatures, the nn modules."""
import inspect
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import tinycuda
from tinycuda import _build, capi
from conftest import assert_drop_in_module
from tinycuda.optable import UNARY

OPS = _build.unary_ops()
inf, nan = math.inf, math.nan


def _every_variant():
    return [pytest.param(name, kw, id=name + "".join(f"-{k}={v}" for k, v in kw.items()))
            for name in OPS for kw in UNARY[name].kwargs]


@pytest.mark.parametrize("name,kw", _every_variant())
def test_nan_propagates(device, dtype, name, kw):
    """NaN in, NaN out, for every op (clamp and hardtanh keep it, as torch's); the other values as torch's."""
    x = torch.tensor([nan, 0.5, nan, 2.0, 0.25], device=device).to(dtype)
    y = getattr(tinycuda, name)(x, **kw)
    assert torch.isnan(y[[0, 2]]).all() and not torch.isnan(y[[1, 3, 4]]).any(), y
    torch.testing.assert_close(y, UNARY[name].ref(x, **kw), equal_nan=True)


def _grad(fn, x, *args):
    x = x.detach().requires_grad_()
    return torch.autograd.grad(fn(x, *args).sum(), x)[0]


@pytest.mark.parametrize("name,kw", _every_variant())
def test_gradient_at_nan_is_torchs(device, name, kw):
    """The backward at a NaN input takes the branch torch's takes (elu, selu: the positive one, grad * scale)."""
    x = torch.tensor([nan, 0.5, -0.5, 2.0], device=device)
    torch.testing.assert_close(_grad(getattr(tinycuda, name), x, *kw.values()),
                               _grad(UNARY[name].ref, x, *kw.values()), equal_nan=True)


def test_hardtanh_and_clamp_gradients_at_the_bounds(device, dtype):
    """At a bound hardtanh's gradient is 0 and clamp's is kept, torch's two rules, bit for bit."""
    x = torch.tensor([-2.0, -1.0, -0.5, 0.0, 1.0, 2.0], device=device).to(dtype)
    torch.testing.assert_close(_grad(tinycuda.hardtanh, x), torch.tensor([0.0, 0, 1, 1, 0, 0]).to(x), rtol=0, atol=0)
    torch.testing.assert_close(_grad(tinycuda.clamp, x, -1.0, 1.0), torch.tensor([0.0, 1, 1, 1, 1, 0]).to(x), rtol=0,
                               atol=0)
    torch.testing.assert_close(_grad(tinycuda.hardtanh, x), _grad(F.hardtanh, x), rtol=0, atol=0)
    torch.testing.assert_close(_grad(tinycuda.clamp, x, -1.0, 1.0), _grad(torch.clamp, x, -1.0, 1.0), rtol=0, atol=0)


@pytest.mark.parametrize("beta,threshold", [(1.0, 20.0), (2.0, 5.0), (0.5, 3.0)])
def test_softplus_threshold(device, beta, threshold):
    """Above threshold / beta softplus is x itself (bits) with gradient 1; at and below it, log1p(exp(beta x)) / beta
    with gradient sigmoid(beta x), as torch's."""
    t = threshold / beta
    above = torch.tensor([t + 0.5, t + 1.0, 4 * t, 1e30], device=device)
    below = torch.tensor([t, t - 0.5, t - 1.0, 0.0, -t], device=device)
    y = tinycuda.softplus(above, beta, threshold)
    assert torch.equal(y, above) and torch.equal(_grad(tinycuda.softplus, above, beta, threshold), torch.ones_like(y))
    ref = F.softplus(below.double(), beta, threshold)
    torch.testing.assert_close(tinycuda.softplus(below, beta, threshold).double(), ref)
    torch.testing.assert_close(_grad(tinycuda.softplus, below, beta, threshold).double(),
                               torch.sigmoid(beta * below.double()))


INFINITIES = {  # op: inputs where torch defines the result
    "exp": [-inf, inf, -1e4, 100.0], "sigmoid": [-inf, inf, -1e4, 1e4], "tanh": [-inf, inf, -1e4, 1e4],
    "mish": [20.0, 50.0, 1e4, inf, -1e4], "softplus": [inf, -inf, 1e4], "silu": [inf, -1e4], "softsign": [inf, -inf],
    "hardsigmoid": [inf, -inf], "elu": [inf, -inf], "leaky_relu": [inf, -inf], "log": [0.0, inf], "rsqrt": [inf],
    "sqrt": [inf, 0.0], "abs": [-inf], "neg": [inf],
}


@pytest.mark.parametrize("name", INFINITIES)
def test_infinities(device, name):
    """Where torch defines a result for an infinite or huge input, the same value; and the same gradient where
    torch's is finite (sigmoid, tanh, exp: 0 at their flat ends)."""
    x = torch.tensor(INFINITIES[name], device=device)
    torch.testing.assert_close(getattr(tinycuda, name)(x), UNARY[name].ref(x), equal_nan=True, rtol=0, atol=0)
    ref = _grad(UNARY[name].ref, x)
    finite = torch.isfinite(ref)
    torch.testing.assert_close(_grad(getattr(tinycuda, name), x)[finite], ref[finite])


@pytest.mark.parametrize("name", ["sigmoid", "leaky_relu", "clamp"])
def test_more_than_8_dims(device, name):
    """The params hold 8 dims: the torch layer and capi read a larger x flat (contiguous, or a contiguous copy)."""
    kw = UNARY[name].kwargs[0]
    f = getattr(tinycuda, name)
    for x in (torch.randn((2, 1, 3, 1, 2, 1, 2, 1, 3, 2), device=device),  # 10 dims, contiguous
              torch.randn((2, 1, 3, 2, 2, 1, 2, 1, 3), device=device).transpose(0, 3)):  # 9 dims, permuted
        y = f(x, **kw)
        assert y.shape == x.shape and y.is_contiguous()
        torch.testing.assert_close(y, UNARY[name].ref(x, **kw))
        torch.testing.assert_close(_grad(f, x, *kw.values()), _grad(UNARY[name].ref, x, *kw.values()))
        got = getattr(capi, name)(x.cpu().numpy(), **kw)  # capi on the CPU: against the CPU kernel, bit for bit
        assert np.array_equal(got, f(x.cpu(), **kw).numpy())


@pytest.mark.parametrize("name", OPS)
def test_permuted_bf16_view_is_read_in_place(device, name):
    """A permuted 4-D bfloat16 view gives the bits of the same op on its contiguous copy, forward and backward."""
    u, f = UNARY[name], getattr(tinycuda, name)
    x = 3 * torch.randn(2, 3, 4, 5, device=device)
    x = (x.abs() + 0.1 if u.positive else x).bfloat16().permute(3, 1, 0, 2)
    assert not x.is_contiguous()
    kw = u.kwargs[0]
    assert torch.equal(f(x, **kw), f(x.contiguous(), **kw))
    assert torch.equal(_grad(f, x, *kw.values()), _grad(f, x.contiguous(), *kw.values()))
    got = getattr(capi, name)(x, **kw)  # the C ABI reads the torch view through DLPack, strides and all
    assert torch.equal(got, f(x, **kw))


def test_capi_reads_numpy_views_in_place():
    """NumPy's byte strides, negative and 0 included, reach the kernel as element strides: the bits of the torch op
    on the same values; bad arguments name the op and the argument."""
    a = np.random.randn(6, 10).astype(np.float32)
    for x in (a[::-1, ::2], a.T, a[2:, 3:7], np.broadcast_to(a[:1], (4, 10)), a[3, ::-3]):
        assert np.array_equal(capi.elu(x, 0.5), tinycuda.elu(torch.from_numpy(x.copy()), 0.5).numpy())
        assert np.array_equal(capi.clamp(x, max=0.25), tinycuda.clamp(torch.from_numpy(x.copy()), max=0.25).numpy())
    with pytest.raises(ValueError, match=r"tinycuda.capi.clamp: at least one of min and max must be given"):
        capi.clamp(a)
    with pytest.raises(TypeError, match=r"tinycuda.capi.leaky_relu: negative_slope must be a float, got 'x'"):
        capi.leaky_relu(a, "x")
    with pytest.raises(TypeError, match=r"tinycuda.capi.exp: got an unexpected keyword argument 'alpha'"):
        capi.exp(a, alpha=1.0)
    with pytest.raises(ValueError, match=r"tinycuda.capi.tanh_backward: grad_out has shape \(6, 10\) but y has "
                                         r"shape \(10, 6\)"):
        capi.tanh_backward(a, a.T.copy())


def test_defaults_are_torchs():
    """The core's schema defaults are torch.nn.functional's (F.softplus is a builtin without a Python signature:
    nn.Softplus's constructor has its defaults; torch.clamp's are in aten's schema)."""
    torch_sigs = {"leaky_relu": inspect.signature(F.leaky_relu), "elu": inspect.signature(F.elu),
                  "hardtanh": inspect.signature(F.hardtanh), "softplus": inspect.signature(torch.nn.Softplus)}
    for name, sig in torch_sigs.items():
        ours = {p: v.default for p, v in inspect.signature(getattr(tinycuda, name)).parameters.items() if p != "x"}
        assert ours and ours == {p: sig.parameters[p].default for p in ours}, name
    aten = {a.name: a.default_value for a in torch.ops.aten.clamp.default._schema.arguments[1:]}
    assert {p: v.default for p, v in inspect.signature(tinycuda.clamp).parameters.items() if p != "x"} == aten


def test_generated_signatures_show_the_defaults():
    assert str(inspect.signature(tinycuda.leaky_relu)) == "(x, negative_slope=0.01)"
    assert str(inspect.signature(tinycuda.clamp)) == "(x, min=None, max=None)"
    assert str(inspect.signature(tinycuda.softplus)) == "(x, beta=1.0, threshold=20.0)"
    assert str(inspect.signature(capi.hardtanh)) == "(x, min_val=-1.0, max_val=1.0, *, out=None, stream=None)"
    assert str(inspect.signature(capi.sigmoid_backward)) == "(grad_out, y, *, grad_x=None, stream=None)"
    for name in OPS:
        fn, schema = getattr(tinycuda, name), getattr(torch.ops.tinycuda, name).default._schema
        params = inspect.signature(fn).parameters.values()
        assert [(p.name, None if p.default is p.empty else p.default) for p in params] == [
            (a.name, a.default_value) for a in schema.arguments], name
        assert fn.__name__ == name and f"tinycuda::{name}_backward" in fn.__doc__
        capi_params = [p for p in inspect.signature(getattr(capi, name)).parameters.values() if p.name != "x"]
        assert [(p.name, p.default) for p in capi_params if p.kind == p.POSITIONAL_OR_KEYWORD] == [
            (p.name, p.default) for p in params if p.name != "x"], name
    assert set(OPS) <= set(tinycuda.ops.__all__)


MODULES = [  # (the class's name in tinycuda.nn and torch.nn, constructor arguments)
    ("Sigmoid", ()), ("Tanh", ()), ("SiLU", ()), ("Mish", ()), ("LeakyReLU", (0.2,)), ("ELU", (0.5,)), ("SELU", ()),
    ("Softplus", (2.0, 5.0)), ("Softsign", ()), ("Hardsigmoid", ()), ("Hardtanh", (-0.5, 2.0)),
]


@pytest.mark.parametrize("cls,args", MODULES, ids=[m[0] for m in MODULES])
def test_module_is_a_drop_in(device, cls, args):
    ours, ref = getattr(tinycuda.nn, cls)(*args), getattr(torch.nn, cls)(*args)
    assert isinstance(ours, type(ref)) and ours.extra_repr() == ref.extra_repr() and not ours.state_dict()
    x = 4 * torch.randn(5, 33, device=device)
    assert_drop_in_module(ours, ref, x)  # state_dict keys, repr, outputs
    torch.testing.assert_close(_grad(ours, x), _grad(ref, x))


INPLACE = [m for m in MODULES if "inplace" in inspect.signature(getattr(torch.nn, m[0])).parameters]


@pytest.mark.parametrize("cls,args", INPLACE, ids=[m[0] for m in INPLACE])
def test_module_inplace(device, cls, args):
    """inplace=True writes the result over x and returns x, with torch's gradients through it, and is refused on
    a leaf that requires grad, as torch's."""
    ours, ref = getattr(tinycuda.nn, cls)(*args, inplace=True), getattr(torch.nn, cls)(*args, inplace=True)
    assert repr(ours) == repr(ref)
    x = 4 * torch.randn(5, 33, device=device)
    want = getattr(torch.nn, cls)(*args)(x)
    with torch.no_grad():
        assert ours(x) is x
    torch.testing.assert_close(x, want)
    x, grads = 4 * torch.randn(5, 33, device=device), []
    for m in (ours, ref):
        leaf = x.clone().requires_grad_()
        h = leaf * 1  # not a leaf: in place is allowed
        out = m(h)
        assert out is h
        grads.append(torch.autograd.grad(out.sum(), leaf)[0])
    torch.testing.assert_close(grads[0], grads[1])
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        ours(torch.randn(3, device=device, requires_grad=True))
