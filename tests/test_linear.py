"""linear beyond the op table (tests/test_ops.py): the CUDA GEMM's kept
variants (tinycuda.variants), the nn.Linear drop-in."""
import pytest
import torch
import torch.nn.functional as F

import tinycuda
from conftest import DEVICES, check_op, launched, requires_cuda
from tinycuda import variants
from tinycuda.optable import _linear_act_ref

pytestmark = pytest.mark.racecheck


# The mma variant copies 16-byte chunks with cp.async when every extent with
# unit stride is a multiple of 8 ((256, 64, 136) on: forward, grad_x and
# grad_weight each pair the operands' layouts differently; ragged M, and K over
# many 4-stage rounds) and gathers element by element otherwise (k = 17, 300, 132).
# (8292, 64, 136): grad_weight's K is 8292 rows for one 136 x 64 output tile,
# which auto and wgmma split into slices (a shorter last one) with the
# backward's workspace.
@requires_cuda
@pytest.mark.parametrize("variant", variants.names("linear"))
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (33, 17, 129), (257, 300, 130), (260, 132, 68), (256, 64, 136),
                                   (300, 64, 136), (129, 1000, 264), (8292, 64, 136)], ids=str)
def test_linear_cuda_variants(dtype, variant, m, k, n):
    x = torch.randn(m, k, device="cuda").to(dtype)
    w = torch.randn(n, k, device="cuda").to(dtype)
    b = torch.randn(n, device="cuda").to(dtype)
    if variant in ("mma", "wgmma") and dtype == torch.float32:
        with pytest.raises(RuntimeError, match=rf"tinycuda::linear: .*the {variant} variant takes float16 or bfloat16"):
            variants.call("linear", variant, x, w, b)
        return
    check_op(variants.get("linear", variant), F.linear, [x, w, b], rtol32=1e-4, atol32=1e-3, grad_atol32=2e-3)


_ACT_OP = {"relu": lambda p: torch.ops.tinycuda.relu(p), "gelu": lambda p: torch.ops.tinycuda.gelu(p, "none"),
           "gelu_tanh": lambda p: torch.ops.tinycuda.gelu(p, "tanh")}


# Every GEMM path with the activation: wgmma applies it in its epilogue (staged
# 128-byte rows: (300, 72, 264) ragged in M and N, (33, 64, 129) an odd N on
# the element-store path; (33, 17, 129): rows TMA cannot read, mma), the other variants, the GEMV (m = 1) and the CPU
# kernel write P and run the activation as a pass. y must be act(pre) and both
# as accurate as torch's unfused pair, gradients included.
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("activation", list(_ACT_OP))
@pytest.mark.parametrize("m,k,n", [(300, 72, 264), (33, 64, 129), (33, 17, 129), (256, 64, 136), (1, 4099, 129)],
                         ids=str)
def test_linear_act_every_path(dtype, device, activation, m, k, n):
    x = torch.randn(m, k, device=device).to(dtype)
    w = (torch.randn(n, k, device=device) / k**0.5).to(dtype)
    b = torch.randn(n, device=device).to(dtype)
    ref = lambda x, w, b: _linear_act_ref(x, w, b, activation)
    # auto, then (CUDA) the variants: naive, tiled, regtile, mma, wgmma (tc_gemm_algo)
    algos = [0] if device == "cpu" else [0, 1, 2, 3] + ([4, 5] if dtype != torch.float32 else [])
    for algo in algos:
        def ours(x, w, b, algo=algo):
            need = x.requires_grad or w.requires_grad or b.requires_grad
            return torch.ops.tinycuda.linear_act(x, w, b, activation, save_pre=need, algo=algo)[0]
        check_op(ours, ref, [x, w, b], rtol32=1e-4, atol32=1e-3, grad_atol32=2e-3)
        y, pre = torch.ops.tinycuda.linear_act(x, w, b, activation, save_pre=True, algo=algo)
        check_op(lambda x, w, b: pre, F.linear, [x, w, b], grad=False, rtol32=1e-4, atol32=1e-3)
        torch.testing.assert_close(y, _ACT_OP[activation](pre))
        # without pre (inference): the same y, bit for bit (wgmma applies act in place)
        y_only = torch.ops.tinycuda.linear_act(x, w, b, activation, save_pre=False, algo=algo)[0]
        torch.testing.assert_close(y_only, y, rtol=0, atol=0)


# Stream-K (matmul_core.h) in the weight gradient, after the fused GELU backward: x [8296, 1000] and
# w [2104, 1000] make grad_weight 2104 x 1000 over the 8296 rows. Every extent is a multiple of 8, so TMA
# reads the operands and the wgmma kernel runs: the runs' sum shows in the profile (before Hopper, split-K's).
# (The forward never splits K: linear has no workspace.) y and the gradients as torch's, and the op's
# weight and bias gradients as the unfused pair's.
@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_linear_act_stream_k(dtype):
    x = torch.randn(8296, 1000, device="cuda").to(dtype)
    w = (torch.randn(2104, 1000, device="cuda") / 1000**0.5).to(dtype)
    b = torch.randn(2104, device="cuda").to(dtype)
    ours = lambda x, w, b: torch.ops.tinycuda.linear_act(x, w, b, "gelu_tanh", save_pre=True)[0]
    check_op(ours, lambda x, w, b: _linear_act_ref(x, w, b, "gelu_tanh"), [x, w, b])
    y, pre = torch.ops.tinycuda.linear_act(x, w, b, "gelu_tanh", save_pre=True)
    g = torch.randn_like(y)
    out = []
    hopper = torch.cuda.get_device_capability() >= (9, 0)
    assert launched(lambda: out.extend(torch.ops.tinycuda.linear_backward(g, x, w, [False, True, True], pre=pre,
                                                                          activation="gelu_tanh")),
                    "sum_runs_kernel" if hopper else "sum_slices_kernel")
    ref = torch.ops.tinycuda.linear_backward(torch.ops.tinycuda.gelu_backward(g, pre, "tanh"), x, w,
                                             [False, True, True])
    torch.testing.assert_close(out[1], ref[1], rtol=0, atol=0)  # the same grad_P, the same product
    exact = torch.ops.tinycuda.gelu_backward(g.double(), pre.double(), "tanh").sum(0)  # of the unrounded grad_P
    torch.testing.assert_close(out[2].double(), exact, rtol=1e-2, atol=0.25)


def test_linear_act_pre_needs_an_activation():
    """With no activation P is C: the C door refuses a pre rather than leave C unwritten."""
    from tinycuda import capi
    x, w = torch.randn(4, 5).numpy(), torch.randn(3, 5).numpy()
    with pytest.raises(capi.CapiError, match=r"linear: pre is written only with an activation"):
        capi._linear("linear", x, w, None, "TC_ACT_NONE", True, 0, None, None, None)


def test_linear_backward_core_checks_through_the_c_abi():
    """The core's own checks, which a C caller meets (the doors refuse the same earlier, by name)."""
    from tinycuda import capi
    op = "linear_backward"
    v = capi._check(op, {"g": torch.randn(4, 3).numpy(), "x": torch.randn(4, 5).numpy(), "w": torch.randn(3, 5).numpy()})
    args = dict(M=4, N=3, K=5, grad_y=v["g"], x=v["x"], weight=v["w"], grad_x=None, grad_weight=None, grad_bias=None)
    with pytest.raises(capi.CapiError, match=r"linear_backward: activation must be a tc_activation, got 7"):
        capi._call(op, v["x"], activation=7, pre=None, **args)
    with pytest.raises(capi.CapiError, match=r"linear_backward: pre \(the forward's P\) is given with an activation, "
                                             r"and only then"):
        capi._call(op, v["x"], activation="TC_ACT_NONE", pre=v["g"], **args)


def test_linear_act_empty_batch_backward():
    x, w = torch.randn(0, 5, requires_grad=True), torch.randn(3, 5, requires_grad=True)
    y = tinycuda.linear_act(x, w, None, "relu")
    gx, gw = torch.autograd.grad(y.sum(), (x, w))
    assert gx.shape == (0, 5) and torch.equal(gw, torch.zeros(3, 5))


def test_linear_act_backward_needs_pre():
    x, w = torch.randn(4, 5, requires_grad=True), torch.randn(3, 5, requires_grad=True)
    y, _ = torch.ops.tinycuda.linear_act(x, w, None, "gelu")  # save_pre=False, yet a gradient is asked for
    with pytest.raises(RuntimeError, match=r"tinycuda::linear_act: the backward needs the pre-activation"):
        y.sum().backward()


def test_linear_rejects_unknown_variant():
    with pytest.raises(ValueError, match=r"tinycuda.variants: linear has no variant 'fast'"):
        variants.get("linear", "fast")
    with pytest.raises(ValueError, match=r"tinycuda.variants: 'relu' has no variants"):
        variants.get("relu", "naive")
    with pytest.raises(RuntimeError, match=r"tinycuda::linear: algo must be"):
        torch.ops.tinycuda.linear(torch.randn(4, 5), torch.randn(3, 5), None, algo=9)


def test_linear_module_is_drop_in():
    torch.manual_seed(0)
    ref = torch.nn.Linear(6, 4)
    torch.manual_seed(0)
    ours = tinycuda.nn.Linear(6, 4)
    assert list(ours.state_dict()) == list(ref.state_dict()) == ["weight", "bias"]
    torch.testing.assert_close(ours.weight, ref.weight)  # same initialization
    ours.load_state_dict(ref.state_dict())
    x = torch.randn(3, 6)
    torch.testing.assert_close(ours(x), ref(x))
    assert tinycuda.nn.Linear(6, 4, bias=False).bias is None


# More output tiles than the H100/H200's 132 blocks (9 x 17 of 128 x 256 at
# (1100, 4104)): each block stores several tiles, its TMA store buffers
# alternating across them while the next tile's k-tiles load; 4104 % 256 = 8
# leaves a last column box that TMA clips to 8 of its 64 columns; no bias
# takes the epilogue's other branch. y, pre and the gradients as torch's.
@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("algo", [0, 5], ids=["auto", "wgmma"])
def test_linear_act_more_tiles_than_blocks(dtype, bias, algo):
    x = torch.randn(1100, 64, device="cuda").to(dtype)
    w = (torch.randn(4104, 64, device="cuda") / 8).to(dtype)
    b = torch.randn(4104, device="cuda").to(dtype) if bias else None
    ours = lambda x, w, b=None: torch.ops.tinycuda.linear_act(x, w, b, "gelu_tanh", save_pre=True, algo=algo)[0]
    ref = lambda x, w, b=None: _linear_act_ref(x, w, b, "gelu_tanh")
    check_op(ours, ref, [x, w] + ([b] if bias else []))
    y, pre = torch.ops.tinycuda.linear_act(x, w, b, "gelu_tanh", save_pre=True, algo=algo)
    check_op(lambda x, w, b=None: pre, F.linear, [x, w] + ([b] if bias else []), grad=False)
    torch.testing.assert_close(y, _ACT_OP["gelu_tanh"](pre))
    y_only = torch.ops.tinycuda.linear_act(x, w, b, "gelu_tanh", save_pre=False, algo=algo)[0]
    torch.testing.assert_close(y_only, y, rtol=0, atol=0)


# linear_act's backward in one op: linear_backward with pre and the activation makes grad_P = grad * act'(P)
# (on CUDA with the bias's column sums in the same pass) and runs the products on it. Against the unfused
# pair (the activation's own backward op, then linear_backward): the products bit for bit (the same grad_P,
# rounded to the dtype), the bias as close as the dtype allows (CUDA sums grad_P before rounding). Rows over
# several bias slices, an odd width (the unvectorized pass) and no rows at all; every output mask (each
# output asked for alone and together, the bias alone: the pass without the products); and pre one element
# off the 16-byte grid (the unvectorized pass at an aligned width): the same bits as an aligned pre.
_MASKS = [[True, True, True], [False, True, True], [True, False, True], [True, False, False], [False, False, True],
          [False, False, False]]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("activation", list(_ACT_OP))
@pytest.mark.parametrize("m,k,n", [(1000, 72, 264), (33, 17, 129), (0, 16, 24)], ids=str)
def test_linear_backward_with_the_activation(dtype, device, activation, m, k, n):
    x = torch.randn(m, k, device=device).to(dtype)
    w = (torch.randn(n, k, device=device) / k**0.5).to(dtype)
    pre, grad = torch.randn(m, n, device=device).to(dtype), torch.randn(m, n, device=device).to(dtype)
    unfused = {"relu": lambda: torch.ops.tinycuda.relu_backward(grad, pre),
               "gelu": lambda: torch.ops.tinycuda.gelu_backward(grad, pre, "none"),
               "gelu_tanh": lambda: torch.ops.tinycuda.gelu_backward(grad, pre, "tanh")}[activation]()
    ref = torch.ops.tinycuda.linear_backward(unfused, x, w, [True, True, True])
    exact = unfused.double().sum(0)  # the bias of the rounded grad_P, in float64
    for mask in _MASKS:
        ours = torch.ops.tinycuda.linear_backward(grad, x, w, mask, pre=pre, activation=activation)
        for i in range(3):
            if not mask[i]:
                assert ours[i].numel() == 0, (mask, i)
            elif i < 2 or device == "cpu":
                torch.testing.assert_close(ours[i], ref[i], rtol=0, atol=0, msg=lambda e: f"{mask} {i}: {e}")
            else:
                torch.testing.assert_close(ours[2].double(), exact, rtol=2e-2 if dtype != torch.float32 else 1e-5,
                                           atol=m * 2e-3 if dtype != torch.float32 else 1e-3)
    if m * n > 0:
        off = torch.empty(m * n + 1, device=device, dtype=dtype)[1:].view(m, n)
        off.copy_(pre)
        aligned = torch.ops.tinycuda.linear_backward(grad, x, w, [True, True, True], pre=pre, activation=activation)
        for a, b in zip(torch.ops.tinycuda.linear_backward(grad, x, w, [True, True, True], pre=off,
                                                           activation=activation), aligned):
            torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_linear_backward_activation_and_pre_go_together():
    x, w, g = torch.randn(4, 3), torch.randn(5, 3), torch.randn(4, 5)
    op = torch.ops.tinycuda.linear_backward
    with pytest.raises(RuntimeError, match=r"tinycuda::linear_backward: pre \(the forward's P\) is given with an "
                                           r"activation, and only then"):
        op(g, x, w, [True, True, True], activation="gelu")
    with pytest.raises(RuntimeError, match=r"tinycuda::linear_backward: pre \(the forward's P\)"):
        op(g, x, w, [True, True, True], pre=g)
    with pytest.raises(RuntimeError, match=r"tinycuda::linear_backward: activation must be 'none', 'relu', 'gelu' "
                                           r"or 'gelu_tanh', got 'silu'"):
        op(g, x, w, [True, True, True], pre=g, activation="silu")
    with pytest.raises(RuntimeError, match=r"tinycuda::linear_backward: pre must have grad_out's shape \[4, 5\], "
                                           r"got \[4, 4\]"):
        op(g, x, w, [True, True, True], pre=g[:, :4], activation="relu")
    with pytest.raises(RuntimeError, match=r"tinycuda::linear_backward: pre has dtype Double but grad_out has "
                                           r"dtype Float"):
        op(g, x, w, [True, True, True], pre=g.double(), activation="relu")
    # torch.compile's fake kernel refuses what the op refuses (a wrong pre would otherwise fail only when run)
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode:
        fg, fx, fw = (mode.from_tensor(t) for t in (g, x, w))
        with pytest.raises(RuntimeError, match=r"tinycuda::linear_backward: pre must have grad_out's shape"):
            op(fg, fx, fw, [True, True, True], pre=fg[:, :4], activation="relu")
        with pytest.raises(RuntimeError, match=r"tinycuda::linear_backward: pre has dtype"):
            op(fg, fx, fw, [True, True, True], pre=fg.double(), activation="relu")


@requires_cuda
def test_linear_backward_pre_on_another_device():
    x, w, g = torch.randn(4, 3), torch.randn(5, 3), torch.randn(4, 5)
    with pytest.raises(RuntimeError, match=r"tinycuda::linear_backward: pre is on cuda:0 but grad_out is on cpu"):
        torch.ops.tinycuda.linear_backward(g, x, w, [True, True, True], pre=g.cuda(), activation="relu")


@pytest.mark.parametrize("device", DEVICES)
def test_linear_backward_with_the_activation_through_the_c_abi(device):
    """capi.linear_backward with pre and an activation: torch's op bit for bit (CUDA: the fused pass, its
    workspace sized by capi's generic call), and the door's refusals named."""
    from tinycuda import capi
    x, w = torch.randn(40, 8, device=device), torch.randn(16, 8, device=device)
    g, pre = torch.randn(40, 16, device=device), torch.randn(40, 16, device=device)
    as_capi = (lambda t: t.numpy()) if device == "cpu" else (lambda t: t)
    ours = capi.linear_backward(*map(as_capi, (g, x, w)), pre=as_capi(pre), activation="gelu_tanh")
    ref = torch.ops.tinycuda.linear_backward(g, x, w, [True, True, True], pre=pre, activation="gelu_tanh")
    for a, b in zip(ours, ref):
        torch.testing.assert_close(torch.as_tensor(a, device=device), b, rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"tinycuda.capi.linear_backward: pre \(the forward's P\) is given with an "
                                         r"activation, and only then"):
        capi.linear_backward(*map(as_capi, (g, x, w)), activation="relu")
    with pytest.raises(ValueError, match=r"tinycuda.capi.linear_backward: pre must have grad_out's shape"):
        capi.linear_backward(*map(as_capi, (g, x, w)), pre=as_capi(pre[:, :8].contiguous()), activation="relu")
    with pytest.raises(ValueError, match=r"tinycuda.capi.linear_backward: activation must be"):
        capi.linear_backward(*map(as_capi, (g, x, w)), pre=as_capi(pre), activation="silu")


