import math

import pytest
import torch
import torch.nn.functional as F

import tinycuda
from conftest import check_op, noncontiguous, requires_cuda

OP = torch.ops.tinycuda

SHAPES = [(1, 1), (5, 1), (3, 7), (33, 5), (4, 1023), (3, 1025), (3, 4097), (2, 8193), (2, 32000),
          (2, 50257), (1, 128256)]


def _targets(rows, classes, device, ignore_index=-100, ignored=(1,)):
    t = torch.randint(0, classes, (rows,), device=device)
    for r in ignored:
        if r < rows:
            t[r] = ignore_index
    return t


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_matches_torch(device, dtype, shape, reduction):
    x = (3 * torch.randn(shape, device=device)).to(dtype)
    t = _targets(shape[0], shape[1], device)
    check_op(lambda z: tinycuda.cross_entropy(z, t, reduction=reduction),
             lambda z: F.cross_entropy(z, t, reduction=reduction), [x], rtol32=1e-5, atol32=1e-5)


@pytest.mark.parametrize("shape", [(9, 7), (3, 4097), (2, 50257)], ids=str)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("eps", [0.1, 1.0])
def test_cross_entropy_label_smoothing(device, dtype, shape, reduction, eps):
    x = (3 * torch.randn(shape, device=device)).to(dtype)
    t = _targets(shape[0], shape[1], device, ignored=(0,))
    check_op(lambda z: tinycuda.cross_entropy(z, t, reduction=reduction, label_smoothing=eps),
             lambda z: F.cross_entropy(z, t, reduction=reduction, label_smoothing=eps), [x],
             rtol32=1e-5, atol32=1e-5)


@pytest.mark.parametrize("shape", [(6, 33), (4, 4097)], ids=str)
def test_cross_entropy_strided_logits_and_ignore_index(device, dtype, shape):
    x = noncontiguous((3 * torch.randn(shape, device=device)).to(dtype))
    t = _targets(shape[0], shape[1], device, ignore_index=3, ignored=(0, 2))
    t[1] = 4  # 3, an in-range class, is the ignore_index
    for reduction in ("mean", "sum", "none"):
        check_op(lambda z: tinycuda.cross_entropy(z, t, ignore_index=3, reduction=reduction, label_smoothing=0.2),
                 lambda z: F.cross_entropy(z, t, ignore_index=3, reduction=reduction, label_smoothing=0.2),
                 [x], rtol32=1e-5, atol32=1e-5)


def test_cross_entropy_one_dim_logits(device):
    x = torch.randn(11, device=device, requires_grad=True)
    t = torch.tensor(4, device=device)
    for reduction in ("mean", "sum", "none"):
        ours = tinycuda.cross_entropy(x, t, reduction=reduction)
        ref = F.cross_entropy(x, t, reduction=reduction)
        assert ours.shape == ref.shape == ()
        torch.testing.assert_close(ours, ref)
        torch.testing.assert_close(torch.autograd.grad(ours, x)[0], torch.autograd.grad(ref, x)[0])


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


def test_cross_entropy_out_of_range_target_cpu():
    x = torch.randn(5, 5)
    t = torch.tensor([0, 1, 2, 7, 4])
    with pytest.raises(RuntimeError, match=r"tinycuda::cross_entropy: cross_entropy: target 7 at row 3 is out of range \[0, 5\)"):
        tinycuda.cross_entropy(x, t)
    with pytest.raises(RuntimeError, match=r"target -3 at row 0 is out of range"):
        tinycuda.cross_entropy(x, torch.tensor([-3, 0, 0, 0, 0]))


@requires_cuda
def test_cross_entropy_out_of_range_target_cuda_is_nan_row():
    """On CUDA (no host sync to raise from) the row's loss and gradient are NaN; nothing else changes."""
    x = torch.randn(5, 4097, device="cuda")
    t = torch.tensor([0, 1, 2, 4097, 4], device="cuda")
    loss, grad = OP.cross_entropy(x, t, -100, "none", 0.0, True)
    assert torch.isnan(loss[3]) and torch.isnan(grad[3]).all()
    keep = torch.tensor([0, 1, 2, 4], device="cuda")
    ref = F.cross_entropy(x[keep], t[keep], reduction="none")
    torch.testing.assert_close(loss[keep], ref)
    assert torch.isnan(tinycuda.cross_entropy(x, t))


def test_cross_entropy_backward_scales_in_place_and_skips_ones(device, dtype):
    x = torch.randn(6, 1031, device=device, dtype=dtype)
    t = _targets(6, 1031, device)
    _, grad = OP.cross_entropy(x, t, -100, "none", 0.0, True)
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
    t = _targets(7, 40, device, ignored=(2, 5))
    for reduction in ("mean", "sum", "none"):
        _, grad = OP.cross_entropy(x.detach(), t, -100, reduction, 0.3, True)
        ref = F.cross_entropy(x, t, reduction=reduction, label_smoothing=0.3)
        torch.testing.assert_close(grad, torch.autograd.grad(ref.sum(), x)[0])


def test_cross_entropy_no_grad_outputs():
    x = torch.randn(3, 5, requires_grad=True)
    t = torch.tensor([0, 1, 2])
    with torch.no_grad():
        loss = tinycuda.cross_entropy(x, t)
    assert loss.grad_fn is None
    loss, grad = OP.cross_entropy(x.detach(), t)
    assert grad.shape == (0,)


class _FreshGraph(torch.autograd.Function):
    """The op's graph can be backpropagated once (its saved gradient is scaled
    in place), and gradcheck backpropagates many times: every backward here
    runs tinycuda's forward and backward on a new graph."""

    @staticmethod
    def forward(ctx, x, t, fn):
        ctx.save_for_backward(x)
        ctx.t, ctx.fn = t, fn
        with torch.no_grad():
            return fn(x, t)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        with torch.enable_grad():
            leaf = x.detach().requires_grad_()
            (gx,) = torch.autograd.grad(ctx.fn(leaf, ctx.t), leaf, g)
        return gx, None, None


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_gradcheck(reduction):
    x = torch.randn(5, 9, dtype=torch.float64, requires_grad=True)
    t = torch.tensor([0, 8, -100, 3, 3])
    for eps in (0.0, 0.25):
        fn = lambda z, tt: tinycuda.cross_entropy(z, tt, reduction=reduction, label_smoothing=eps)  # noqa: E731
        assert torch.autograd.gradcheck(lambda z: _FreshGraph.apply(z, t, fn), (x,))


def test_cross_entropy_second_backward_raises_instead_of_a_wrong_gradient():
    x = torch.randn(4, 6, requires_grad=True)
    loss = tinycuda.cross_entropy(x, torch.tensor([0, 1, 2, 3]), reduction="none")
    torch.autograd.grad(loss, x, torch.randn(4), retain_graph=True)
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation"):
        torch.autograd.grad(loss, x, torch.randn(4))


def test_cross_entropy_opcheck(device, dtype):
    x = torch.randn(5, 33, device=device, dtype=dtype)
    t = _targets(5, 33, device)
    for reduction in ("mean", "sum", "none"):
        torch.library.opcheck(OP.cross_entropy.default, (x, t, -100, reduction, 0.1, False))
        # With compute_grad the op's second output is the gradient its backward
        # scales in place; opcheck's AOT test returns that output from the graph
        # as well, which AOTAutograd cannot partition. The real use (the
        # functional API drops it) goes through torch.compile in
        # test_cross_entropy_compile_fullgraph.
        torch.library.opcheck(OP.cross_entropy.default,
                              (x.detach().requires_grad_(), t, -100, reduction, 0.1, True),
                              test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))
    g = torch.randn(5, 33, device=device, dtype=dtype)
    torch.library.opcheck(OP.cross_entropy_backward.default, (g, torch.tensor(0.5, device=device, dtype=dtype)))
    torch.library.opcheck(OP.cross_entropy_backward.default, (g, torch.randn(5, device=device, dtype=dtype)))


class _LmHead(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(16, 37)
        self.loss = tinycuda.nn.CrossEntropyLoss(label_smoothing=0.1)

    def forward(self, x, t):
        return self.loss(self.proj(x), t) * 3  # grad_loss = 3: the scaling path


def _check_compiled(device, **compile_kwargs):
    torch._dynamo.reset()
    model = _LmHead().to(device)
    x, t = torch.randn(9, 16, device=device), _targets(9, 37, device)
    ref_loss = model(x, t)
    ref_grads = torch.autograd.grad(ref_loss, list(model.parameters()))
    compiled = torch.compile(model, fullgraph=True, **compile_kwargs)
    for _ in range(3):  # the CUDA-graph mode records on a later call, then replays
        loss = compiled(x, t)
        grads = torch.autograd.grad(loss, list(model.parameters()))
        torch.testing.assert_close(loss, ref_loss)
        for g, r in zip(grads, ref_grads):
            torch.testing.assert_close(g, r)


def test_cross_entropy_compile_fullgraph(device):
    _check_compiled(device)


@requires_cuda
def test_cross_entropy_compile_cuda_graphs():
    _check_compiled("cuda", mode="reduce-overhead")


@requires_cuda
def test_cross_entropy_cuda_graph_replay():
    """No host sync anywhere (n_valid on the device, the skip-when-1 test on
    the device): forward + backward capture into one CUDA graph."""
    x = torch.randn(64, 4097, device="cuda", requires_grad=True)
    t = _targets(64, 4097, "cuda", ignored=(3, 9))

    def step():
        loss = tinycuda.cross_entropy(x, t, label_smoothing=0.1)
        return loss, torch.autograd.grad(loss * 2, x)[0]

    # warm-up (and the eager reference) on a side stream, torch.cuda.graph's
    # recipe: with the reference computed on the default stream first, the
    # capture failed on the H100 ("would make the legacy stream depend on a
    # capturing blocking stream")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        ref_loss, ref_grad = step()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        loss, grad = step()
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(loss, ref_loss) and torch.equal(grad, ref_grad)


def test_cross_entropy_bitwise_deterministic(device, dtype):
    x = torch.randn(300, 4099, device=device, dtype=dtype, requires_grad=True)
    t = _targets(300, 4099, device, ignored=(0, 7))
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
    with pytest.raises(ValueError, match=r"tinycuda.nn.CrossEntropyLoss: class weights are not supported"):
        tinycuda.nn.CrossEntropyLoss(weight=torch.ones(11))


def test_cross_entropy_errors():
    x, t = torch.randn(3, 4), torch.tensor([0, 1, 2])
    with pytest.raises(RuntimeError, match=r"tinycuda::cross_entropy: target must be int64 class indices, got Int"):
        tinycuda.cross_entropy(x, t.int())
    with pytest.raises(RuntimeError, match=r"tinycuda::cross_entropy: target must have shape \[3\] \(logits's rows\), got \[2\]"):
        tinycuda.cross_entropy(x, t[:2])
    with pytest.raises(RuntimeError, match=r"tinycuda::cross_entropy: reduction must be 'mean', 'sum' or 'none', got 'avg'"):
        tinycuda.cross_entropy(x, t, reduction="avg")
    with pytest.raises(RuntimeError, match=r"tinycuda::cross_entropy: label_smoothing must be in \[0, 1\], got 1.5"):
        tinycuda.cross_entropy(x, t, label_smoothing=1.5)
    with pytest.raises(RuntimeError, match=r"tinycuda::cross_entropy: logits must be 2-D \[rows, classes\]"):
        tinycuda.cross_entropy(torch.randn(2, 3, 4), t)
    with pytest.raises(RuntimeError, match=r"tinycuda::cross_entropy: logits must be float32.*Long"):
        tinycuda.cross_entropy(torch.ones(3, 4, dtype=torch.long), t)
    with pytest.raises(RuntimeError, match=r"tinycuda::cross_entropy_backward: grad_loss must be 0-dim or have shape \[3\]"):
        OP.cross_entropy_backward(torch.randn(3, 4), torch.randn(4))
    with pytest.raises(RuntimeError, match=r"tinycuda::cross_entropy_backward: grad_logits must be contiguous"):
        OP.cross_entropy_backward(torch.randn(4, 3).t(), torch.tensor(2.0))
    with pytest.raises(RuntimeError, match=r"ran with compute_grad=False"):  # the raw op, differentiable
        OP.cross_entropy(x.requires_grad_(), t)[0].backward()
