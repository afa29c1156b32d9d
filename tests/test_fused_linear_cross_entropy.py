"""fused_linear_cross_entropy beyond the op table (tests/test_ops.py): all
tokens ignored, the one-backward rule, determinism, the module under
torch.compile's CUDA graphs and its Liger argument order."""
import pytest
import torch

import tinycuda
from conftest import check_compiled, requires_cuda
from tinycuda.optable import BY_NAME
from tinycuda.optable import flce_inputs as _inputs


def test_flce_all_ignored_and_no_tokens(device):
    for n in (4, 0):
        hidden, weight, target, b = _inputs(n, 8, 11, device, torch.float32, bias=True, ignored=range(n))
        ins = [t.requires_grad_() for t in (hidden, weight, b)]
        ours = tinycuda.fused_linear_cross_entropy(hidden, weight, target, b)
        assert torch.isnan(ours)  # 0 / 0, as torch
        for g in torch.autograd.grad(ours, ins):
            assert torch.equal(g, torch.zeros_like(g))


def test_flce_second_backward_raises_instead_of_a_wrong_gradient():
    hidden, weight, target, _ = _inputs(6, 4, 5, "cpu", torch.float32)
    hidden.requires_grad_()
    loss = tinycuda.fused_linear_cross_entropy(hidden, weight, target)
    torch.autograd.grad(loss, hidden, torch.tensor(2.0), retain_graph=True)
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation"):
        torch.autograd.grad(loss, hidden, torch.tensor(2.0))


class _Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lm_head = torch.nn.Linear(16, 41)
        self.loss = tinycuda.nn.FusedLinearCrossEntropyLoss(label_smoothing=0.1)

    def forward(self, x, t):
        return self.loss(self.lm_head.weight, torch.tanh(x), t, self.lm_head.bias) * 3


@requires_cuda
@pytest.mark.compile
def test_flce_module_compiles_to_cuda_graphs():
    model = _Head().cuda()
    x = torch.randn(11, 16, device="cuda", requires_grad=True)
    t = torch.randint(0, 41, (11,), device="cuda")
    check_compiled(model, (x, t), wrt=[x, *model.parameters()], mode="reduce-overhead")


def test_flce_bitwise_deterministic(device, dtype):
    hidden, weight, target, b = _inputs(70, 32, 1001, device, dtype, bias=True)
    ins = [x.requires_grad_() for x in (hidden, weight, b)]
    runs = []
    for _ in range(3):
        loss = tinycuda.fused_linear_cross_entropy(hidden, weight, target, b, chunk_size=16)
        runs.append((loss, *torch.autograd.grad(loss * 1.5, ins)))
    for run in runs[1:]:
        for a, r in zip(run, runs[0]):
            assert torch.equal(a, r)


def test_flce_module_takes_ligers_argument_order():
    loss_fn = tinycuda.nn.FusedLinearCrossEntropyLoss(ignore_index=5, reduction="sum", label_smoothing=0.1)
    hidden, weight, target, b = _inputs(8, 6, 10, "cpu", torch.float32, bias=True, ignored=())
    target[2] = 5
    ref = BY_NAME["fused_linear_cross_entropy"].ref
    torch.testing.assert_close(loss_fn(weight, hidden, target, b),
                               ref(hidden, weight, target, b, ignore_index=5, reduction="sum", label_smoothing=0.1))
    assert "reduction='sum'" in repr(loss_fn)
    with pytest.raises(ValueError, match=r"reduction must be 'mean', 'sum' or 'none', got 'avg'"):
        tinycuda.nn.FusedLinearCrossEntropyLoss(reduction="avg")


def test_flce_module_ce_weight_is_a_buffer():
    """ce_weight: the class weights, kept as a buffer (in the state_dict, moved by .to()) when given."""
    cw = torch.rand(10) + 0.5
    loss_fn = tinycuda.nn.FusedLinearCrossEntropyLoss(label_smoothing=0.1, ce_weight=cw)
    assert set(loss_fn.state_dict()) == {"ce_weight"}
    assert not tinycuda.nn.FusedLinearCrossEntropyLoss().state_dict()
    hidden, weight, target, b = _inputs(8, 6, 10, "cpu", torch.float64, bias=True)
    loss_fn = loss_fn.double()
    ref = BY_NAME["fused_linear_cross_entropy"].ref
    torch.testing.assert_close(loss_fn(weight, hidden, target, b),
                               ref(hidden, weight, target, b, label_smoothing=0.1, ce_weight=cw.double()))


@pytest.mark.parametrize("bad", [float("inf"), float("nan")], ids=["inf", "nan"])
def test_flce_weight_of_an_ignored_class_stays_out_of_w(device, bad):
    """'mean' with ce_weight: the batch's W sums the weights of the targets not ignored only, so an
    inf or NaN weight of an in-range ignore_index does not reach it (torch's masked_select), in the
    torch op and the capi's chunked loop; the z terms apart by the count (cross_entropy.h)."""
    from tinycuda import capi
    hidden, weight, target, b = _inputs(13, 6, 9, device, torch.float64, bias=True, ignored=())
    target[[1, 5, 6]] = 4
    cw = torch.rand(9, device=device, dtype=torch.float64) + 0.5
    cw[4] = bad
    ref = torch.nn.functional.cross_entropy(hidden @ weight.T + b, target, weight=cw, ignore_index=4)
    assert ref.isfinite()
    for zs in (0.0, 1e-2):
        ours = tinycuda.fused_linear_cross_entropy(hidden, weight, target, b, 4, chunk_size=4, ce_weight=cw,
                                                   lse_square_scale=zs)
        via_capi = capi.fused_linear_cross_entropy(hidden, weight, target, b, 4, chunk_size=4, ce_weight=cw,
                                                   lse_square_scale=zs)
        if zs == 0:
            torch.testing.assert_close(ours, ref)
        assert ours.isfinite() and via_capi.isfinite()
        torch.testing.assert_close(torch.as_tensor(via_capi, device=device), ours)
