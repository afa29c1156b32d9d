"""The adamw family: tinycuda.adamw_ and tinycuda.optim.AdamW against
torch.optim.AdamW (with clip_grad_norm_ for max_grad_norm),
multi_tensor_l2norm against a float64 norm, determinism, state_dict exchange
with torch's optimizer, and bad input."""
import math

import numpy as np
import pytest
import torch

import tinycuda
from conftest import DEVICES, requires_cuda
from tinycuda.optim import AdamW

# empty, one element, odd, a 16384-element chunk's edge and past it, several chunks
SHAPES = [(0,), (1,), (3, 5), (16384,), (16385,), (7, 9001)]
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]


def _params(device, dtype, layout="contig"):
    out = []
    for s in SHAPES:
        t = torch.randn(s, device=device).to(dtype)
        if layout == "offset" and t.numel():  # off the 16-byte grid: the kernels' scalar path
            flat = torch.empty(t.numel() + 1, device=device, dtype=dtype)
            flat[1:] = t.reshape(-1)
            t = flat[1:].view(s)
        out.append(t.requires_grad_())
    return out


def _run(opt_cls, params, grads, steps, clip=None, **kw):
    opt = opt_cls(params, **kw)
    for k in range(steps):
        for p, g in zip(params, grads):
            p.grad = g * (1 + k)  # a different gradient each step
        if clip and opt_cls is torch.optim.AdamW:
            torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
    return opt


KW = dict(lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)


@pytest.mark.parametrize("beta1", [0.9, 0.3])  # torch's lerp takes its other formula for weights >= 0.5
@pytest.mark.parametrize("clip", [None, 0.5])
@pytest.mark.parametrize("layout", ["contig", "offset"])
@pytest.mark.parametrize("device", DEVICES)
def test_matches_torch_adamw_float32(device, layout, clip, beta1):
    torch.manual_seed(0)
    ours = _params(device, torch.float32, layout)
    ref = [p.detach().clone().requires_grad_() for p in ours]
    grads = [torch.randn_like(p) for p in ours]
    extra = {"max_grad_norm": clip} if clip else {}
    kw = {**KW, "betas": (beta1, KW["betas"][1])}
    opt = _run(AdamW, ours, grads, 3, **kw, **extra)
    ropt = _run(torch.optim.AdamW, ref, grads, 3, clip=clip, foreach=False, **kw)
    for p, r in zip(ours, ref):
        torch.testing.assert_close(p, r, rtol=2e-6, atol=2e-7)
        torch.testing.assert_close(opt.state[p]["exp_avg"], ropt.state[r]["exp_avg"], rtol=2e-6, atol=1e-7)
        torch.testing.assert_close(opt.state[p]["exp_avg_sq"], ropt.state[r]["exp_avg_sq"], rtol=2e-6, atol=1e-9)
        assert opt.state[p]["step"].item() == 3
    if clip:
        want = torch.linalg.vector_norm(torch.cat([(3 * g).reshape(-1).double() for g in grads]))
        torch.testing.assert_close(opt.last_grad_norm.double(), want, rtol=1e-5, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_a_nan_gradient_norm_turns_every_parameter_nan_as_torch(device):
    """clip_grad_norm_ with a NaN in one gradient scales every gradient by NaN (its clamp keeps NaN);
    the clipping inside tinycuda's step does the same, rather than stepping the other tensors unclipped."""
    ours = _params(device, torch.float32)
    ref = [p.detach().clone().requires_grad_() for p in ours]
    grads = [torch.randn_like(p) for p in ours]
    next(g for g in grads if g.numel()).view(-1)[0] = float("nan")
    _run(AdamW, ours, grads, 1, **KW, max_grad_norm=1.0)
    _run(torch.optim.AdamW, ref, grads, 1, clip=1.0, foreach=False, **KW)
    assert all(r.isnan().all() for r in ref)
    assert all(p.isnan().all() for p in ours)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("device", DEVICES)
def test_half_types_closer_to_float64_than_torch(device, dtype):
    """16-bit parameters and state: tinycuda computes each element in float32 and rounds once;
    torch rounds every intermediate. Its max error against float64, over all 80k elements, is at
    most 2x torch's (FlashAttention's rule)."""
    torch.manual_seed(1)
    ours = _params(device, dtype)
    ref = [p.detach().clone().requires_grad_() for p in ours]
    exact = [p.detach().double().requires_grad_() for p in ours]
    grads = [torch.randn_like(p) for p in ours]
    _run(AdamW, ours, grads, 3, **KW)
    _run(torch.optim.AdamW, ref, grads, 3, foreach=False, **KW)
    _run(torch.optim.AdamW, exact, [g.double() for g in grads], 3, foreach=False, **KW)
    flat = [torch.cat([t.detach().double().reshape(-1) for t in ts]) for ts in (ours, ref, exact)]
    ours_err, torch_err = ((flat[0] - flat[2]).abs().max().item(), (flat[1] - flat[2]).abs().max().item())
    # torch's own 16-bit step can be NaN (torch 2.11's CPU float16: eps = 1e-8 is 0 there, and 0 / 0 where
    # v underflows); then ours must still be within a few roundings of float64
    one_rounding = torch.finfo(dtype).eps * (flat[2].abs().max().item() + 0.3)
    bound = 2 * torch_err if math.isfinite(torch_err) else 4 * one_rounding
    assert ours_err <= bound, (ours_err, torch_err)


@pytest.mark.parametrize("clip", [None, 0.5])
@pytest.mark.parametrize("layout", ["contig", "offset"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("device", DEVICES)
def test_master_weights_step_as_float32(device, dtype, layout, clip):
    """master_weights: 16-bit params and gradients, float32 masters and moments. The masters follow
    float32 AdamW on the same values step for step (to float32 rounding), and each param is its
    master rounded to nearest, bit for bit; float32 params in the same optimizer step as without it."""
    torch.manual_seed(3)
    low = _params(device, dtype, layout)
    f32 = [p.detach().float().requires_grad_() for p in low]
    # 16-bit gradients; the float32 run gets the same values (2 steps: _run's g * 2 is exact in 16 bits too)
    grads = [torch.randn_like(p) for p in low]
    extra = {"max_grad_norm": clip} if clip else {}
    opt = _run(AdamW, low, grads, 2, master_weights=True, **KW, **extra)
    _run(AdamW, f32, [g.float() for g in grads], 2, **KW, **extra)
    for p, r in zip(low, f32):
        st = opt.state[p]
        assert st["master"].dtype == st["exp_avg"].dtype == st["exp_avg_sq"].dtype == torch.float32
        torch.testing.assert_close(st["master"], r.detach(), rtol=2e-6, atol=2e-7)
        assert torch.equal(p.detach(), st["master"].to(dtype))
    plain = _params(device, torch.float32)
    ref = [p.detach().clone().requires_grad_() for p in plain]
    g32 = [torch.randn_like(p) for p in plain]
    opt = _run(AdamW, plain, g32, 2, master_weights=True, **KW)
    _run(AdamW, ref, g32, 2, **KW)
    assert all(torch.equal(a, b) and "master" not in opt.state[a] for a, b in zip(plain, ref))


@pytest.mark.parametrize("device", DEVICES)
def test_master_weights_errors(device):
    p = torch.zeros(5, device=device, dtype=torch.bfloat16)
    f = torch.zeros(5, device=device)
    kw = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, step=1)
    with pytest.raises(RuntimeError, match=r"tinycuda::adamw_: master weights go with float16 or bfloat16 params"):
        tinycuda.adamw_([f], [f.clone()], [f.clone()], [f.clone()], **kw, masters=[f.clone()])
    with pytest.raises(RuntimeError, match=r"tinycuda::adamw_: masters must be empty or have one tensor a param"):
        tinycuda.adamw_([p], [p.clone()], [f.clone()], [f.clone()], **kw, masters=[f.clone(), f.clone()])
    with pytest.raises(RuntimeError, match=r"tinycuda::adamw_: masters\[0\] must be float32"):
        tinycuda.adamw_([p], [p.clone()], [f.clone()], [f.clone()], **kw, masters=[p.clone()])
    with pytest.raises(RuntimeError, match=r"tinycuda::adamw_: .*exp_avgs\[0\]"):  # the state goes float32 too
        tinycuda.adamw_([p], [p.clone()], [p.clone()], [f.clone()], **kw, masters=[f.clone()])
    with pytest.raises(RuntimeError, match=r"tinycuda::adamw_: .*masters\[0\]'s? .*shape|must have params\[0\]'s"):
        tinycuda.adamw_([p], [p.clone()], [f.clone()], [f.clone()], **kw, masters=[torch.zeros(4, device=device)])


@pytest.mark.parametrize("device", DEVICES)
def test_float64(device):
    torch.manual_seed(2)
    ours = _params(device, torch.float64)
    ref = [p.detach().clone().requires_grad_() for p in ours]
    grads = [torch.randn_like(p) for p in ours]
    _run(AdamW, ours, grads, 2, **KW)
    _run(torch.optim.AdamW, ref, grads, 2, foreach=False, **KW)
    for p, r in zip(ours, ref):
        torch.testing.assert_close(p, r, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("device", DEVICES)
def test_multi_tensor_l2norm(device, dtype):
    torch.manual_seed(3)
    ts = [torch.randn(s, device=device).to(dtype) for s in SHAPES] + [torch.randn(40, 3, device=device).to(dtype).t()]
    norm = tinycuda.multi_tensor_l2norm(ts)
    assert norm.shape == () and norm.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
    want = torch.linalg.vector_norm(torch.cat([t.reshape(-1).double() for t in ts]))
    torch.testing.assert_close(norm.double(), want, rtol=1e-12 if dtype == torch.float64 else 1e-5, atol=0)
    assert tinycuda.multi_tensor_l2norm([torch.zeros(0, device=device, dtype=dtype)]).item() == 0


@requires_cuda
def test_cuda_deterministic_and_many_tensors():
    """More tensors and chunks than one launch carries (24 tensors / 320 chunks a launch for the
    step, 96 tensors for the norm); bit-identical norms and steps run to run."""
    torch.manual_seed(4)
    # the 6M-element tensor spans 367 chunks: cut across two launches of each kernel
    shapes = [(i % 7 + 1, 1000 + 37 * i) for i in range(150)] + [(3_000_000,), (6_000_000,)]
    ts = [torch.randn(s, device="cuda") for s in shapes]
    norms = {tinycuda.multi_tensor_l2norm(ts).item() for _ in range(20)}
    assert len(norms) == 1
    want = torch.linalg.vector_norm(torch.cat([t.reshape(-1).double() for t in ts]))
    torch.testing.assert_close(torch.tensor(norms.pop(), dtype=torch.float64), want.cpu(), rtol=1e-5, atol=0)
    ours = [t.clone().requires_grad_() for t in ts]
    ref = [t.clone().requires_grad_() for t in ts]
    grads = [torch.randn_like(t) for t in ts]
    _run(AdamW, ours, grads, 2, max_grad_norm=1.0, **KW)
    _run(torch.optim.AdamW, ref, grads, 2, clip=1.0, **KW)
    for p, r in zip(ours, ref):
        torch.testing.assert_close(p, r, rtol=2e-6, atol=2e-7)


@pytest.mark.parametrize("device", DEVICES)
def test_state_dict_loads_both_ways(device):
    torch.manual_seed(5)
    model = torch.nn.Linear(8, 4).to(device)
    twin = torch.nn.Linear(8, 4).to(device)
    twin.load_state_dict(model.state_dict())
    x = torch.randn(16, 8, device=device)

    def step(m, opt):
        opt.zero_grad()
        m(x).square().mean().backward()
        opt.step()

    ours, theirs = AdamW(model.parameters(), **KW), torch.optim.AdamW(twin.parameters(), foreach=False, **KW)
    for _ in range(2):
        step(model, ours), step(twin, theirs)
    # swap: each optimizer continues from the other's state
    ours2, theirs2 = AdamW(model.parameters(), **KW), torch.optim.AdamW(twin.parameters(), foreach=False, **KW)
    ours2.load_state_dict(theirs.state_dict())
    theirs2.load_state_dict(ours.state_dict())
    for _ in range(2):
        step(model, ours2), step(twin, theirs2)
    for a, b in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_compiles_and_opchecks():
    ps = [torch.randn(5, 3), torch.randn(7)]
    gs = [torch.randn_like(p) for p in ps]
    ms = [torch.zeros_like(p) for p in ps]
    vs = [torch.zeros_like(p) for p in ps]
    torch.library.opcheck(torch.ops.tinycuda.adamw_.default, (ps, gs, ms, vs),
                          dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, step=1))
    torch.library.opcheck(torch.ops.tinycuda.multi_tensor_l2norm.default, (gs,))
    # master weights: bf16 params and grads, float32 moments and masters
    bs = [p.bfloat16() for p in ps]
    torch.library.opcheck(torch.ops.tinycuda.adamw_.default, ([p.clone() for p in bs], [g.bfloat16() for g in gs],
                                                              [m.clone() for m in ms], [v.clone() for v in vs]),
                          dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, step=1,
                               masters=[p.float() for p in bs]))

    def master_step(ps, gs, ms, vs, ws):
        tinycuda.adamw_(ps, gs, ms, vs, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, step=1,
                        masters=ws)

    lists = ([p.clone() for p in bs], [g.bfloat16() for g in gs], ms, vs, [p.float() for p in bs])
    eager, compiled = ([[t.clone() for t in ts] for ts in lists] for _ in range(2))
    master_step(*eager)
    torch.compile(master_step, fullgraph=True)(*compiled)
    assert all(torch.equal(a, b) for a, b in zip(sum(eager, []), sum(compiled, [])))

    def step(ps, gs, ms, vs):
        norm = tinycuda.multi_tensor_l2norm(gs)
        tinycuda.adamw_(ps, gs, ms, vs, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, step=1,
                        grad_norm=norm, max_grad_norm=1.0)
        return norm

    eager = [[t.clone() for t in ts] for ts in (ps, gs, ms, vs)]
    compiled = [[t.clone() for t in ts] for ts in (ps, gs, ms, vs)]
    assert torch.equal(step(*eager), torch.compile(step, fullgraph=True)(*compiled))
    for a, b in zip(eager[0] + eager[2] + eager[3], compiled[0] + compiled[2] + compiled[3]):
        assert torch.equal(a, b)


def test_errors():
    p, g = torch.randn(4), torch.randn(4)
    m, v = torch.zeros(4), torch.zeros(4)
    kw = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, step=1)
    with pytest.raises(RuntimeError, match=r"tinycuda::adamw_: params, grads, exp_avgs and exp_avg_sqs"):
        tinycuda.adamw_([p], [g, g], [m], [v], **kw)
    with pytest.raises(RuntimeError, match=r"tinycuda::adamw_: grads\[0\] has dtype Double"):
        tinycuda.adamw_([p], [g.double()], [m], [v], **kw)
    with pytest.raises(RuntimeError, match=r"tinycuda::adamw_: exp_avgs\[0\] must be contiguous"):
        tinycuda.adamw_([p], [g], [torch.zeros(4, 2)[:, 0]], [v], **kw)
    with pytest.raises(RuntimeError, match=r"tinycuda::adamw_: grads\[0\], exp_avgs\[0\] and exp_avg_sqs\[0\] must "
                                           r"have params\[0\]'s shape \[4\]"):
        tinycuda.adamw_([p], [torch.randn(5)], [m], [v], **kw)
    with pytest.raises(RuntimeError, match=r"tinycuda::adamw_: step must be >= 1"):
        tinycuda.adamw_([p], [g], [m], [v], **{**kw, "step": 0})
    with pytest.raises(RuntimeError, match=r"tinycuda::adamw_: beta2 must be in \[0, 1\)"):
        tinycuda.adamw_([p], [g], [m], [v], **{**kw, "beta2": 1.0})
    with pytest.raises(RuntimeError, match=r"tinycuda::adamw_: grad_norm must be one Float value"):
        tinycuda.adamw_([p], [g], [m], [v], **kw, grad_norm=torch.ones(2), max_grad_norm=1.0)
    with pytest.raises(RuntimeError, match=r"tinycuda::adamw_: max_grad_norm must be > 0"):
        tinycuda.adamw_([p], [g], [m], [v], **kw, grad_norm=torch.ones(()), max_grad_norm=0.0)
    with pytest.raises(RuntimeError, match=r"tinycuda::multi_tensor_l2norm: tensors must hold at least one"):
        tinycuda.multi_tensor_l2norm([])
    with pytest.raises(RuntimeError, match=r"tinycuda::multi_tensor_l2norm: tensors\[1\] has dtype Half"):
        tinycuda.multi_tensor_l2norm([g, g.half()])
    for bad in (dict(amsgrad=True), dict(maximize=True), dict(lr=-1.0), dict(max_grad_norm=0.0)):
        with pytest.raises(ValueError, match="tinycuda.optim.AdamW"):
            AdamW([torch.nn.Parameter(p)], **bad)
    opt = AdamW([torch.nn.Parameter(p)])
    opt.add_param_group({"params": [torch.nn.Parameter(g)], "amsgrad": True})
    for q in (pq for group in opt.param_groups for pq in group["params"]):
        q.grad = torch.ones_like(q)
    with pytest.raises(ValueError, match=r"tinycuda.optim.AdamW: amsgrad=True \(in a param group\)"):
        opt.step()


@pytest.mark.parametrize("device", DEVICES)
def test_capi_bit_for_bit(device):
    """tinycuda.capi's adamw_ and multi_tensor_l2norm (NumPy arrays on the CPU, torch tensors on CUDA) write
    the torch ops' bits; their argument errors name the op."""
    from tinycuda import capi
    torch.manual_seed(6)
    for dtype in (torch.float32, torch.float16) + ((torch.bfloat16,) if device == "cuda" else ()):
        lists = [[torch.randn(s, device=device).to(dtype).abs() for s in SHAPES] for _ in range(4)]
        ours = [[t.clone() for t in ts] for ts in lists]
        conv = (lambda t: t.numpy()) if device == "cpu" else (lambda t: t)
        norm = tinycuda.multi_tensor_l2norm(lists[1])
        got = capi.multi_tensor_l2norm([conv(t) for t in ours[1]])
        assert torch.equal(torch.as_tensor(got, device=device), norm)
        kw = dict(lr=1e-2, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1, step=2, max_grad_norm=1.0)
        tinycuda.adamw_(*lists, grad_norm=norm, **kw)
        capi.adamw_(*([conv(t) for t in ts] for ts in ours), grad_norm=conv(norm), **kw)
        for a, b in zip(sum(ours, []), sum(lists, [])):
            assert torch.equal(a, b)
    with pytest.raises(ValueError, match=r"tinycuda.capi.adamw_: params, grads, exp_avgs and exp_avg_sqs must"):
        capi.adamw_([np.zeros(2, np.float32)], [], [], [], 1e-3, 0.9, 0.99, 1e-8, 0.0, 1)
    with pytest.raises(ValueError, match=r"tinycuda.capi.adamw_: grad_norm must be one float32 value"):
        a = np.zeros(2, np.float32)
        capi.adamw_([a], [a], [a.copy()], [a.copy()], 1e-3, 0.9, 0.99, 1e-8, 0.0, 1, grad_norm=np.zeros(2),
                    max_grad_norm=1.0)
    with pytest.raises(ValueError, match=r"tinycuda.capi.multi_tensor_l2norm: tensors must hold at least one"):
        capi.multi_tensor_l2norm([])


@pytest.mark.parametrize("device", DEVICES)
def test_capi_master_weights_bit_for_bit(device):
    """tinycuda.capi.adamw_ with masters (NumPy float16 on the CPU, torch bf16 on CUDA) writes the torch op's bits."""
    from tinycuda import capi
    torch.manual_seed(7)
    dtype = torch.bfloat16 if device == "cuda" else torch.float16
    params = [torch.randn(s, device=device).to(dtype) for s in SHAPES]
    grads = [torch.randn_like(p) for p in params]
    state = [[torch.rand(s, device=device) for s in SHAPES] for _ in range(2)]
    masters = [p.float() for p in params]
    lists = [params, grads, *state, masters]
    ours = [[t.clone() for t in ts] for ts in lists]
    kw = dict(lr=1e-2, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1, step=2)
    tinycuda.adamw_(*lists[:4], **kw, masters=lists[4])
    conv = (lambda t: t.numpy()) if device == "cpu" else (lambda t: t)
    capi.adamw_(*([conv(t) for t in ts] for ts in ours[:4]), **kw, masters=[conv(t) for t in ours[4]])
    for a, b in zip(sum(ours, []), sum(lists, [])):
        assert torch.equal(a, b)
    with pytest.raises(TypeError, match=r"tinycuda.capi.adamw_: master weights go with float16 or bfloat16"):
        a = np.zeros(2, np.float32)
        capi.adamw_([a], [a], [a.copy()], [a.copy()], **kw, masters=[a.copy()])


@pytest.mark.parametrize("device", DEVICES)
def test_master_weights_state_dict_keeps_float32(device):
    """torch's load_state_dict casts state to the parameter's dtype; the masters and their moments stay
    float32, and a reloaded optimizer continues bit for bit."""
    torch.manual_seed(8)
    a = [torch.randn(s, device=device).bfloat16().requires_grad_() for s in SHAPES]
    b = [t.detach().clone().requires_grad_() for t in a]
    grads = [torch.randn_like(t) for t in a]
    opt = _run(AdamW, a, grads, 2, master_weights=True, **KW)
    other = _run(AdamW, b, grads, 2, master_weights=True, **KW)
    again = AdamW(b, master_weights=True, **KW)
    again.load_state_dict(other.state_dict())
    assert all(again.state[p][k].dtype == torch.float32 for p in b for k in ("master", "exp_avg", "exp_avg_sq"))
    for x, g in zip(a, grads):
        x.grad = g
    for x, g in zip(b, grads):
        x.grad = g
    opt.step(), again.step()
    assert all(torch.equal(x, y) for x, y in zip(a, b))
