"""The generic tests, driven by the op table (tinycuda/optable.py): every
entry on every device and dtype against torch (outputs and gradients),
gradcheck in float64, torch.library.opcheck of every torch.ops.tinycuda op
its samples reach (backward ops included), torch.compile(fullgraph=True),
CUDA-graph replay, tinycuda.capi bit for bit against the torch ops, and the
bad-input errors. What is particular to a family lives in tests/test_<family>.py.

Markers (pyproject.toml): the entries whose kernels share memory carry
`racecheck` on their torch comparison; the compile and CUDA-graph tests
`compile`; the capi comparison `capi`; conftest adds `cuda` to every CUDA case.
"""
import contextlib
import re

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import tinycuda
from conftest import DEVICES, DTYPES, HAS_CUDA, check_compiled, check_op, requires_cuda
from tinycuda.optable import OPS, differentiable, grad_outs, outputs


def _id(dtype):
    return str(dtype).replace("torch.", "")


def _entries(keep=lambda info: True, marks=lambda info: ()):
    return [pytest.param(info, id=info.name, marks=marks(info)) for info in OPS if keep(info)]


def _racecheck(info):
    return (pytest.mark.racecheck,) if info.racecheck else ()


@contextlib.contextmanager
def _described(sample):
    """Adds the sample's name to an error raised while it runs."""
    try:
        yield
    except Exception as e:
        e.add_note(f"sample: {sample.name}")
        raise


def _grad_arg(sample, differentiable):
    if not differentiable or sample.grad == ():
        return False
    return True if sample.grad is None else sample.grad


def _wrt(sample):
    return [i for i in range(len(sample.args)) if sample.needs_grad(i)]


# ---------------------------------------------------------------------------
# against torch

@pytest.mark.parametrize("dtype", DTYPES, ids=_id)
@pytest.mark.parametrize("info", _entries(marks=_racecheck))
def test_matches_torch(info, device, dtype):
    for sample in info.samples(device, dtype):
        with _described(sample):
            check_op(info.fn, info.ref, sample.args, sample.kwargs, grad=_grad_arg(sample, info.differentiable),
                     grad_out=sample.grad_out, rtol32=info.rtol, atol32=info.atol,
                     grad_rtol32=info.grad_rtol, grad_atol32=info.grad_atol)


class _FreshGraph(torch.autograd.Function):
    """For ops whose graph can be backpropagated once (the saved gradient is
    scaled in place), while gradcheck backpropagates many times: every
    backward runs the op's forward and backward on a new graph."""

    @staticmethod
    def forward(ctx, call, *tensors):
        ctx.call = call
        ctx.save_for_backward(*tensors)
        with torch.no_grad():
            return call(*tensors)

    @staticmethod
    def backward(ctx, *grads):
        with torch.enable_grad():
            leaves = [t.detach().requires_grad_() for t in ctx.saved_tensors]
            live = [(o, g) for o, g in zip(outputs(ctx.call(*leaves)), grads) if o.requires_grad and g is not None]
            return (None, *torch.autograd.grad([o for o, _ in live], leaves, [g for _, g in live]))


GRADCHECK_MAX_ELEMENTS = 200  # per sample: the numerical Jacobian costs two calls an element


@pytest.mark.parametrize("info", _entries(lambda info: info.differentiable and info.gradcheck))
def test_gradcheck(info):
    checked = 0
    for sample in info.samples("cpu", torch.float64):
        wrt = _wrt(sample)
        size = sum(sample.args[i].numel() for i in wrt)
        # small samples, in their contiguous layout (test_matches_torch covers the strided ones)
        if not 0 < size <= GRADCHECK_MAX_ELEMENTS or not all(sample.args[i].is_contiguous() for i in wrt):
            continue

        def call(*ts, sample=sample, wrt=wrt):
            args = list(sample.args)
            for i, t in zip(wrt, ts):
                args[i] = t
            return info.fn(*args, **sample.kwargs)

        inputs = [sample.args[i].detach().requires_grad_() for i in wrt]
        # the differentiable outputs only (cross_entropy's z_loss, for logging, has no gradient)
        out = outputs(call(*inputs))
        keep = [k for k, o in enumerate(out) if o.requires_grad]
        # finite differences of an infinite output are NaN (an exclusive logcumsumexp's first, -inf)
        if not all(out[k].isfinite().all() for k in keep):
            continue

        def call(*ts, call=call, keep=keep):
            out = outputs(call(*ts))
            return out[keep[0]] if len(keep) == 1 else tuple(out[k] for k in keep)

        with _described(sample):
            if info.backward_once:
                assert torch.autograd.gradcheck(lambda *ts, call=call: _FreshGraph.apply(call, *ts), inputs)
            else:
                assert torch.autograd.gradcheck(call, inputs)
        checked += 1
    assert checked >= 3, f"{info.name}: only {checked} samples small enough for gradcheck"


# ---------------------------------------------------------------------------
# the torch ops the samples reach: opcheck, capi

class _OpCalls(TorchDispatchMode):
    """Records every torch.ops.tinycuda call: the op and its arguments, copied
    before the call (a backward may write over its input), requires_grad kept
    in a forward (the autograd formula's inputs), dropped in a backward (the
    backward ops have none)."""

    def __init__(self):
        super().__init__()
        self.calls, self.backward = [], False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.namespace == "tinycuda":
            self.calls.append((func, self._copy(args), self._copy(kwargs)))
        return func(*args, **kwargs)

    def _copy(self, tree):
        def one(a):
            if not isinstance(a, torch.Tensor):
                return a
            return a.detach().clone().requires_grad_(a.requires_grad and not self.backward)
        return torch.utils._pytree.tree_map(one, tree)


def op_calls(info, device, dtype):
    """The torch.ops.tinycuda calls of the entry's samples: each forward
    without gradients, then forward and backward with them."""
    mode = _OpCalls()
    with mode:
        for sample in info.samples(device, dtype):
            with torch.no_grad():
                info.fn(*sample.args, **sample.kwargs)
            wrt = _wrt(sample) if info.differentiable else []
            if wrt:
                args = [t.detach().requires_grad_() if i in wrt else t for i, t in enumerate(sample.args)]
                out = differentiable(info.fn(*args, **sample.kwargs))
                g = grad_outs(out, sample.grad_out)
                mode.backward = True
                torch.autograd.grad(out, [args[i] for i in wrt], g)
                mode.backward = False
    return mode.calls


def _kind(a):
    """What distinguishes two calls of one op for opcheck: tensors' dtype and
    requires_grad, which optional tensors are given, string, bool and mask
    arguments; not sizes or numbers."""
    if isinstance(a, torch.Tensor):
        return ("tensor", a.dtype, a.requires_grad)
    if a is None or isinstance(a, (str, bool)):
        return a
    if isinstance(a, (list, tuple)) and a and all(isinstance(b, bool) for b in a):
        return tuple(a)
    return type(a).__name__


def _with_defaults(op, args):
    """args with the trailing defaults the dispatcher leaves out filled in."""
    positional = [a for a in op._schema.arguments if not a.kwarg_only]
    return tuple(args) + tuple(a.default_value for a in positional[len(args):])


@pytest.mark.parametrize("dtype", DTYPES, ids=_id)
@pytest.mark.parametrize("info", _entries())
def test_opcheck(info, device, dtype):
    seen = set()
    for op, args, kwargs in op_calls(info, device, dtype):
        key = (op, tuple(map(_kind, _with_defaults(op, args))), tuple((k, _kind(v)) for k, v in sorted(kwargs.items())))
        if key in seen:
            continue
        seen.add(key)
        grad = any(isinstance(a, torch.Tensor) and a.requires_grad for a in args)
        extra = info.opcheck_utils.get(op._opname, {}) if grad else {}
        try:
            torch.library.opcheck(op, args, kwargs, **extra)
        except Exception as e:
            e.add_note(f"opcheck of {op} with {key[1:]}")
            raise


def test_every_op_and_function_is_in_the_table():
    """Every torch.ops.tinycuda op is reached by some entry's samples (so
    opcheck and capi see it), and every public function has an entry."""
    reached = {op._opname for info in OPS for op, _, _ in op_calls(info, "cpu", torch.float32)}
    registered = {n.split("::")[1] for n in torch._C._dispatch_get_all_op_names() if n.startswith("tinycuda::")}
    assert registered and registered <= reached, registered - reached
    names = [info.name for info in OPS]
    assert len(set(names)) == len(names)
    assert set(tinycuda.ops.__all__) <= set(names), set(tinycuda.ops.__all__) - set(names)


def _capi_params():
    """NumPy has no bfloat16: CPU arrays in float32 and float16; on CUDA, torch tensors in all three."""
    cases = [("cpu", torch.float32), ("cpu", torch.float16)] + [("cuda", d) for d in DTYPES if HAS_CUDA]
    return [pytest.param(device, dtype, id=f"{device}-{_id(dtype)}") for device, dtype in cases]


def _bits_equal(got, ref, what):
    if got is None:  # a gradient not asked for: capi returns None where the torch op returns an empty tensor
        assert ref.numel() == 0, (what, "None", (ref.shape, ref.dtype))
        return
    got = torch.as_tensor(got, device=ref.device)
    assert got.shape == ref.shape and got.dtype == ref.dtype, (
        what, None if got is None else (got.shape, got.dtype), (ref.shape, ref.dtype))
    torch.testing.assert_close(got, ref, rtol=0, atol=0, equal_nan=True, msg=lambda m: f"{what}: {m}")


@pytest.mark.capi
@pytest.mark.parametrize("device,dtype", _capi_params())
@pytest.mark.parametrize("info", _entries(lambda info: info.capi))
def test_capi_bit_for_bit(info, device, dtype):
    """tinycuda.capi.<op>, called with the torch op's arguments (NumPy arrays on
    the CPU, contiguous), gives the torch op's results bit for bit, and writes
    the arguments the op writes (its schema's (a!)) as the op does."""
    from tinycuda import capi

    def to_capi(a):
        if not isinstance(a, torch.Tensor):
            return a
        if a.device.type != "cpu":
            return a
        # NumPy has no bfloat16: a 0-dim one (a host scalar beside CUDA arrays) goes as its value, exact as a float
        return a.item() if a.dtype == torch.bfloat16 and a.dim() == 0 else a.numpy()

    for op, args, kwargs in op_calls(info, device, dtype):
        ours = [a.detach().contiguous().clone() if isinstance(a, torch.Tensor) else a for a in args]
        theirs = [a.detach().contiguous().clone() if isinstance(a, torch.Tensor) else a for a in args]
        kw = {k: (v.detach().contiguous() if isinstance(v, torch.Tensor) else v) for k, v in kwargs.items()}
        ref = op(*theirs, **kw)
        got = getattr(capi, op._opname)(*map(to_capi, ours), **{k: to_capi(v) for k, v in kw.items()})
        refs = list(ref) if isinstance(ref, (tuple, list)) else ([] if ref is None else [ref])
        gots = list(got) if isinstance(got, (tuple, list)) else ([] if got is None else [got])
        if not refs:  # an in-place op (cross_entropy_backward): capi returns the written array for convenience
            gots = []
        gots += [None] * (len(refs) - len(gots))  # trailing outputs not asked for (cross_entropy's grad)
        assert len(gots) == len(refs), (op, len(gots), len(refs))
        for i, (g, r) in enumerate(zip(gots, refs)):
            _bits_equal(g, r, f"{op} output {i}")
        for i, arg in enumerate(op._schema.arguments):
            if arg.alias_info is not None and arg.alias_info.is_write:
                _bits_equal(ours[i], theirs[i], f"{op} argument {arg.name}, written in place")


# ---------------------------------------------------------------------------
# torch.compile and CUDA graphs

def _compile_samples(info, device, dtype):
    """Up to two samples with no empty tensor: the first, and the first with a non-contiguous argument."""
    full = [s for s in info.samples(device, dtype)
            if all(t.numel() for t in s.args if isinstance(t, torch.Tensor))]
    strided = [s for s in full if any(isinstance(t, torch.Tensor) and not t.is_contiguous() for t in s.args)]
    return full[:1] + strided[:1]


def _leaves(info, sample):
    wrt = _wrt(sample) if info.differentiable else []
    args = [t.detach().requires_grad_() if i in wrt else t for i, t in enumerate(sample.args)]
    return args, [args[i] for i in wrt]


@pytest.mark.compile
@pytest.mark.parametrize("info", _entries(lambda info: info.compile))
def test_compile_fullgraph(info, device):
    """The op traces with no graph break (fake kernels, autograd formula) and
    the compiled forward and backward run the same kernels: the same bits."""
    for sample in _compile_samples(info, device, torch.float32):
        args, wrt = _leaves(info, sample)
        g = None
        if wrt:
            g = grad_outs(differentiable(info.fn(*args, **sample.kwargs)), sample.grad_out, torch.float32)
        with _described(sample):
            check_compiled(info.fn, args, sample.kwargs, wrt=wrt, grad_out=g, reps=2, rtol=0, atol=0)


@requires_cuda
@pytest.mark.compile
@pytest.mark.parametrize("info", _entries(lambda info: info.cuda_graph))
def test_cuda_graph_replay(info):
    """Forward and backward capture into one CUDA graph (every kernel on the
    current stream, no host sync) and its replay gives eager's bits."""
    for sample in _compile_samples(info, "cuda", torch.float32):
        args, wrt = _leaves(info, sample)

        def step():
            out = info.fn(*args, **sample.kwargs)
            return (*outputs(out), *torch.autograd.grad(differentiable(out), wrt, g)) if wrt else outputs(out)

        # Everything before the capture, the forward that sizes grad_out
        # included, on a side stream (torch.cuda.graph's recipe): with one
        # forward on the default stream first, every capture failed on the
        # H100 ("would make the legacy stream depend on a capturing blocking
        # stream"), also with CUDA_MODULE_LOADING=EAGER.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            g = grad_outs(differentiable(info.fn(*args, **sample.kwargs)), sample.grad_out, torch.float32)
            ref = step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            got = step()
        graph.replay()
        torch.cuda.synchronize()
        with _described(sample):
            for a, r in zip(got, ref, strict=True):
                torch.testing.assert_close(a, r, rtol=0, atol=0, equal_nan=True)


# ---------------------------------------------------------------------------
# bad input

def _error_params():
    cases = [pytest.param(info, "cpu", id=f"{info.name}-cpu") for info in OPS if info.errors]
    return cases + [pytest.param(info, "cuda", id=f"{info.name}-cuda", marks=requires_cuda)
                    for info in OPS if info.cuda_errors]


@pytest.mark.parametrize("info,where", _error_params())
def test_bad_input_errors(info, where):
    for case in (info.errors if where == "cpu" else info.cuda_errors)():
        assert re.match(r"tinycuda::\w+: ", case.match), f"the message must name the op: {case.match}"
        with pytest.raises(case.exc, match=case.match):
            case.fn(*case.args, **case.kwargs)


def test_cuda_marker_follows_the_device():
    """conftest marks `cuda` from the parameters; checked here where no GPU is."""
    from conftest import _on_cuda
    assert _on_cuda("cuda") and _on_cuda("cuda:1") and _on_cuda(torch.device("cuda", 0))
    assert not _on_cuda("cpu") and not _on_cuda(torch.float32) and not _on_cuda("cudagraph")
