"""cross_entropy beyond the op table (tests/test_ops.py): all rows ignored,
infinities, out-of-range targets on CUDA (a device-side assert), the in-place backward
(a scale: fused_linear_cross_entropy's; with the logits: the rows whose grad_loss is not 1
recomputed, the autograd backward's), the gradient made by the forward, times grad_loss rounded
once, backpropagating twice, determinism, the module under torch.compile's CUDA graphs, the
nn.CrossEntropyLoss drop-in."""
import math
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from torch._subclasses.fake_tensor import FakeTensorMode

import tinycuda
from conftest import assert_matches, check_compiled, max_err, requires_cuda
from tinycuda.optable import _cross_entropy_ref, class_weights, targets

pytestmark = pytest.mark.racecheck
OP = torch.ops.tinycuda


@pytest.mark.parametrize("weighted", [False, True], ids=["", "weight"])
@pytest.mark.parametrize("rows", [4, 0])
def test_cross_entropy_all_ignored_or_no_rows(device, rows, weighted):
    x = torch.randn(rows, 9, device=device, requires_grad=True)
    t = torch.full((rows,), -100, device=device)
    w = torch.rand(9, device=device) + 0.5 if weighted else None
    for reduction, eps in (("mean", 0.0), ("mean", 0.1), ("sum", 0.0), ("sum", 0.1), ("none", 0.1)):
        ours = tinycuda.cross_entropy(x, t, reduction=reduction, label_smoothing=eps, weight=w)
        ref = F.cross_entropy(x, t, reduction=reduction, label_smoothing=eps, weight=w)
        torch.testing.assert_close(ours, ref, equal_nan=True)  # mean: 0 / 0 = NaN, as torch
        g = torch.ones_like(ours)
        torch.testing.assert_close(torch.autograd.grad(ours, x, g)[0], torch.zeros_like(x))


def test_cross_entropy_infinities(device):
    inf = math.inf
    x = torch.tensor([[-inf, 1.0, 2.0], [3.0, -inf, -inf], [0.5, 0.5, 0.5]], device=device)
    t = torch.tensor([1, 0, 2], device=device)
    torch.testing.assert_close(tinycuda.cross_entropy(x, t, reduction="none"), F.cross_entropy(x, t, reduction="none"))
    x[2, 1] = math.nan
    ours = tinycuda.cross_entropy(x, t, reduction="none")
    assert torch.isnan(ours[2]) and not torch.isnan(ours[:2]).any()


_BAD_TARGET = """
import sys, torch, tinycuda
x = torch.randn(5, 4097, device="cuda", requires_grad=True)
t = torch.tensor([0, 1, 2, int(sys.argv[1]), 4], device="cuda")
try:
    tinycuda.cross_entropy(x, t, reduction=sys.argv[2]).sum().backward()
    torch.cuda.synchronize()
except RuntimeError as e:
    print("raised:", e)
    sys.exit(3)
print("no error")
"""


@requires_cuda
@pytest.mark.device_assert
@pytest.mark.parametrize("target,reduction", [(4097, "mean"), (-5, "none")])
def test_cross_entropy_out_of_range_target_cuda_raises(target, reduction):
    """As torch: a device-side assert naming the op, raised at the next
    synchronization, never a silent NaN. It ruins the CUDA context, so it runs
    in a child process."""
    run = subprocess.run([sys.executable, "-c", _BAD_TARGET, str(target), reduction], capture_output=True,
                         text=True, timeout=300)
    out = run.stdout + run.stderr
    assert run.returncode == 3 and "device-side assert" in out, out
    assert "tinycuda::cross_entropy: a target is out of range [0, classes) and not ignore_index" in out, out


def test_cross_entropy_backward_scales_in_place_and_skips_ones(device, dtype):
    x = torch.randn(6, 1031, device=device, dtype=dtype)
    t = targets(6, 1031, device)
    _, grad, *_ = OP.cross_entropy(x, t, -100, "none", 0.0, True)
    ref = grad.clone()
    OP.cross_entropy_backward(grad, torch.ones(6, device=device, dtype=dtype))
    assert torch.equal(grad, ref)  # exactly 1: untouched
    scale = torch.tensor([1.0, 2.0, 0.5, 1.0, -4.0, 0.0], device=device, dtype=dtype)
    OP.cross_entropy_backward(grad, scale)
    assert torch.equal(grad, ref * scale[:, None])  # powers of two: exact
    OP.cross_entropy_backward(grad, torch.tensor(2.0, device=device, dtype=dtype))
    assert torch.equal(grad, ref * scale[:, None] * 2)


def test_cross_entropy_forward_gradient_is_the_mean_gradient(device):
    """compute_grad writes d(loss)/d(logits) for grad_loss = 1 (not given) and times grad_loss (one value,
    or one per row for 'none'); mean divides by n_valid."""
    x = torch.randn(7, 40, device=device, dtype=torch.float64, requires_grad=True)
    t = targets(7, 40, device, ignored=(2, 5))
    for reduction in ("mean", "sum", "none"):
        ref = F.cross_entropy(x, t, reduction=reduction, label_smoothing=0.3)
        _, grad, *_ = OP.cross_entropy(x.detach(), t, -100, reduction, 0.3, True)
        torch.testing.assert_close(grad, torch.autograd.grad(ref.sum(), x, retain_graph=True)[0])
        g = torch.randn_like(ref)
        _, grad, *_ = OP.cross_entropy(x.detach(), t, -100, reduction, 0.3, True, grad_loss=g)
        torch.testing.assert_close(grad, torch.autograd.grad(ref, x, g)[0])


def test_cross_entropy_no_grad_outputs():
    x = torch.randn(3, 5, requires_grad=True)
    t = torch.tensor([0, 1, 2])
    with torch.no_grad():
        loss = tinycuda.cross_entropy(x, t)
    assert loss.grad_fn is None
    loss, grad, *_ = OP.cross_entropy(x.detach(), t)
    assert grad.shape == (0,)


def test_cross_entropy_backpropagates_twice(device):
    """The first backward updates the saved gradient (made by the forward for grad_loss = 1) in place and
    returns it; a second backward of the graph (retain_graph) recomputes every row from the logits, so each
    gets the right gradient for its own grad_loss, rows of exactly 1 in one and not the other included,
    and the first's result is left as it was."""
    x = torch.randn(4, 6, device=device, dtype=torch.float64, requires_grad=True)
    t = torch.tensor([0, 1, 2, 3], device=device)
    loss, ref = tinycuda.cross_entropy(x, t, reduction="none"), F.cross_entropy(x, t, reduction="none")
    results = []
    for g in ([1.0, -0.7, 1.0, 2.5], [0.3, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]):
        g = torch.tensor(g, device=device, dtype=torch.float64)
        ours = torch.autograd.grad(loss, x, g, retain_graph=True)[0]
        want = torch.autograd.grad(ref, x, g, retain_graph=True)[0]
        torch.testing.assert_close(ours, want)
        results.append((ours, ours.clone()))
    for ours, then in results:
        assert torch.equal(ours, then)
    # mean: a first backward of 0.37, then loss.backward()'s 1: the mean gradient, not 0.37 of it
    loss = tinycuda.cross_entropy(x, t)
    first = torch.autograd.grad(loss, x, torch.tensor(0.37, device=device, dtype=torch.float64),
                                retain_graph=True)[0]
    torch.testing.assert_close(first, 0.37 * torch.autograd.grad(F.cross_entropy(x, t), x)[0])
    assert torch.equal(torch.autograd.grad(loss, x)[0], OP.cross_entropy(x.detach(), t, compute_grad=True)[1])


_SAME_BITS_OPTIONS = {"plain": {}, "smoothing": {"label_smoothing": 0.1}, "weight": {"weight": True},
                      "all": {"weight": True, "label_smoothing": 0.1, "softcap": 5.0, "lse_square_scale": 1e-2}}


def _ce_args(option, cols, device, dtype):
    """The raw op's keyword arguments for an entry of _SAME_BITS_OPTIONS."""
    kw = dict(_SAME_BITS_OPTIONS[option])
    if kw.pop("weight", False):
        kw["weight"] = class_weights(cols, device, dtype)
    return kw


@pytest.mark.parametrize("option", list(_SAME_BITS_OPTIONS))
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("cols", [40, 4099])
def test_cross_entropy_backward_of_one_is_the_forward_gradient(device, dtype, cols, reduction, option):
    """loss.backward() (grad_loss exactly 1) returns the gradient the forward made, bit for bit: the backward
    reads grad_loss on the device and leaves every row (2 N V s bytes for forward and backward)."""
    x = torch.randn(9, cols, device=device).to(dtype)
    t = targets(9, cols, device, ignored=(4,))
    kw = _ce_args(option, cols, device, dtype)
    _, want, *_ = OP.cross_entropy(x, t, reduction=reduction, compute_grad=True, **kw)
    xg = x.clone().requires_grad_()
    loss = tinycuda.cross_entropy(xg, t, reduction=reduction, **kw)
    (loss.sum() if reduction == "none" else loss).backward()
    assert torch.equal(xg.grad, want)


@pytest.mark.parametrize("option", list(_SAME_BITS_OPTIONS))
@pytest.mark.parametrize("cols", [40, 4099])
def test_cross_entropy_backward_mixes_rows_of_one_and_others(device, dtype, cols, option):
    """reduction='none' with per-row grad_loss, some exactly 1: the rows of 1 keep the forward's gradient and
    the others are the gradient times their grad_loss rounded once, bit for bit what the op makes with
    grad_loss out of place. Through the in-place op itself: rows of 1 are not touched at all (a buffer of
    NaN keeps them), the others are overwritten whatever the buffer held."""
    x = torch.randn(8, cols, device=device).to(dtype)
    t = targets(8, cols, device, ignored=(5,))
    kw = _ce_args(option, cols, device, dtype)
    gl = torch.tensor([1.0, 0.37, 1.0, -2.0, 1.0, 3.0, 0.0, 1.0], device=device).to(dtype)
    _, want, *_ = OP.cross_entropy(x, t, reduction="none", compute_grad=True, grad_loss=gl, **kw)
    _, unit, *_ = OP.cross_entropy(x, t, reduction="none", compute_grad=True, **kw)
    ones = gl == 1
    assert torch.equal(want[ones], unit[ones])
    xg = x.clone().requires_grad_()
    loss = tinycuda.cross_entropy(xg, t, reduction="none", **kw)
    assert torch.equal(torch.autograd.grad(loss, xg, gl)[0], want)
    buf = torch.full_like(x, math.nan)
    OP.cross_entropy_backward(buf, gl, x, t, reduction="none", **kw)
    assert buf[ones].isnan().all()
    assert torch.equal(buf[~ones], want[~ones])


class _LmHead(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(16, 37)
        self.loss = tinycuda.nn.CrossEntropyLoss(label_smoothing=0.1)

    def forward(self, x, t):
        return self.loss(self.proj(x), t) * 3  # grad_loss = 3: the scaling path


@requires_cuda
@pytest.mark.compile
def test_cross_entropy_module_compiles_to_cuda_graphs():
    model = _LmHead().cuda()
    x, t = torch.randn(9, 16, device="cuda"), targets(9, 37, "cuda")
    check_compiled(model, (x, t), wrt=list(model.parameters()), mode="reduce-overhead")


@pytest.mark.parametrize("weighted", [False, True], ids=["", "weight"])
def test_cross_entropy_bitwise_deterministic(device, dtype, weighted):
    """Fixed-order reductions only (no float atomics): with class weights W and Wsum too."""
    x = torch.randn(300, 4099, device=device, dtype=dtype, requires_grad=True)
    t = targets(300, 4099, device, ignored=(0, 7))
    w = (torch.rand(4099, device=device) + 0.5).to(dtype) if weighted else None
    runs = []
    for _ in range(3):
        loss = tinycuda.cross_entropy(x, t, label_smoothing=0.05, weight=w)
        runs.append((loss, torch.autograd.grad(loss * 1.5, x)[0]))
    for loss, grad in runs[1:]:
        assert torch.equal(loss, runs[0][0]) and torch.equal(grad, runs[0][1])


def test_cross_entropy_module_is_a_drop_in():
    ours, ref = tinycuda.nn.CrossEntropyLoss(label_smoothing=0.1), torch.nn.CrossEntropyLoss(label_smoothing=0.1)
    assert ours.state_dict().keys() == ref.state_dict().keys()
    assert (ours.ignore_index, ours.reduction, ours.label_smoothing) == (-100, "mean", 0.1)
    x, t = torch.randn(6, 11, requires_grad=True), torch.tensor([1, 2, 3, -100, 4, 10])
    torch.testing.assert_close(ours(x, t), ref(x, t))
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        legacy = tinycuda.nn.CrossEntropyLoss(reduce=False)  # torch's deprecated arguments still map
    assert legacy.reduction == "none" and legacy(x, t).shape == (6,)


def test_cross_entropy_module_with_class_weights_is_a_drop_in(device):
    """torch's `weight` buffer: the same state_dict keys, loaded from torch's module, moved by .to()."""
    w = torch.rand(11) + 0.5
    ref = torch.nn.CrossEntropyLoss(weight=w, ignore_index=2, label_smoothing=0.1)
    ours = tinycuda.nn.CrossEntropyLoss(weight=torch.ones(11), ignore_index=2, label_smoothing=0.1)
    assert ours.state_dict().keys() == ref.state_dict().keys() == {"weight"}
    ours.load_state_dict(ref.state_dict())
    ours, ref = ours.to(device), ref.to(device)
    x = torch.randn(9, 11, device=device, dtype=torch.float64, requires_grad=True)
    t = torch.randint(0, 11, (9,), device=device)
    t[3] = 2
    ref, ours = ref.double(), ours.double()
    torch.testing.assert_close(ours(x, t), ref(x, t))
    g, g_ref = (torch.autograd.grad(f(x, t), x)[0] for f in (ours, ref))
    torch.testing.assert_close(g, g_ref)


@pytest.mark.parametrize("rows", [0, 3])
def test_cross_entropy_weighted_mean_of_nothing_is_nan(device, rows):
    """'mean' with class weights divides by W, the weights of the targets not ignored: 0 rows, every
    row ignored, or every target of weight 0 give NaN, as torch's."""
    x = torch.randn(rows, 5, device=device)
    w = torch.rand(5, device=device) + 0.5
    for t, wt in ((torch.full((rows,), -100, device=device), w),
                  (torch.zeros(rows, dtype=torch.long, device=device), torch.cat([w.new_zeros(1), w[1:]]))):
        ours, ref = tinycuda.cross_entropy(x, t, weight=wt), F.cross_entropy(x, t, weight=wt)
        assert ours.isnan() and ref.isnan()


def test_cross_entropy_weight_without_grad_mode_needs_no_detach():
    """A weight that requires grad is refused only where a gradient could flow (grad mode on)."""
    x, t, w = torch.randn(4, 6), torch.tensor([0, 1, 5, 3]), torch.rand(6, requires_grad=True)
    with torch.no_grad():
        torch.testing.assert_close(tinycuda.cross_entropy(x, t, weight=w), F.cross_entropy(x, t, weight=w))


def _weighted_case(rows, cols, device, dtype=torch.float64):
    """Logits, targets with every third row (from the second) at an in-range ignore_index (the last
    class; -100 for one class), the first at class 0, and weights: a strided view, with a 0 and a negative weight where
    there are classes enough (torch takes any real weights)."""
    x = torch.randn(rows, cols, device=device, dtype=dtype)
    ignore = cols - 1 if cols > 1 else -100
    t = torch.randint(0, cols, (rows,), device=device)
    t[1::3] = ignore
    t[0] = 0  # W > 0: one target of a positive weight
    w = torch.empty(2 * cols, device=device, dtype=dtype)[::2]
    w.copy_(torch.rand(cols, device=device) + 0.5)
    if cols > 2:
        w[1] = 0
    if cols > 3:
        w[2] = -0.75
    return x, t, ignore, w


@pytest.mark.parametrize("shape", [(1, 1), (7, 1), (5, 3), (9, 1030), (4, 8195)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("eps", [0.0, 0.3, 1.0])
def test_cross_entropy_class_weights_match_torch_in_float64(device, shape, reduction, eps):
    """torch's formula exactly: loss_i = (1 - eps) w_t nll_i + eps / V sum_c w_c (-log p_ic), 0 on ignored
    rows, 'mean' dividing both terms by W = sum of w_t over the rows not ignored; loss and gradient
    (a random grad_loss for 'none') against F.cross_entropy in float64."""
    x, t, ignore, w = _weighted_case(*shape, device)
    x.requires_grad_()
    kw = dict(reduction=reduction, label_smoothing=eps, ignore_index=ignore, weight=w)
    ours, ref = tinycuda.cross_entropy(x, t, **kw), F.cross_entropy(x, t, **kw)
    torch.testing.assert_close(ours, ref)
    g = torch.randn_like(ref)
    torch.testing.assert_close(torch.autograd.grad(ours, x, g)[0], torch.autograd.grad(ref, x, g)[0])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_class_weights_low_precision(device, dtype, reduction):
    """fp16/bf16/fp32 logits with weights of their dtype (torch requires the same dtype): within
    the torch op's own error against the float64 reference (conftest's rule)."""
    x, t, ignore, w = _weighted_case(11, 523, device, dtype)
    x.requires_grad_()
    kw = dict(reduction=reduction, label_smoothing=0.1, ignore_index=ignore)
    ours = tinycuda.cross_entropy(x, t, weight=w, **kw)
    same = F.cross_entropy(x, t, weight=w, **kw)
    x64 = x.detach().double().requires_grad_()
    ref = F.cross_entropy(x64, t, weight=w.double(), **kw)
    assert_matches(ours, same, ref)
    g = torch.randn_like(ref)
    assert_matches(torch.autograd.grad(ours, x, g.to(dtype))[0], torch.autograd.grad(same, x, g.to(dtype))[0],
                   torch.autograd.grad(ref, x64, g)[0], grad=True)


def test_cross_entropy_weight_of_an_ignored_class_stays_out(device):
    """An in-range ignore_index whose weight is inf or NaN: its rows add nothing to W, as torch's
    (no smoothing: Wsum, which holds every class, is not used)."""
    x, t, ignore, w = _weighted_case(10, 7, device)
    for bad in (math.inf, math.nan):
        w[ignore] = bad
        for reduction in ("mean", "sum"):
            kw = dict(reduction=reduction, ignore_index=ignore, weight=w)
            ours, ref = tinycuda.cross_entropy(x, t, **kw), F.cross_entropy(x, t, **kw)
            assert ref.isfinite()
            torch.testing.assert_close(ours, ref)


_BAD_WEIGHTS = [
    (lambda: torch.ones(4), r"weight must have shape \[5\] \(one weight per class\), got \[4\]"),
    (lambda: torch.ones(5, 1), r"weight must have shape \[5\] \(one weight per class\), got \[5, 1\]"),
    (lambda: torch.ones(()), r"weight must have shape \[5\] \(one weight per class\), got \[\]"),
    (lambda: torch.ones(5, dtype=torch.float64), r"weight has dtype (Double|torch.float64) but logits has dtype"),
    (lambda: torch.ones(5, dtype=torch.int64), r"weight must be float32, float16, bfloat16 or float64, got"),
]


@pytest.mark.parametrize("make,match", _BAD_WEIGHTS, ids=["short", "2d", "0d", "float64", "int64"])
@pytest.mark.parametrize("mode", ["real", "fake"])
def test_cross_entropy_bad_weight_errors_in_both_kernels(make, match, mode):
    """The C++ checks and the fake (meta) kernel's name the op and the argument alike, in one order."""
    x, t, w = torch.randn(3, 5), torch.tensor([0, 4, 2]), make()
    with pytest.raises(RuntimeError, match=r"tinycuda::cross_entropy: " + match):
        if mode == "fake":
            with FakeTensorMode() as m:
                OP.cross_entropy(m.from_tensor(x), m.from_tensor(t), weight=m.from_tensor(w))
        else:
            OP.cross_entropy(x, t, weight=w)


def test_cross_entropy_half_logits_with_float32_weight_raise_as_torch():
    """torch requires weight's dtype to be the input's ("expected scalar type BFloat16 but found Float"):
    so does the op, naming it, in both kernels; the nn module follows its buffer's dtype (.to())."""
    x, t, w = torch.randn(3, 5, dtype=torch.bfloat16), torch.tensor([0, 4, 2]), torch.rand(5)
    with pytest.raises(RuntimeError, match="expected scalar type BFloat16 but found Float"):
        F.cross_entropy(x, t, weight=w)
    match = r"tinycuda::cross_entropy: weight has dtype (Float|torch.float32) but logits has dtype"
    with pytest.raises(RuntimeError, match=match):
        tinycuda.cross_entropy(x, t, weight=w)
    with FakeTensorMode() as m, pytest.raises(RuntimeError, match=match):
        OP.cross_entropy(m.from_tensor(x), m.from_tensor(t), weight=m.from_tensor(w))
    module = tinycuda.nn.CrossEntropyLoss(weight=w).to(torch.bfloat16)
    torch.testing.assert_close(module(x, t), F.cross_entropy(x, t, weight=w.to(torch.bfloat16)))


def test_cross_entropy_fake_weight_on_another_device():
    """The fake names the device mismatch as the C++ check does (a CUDA weight for CPU logits)."""
    with FakeTensorMode() as m, pytest.raises(RuntimeError, match=r"tinycuda::cross_entropy: weight is on cuda"):
        OP.cross_entropy(m.from_tensor(torch.randn(3, 5)), m.from_tensor(torch.tensor([0, 4, 2])),
                         weight=torch.ones(5, device="cuda"))


# ---------------------------------------------------------------------------
# token accuracy (return_token_accuracy, Liger-Kernel's): cross_entropy.h

def _accuracy_ref(x, t, reduction, ignore_index=-100):
    valid = t != ignore_index
    correct = ((x.argmax(-1) == t) & valid).float()
    return correct if reduction == "none" else correct.sum() / valid.sum()


def _accuracy_cases(device, dtype, cols):
    """Rows of every kind at one width: ties (the first index wins), NaN (the largest: the first NaN wins),
    all -inf (index 0), +inf, an ignored row, right and wrong rows; softcap-saturated neighbours."""
    x = torch.randn(12, cols, device=device).to(dtype)
    t = torch.randint(0, cols, (12,), device=device)
    last, mid = cols - 1, cols // 2
    top = x.amax(-1) + 1
    x[0, mid] = x[0, last] = top[0]
    t[0] = mid                                   # tie: the first is the argmax, right
    x[1, 0] = x[1, last] = top[1]
    t[1] = last                                  # tie: the later index, wrong
    x[2, mid] = x[2, last] = math.nan
    t[2] = mid                                   # the first NaN, right
    x[3, mid] = x[3, last] = math.nan
    t[3] = last                                  # the second NaN, wrong
    x[4] = -math.inf
    t[4] = 0                                     # all -inf: torch's argmax is 0
    x[5, last] = math.inf
    t[5] = last
    t[6] = -100                                  # ignored, whatever its argmax
    t[7:10] = x[7:10].argmax(-1)                 # right
    x[10, last], x[10, 0] = 300, 200             # both saturate under softcap 1 in float: raw logits decide
    t[10] = last
    return x, t


@pytest.mark.parametrize("cols", [1, 7, 1030, 8195], ids=lambda c: f"V{c}")
def test_cross_entropy_token_accuracy_edge_cases(device, dtype, cols):
    """Per row ('none') and the fraction ('mean' and 'sum' alike) against torch's argmax, on each CUDA width
    (a warp, 256 threads, 1024) and with odd row lengths (rows start unaligned); with softcap, z-loss and
    class weights the accuracy is the same; the loss is what it is without the option."""
    x, t = _accuracy_cases(device, dtype, cols)
    if cols == 1:
        t = t.clamp(max=0).masked_fill(torch.arange(12, device=device) == 6, -100)
    w = (torch.rand(cols, device=device) + 0.5).to(dtype)
    for kw in ({}, {"softcap": 1.0, "lse_square_scale": 1e-3}, {"weight": w, "label_smoothing": 0.1}):
        for reduction in ("none", "mean", "sum"):
            loss, acc = tinycuda.cross_entropy(x, t, reduction=reduction, return_token_accuracy=True, **kw)
            assert acc.dtype == torch.float32 and not acc.requires_grad
            assert torch.equal(acc, _accuracy_ref(x, t, reduction)), (kw, reduction, acc)
            torch.testing.assert_close(loss, tinycuda.cross_entropy(x, t, reduction=reduction, **kw), equal_nan=True)
    # the gradient from the same pass is the one without the option
    xg = x.nan_to_num(0.0, 0.0, 0.0).requires_grad_()
    loss, acc = tinycuda.cross_entropy(xg, t, return_token_accuracy=True, softcap=2.0)
    ref = tinycuda.cross_entropy(xg, t, softcap=2.0)
    torch.testing.assert_close(torch.autograd.grad(loss, xg)[0], torch.autograd.grad(ref, xg)[0])


@pytest.mark.parametrize("rows", [5, 0])
def test_cross_entropy_token_accuracy_all_ignored(device, rows):
    """No row counts: 0 / 0 = NaN for 'mean' and 'sum' (torch's mean of nothing), zeros (or nothing) for 'none';
    with return_z_loss the accuracy comes last."""
    x, t = torch.randn(rows, 6, device=device), torch.full((rows,), -100, device=device)
    for reduction in ("mean", "sum"):
        assert tinycuda.cross_entropy(x, t, reduction=reduction, return_token_accuracy=True)[1].isnan()
    loss, z, acc = tinycuda.cross_entropy(x, t, reduction="none", return_token_accuracy=True, return_z_loss=True,
                                          lse_square_scale=1e-2)
    assert torch.equal(acc, torch.zeros(rows, device=device)) and z.shape == acc.shape == loss.shape


def test_cross_entropy_token_accuracy_return_values():
    """The loss alone without the option (unchanged); then (loss, token_accuracy), (loss, z_loss, token_accuracy);
    1-D logits give a 0-dim accuracy for 'none'; no gradient reaches it."""
    x, t = torch.randn(6, 5, requires_grad=True), torch.tensor([0, 1, -100, 3, 4, 0])
    assert isinstance(tinycuda.cross_entropy(x, t), torch.Tensor)
    assert len(tinycuda.cross_entropy(x, t, return_z_loss=True)) == 2
    loss, acc = tinycuda.cross_entropy(x, t, return_token_accuracy=True)
    loss.backward()
    loss, z, acc = tinycuda.cross_entropy(x.detach(), t, return_z_loss=True, return_token_accuracy=True,
                                          lse_square_scale=1e-2)
    assert acc.shape == () and acc.item() == _accuracy_ref(x, t, "mean").item()
    one = tinycuda.cross_entropy(x[0].detach(), x[0].argmax(), reduction="none", return_token_accuracy=True)[1]
    assert one.shape == () and one.item() == 1.0


@pytest.mark.compile
def test_cross_entropy_token_accuracy_compiles_fullgraph():
    """Both ops with the option trace without a graph break (the fakes give float32 accuracies) and the
    compiled call returns the same values and gradients."""
    def f(x, t, h, w):
        loss, acc = tinycuda.cross_entropy(x, t, return_token_accuracy=True)
        floss, fz, facc = tinycuda.fused_linear_cross_entropy(h, w, t, reduction="sum", chunk_size=2,
                                                              lse_square_scale=1e-2, return_z_loss=True,
                                                              return_token_accuracy=True)
        return loss + floss, acc, fz, facc
    x, t = torch.randn(5, 9, requires_grad=True), targets(5, 9, "cpu")
    h, w = torch.randn(5, 4, requires_grad=True), torch.randn(9, 4, requires_grad=True)
    check_compiled(f, (x, t, h, w), wrt=[x, h, w])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_fused_linear_cross_entropy_token_accuracy(device, reduction):
    """Chunks that split the batch: each chunk's rows' 1 / 0, reduced over the whole batch's count."""
    h, w = torch.randn(23, 8, device=device), torch.randn(11, 8, device=device)
    logits = h @ w.T
    t = targets(23, 11, device, ignored=(1, 5, 6))
    t[::2] = logits[::2].argmax(-1)
    t[4] = -100
    for chunk in (0, 4, 7):
        loss, acc = tinycuda.fused_linear_cross_entropy(h, w, t, reduction=reduction, chunk_size=chunk,
                                                        return_token_accuracy=True)
        assert torch.equal(acc, _accuracy_ref(logits, t, reduction)), chunk
    t[:] = -100
    acc = tinycuda.fused_linear_cross_entropy(h, w, t, reduction=reduction, return_token_accuracy=True)[1]
    assert acc.isnan() if reduction != "none" else torch.equal(acc, torch.zeros(23, device=device))


@pytest.mark.parametrize("cols", [5, 256, 300, 1000], ids=lambda c: f"{c}cols")
@pytest.mark.parametrize("weighted", [False, True], ids=["", "weight"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
def test_cross_entropy_many_rows(device, cols, weighted, dtype):
    """More rows than the CUDA sums' 1024 slices (each a block, then one block over the slices) and
    short rows packed several to a warp (8 or 16 threads a row): 'mean' and 'sum' of the loss, the
    z-loss term and token accuracy against float64 torch; every third row ignored. An odd count of
    rows: float64's partial sums follow 4-byte accuracy flags in the CUDA workspace."""
    rows = 3001
    x, t, ignore, w = _weighted_case(rows, cols, device, dtype)
    x.requires_grad_()
    w = w if weighted else None
    for reduction in ("mean", "sum"):
        kw = dict(reduction=reduction, label_smoothing=0.1, ignore_index=ignore)
        loss, z, acc = tinycuda.cross_entropy(x, t, weight=w, lse_square_scale=1e-3, return_z_loss=True,
                                              return_token_accuracy=True, **kw)
        x64 = x.detach().double().requires_grad_()
        lse = torch.logsumexp(x64, -1)
        valid = t != ignore
        z_rows = 1e-3 * lse.square() * valid
        z_ref = z_rows.sum() / (valid.sum() if reduction == "mean" else 1)
        ref = F.cross_entropy(x64, t, weight=None if w is None else w.double(), **kw) + z_ref
        torch.testing.assert_close(loss.double(), ref, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(z.double(), z_ref, rtol=1e-5, atol=1e-7)
        acc_ref = (x64.argmax(-1) == t)[valid].double().mean()
        torch.testing.assert_close(acc.double(), acc_ref, rtol=0, atol=1e-7)
        g = torch.autograd.grad(loss, x)[0]
        g_ref = torch.autograd.grad(ref, x64)[0]
        torch.testing.assert_close(g.double(), g_ref, rtol=1e-4, atol=1e-7)


# ---------------------------------------------------------------------------
# an upstream gradient other than 1: the gradient times grad_loss, rounded once (cross_entropy.h)

GRAD_LOSS_OPTIONS = {"plain": {}, "smoothing": {"label_smoothing": 0.1}, "weight": {"weight": True},
                     "softcap": {"softcap": 5.0}, "z_loss": {"lse_square_scale": 1e-2},
                     "all": {"weight": True, "label_smoothing": 0.1, "softcap": 5.0, "lse_square_scale": 1e-2}}


def _term_bound(x64, t, gl, reduction, weight=None, label_smoothing=0.0, softcap=None, lse_square_scale=0.0):
    """T: a bound on the sum of the magnitudes of the terms the kernels add up for an element of the
    gradient (the softmax times its factor, the smoothing bias, the target's term: 3 x scale x max |w|,
    and the z-loss term), times |grad_loss|: the arithmetic's error is relative to these, not to the
    result, which can cancel."""
    valid = t != -100
    w = weight.double().abs() if weight is not None else torch.ones(x64.shape[1], dtype=torch.float64,
                                                                     device=x64.device)
    n_valid = valid.sum().clamp(min=1).item()
    w_valid = weight.double()[t[valid]].sum().abs().item() if weight is not None else n_valid
    mean = reduction == "mean"
    scale, scale_z = (1 / w_valid if mean and w_valid else 1.0), (1 / n_valid if mean else 1.0)
    xc = softcap * torch.tanh(x64 / softcap) if softcap else x64
    lse = torch.logsumexp(xc, -1).abs() if x64.numel() else x64.new_zeros(x64.shape[0])
    rows = gl.double().abs().expand(x64.shape[0]) * (3 * scale * w.max() + 2 * lse_square_scale * lse * scale_z)
    return rows.max().item() if rows.numel() else 0.0


@pytest.mark.parametrize("option", list(GRAD_LOSS_OPTIONS))
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape", [(37, 1000), (3, 4099), (1, 5), (0, 7)], ids=lambda s: "x".join(map(str, s)))
def test_cross_entropy_grad_loss_is_as_accurate_as_torch(device, dtype, shape, reduction, option):
    """With grad_loss != 1 (0.37 for 'mean' and 'sum', random per row for 'none'), the input gradient's
    max error against float64 is at most torch's own in the same dtype, plus 2 delta. Why: the kernel
    rounds once a value within delta of the exact gradient (delta: its arithmetic's error), so it lands on
    the dtype value nearest the exact one except where a midpoint lies within delta, and then at most 2
    delta further off; torch's result, a dtype value too, is never nearer than the nearest. delta, with T
    the largest term (_term_bound): 2^-24 T on the CPU for float16 and bfloat16 (double arithmetic rounded
    to float, then to the dtype), 2^-40 T for float32 (the double rounded once); 2^-18 T on CUDA (float
    arithmetic: 64 float32 roundings, ex2.approx's 2^-22 counting 4). For float16 and bfloat16, 2 delta is
    under 1/32 of a half ulp at T, which a second rounding (the gradient for grad_loss = 1 rounded, then
    scaled and rounded again) misses by: the test tells the two apart. float32 on CUDA, computed in
    float32 itself, is held only to within 2^-17 T of torch's."""
    rows, cols = shape
    x = torch.randn(shape, device=device).to(dtype)
    t = targets(rows, cols, device)
    kw = {k: (class_weights(cols, device, dtype) if k == "weight" else v)
          for k, v in GRAD_LOSS_OPTIONS[option].items()}
    kw["reduction"] = reduction
    gl = (torch.randn(rows, device=device) if reduction == "none" else torch.tensor(0.37, device=device)).to(dtype)
    x_ours, x_same, x64 = x.clone().requires_grad_(), x.clone().requires_grad_(), x.double().requires_grad_()
    ours = tinycuda.cross_entropy(x_ours, t, **kw)
    same, ref = _cross_entropy_ref(x_same, t, **kw), _cross_entropy_ref(x64, t, **kw)
    g = torch.autograd.grad(ours, x_ours, gl)[0]
    g_same = torch.autograd.grad(same, x_same, gl)[0]
    g_ref = torch.autograd.grad(ref, x64, gl.double())[0]
    assert g.shape == g_ref.shape and g.dtype == dtype
    e_ours, e_torch = max_err(g, g_ref), max_err(g_same, g_ref)
    bound = _term_bound(x64.detach(), t, gl, **kw)
    delta = (2.0**-18 if device == "cuda" else 2.0**-40 if dtype == torch.float32 else 2.0**-24) * bound
    assert e_ours <= e_torch + 2 * delta, f"error {e_ours:.4g} > torch's {e_torch:.4g} + {2 * delta:.3g}"


_BAD_GRAD_LOSS = [
    ({"compute_grad": True, "grad_loss": torch.ones(3)}, r"grad_loss must have shape \[\] \(the loss's\), got \[3\]"),
    ({"reduction": "none", "compute_grad": True, "grad_loss": torch.ones(())},
     r"grad_loss must have shape \[3\] \(the loss's\), got \[\]"),
    ({"compute_grad": True, "grad_loss": torch.ones((), dtype=torch.float64)},
     r"grad_loss has dtype (Double|torch.float64) but logits has dtype"),
    ({"compute_grad": True, "grad_loss": torch.ones((), dtype=torch.int64)},
     r"grad_loss must be float32, float16, bfloat16 or float64, got"),
    ({"grad_loss": torch.ones(())}, r"grad_loss is given but compute_grad is False"),
]


@pytest.mark.parametrize("kwargs,match", _BAD_GRAD_LOSS, ids=["shape", "shape_none", "float64", "int64", "no_grad"])
@pytest.mark.parametrize("mode", ["real", "fake"])
def test_cross_entropy_bad_grad_loss_errors_in_both_kernels(kwargs, match, mode):
    """The C++ checks and the fake (meta) kernel's name the op and the argument alike, in one order."""
    x, t = torch.randn(3, 5), torch.tensor([0, 4, 2])
    with pytest.raises(RuntimeError, match=r"tinycuda::cross_entropy: " + match):
        if mode == "fake":
            with FakeTensorMode() as m:
                OP.cross_entropy(m.from_tensor(x), m.from_tensor(t),
                                 **{k: m.from_tensor(v) if isinstance(v, torch.Tensor) else v
                                    for k, v in kwargs.items()})
        else:
            OP.cross_entropy(x, t, **kwargs)
