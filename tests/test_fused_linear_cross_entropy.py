import pytest
import torch
import torch.nn.functional as F

import tinycuda
from conftest import check_op, noncontiguous, requires_cuda

OP = torch.ops.tinycuda


def _inputs(n, h, v, device, dtype, bias=False, ignored=(1,)):
    hidden = torch.randn(n, h, device=device).to(dtype)
    weight = (torch.randn(v, h, device=device) / h**0.5).to(dtype)
    target = torch.randint(0, v, (n,), device=device)
    for r in ignored:
        if r < n:
            target[r] = -100
    return hidden, weight, target, (torch.randn(v, device=device).to(dtype) if bias else None)


def _reference(reduction="mean", eps=0.0, ignore_index=-100):
    def fn(h, w, t, b=None):
        logits = h @ w.T if b is None else h @ w.T + b
        return F.cross_entropy(logits, t, ignore_index=ignore_index, reduction=reduction, label_smoothing=eps)
    return fn


# (tokens, hidden, classes, chunk_size): chunks that do not divide the tokens,
# a single chunk, one-token chunks, Liger's automatic size (0).
CASES = [(37, 24, 50, 8), (37, 24, 50, 0), (5, 16, 7, 1), (16, 8, 1023, 5), (9, 32, 4097, 4), (64, 40, 300, 64)]


@pytest.mark.parametrize("n,h,v,chunk", CASES, ids=str)
@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
def test_flce_matches_torch(device, dtype, n, h, v, chunk, reduction, bias):
    hidden, weight, target, b = _inputs(n, h, v, device, dtype, bias)
    ins = [hidden, weight, target] + ([b] if bias else [])
    check_op(lambda *a: tinycuda.fused_linear_cross_entropy(*a[:3], a[3] if bias else None, reduction=reduction,
                                                            chunk_size=chunk),
             _reference(reduction), ins, rtol32=1e-5, atol32=1e-5, grad_rtol32=1e-4, grad_atol32=1e-5)


@pytest.mark.parametrize("chunk", [3, 16], ids=lambda c: f"chunk{c}")
def test_flce_many_chunks_half_accuracy(device, dtype, chunk):
    """grad_weight adds one rounding per chunk (bf16/fp16 accumulation); it
    must still meet the 3x-torch rule with 16 to 86 chunks."""
    hidden, weight, target, _ = _inputs(256, 32, 300, device, dtype, ignored=(0, 100))
    check_op(lambda a, b, c: tinycuda.fused_linear_cross_entropy(a, b, c, chunk_size=chunk),
             _reference(), [hidden, weight, target], rtol32=1e-5, atol32=1e-5, grad_rtol32=1e-4, grad_atol32=1e-5)


def test_flce_label_smoothing_ignore_index_strided(device, dtype):
    hidden, weight, target, b = _inputs(21, 16, 130, device, dtype, bias=True, ignored=())
    target[[0, 4]] = 7  # 7 is the ignore_index: an in-range class
    hidden = noncontiguous(hidden)
    check_op(lambda a, w, t, bb: tinycuda.fused_linear_cross_entropy(a, w, t, bb, ignore_index=7,
                                                                     label_smoothing=0.2, chunk_size=4),
             _reference(eps=0.2, ignore_index=7), [hidden, weight, target, b], rtol32=1e-5, atol32=1e-5,
             grad_rtol32=1e-4, grad_atol32=1e-5)


def test_flce_reduction_none_without_grad(device):
    hidden, weight, target, _ = _inputs(13, 8, 20, device, torch.float32)
    with torch.no_grad():
        ours = tinycuda.fused_linear_cross_entropy(hidden, weight, target, reduction="none", chunk_size=4)
    torch.testing.assert_close(ours, _reference("none")(hidden, weight, target))
    with pytest.raises(RuntimeError, match=r"tinycuda::fused_linear_cross_entropy: reduction='none' has no gradient"):
        tinycuda.fused_linear_cross_entropy(hidden.requires_grad_(), weight, target, reduction="none")


def test_flce_all_ignored_and_no_tokens(device):
    for n in (4, 0):
        hidden, weight, target, b = _inputs(n, 8, 11, device, torch.float32, bias=True, ignored=range(n))
        ins = [t.requires_grad_() for t in (hidden, weight, b)]
        ours = tinycuda.fused_linear_cross_entropy(hidden, weight, target, b)
        assert torch.isnan(ours)  # 0 / 0, as torch
        for g in torch.autograd.grad(ours, ins):
            assert torch.equal(g, torch.zeros_like(g))


def test_flce_only_some_inputs_need_grad(device):
    hidden, weight, target, b = _inputs(10, 8, 12, device, torch.float32, bias=True)
    hidden.requires_grad_()  # frozen weight and bias (fine-tuning below the lm_head)
    ours = tinycuda.fused_linear_cross_entropy(hidden, weight, target, b, chunk_size=3)
    (g,) = torch.autograd.grad(ours * 2, hidden)
    ref_h = hidden.detach().requires_grad_()
    (r,) = torch.autograd.grad(_reference()(ref_h, weight, target, b) * 2, ref_h)
    torch.testing.assert_close(g, r)


def test_flce_out_of_range_target_names_the_batch_row():
    hidden, weight, target, _ = _inputs(10, 4, 6, "cpu", torch.float32, ignored=())
    target[7] = 6
    with pytest.raises(RuntimeError, match=r"tinycuda::fused_linear_cross_entropy: target 6 at row 7 is out of range \[0, 6\)"):
        tinycuda.fused_linear_cross_entropy(hidden, weight, target, chunk_size=3)


class _FreshGraph(torch.autograd.Function):
    """Every backward runs tinycuda's forward and backward on a new graph: the
    op's own graph can be backpropagated once (gradients scaled in place)."""

    @staticmethod
    def forward(ctx, h, w, b, t, kwargs):
        ctx.save_for_backward(h, w, b)
        ctx.t, ctx.kwargs = t, kwargs
        with torch.no_grad():
            return tinycuda.fused_linear_cross_entropy(h, w, t, b, **kwargs)

    @staticmethod
    def backward(ctx, g):
        with torch.enable_grad():
            leaves = [x.detach().requires_grad_() for x in ctx.saved_tensors]
            h, w, b = leaves
            loss = tinycuda.fused_linear_cross_entropy(h, w, ctx.t, b, **ctx.kwargs)
            return (*torch.autograd.grad(loss, leaves, g), None, None)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_flce_gradcheck(reduction):
    hidden, weight, target, b = _inputs(7, 5, 9, "cpu", torch.float64, bias=True)
    ins = tuple(x.requires_grad_() for x in (hidden, weight, b))
    for kwargs in (dict(reduction=reduction, chunk_size=3), dict(reduction=reduction, label_smoothing=0.3)):
        assert torch.autograd.gradcheck(lambda h, w, bb: _FreshGraph.apply(h, w, bb, target, kwargs), ins)


def test_flce_second_backward_raises_instead_of_a_wrong_gradient():
    hidden, weight, target, _ = _inputs(6, 4, 5, "cpu", torch.float32)
    hidden.requires_grad_()
    loss = tinycuda.fused_linear_cross_entropy(hidden, weight, target)
    torch.autograd.grad(loss, hidden, torch.tensor(2.0), retain_graph=True)
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation"):
        torch.autograd.grad(loss, hidden, torch.tensor(2.0))


def test_flce_opcheck(device, dtype):
    hidden, weight, target, b = _inputs(9, 8, 13, device, dtype, bias=True)
    for bias in (None, b):
        for reduction in ("mean", "sum", "none"):
            torch.library.opcheck(OP.fused_linear_cross_entropy.default,
                                  (hidden, weight, target, bias, -100, reduction, 0.1, False, 4))
        # As for cross_entropy: the gradients the backward scales in place are
        # also outputs, which opcheck's AOT test returns from the graph; the
        # compiled use is tested in test_flce_compile_fullgraph.
        args = [x.detach().requires_grad_() if x is not None else None for x in (hidden, weight, bias)]
        torch.library.opcheck(OP.fused_linear_cross_entropy.default,
                              (args[0], args[1], target, args[2], -100, "mean", 0.1, True, 4),
                              test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))


class _Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lm_head = torch.nn.Linear(16, 41)
        self.loss = tinycuda.nn.FusedLinearCrossEntropyLoss(label_smoothing=0.1)

    def forward(self, x, t):
        return self.loss(self.lm_head.weight, torch.tanh(x), t, self.lm_head.bias) * 3


def _check_compiled(device, **compile_kwargs):
    torch._dynamo.reset()
    model = _Head().to(device)
    x = torch.randn(11, 16, device=device, requires_grad=True)
    t = torch.randint(0, 41, (11,), device=device)
    params = [x, *model.parameters()]
    ref_loss = model(x, t)
    ref_grads = torch.autograd.grad(ref_loss, params)
    compiled = torch.compile(model, fullgraph=True, **compile_kwargs)
    for _ in range(3):
        loss = compiled(x, t)
        grads = torch.autograd.grad(loss, params)
        torch.testing.assert_close(loss, ref_loss)
        for g, r in zip(grads, ref_grads):
            torch.testing.assert_close(g, r)


def test_flce_compile_fullgraph(device):
    _check_compiled(device)


@requires_cuda
def test_flce_compile_cuda_graphs():
    _check_compiled("cuda", mode="reduce-overhead")


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
    torch.testing.assert_close(loss_fn(weight, hidden, target, b),
                               _reference("sum", 0.1, ignore_index=5)(hidden, weight, target, b))
    assert "reduction='sum'" in repr(loss_fn)
    with pytest.raises(ValueError, match=r"reduction must be 'mean', 'sum' or 'none', got 'avg'"):
        tinycuda.nn.FusedLinearCrossEntropyLoss(reduction="avg")


def test_flce_errors():
    hidden, weight, target, b = _inputs(4, 6, 10, "cpu", torch.float32, bias=True)
    name = "tinycuda::fused_linear_cross_entropy"
    with pytest.raises(RuntimeError, match=name + r": weight must be 2-D \[classes, 6\] \(hidden's last dim\)"):
        tinycuda.fused_linear_cross_entropy(hidden, weight[:, :5], target)
    with pytest.raises(RuntimeError, match=name + r": bias must have shape \[10\] \(weight's rows\), got \[9\]"):
        tinycuda.fused_linear_cross_entropy(hidden, weight, target, b[:9])
    with pytest.raises(RuntimeError, match=name + r": weight has dtype Double but hidden has dtype Float"):
        tinycuda.fused_linear_cross_entropy(hidden, weight.double(), target)
    with pytest.raises(RuntimeError, match=name + r": target must have shape \[4\] \(hidden's rows\)"):
        tinycuda.fused_linear_cross_entropy(hidden, weight, target[:3])
    with pytest.raises(RuntimeError, match=name + r": chunk_size must be >= 0"):
        tinycuda.fused_linear_cross_entropy(hidden, weight, target, chunk_size=-1)
    with pytest.raises(RuntimeError, match=name + r": hidden must be 2-D"):
        tinycuda.fused_linear_cross_entropy(hidden[None], weight, target)
