"""The C ABI front door: libtinycuda through tinycuda.capi (cffi over the headers).

Every op of the torch door is in capi under its name, with its arguments; the
two run the same kernels, so results agree bit for bit. fused_linear_cross_entropy
is capi's own chunked composite over its linear / cross_entropy / linear_backward
(the core's GEMM, where the torch op uses torch's matmul), so it agrees with the
torch op within the precision rule of conftest, and bit for bit with the
unfused capi calls where the arithmetic is the same. Bad input is a Python
exception naming the op and the argument, never a crash."""
import inspect
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import tinycuda
from tinycuda import _build, capi
from conftest import DEVICES, HAS_CUDA, assert_matches, requires_cuda

T = torch.ops.tinycuda
ALL_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
SHAPES = [(0, 5), (1, 1), (7, 13), (3, 5, 33)]  # empty, one element, odd sizes, 3-D


def _to_capi(a):
    """What a capi user passes: NumPy for CPU arrays NumPy can hold, else the tensor
    itself (bfloat16 through DLPack, CUDA through __cuda_array_interface__)."""
    if isinstance(a, torch.Tensor) and a.device.type == "cpu" and a.dtype != torch.bfloat16:
        return a.numpy()
    return a


def _torch(a):
    """A capi result as a tensor (NumPy arrays come back as NumPy)."""
    return a if isinstance(a, torch.Tensor) else torch.from_numpy(np.asarray(a))


def _same(got, ref):
    """Bit for bit: same shape, dtype and bits (NaNs in the same places)."""
    if isinstance(ref, (tuple, list)):
        assert len(got) == len(ref)
        for g, r in zip(got, ref):
            _same(g, r)
        return
    got = _torch(got)
    assert got.shape == ref.shape and got.dtype == ref.dtype, (got.shape, got.dtype, ref.shape, ref.dtype)
    exact = torch.allclose(got.cpu(), ref.cpu(), rtol=0, atol=0, equal_nan=True)  # NaNs in the same places too
    assert exact, (got.double() - ref.double()).abs().max()


def _cases(x):
    """[(op, args, capi kwargs, torch-only trailing args)] for an input x [..., C]:
    each capi op is called as capi.<op>(*args, **kwargs), the torch op as
    torch.ops.tinycuda.<op>(*args, *trailing)."""
    c, dt = x.shape[-1], x.dtype
    g, x2, dev = torch.randn_like(x), torch.randn_like(x), x.device
    w, b, lw, lb = (torch.randn(*s, dtype=dt, device=x.device) for s in ((c,), (c,), (5, c), (5,)))
    sm, lsm, sbr = T.softmax(x, 0), T.log_softmax(x, -1), T.scale_bias_relu(x, b, 0.5)
    ln, rms = T.layer_norm(x, [c], w, b, 1e-5), T.rms_norm(x, [c], w, None)
    logits = x.reshape(-1, c)
    target = torch.randint(0, c, logits.shape[:1], device=dev)
    target[::3] = -100
    cases = [("relu", (x,)), ("relu_backward", (g, x)), ("relu_mask", (x,)),
             ("relu_mask_backward", (g, T.relu_mask(x)[1])), ("square", (x,)), ("square_backward", (g, x)),
             ("swiglu", (x, x2)), ("swiglu_backward", (g, x, x2)),
             ("softmax", (x,)), ("softmax", (x, 0)), ("log_softmax", (x, -1)), ("log_softmax", (x, 0)),
             ("softmax_backward", (g, sm, 0, False)), ("softmax_backward", (g, lsm, -1, True)),
             ("scale_bias_relu", (x, b, 0.5)), ("scale_bias_relu_backward", (g, sbr, 0.5, [True, True])),
             ("scale_bias_relu_backward", (g, sbr, 0.5, [False, True])),
             ("layer_norm", (x, [c], w, b, 1e-5)), ("layer_norm", (x, [c])),
             ("layer_norm_backward", (g, x, [c], ln[1], ln[2], w, [True, True, True])),
             ("rms_norm", (x, [c], w, None)), ("rms_norm", (x, [c], None, 1e-3)),
             ("rms_norm_backward", (g, x, [c], rms[1], w, [True, False])),
             ("linear", (x, lw, lb)), ("linear", (x, lw)),
             ("linear_backward", (torch.randn(*x.shape[:-1], 5, dtype=dt, device=dev), x, lw, [True, True, True])),
             ("linear_backward", (torch.randn(*x.shape[:-1], 5, dtype=dt, device=dev), x, lw, [False, True, False])),
             ("sum", (x,)), ("sum", (x, 0, True)), ("sum", (x, [0, -1], False)),
             ("sum_backward", (torch.randn(x.shape[:-1], dtype=dt, device=dev), x, T.sum(x, -1), -1, False))]
    for ap in ("none", "tanh"):
        cases += [("gelu", (x, ap)), ("gelu_backward", (g, x, ap)), ("geglu", (x, x2, ap)),
                  ("geglu_backward", (g, x, x2, ap))]
    cases = [(op, args, {}, ()) for op, args in cases]
    for red in ("mean", "sum", "none"):
        cases.append(("cross_entropy", (logits, target, -100, red, 0.1), {"compute_grad": True}, (True,)))
    cases.append(("cross_entropy", (logits, target.clamp(min=0), 2), {}, ()))
    for red, grad in (("mean", True), ("none", False)):  # softcap and z-loss, the z terms returned
        cases.append(("cross_entropy", (logits, target, -100, red, 0.0, grad, 3.0, 1e-2, True), {}, ()))
    cw = torch.rand(c, dtype=dt, device=dev) + 0.5  # class weights, the last positional argument
    for red in ("mean", "sum", "none"):
        cases.append(("cross_entropy", (logits, target, -100, red, 0.1, True, 0.0, 0.0, False, cw), {}, ()))
    cases.append(("cross_entropy", (logits, target, -100, "mean", 0.2, True, 3.0, 1e-2, True, cw), {}, ()))
    cases.append(("cross_entropy", (logits, target, -100, "mean", 0.0, False, 0.0, 1e-2, False, cw), {}, ()))
    for red in ("mean", "none"):  # an upstream gradient, multiplied in before the one rounding (the backward's call)
        gl = (torch.rand(logits.shape[:1] if red == "none" else (), device=dev) + 0.5).to(dt)
        cases.append(("cross_entropy", (logits, target, -100, red, 0.1, True, 3.0, 1e-2, False, cw, False, gl), {}, ()))
    return cases


def _check_ops_bit_for_bit(device, dtype, shape):
    x = torch.randn(shape, dtype=dtype, device=device)
    for op, args, kwargs, tail in _cases(x):
        ref = getattr(T, op)(*args, *tail)
        if op == "cross_entropy":  # capi returns what was asked for: the loss, its gradient, the z terms
            grad, z = kwargs.get("compute_grad", args[5:6] == (True,)), args[8:9] == (True,)
            ref = (ref[0], ref[1] if grad else None, ref[2]) if z else ref[:2] if grad else ref[0]
        mask = args[-1] if isinstance(args[-1], list) and isinstance(args[-1][0], bool) else None
        if mask:  # output_mask: skipped gradients are None here, empty there
            ref = tuple(r if m else None for r, m in zip(ref, mask))
        got = getattr(capi, op)(*[_to_capi(a) for a in args], **kwargs)
        if isinstance(ref, tuple):
            assert [g is None for g in got] == [r is None for r in ref], op
            got, ref = [g for g in got if g is not None], [r for r in ref if r is not None]
        try:
            _same(got, ref)
        except AssertionError as e:
            raise AssertionError(f"{op}{tuple(type(a).__name__ for a in args)}: {e}") from None
    # cross_entropy_backward scales in place, per row or by one value
    logits = x.reshape(-1, shape[-1])
    for scale in (torch.rand(logits.shape[:1], dtype=dtype, device=device), torch.tensor(0.5, dtype=dtype)):
        grad = T.cross_entropy(logits, torch.zeros(logits.shape[:1], dtype=torch.long, device=device), -100,
                               "none" if scale.dim() else "mean", 0.0, True)[1]
        ours = grad.clone()
        assert capi.cross_entropy_backward(_to_capi(ours), _to_capi(scale.to(device))) is not None
        T.cross_entropy_backward(grad, scale.to(device))
        _same(ours, grad)
    # with the logits (cross_entropy's grad_in_place): the rows whose grad_loss is not 1 recomputed over the
    # gradient for 1
    target = torch.randint(0, logits.shape[1], logits.shape[:1], device=device)
    for red, gl in (("none", torch.rand(logits.shape[:1], device=device).to(dtype)), ("mean", torch.tensor(0.5))):
        if red == "none" and gl.numel():
            gl[::2] = 1
        gl = gl.to(device=device, dtype=dtype)
        grad = T.cross_entropy(logits, target, -100, red, 0.1, True, 3.0, 1e-2)[1]
        ours = grad.clone()
        assert capi.cross_entropy_backward(_to_capi(ours), _to_capi(gl), _to_capi(logits), _to_capi(target), -100,
                                           red, 0.1, 3.0, 1e-2) is not None
        T.cross_entropy_backward(grad, gl, logits, target, -100, red, 0.1, 3.0, 1e-2)
        _same(ours, grad)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("device", DEVICES)
def test_every_op_matches_the_torch_op_bit_for_bit(device, dtype, shape):
    _check_ops_bit_for_bit(device, dtype, shape)


def test_capi_has_every_torch_op_with_its_arguments():
    """Same names; the torch schema's positional arguments are capi's, its keyword-only ones too."""
    ops = sorted(n.split("::")[1] for n in torch._C._dispatch_get_all_op_names() if n.startswith("tinycuda::"))
    assert "fused_linear_cross_entropy" in ops and "softmax" in ops
    for op in ops:
        assert op in capi.__all__, op
        schema = getattr(T, op).default._schema
        params = inspect.signature(getattr(capi, op)).parameters.values()
        positional = [p.name for p in params if p.kind == p.POSITIONAL_OR_KEYWORD]
        keyword = {p.name for p in params if p.kind == p.KEYWORD_ONLY}
        assert positional == [a.name for a in schema.arguments if not a.kwarg_only], op
        assert {a.name for a in schema.arguments if a.kwarg_only} <= keyword, op


def test_structs_come_from_the_headers():
    capi.lib()
    fields = [name for name, _ in capi.ffi.typeof("tc_softmax_params").fields]
    assert fields == ["dtype", "rows", "cols", "log", "x", "y", "algo", "stream"]
    assert capi.lib().TC_SOFTMAX_REGISTERS == 2


@pytest.mark.parametrize("algo", [0, 1, 2, "TC_SOFTMAX_ONLINE"])
def test_algo_is_the_struct_field(algo):
    x = torch.randn(9, 64)
    _same(capi.softmax(x.numpy(), algo=algo), T.softmax(x, -1, algo=capi.lib().TC_SOFTMAX_ONLINE
                                                         if isinstance(algo, str) else algo))
    w = torch.randn(5, 64)
    _same(capi.linear(x.numpy(), w.numpy(), algo="TC_GEMM_TILED"), T.linear(x, w, algo=2))


# ---------------------------------------------------------------------------
# fused_linear_cross_entropy

def _flce_inputs(n, h, v, dtype, device, bias, ignore=True):
    hidden = torch.randn(n, h, dtype=dtype, device=device)
    weight = torch.randn(v, h, dtype=dtype, device=device) / h ** 0.5
    b = torch.randn(v, dtype=dtype, device=device) if bias else None
    target = torch.randint(0, v, (n,), device=device)
    if ignore:
        target[1::4] = -100
    return hidden, weight, target, b


def _flce_reference(hidden, weight, target, bias, reduction, label_smoothing):
    """(loss, grad_hidden, grad_weight, grad_bias) by torch autograd, in hidden's dtype."""
    leaves = [t.detach().requires_grad_() for t in (hidden, weight, *(() if bias is None else (bias,)))]
    logits = F.linear(leaves[0], leaves[1], leaves[2] if bias is not None else None)
    loss = F.cross_entropy(logits, target, reduction=reduction, label_smoothing=label_smoothing)
    return (loss.detach(), *torch.autograd.grad(loss, leaves), *(() if bias is not None else (None,)))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("chunk_size", [0, 1, 8, 1000])
@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_fused_linear_cross_entropy_matches_the_torch_op(device, dtype, chunk_size, bias, reduction):
    hidden, weight, target, b = _flce_inputs(37, 19, 23, dtype, device, bias)
    args = (hidden, weight, target, b, -100, reduction, 0.1)
    ours = capi.fused_linear_cross_entropy(*map(_to_capi, args), compute_grad=True, chunk_size=chunk_size)
    torch_op = T.fused_linear_cross_entropy(*args, True, chunk_size)
    ref = _flce_reference(*[t.double() if t is not None and t.is_floating_point() else t for t in args[:4]],
                          reduction, 0.1)
    assert ours[3] is None if b is None else ours[3] is not None
    for i, (o, t, r) in enumerate(zip(ours, torch_op, ref)):
        if r is None:
            continue
        o = _torch(o)
        # the torch op's own error is the yardstick (conftest's rule); float32:
        # the logits' accumulation over H, the gradients' over N
        assert_matches(o.to(device), t, r.to(device), grad=i > 0, rtol32=1e-5, atol32=1e-5)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_fused_linear_cross_entropy_options_match_the_torch_op(device, dtype, reduction):
    """softcap, z-loss with return_z_loss, and reduction='none' with its per-row grad_loss (row_scale):
    the same kernels and chunks in both doors; the matmuls differ (the core's GEMM, torch's), so within
    the torch op's own error against float64 (conftest's rule)."""
    hidden, weight, target, b = _flce_inputs(37, 19, 23, dtype, device, True)
    scale = torch.rand(37, dtype=dtype, device=device) if reduction == "none" else None
    args = (hidden, weight, target, b, -100, reduction, 0.1, True, 8, None, 2.0, 1e-2, True, scale)
    ours = capi.fused_linear_cross_entropy(*map(_to_capi, args))
    torch_op = T.fused_linear_cross_entropy(*args)
    ref = T.fused_linear_cross_entropy(*[a.double() if isinstance(a, torch.Tensor) and a.is_floating_point()
                                         else a for a in args])
    assert len(ours) == 5
    for i, (o, t, r) in enumerate(zip(ours, torch_op, ref)):
        o = _torch(o)
        assert_matches(o.to(device), t, r.to(device), grad=i in (1, 2, 3), rtol32=1e-5, atol32=1e-5)
    loss, z = capi.fused_linear_cross_entropy(*map(_to_capi, args[:7]), False, 8, None, 2.0, 1e-2, True)
    _same(z, _torch(ours[4]))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("z_loss", [False, True], ids=["plain", "softcap_zloss"])
def test_fused_linear_cross_entropy_ce_weight_matches_the_torch_op(device, dtype, reduction, z_loss):
    """Class weights (ce_weight, one of them 0): the batch's W given to every chunk in both doors, and
    with z-loss each row's z term apart ('mean' divides it by the count); within the torch op's own error
    against float64 (conftest's rule)."""
    hidden, weight, target, b = _flce_inputs(37, 19, 23, dtype, device, True)
    cw = torch.rand(23, dtype=dtype, device=device) + 0.5
    cw[2] = 0
    scale = torch.rand(37, dtype=dtype, device=device) if reduction == "none" else None
    options = (2.0, 1e-2, True) if z_loss else (0.0, 0.0, False)
    args = (hidden, weight, target, b, -100, reduction, 0.1, True, 8, None, *options, scale, cw)
    ours = capi.fused_linear_cross_entropy(*map(_to_capi, args))
    torch_op = T.fused_linear_cross_entropy(*args)
    ref = T.fused_linear_cross_entropy(*[a.double() if isinstance(a, torch.Tensor) and a.is_floating_point()
                                         else a for a in args])
    assert len(ours) == 4 + z_loss
    for i, (o, t, r) in enumerate(zip(ours, torch_op, ref)):
        o = _torch(o)
        assert_matches(o.to(device), t, r.to(device), grad=i in (1, 2, 3), rtol32=1e-5, atol32=1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_fused_linear_cross_entropy_token_accuracy_matches_the_torch_op(device, reduction):
    """return_token_accuracy: each chunk's row_correct, reduced over the batch's count of rows not ignored, the
    same float32 values in both doors, after the z terms; NaN when every row is ignored."""
    hidden, weight, target, b = _flce_inputs(37, 19, 23, torch.float32, device, True)
    target[::3] = F.linear(hidden, weight, b)[::3].argmax(-1)  # some right rows, clear of ties
    args = (hidden, weight, target, b, -100, reduction, 0.0, False, 8, None, 0.0, 1e-2, True, None, None, True)
    *_, z, acc = capi.fused_linear_cross_entropy(*map(_to_capi, args))
    torch_op = T.fused_linear_cross_entropy(*args)
    _same(acc, torch_op[5])
    loss, acc = capi.fused_linear_cross_entropy(*map(_to_capi, (hidden, weight, torch.full_like(target, -100))),
                                                reduction=reduction, return_token_accuracy=True)
    acc = _torch(acc).cpu()
    assert acc.isnan().all() if reduction != "none" else not acc.any()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("device", DEVICES)
def test_fused_linear_cross_entropy_accum_dtype_float32(device, dtype):
    """37 one-token chunks, grad_weight accumulated in float32 in both doors:
    within the unchunked torch reference's own error."""
    hidden, weight, target, b = _flce_inputs(37, 19, 23, dtype, device, True)
    args = (hidden, weight, target, b, -100, "sum", 0.0)
    ours = capi.fused_linear_cross_entropy(*map(_to_capi, args), compute_grad=True, chunk_size=1,
                                           accum_dtype="float32")
    torch_op = T.fused_linear_cross_entropy(*args, True, 1, torch.float32)
    ref = _flce_reference(*[t.double() for t in args[:2]], target, b.double(), "sum", 0.0)[2].to(device)
    same_dtype = _flce_reference(*args[:4], "sum", 0.0)[2]
    o, t = ours[2], torch_op[2]  # grad_weight
    o = _torch(o)
    assert o.dtype == t.dtype == dtype
    assert_matches(o.to(device), same_dtype, ref, grad=True)
    assert_matches(t, same_dtype, ref, grad=True)
    with pytest.raises(ValueError, match=r"tinycuda.capi.fused_linear_cross_entropy: accum_dtype must be None"):
        capi.fused_linear_cross_entropy(*map(_to_capi, args), compute_grad=True, accum_dtype="float64")


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("chunk_size", [1, 5, 1000])
@pytest.mark.parametrize("weighted", [False, True], ids=["", "ce_weight"])
def test_fused_linear_cross_entropy_bit_for_bit_with_the_unfused_capi_calls(dtype, chunk_size, weighted):
    """Where the arithmetic is the same: each row's loss and grad_hidden for
    any chunking; grad_weight and grad_bias with one chunk."""
    hidden, weight, target, b = map(_to_capi, _flce_inputs(21, 17, 11, dtype, "cpu", True))
    cw = _to_capi(torch.rand(11).to(dtype) + 0.5) if weighted else None
    logits = capi.linear(hidden, weight, b)
    row_loss, _ = capi.cross_entropy(logits, target, reduction="none", label_smoothing=0.2, compute_grad=True,
                                     weight=cw)
    _, grad = capi.cross_entropy(logits, target, reduction="sum", label_smoothing=0.2, compute_grad=True, weight=cw)
    gh, gw, gb = capi.linear_backward(grad, hidden, weight)
    loss_none = capi.fused_linear_cross_entropy(hidden, weight, target, b, -100, "none", 0.2, chunk_size=chunk_size,
                                                ce_weight=cw)
    _same(loss_none, torch.as_tensor(row_loss) if not isinstance(row_loss, torch.Tensor) else row_loss)
    ours = capi.fused_linear_cross_entropy(hidden, weight, target, b, -100, "sum", 0.2, True, chunk_size,
                                           ce_weight=cw)
    wrap = lambda a: torch.from_numpy(a) if isinstance(a, np.ndarray) else a  # noqa: E731
    _same(ours[1], wrap(gh))
    if chunk_size >= 21:
        _same(ours[2], wrap(gw))
        _same(ours[3], wrap(gb))


def test_fused_linear_cross_entropy_chunk_rule():
    """The core's one chunk rule (cross_entropy.h), which the torch op and capi both take: Liger's
    next_pow2(ceil(N / ceil(V / H))), at least 512 rows (1024 for a float32 or float64 grad_weight
    accumulator), at most N (at least 1)."""
    rule = capi.lib().tc_fused_linear_cross_entropy_chunk
    chunk = lambda n, h, v, accum_bytes=2: rule(n, h, v, accum_bytes)  # noqa: E731
    assert chunk(8192, 4096, 128256) == 512  # Liger's 256
    assert chunk(8192, 4096, 128256, 4) == 1024 and chunk(16384, 768, 50304, 4) == 1024  # float32 accumulator
    assert chunk(8192, 4096, 128256, 8) == 1024 and chunk(8192, 4096, 128256, 0) == 512  # float64; no gradient
    assert chunk(65536, 4096, 32000) == 8192 and chunk(65536, 4096, 32000, 4) == 8192  # Liger's own: 65536 / 8
    assert chunk(300, 64, 1000) == 300 and chunk(1, 8, 8) == 1 and chunk(0, 8, 8) == 1
    assert chunk(5000, 4096, 4096) == 5000 and chunk(20000, 4096, 8192) == 16384


def test_fused_linear_cross_entropy_edges():
    hidden, weight, target, b = _flce_inputs(6, 4, 3, torch.float32, "cpu", True)
    h, w, bb = hidden.numpy(), weight.numpy(), b.numpy()
    # no token, and no valid target: 'mean' is NaN as in torch; grad_weight zeros for no token
    for hh, tt in ((h[:0], target[:0]), (h, torch.full((6,), -100))):
        loss, gh, gw, gb = capi.fused_linear_cross_entropy(hh, w, tt.numpy(), bb, compute_grad=True)
        ref = T.fused_linear_cross_entropy(torch.from_numpy(hh), weight, tt, b, compute_grad=True)
        assert np.isnan(loss) and torch.isnan(ref[0])
        for o, r in zip((gh, gw, gb), ref[1:]):
            _same(o, r)
    # one row as 1-D logits and a 0-dim target, as tinycuda.cross_entropy
    for red in ("mean", "none"):
        _same(capi.cross_entropy(h[0], target[0].numpy(), reduction=red),
              tinycuda.cross_entropy(hidden[0], target[0], reduction=red))
    # the torch function (autograd over the torch op) and capi agree on the loss
    loss = capi.fused_linear_cross_entropy(h, w, target.numpy(), bb, label_smoothing=0.3)
    torch.testing.assert_close(torch.from_numpy(loss), tinycuda.fused_linear_cross_entropy(
        hidden, weight, target, b, label_smoothing=0.3), rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------------------
# outputs passed in, errors

def test_out_arrays_and_output_mask():
    x, w, gy = np.random.randn(4, 5).astype(np.float32), np.random.randn(3, 5).astype(np.float32), \
        np.random.randn(4, 3).astype(np.float32)
    out = np.empty((4, 3), np.float32)
    assert capi.linear(x, w, out=out) is out
    _same(torch.from_numpy(out), T.linear(torch.from_numpy(x), torch.from_numpy(w)))
    gw = np.empty((3, 5), np.float32)
    gx, gw2, gb = capi.linear_backward(gy, x, w, (False, True, False), grad_weight=gw)
    assert gx is None and gb is None and gw2 is gw
    _same(torch.from_numpy(gw), T.linear_backward(*map(torch.from_numpy, (gy, x, w)), [False, True, False])[1])
    out = np.empty((4, 5), np.float32)  # dim not last: computed with the dim moved, copied into out
    assert capi.softmax(x, 0, out=out) is out
    _same(torch.from_numpy(out), T.softmax(torch.from_numpy(x), 0))


def test_bad_input_raises():
    x = np.random.randn(4, 6).astype(np.float32)
    bad = [
        (TypeError, r"tinycuda.capi.relu: x has dtype int32; expected one of float32, float16, bfloat16, float64",
         lambda: capi.relu(np.ones(3, np.int32))),
        (ValueError, r"tinycuda.capi.relu: x must be C-contiguous", lambda: capi.relu(x[:, ::2])),
        (ValueError, r"tinycuda.capi.linear: x's last dim must equal weight's in_features 5",
         lambda: capi.linear(x, np.ones((3, 5), np.float32))),
        (TypeError, r"tinycuda.capi.linear: weight has dtype float64 but x has dtype float32",
         lambda: capi.linear(x, np.ones((3, 6)))),
        (ValueError, r"tinycuda.capi.relu: out must be a C-contiguous float32 cpu array of shape \(4, 6\), got "
                     r"float32 \(3,\) on cpu", lambda: capi.relu(x, out=np.empty(3, np.float32))),
        (ValueError, r"tinycuda.capi.relu_backward: grad_out has shape \(2, 6\) but x has shape \(4, 6\)",
         lambda: capi.relu_backward(x[:2].copy(), x)),
        (TypeError, r"tinycuda.capi.relu: x must be a NumPy array or a CUDA array", lambda: capi.relu([1.0])),
        (ValueError, r"tinycuda.capi.gelu: approximate must be 'none' or 'tanh', got 'erf'",
         lambda: capi.gelu(x, "erf")),
        (ValueError, r"tinycuda.capi.swiglu: b has shape \(6, 4\) but a has shape \(4, 6\)",
         lambda: capi.swiglu(x, x.T.copy())),
        (ValueError, r"tinycuda.capi.swiglu_backward: grad_b must be a C-contiguous float32 cpu array of shape "
                     r"\(4, 6\)", lambda: capi.swiglu_backward(x, x, x, grad_b=np.empty(3, np.float32))),
        (ValueError, r"tinycuda.capi.softmax: dim 2 is out of range for 2 dims", lambda: capi.softmax(x, 2)),
        (ValueError, r"tinycuda.capi.softmax_backward: grad_out has shape \(6, 4\) but out has shape \(4, 6\)",
         lambda: capi.softmax_backward(x.T.copy(), x, 0)),
        (ValueError, r"tinycuda.capi.linear_backward: output_mask must have 3 entries",
         lambda: capi.linear_backward(x[:, :3].copy(), x, x[:3].copy(), (True, True))),
        (ValueError, r"tinycuda.capi.linear_backward: grad_x is given but output_mask skips it",
         lambda: capi.linear_backward(x[:, :3].copy(), x, x[:3].copy(), (False, True, True), grad_x=x)),
        (ValueError, r"tinycuda.capi.cross_entropy: target must be a C-contiguous int64 cpu array of shape \(4,\)",
         lambda: capi.cross_entropy(x, np.zeros(4, np.int32))),
        (ValueError, r"tinycuda.capi.cross_entropy: reduction must be 'none', 'mean' or 'sum', got 'avg'",
         lambda: capi.cross_entropy(x, np.zeros(4, np.int64), reduction="avg")),
        (capi.CapiError, r"tinycuda.capi.cross_entropy: invalid argument: cross_entropy: target 6 at row 1 is out "
                         r"of range \[0, 6\)", lambda: capi.cross_entropy(x, np.array([0, 6, 1, 2]))),
        (ValueError, r"tinycuda.capi.cross_entropy: grad_loss is given but compute_grad is False",
         lambda: capi.cross_entropy(x, np.zeros(4, np.int64), grad_loss=np.ones((), np.float32))),
        (ValueError, r"tinycuda.capi.cross_entropy: grad_loss must be a C-contiguous float32 cpu array of shape \(4,\)",
         lambda: capi.cross_entropy(x, np.zeros(4, np.int64), reduction="none", compute_grad=True,
                                    grad_loss=np.ones((), np.float32))),
        (ValueError, r"tinycuda.capi.cross_entropy: grad_in_place needs compute_grad, the array holding the "
                     r"gradient for grad_loss = 1, and grad_loss",
         lambda: capi.cross_entropy(x, np.zeros(4, np.int64), compute_grad=True, grad_loss=np.ones((), np.float32),
                                    grad_in_place=True)),
        (ValueError, r"tinycuda.capi.cross_entropy: grad_in_place writes the gradient alone: out, return_z_loss",
         lambda: capi.cross_entropy(x, np.zeros(4, np.int64), compute_grad=x.copy(), grad_loss=np.ones((), np.float32),
                                    return_z_loss=True, grad_in_place=True)),
        (ValueError, r"tinycuda.capi.cross_entropy_backward: grad_loss must be 0-dim or have shape \(4,\)",
         lambda: capi.cross_entropy_backward(x, np.ones(6, np.float32))),
        (capi.CapiError, r"tinycuda.capi.fused_linear_cross_entropy: target 9 at row 3 is out of range \[0, 3\)",
         lambda: capi.fused_linear_cross_entropy(x, x[:3].copy(), np.array([0, 1, 2, 9]), chunk_size=1)),
        (ValueError, r"tinycuda.capi.fused_linear_cross_entropy: reduction='none' makes its gradient from a "
                     r"per-row grad_loss, which must be given as row_scale",
         lambda: capi.fused_linear_cross_entropy(x, x[:3].copy(), np.zeros(4, np.int64), reduction="none",
                                                 compute_grad=True)),
        (ValueError, r"tinycuda.capi.fused_linear_cross_entropy: hidden must be 2-D \(tokens, H\) and weight 2-D "
                     r"\(classes, H\) with at least one class, got shapes \(4, 6\) and \(4, 3\)",
         lambda: capi.fused_linear_cross_entropy(x, x[:, :3].copy(), np.zeros(4, np.int64))),
        (ValueError, r"tinycuda.capi.layer_norm: normalized_shape \(5,\) must equal the last dims of x, whose "
                     r"shape is \(4, 6\)", lambda: capi.layer_norm(x, 5)),
        (ValueError, r"tinycuda.capi.rms_norm: weight must have shape \(6,\), got \(5,\)",
         lambda: capi.rms_norm(x, 6, np.ones(5, np.float32))),
        (ValueError, r"tinycuda.capi.rms_norm_backward: rstd must be a C-contiguous float32 cpu array of shape "
                     r"\(4,\), got float16", lambda: capi.rms_norm_backward(x, x, 6, np.ones(4, np.float16))),
        (ValueError, r"tinycuda.capi.linear: algo must be an int or a TC_\* constant, got 'TILED'",
         lambda: capi.linear(x, x, algo="TILED")),
    ]
    for exc, match, call in bad:
        with pytest.raises(exc, match=match):
            call()


def test_null_pointers_are_errors_not_crashes():
    lib, ffi = capi.lib(), capi.ffi
    assert lib.tc_relu_cpu(ffi.NULL) == lib.TC_ERR_INVALID_ARGUMENT
    assert b"params is NULL" in ffi.string(lib.tc_last_error())
    one = ffi.cast("void*", 1)  # never dereferenced: the checks come first
    for struct, fields, status, message in (
            ("tc_relu_params", dict(n=5), "INVALID_ARGUMENT", b"relu: x or y is NULL"),
            ("tc_linear_params", dict(dtype=7, M=1, N=1, K=1, x=one, weight=one, y=one), "UNSUPPORTED_DTYPE", b""),
            ("tc_glu_params", dict(n=4, act=3, a=one, b=one, y=one), "INVALID_ARGUMENT",
             b"glu: act must be 0 (silu), 1 (gelu) or 2 (gelu tanh), got 3"),
            ("tc_gelu_backward_params", dict(n=4, approximate=2, grad_y=one, x=one, grad_x=one), "INVALID_ARGUMENT",
             b"gelu_backward: approximate must be 0 (none) or 1 (tanh), got 2"),
            ("tc_glu_backward_params", dict(n=4, grad_y=one, a=one, b=one, grad_a=one), "INVALID_ARGUMENT",
             b"glu_backward: a pointer is NULL")):
        fn = getattr(lib, "tc_" + struct[3:-len("_params")] + "_cpu")
        assert fn(ffi.new(struct + "*", fields)) == getattr(lib, "TC_ERR_" + status)
        assert message in ffi.string(lib.tc_last_error())


@pytest.mark.skipif(HAS_CUDA, reason="checks the no-GPU path")
def test_reports_no_cuda_device_without_a_gpu():
    assert capi.cuda_device_count() == 0
    lib, ffi = capi.lib(), capi.ffi
    p = ffi.new("tc_relu_params*", dict(n=4, x=ffi.cast("void*", 16), y=ffi.cast("void*", 16)))
    assert lib.tc_relu_cuda(p) == lib.TC_ERR_NO_CUDA  # never dereferenced: there is no device to run on
    assert b"no CUDA device" in ffi.string(lib.tc_last_error())


def test_import_does_not_import_torch():
    code = ("import sys, numpy as np, tinycuda.capi as c; c.lib(); c.softmax(np.ones((2, 3), np.float32), 0); "
            "assert 'torch' not in sys.modules, 'torch imported'")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


# ---------------------------------------------------------------------------
# CUDA: torch CUDA tensors (above, through DEVICES), other arrays, errors

@requires_cuda
def test_cuda_rejects_a_cpu_array():
    x = torch.randn(4, 5, device="cuda")
    with pytest.raises(ValueError, match=r"tinycuda.capi.linear: weight is a cpu array but x is a cuda array"):
        capi.linear(x, np.ones((3, 5), np.float32))


@requires_cuda
def test_cuda_cupy_arrays():
    cupy = pytest.importorskip("cupy")
    x = cupy.random.standard_normal((33, 65), dtype=cupy.float32)
    y = capi.relu(x)
    assert isinstance(y, cupy.ndarray)
    xt = torch.as_tensor(x, device="cuda")
    _same(torch.as_tensor(y, device="cuda"), T.relu(xt))
    _same(torch.as_tensor(capi.sum(x, 1), device="cuda"), T.sum(xt, 1))
    _same(torch.as_tensor(capi.softmax(x, 0), device="cuda"), T.softmax(xt, 0))


# ---------------------------------------------------------------------------
# the reduce family (mean ... min), made from the core's op list: each op against its torch op (max and min:
# (values, indices), the backward reading the indices in y's place)

REDUCE = _build.op_names("tc_reduce_op")
# values of the ops' float arguments beside their defaults (by the schema's argument name)
REDUCE_SCALARS = {"correction": [0.0, 2.5], "ord": [1.0, 0.0, 3.5, float("inf"), float("-inf")]}


def _reduce_schema(name):
    return getattr(T, name).default._schema


def _reduce_dims(name, nd):
    """dim values for an array of nd dims: every dim (None and [] where the schema takes them), one dim,
    a negative one, and for a list type several, out of order."""
    dim = next(a for a in _reduce_schema(name).arguments if a.name == "dim")
    listed, optional = "List" in str(dim.type), "Optional" in str(dim.type)
    dims = ([None] if optional else []) + ([[]] if listed else []) + [0, -1]
    if listed:
        dims += [[-1], [nd - 1, 0]] if nd > 1 else []
    return dims


def _reduce_calls(name, nd):
    """kwargs for the op: each dim with keepdim False and True, and each value of its float argument."""
    names = [a.name for a in _reduce_schema(name).arguments]
    scalar = next((n for n in names if n in REDUCE_SCALARS), None)
    calls = [dict(dim=d, keepdim=k) for d in _reduce_dims(name, nd) for k in (False, True)]
    if scalar:
        calls += [dict(dim=d, keepdim=False, **{scalar: s}) for s in REDUCE_SCALARS[scalar]
                  for d in _reduce_dims(name, nd)[-2:]]
    return calls


def _reduce_check(name, x, kwargs, backward=True):
    """capi.<name>(x, **kwargs) and its backward bit for bit against the torch ops (x: a tensor, given to
    capi as _to_capi makes it: NumPy views keep its strides)."""
    what = f"{name}({tuple(x.shape)}, strides {x.stride()}, {x.dtype}, {kwargs})"
    ref = getattr(T, name)(x, **kwargs)
    got = getattr(capi, name)(_to_capi(x), **kwargs)
    assert all(type(o) is type(_to_capi(x)) for o in (got if isinstance(ref, tuple) else (got,))), what
    try:
        _same(got, ref)
    except AssertionError as e:
        raise AssertionError(f"{what}: {e}") from None
    if backward and hasattr(T, name + "_backward"):
        y, saved = (ref[0], ref[-1]) if isinstance(ref, tuple) else (ref, ref)  # max's, min's: the indices
        xc, g = x.contiguous(), torch.randn(y.shape, dtype=x.dtype, device=x.device)
        ref_gx = getattr(T, name + "_backward")(g, xc, saved, **kwargs)
        got_gx = getattr(capi, name + "_backward")(*map(_to_capi, (g, xc, saved)), **kwargs)
        try:
            _same(got_gx, ref_gx)
        except AssertionError as e:
            raise AssertionError(f"{name}_backward of {what}: {e}") from None


@pytest.mark.parametrize("shape", [(7, 13), (3, 5, 33)], ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("name", REDUCE)
@pytest.mark.parametrize("device", DEVICES)
def test_reduce_ops_match_the_torch_ops_bit_for_bit(device, name, dtype, shape):
    """Every dim form, keepdim, the op's float argument; values with ties (small integers: argmax's first
    index, amax's even split of the gradient) and without."""
    for x in (torch.randn(shape, dtype=dtype, device=device),
              torch.randint(-2, 3, shape, device=device).to(dtype)):
        for kwargs in _reduce_calls(name, len(shape)):
            _reduce_check(name, x, kwargs)


@pytest.mark.parametrize("name", REDUCE)
@pytest.mark.parametrize("device", DEVICES)
def test_reduce_reads_views_in_place(device, name):
    """A transposed view, a reversed one, a broadcast one (stride 0) and a sliced one, read through their
    strides as the torch layer reads the same views; float16 too."""
    base = torch.randn(13, 7, 5, device=device)
    views = [base.transpose(0, 2), base[:, 2:3].expand(13, 4, 5), base[1::3, :, ::2], base.half().permute(1, 2, 0)]
    for x in views:
        for kwargs in _reduce_calls(name, 3)[::3]:
            _reduce_check(name, x, kwargs, backward=False)


@pytest.mark.parametrize("name", REDUCE)
def test_reduce_reads_negative_strides(name):
    """NumPy's reversed views (torch has none) read in place: the torch op's result on a contiguous copy,
    to float64's rounding (the core's fold order follows the layout: one strided run or several)."""
    base = np.random.randn(6, 9, 4)
    for x in (base[::-1], base[:, ::-2].transpose(2, 0, 1), base[:, :, ::-1]):
        for kwargs in _reduce_calls(name, 3)[::2]:
            got, ref = getattr(capi, name)(x, **kwargs), getattr(T, name)(torch.from_numpy(x.copy()), **kwargs)
            got = tuple(map(_torch, got)) if isinstance(ref, tuple) else _torch(got)  # max, min: (values, indices)
            torch.testing.assert_close(got, ref, rtol=1e-12, atol=1e-12, equal_nan=True,
                                       msg=lambda m: f"{x.strides} {kwargs}: {m}")


@pytest.mark.parametrize("name", REDUCE)
def test_reduce_edges(name):
    """An empty output, an empty slice for an op with an identity, a 0-dim array, more than 8 dims (merged,
    as the torch layer merges them), and the results passed in."""
    _reduce_check(name, torch.randn(0, 5), dict(dim=1))  # no output
    _reduce_check(name, torch.randn(0, 5), dict(dim=1, keepdim=True))
    try:  # an empty slice: a value for an op with an identity, the core's error for one without
        ref = getattr(T, name)(torch.randn(0, 5), dim=0)
    except RuntimeError:
        ref = None
    if ref is None:
        with pytest.raises(capi.CapiError, match="cannot reduce an empty slice"):
            getattr(capi, name)(np.zeros((0, 5), np.float32), dim=0)
    else:
        _reduce_check(name, torch.randn(0, 5), dict(dim=0))
    for d in (0, -1):
        _reduce_check(name, torch.tensor(1.5, dtype=torch.float64), dict(dim=d))
    _reduce_check(name, torch.tensor(-2.5), dict(dim=_reduce_dims(name, 0)[0]))
    x = torch.randn(2, 1, 3, 2, 1, 2, 3, 1, 2, 3)  # 10 dims
    for dim in _reduce_dims(name, 10)[-3:]:
        _reduce_check(name, x, dict(dim=dim, keepdim=True))
        _reduce_check(name, x.transpose(0, 9), dict(dim=dim))
    if isinstance(_reduce_dims(name, 10)[-1], list):
        _reduce_check(name, x, dict(dim=[0, 1, 2, 9]))
    x = torch.randn(4, 6, dtype=torch.float64)
    one = 1
    ref = getattr(T, name)(x, dim=one)
    refs = ref if isinstance(ref, tuple) else (ref,)  # max, min: (values, indices), out a pair
    outs = tuple(np.empty(r.shape, r.numpy().dtype) for r in refs)
    got = getattr(capi, name)(x.numpy(), dim=one, out=outs if len(outs) > 1 else outs[0])
    assert all(a is b for a, b in zip(got if len(outs) > 1 else (got,), outs, strict=True))
    _same(outs, refs)
    if hasattr(T, name + "_backward"):
        gx = np.empty((4, 6))
        g, saved = torch.randn(refs[0].shape, dtype=x.dtype), refs[-1]
        assert getattr(capi, name + "_backward")(g.numpy(), x.numpy(), saved.numpy(), dim=one, grad_x=gx) is gx
        _same(gx, getattr(T, name + "_backward")(g, x, saved, dim=one))


def test_reduce_argmax_ties_take_the_first_index():
    x = np.array([[1.0, 3.0, 3.0], [3.0, 0.0, 3.0]], np.float32)
    for name, dim, keepdim, want in (("argmax", None, False, 1), ("argmax", 1, False, [1, 0]),
                                     ("argmax", 0, True, [[1, 0, 0]]), ("argmin", None, True, [[4]]),
                                     ("argmin", 1, False, [0, 1])):
        got = getattr(capi, name)(x, dim, keepdim)
        assert got.dtype == np.int64 and np.array_equal(got, np.array(want)), (name, dim, got)
        _same(got, getattr(T, name)(torch.from_numpy(x), dim, keepdim))


def test_reduce_signatures_are_the_schemas():
    """capi.<op>: x, then the schema's arguments with its defaults (keyword-only where the schema says),
    out and stream; capi.<op>_backward: grad_out, x, y (max's, min's: indices), the same arguments, grad_x
    and stream."""
    P = inspect.Parameter
    for name in REDUCE:
        assert name in capi.__all__ and name + "_backward" in capi.__all__
        args = _reduce_schema(name).arguments
        want = [(a.name, P.KEYWORD_ONLY if a.kwarg_only else P.POSITIONAL_OR_KEYWORD,
                 a.default_value if a.has_default_value() else P.empty) for a in args[1:]]
        saved = "indices" if len(_reduce_schema(name).returns) == 2 else "y"
        for fn, lead, extra in ((getattr(capi, name), ["x"], "out"),
                                (getattr(capi, name + "_backward"), ["grad_out", "x", saved], "grad_x")):
            params = list(inspect.signature(fn).parameters.values())
            assert [p.name for p in params[:len(lead)]] == lead, fn
            got = [(p.name, p.kind, p.default) for p in params[len(lead):-2]]
            assert got == want, (fn, got, want)
            assert [(p.name, p.kind) for p in params[-2:]] == [(extra, P.KEYWORD_ONLY), ("stream", P.KEYWORD_ONLY)]


def _torch_message(call):
    with pytest.raises(RuntimeError) as e:
        call()
    return str(e.value).splitlines()[0]


def test_reduce_errors():
    """The caller's checks in the torch layer's words; the core's (an empty slice of an op with no
    identity) as a CapiError; argmax has no backward."""
    x = np.random.randn(4, 6).astype(np.float32)
    tx = torch.from_numpy(x)
    for name, kwargs, what in (("var", dict(dim=[2]), "dim 2 is out of range for a tensor of 2 dims"),
                               ("amax", dict(dim=-3), "dim -3 is out of range for a tensor of 2 dims"),
                               ("mean", dict(dim=[1, -1]), "dim 1 appears more than once in the list of dims"),
                               ("argmin", dict(dim=2), "dim 2 is out of range for a tensor of 2 dims")):
        assert _torch_message(lambda: getattr(T, name)(tx, **kwargs)).endswith(f"tinycuda::{name}: {what}")
        with pytest.raises(ValueError, match=rf"^tinycuda.capi.{name}: {what}$"):
            getattr(capi, name)(x, **kwargs)
    with pytest.raises(ValueError, match=r"^tinycuda.capi.std_backward: dim 0 appears more than once"):
        capi.std_backward(x[0].copy(), x, x[0].copy(), [0, -2])
    empty = "cannot reduce an empty slice \\(the reduced dims hold no element\\), the op has no identity"
    for name, kwargs in (("amax", dict(dim=0)), ("argmax", dict()), ("vector_norm", dict(ord=float("-inf")))):
        with pytest.raises(capi.CapiError, match=rf"tinycuda.capi.{name}: invalid argument: {name}: {empty}"):
            getattr(capi, name)(np.zeros((0, 3), np.float32), **kwargs)
    bad = [
        (TypeError, r"tinycuda.capi.argmax: dim must be an int or None, got \[0\]", capi.argmax, (x, [0]), {}),
        (TypeError, r"tinycuda.capi.mean: dim must be an int, a list of ints or None, got 'a'", capi.mean,
         (x, "a"), {}),
        (TypeError, r"tinycuda.capi.var: too many positional arguments", capi.var, (x, 0, 1.0), {}),
        (TypeError, r"tinycuda.capi.std: correction must be a float, got 'x'", capi.std, (x,), {"correction": "x"}),
        (TypeError, r"tinycuda.capi.logsumexp: missing a required argument: 'dim'", capi.logsumexp, (x,), {}),
        (TypeError, r"tinycuda.capi.amax: keepdim must be a bool, got 1", capi.amax, (x, 0, 1), {}),
        (TypeError, r"tinycuda.capi.mean: x has dtype int64", capi.mean, (np.arange(4),), {}),
        (ValueError, r"tinycuda.capi.mean: out must be a C-contiguous float32 cpu array of shape \(6,\), got "
                     r"float32 \(4,\)", capi.mean, (x, 0), {"out": np.empty(4, np.float32)}),
        (ValueError, r"tinycuda.capi.argmin: out must be a C-contiguous int64 cpu array of shape \(\)",
         capi.argmin, (x,), {"out": np.empty((), np.float32)}),
        (ValueError, r"tinycuda.capi.amin: x has 9 dims whose reduced and kept ones alternate 9 times; at most 8",
         capi.amin, (np.zeros((1,) * 9, np.float32), [0, 2, 4, 6, 8]), {}),
        (ValueError, r"tinycuda.capi.mean_backward: x must be C-contiguous", capi.mean_backward,
         (x[:, 0].copy(), x.T.copy().T, x[:, 0].copy(), 1), {}),
        (ValueError, r"tinycuda.capi.mean_backward: grad_out must have shape \(4, 1\), got \(4,\)",
         capi.mean_backward, (x[:, 0].copy(), x, x[:, :1].copy(), 1, True), {}),
        (ValueError, r"tinycuda.capi.amax_backward: y must have shape \(\), got \(1,\)",
         capi.amax_backward, (np.ones((), np.float32), x, np.ones(1, np.float32)), {}),
        (TypeError, r"tinycuda.capi.amax_backward: y has dtype float64 but x has dtype float32",
         capi.amax_backward, (np.ones((), np.float32), x, np.ones(())), {}),
        (TypeError, r"tinycuda.capi.argmax_backward: argmax has no gradient", capi.argmax_backward,
         (x[0].copy(), x, np.zeros(6, np.int64), 0), {}),
        (TypeError, r"tinycuda.capi.max: dim must be an int, got None", capi.max, (x, None), {}),
        (ValueError, r"tinycuda.capi.min_backward: indices must be a C-contiguous int64 cpu array of shape \(4,\), "
                     r"got float32 \(4,\)", capi.min_backward, (x[:, 0].copy(), x, x[:, 0].copy(), 1), {}),
    ]
    for exc, match, fn, args, kwargs in bad:
        with pytest.raises(exc, match=match):
            fn(*args, **kwargs)
