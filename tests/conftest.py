"""Shared test helpers.

Accuracy rule for float16/bfloat16 (FlashAttention's): tinycuda's max error
against a float64 reference may be at most FACTOR x PyTorch's own max error
when PyTorch runs the same op in the same precision (2x for outputs, 3x for
gradients), plus one rounding step of the output's magnitude so that a case
where PyTorch happens to round exactly does not demand better than exact.
float32 and float64 are compared to the float64 reference with tolerances
that follow from the op's accumulation length.
"""
import zlib

import pytest
import torch

import tinycuda.ops  # noqa: F401  (loads the kernels, registers the ops)

HAS_CUDA = torch.cuda.is_available() and torch._C._dispatch_has_kernel_for_dispatch_key(
    "tinycuda::relu", "CUDA")
DEVICES = ["cpu"] + (["cuda"] if HAS_CUDA else [])
HALF = [torch.float16, torch.bfloat16]
DTYPES = [torch.float32] + HALF
requires_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU and a CUDA build")


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


@pytest.fixture(params=DTYPES, ids=lambda d: str(d).replace("torch.", ""))
def dtype(request):
    return request.param


@pytest.fixture(autouse=True)
def _fresh_seed(request):
    # fresh random inputs per test, but reproducible from the test's id
    torch.manual_seed(zlib.crc32(request.node.nodeid.encode()))


def max_err(a, ref):
    return (a.double() - ref.double()).abs().max().item() if a.numel() else 0.0


def assert_matches(ours, torch_same_precision, ref, *, grad=False, rtol32=1e-5, atol32=1e-5):
    """`ours` vs the float64 `ref` under the per-dtype rule above."""
    assert ours.shape == ref.shape, (ours.shape, ref.shape)
    assert ours.dtype == torch_same_precision.dtype
    if ours.numel() == 0:
        return
    assert not torch.isnan(ours).any() or torch.isnan(ref).any(), "NaN in output"
    if ours.dtype in HALF:
        factor = 3.0 if grad else 2.0
        e_ours = max_err(ours, ref)
        e_torch = max_err(torch_same_precision, ref)
        one_rounding = torch.finfo(ours.dtype).eps * ref.abs().max().item()
        assert e_ours <= factor * e_torch + one_rounding, (
            f"{ours.dtype}: error {e_ours:.3g} > {factor} x torch's {e_torch:.3g} + {one_rounding:.3g}")
    else:
        torch.testing.assert_close(ours.double(), ref.double(), rtol=rtol32, atol=atol32)


def noncontiguous(t):
    """The same values as `t` in a non-contiguous view (every other element of
    a tensor twice as wide in the last dim)."""
    if t.dim() == 0 or t.numel() == 0:
        return t
    wide = torch.empty((*t.shape[:-1], 2 * t.shape[-1]), dtype=t.dtype, device=t.device)
    wide[..., ::2] = t
    view = wide[..., ::2]
    assert not view.is_contiguous() or t.shape[-1] == 1
    return view


def check_op(ours_fn, torch_fn, inputs, *, grad=True, rtol32=1e-5, atol32=1e-5,
             grad_rtol32=None, grad_atol32=None):
    """Runs ours_fn and torch_fn on `inputs` (views are kept as given: strides
    matter) and torch_fn on float64 copies; compares outputs, then the
    gradients of every floating input for one random grad_out."""
    def leaves(cast):
        return [cast(t).detach().requires_grad_(grad) if t.is_floating_point() else t for t in inputs]

    ours_in, lp_in, ref_in = leaves(lambda t: t), leaves(lambda t: t), leaves(lambda t: t.double())
    out, out_lp, out_ref = ours_fn(*ours_in), torch_fn(*lp_in), torch_fn(*ref_in)
    assert_matches(out, out_lp, out_ref, rtol32=rtol32, atol32=atol32)
    if not grad:
        return out
    g = torch.randn(out_ref.shape, dtype=out.dtype, device=out.device)
    floats = [i for i, t in enumerate(inputs) if t.is_floating_point()]
    gs = torch.autograd.grad(out, [ours_in[i] for i in floats], g)
    gs_lp = torch.autograd.grad(out_lp, [lp_in[i] for i in floats], g)
    gs_ref = torch.autograd.grad(out_ref, [ref_in[i] for i in floats], g.double())
    for a, b, r in zip(gs, gs_lp, gs_ref):
        assert a.dtype == inputs[0].dtype
        assert_matches(a, b, r, grad=True, rtol32=grad_rtol32 or rtol32, atol32=grad_atol32 or atol32)
    return out


def assert_drop_in_module(ours, ref, x):
    """`ours` is a drop-in for the torch.nn module `ref`: the same state_dict
    keys and repr, and the same output after loading the other's (random)
    parameters, in both directions."""
    assert list(ours.state_dict()) == list(ref.state_dict()) and repr(ours) == repr(ref)
    for src, dst in ((ref, ours), (ours, ref)):
        for p in src.parameters():
            torch.nn.init.normal_(p)
        dst.load_state_dict(src.state_dict())
        torch.testing.assert_close(ours(x), ref(x))
