"""cross_entropy beyond the op table (tests/test_ops.py): all rows ignored,
infinities, out-of-range targets on CUDA (a device-side assert), the in-place backward and its
one-backward rule, the gradient made by the forward, determinism, the
module under torch.compile's CUDA graphs, the nn.CrossEntropyLoss drop-in."""
import math
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import tinycuda
from conftest import check_compiled, requires_cuda
from tinycuda.optable import targets

pytestmark = pytest.mark.racecheck
OP = torch.ops.tinycuda


@pytest.mark.parametrize("rows", [4, 0])
def test_cross_entropy_all_ignored_or_no_rows(device, rows):
    x = torch.randn(rows, 9, device=device, requires_grad=True)
    t = torch.full((rows,), -100, device=device)
    for reduction, eps in (("mean", 0.0), ("mean", 0.1), ("sum", 0.0), ("none", 0.1)):
        ours = tinycuda.cross_entropy(x, t, reduction=reduction, label_smoothing=eps)
        ref = F.cross_entropy(x, t, reduction=reduction, label_smoothing=eps)
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
    _, grad, _ = OP.cross_entropy(x, t, -100, "none", 0.0, True)
    ref = grad.clone()
    OP.cross_entropy_backward(grad, torch.ones(6, device=device, dtype=dtype))
    assert torch.equal(grad, ref)  # exactly 1: untouched
    scale = torch.tensor([1.0, 2.0, 0.5, 1.0, -4.0, 0.0], device=device, dtype=dtype)
    OP.cross_entropy_backward(grad, scale)
    assert torch.equal(grad, ref * scale[:, None])  # powers of two: exact
    OP.cross_entropy_backward(grad, torch.tensor(2.0, device=device, dtype=dtype))
    assert torch.equal(grad, ref * scale[:, None] * 2)


def test_cross_entropy_forward_gradient_is_the_mean_gradient(device):
    """compute_grad writes d(loss)/d(logits) for grad_loss = 1; mean divides by n_valid."""
    x = torch.randn(7, 40, device=device, dtype=torch.float64, requires_grad=True)
    t = targets(7, 40, device, ignored=(2, 5))
    for reduction in ("mean", "sum", "none"):
        _, grad, _ = OP.cross_entropy(x.detach(), t, -100, reduction, 0.3, True)
        ref = F.cross_entropy(x, t, reduction=reduction, label_smoothing=0.3)
        torch.testing.assert_close(grad, torch.autograd.grad(ref.sum(), x)[0])


def test_cross_entropy_no_grad_outputs():
    x = torch.randn(3, 5, requires_grad=True)
    t = torch.tensor([0, 1, 2])
    with torch.no_grad():
        loss = tinycuda.cross_entropy(x, t)
    assert loss.grad_fn is None
    loss, grad, _ = OP.cross_entropy(x.detach(), t)
    assert grad.shape == (0,)


def test_cross_entropy_second_backward_raises_instead_of_a_wrong_gradient():
    x = torch.randn(4, 6, requires_grad=True)
    loss = tinycuda.cross_entropy(x, torch.tensor([0, 1, 2, 3]), reduction="none")
    torch.autograd.grad(loss, x, torch.randn(4), retain_graph=True)
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation"):
        torch.autograd.grad(loss, x, torch.randn(4))


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


def test_cross_entropy_bitwise_deterministic(device, dtype):
    x = torch.randn(300, 4099, device=device, dtype=dtype, requires_grad=True)
    t = targets(300, 4099, device, ignored=(0, 7))
    runs = []
    for _ in range(3):
        loss = tinycuda.cross_entropy(x, t, label_smoothing=0.05)
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
