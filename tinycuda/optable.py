"""The op table: one OpInfo per tinycuda function, the single list that the
generic tests (tests/test_ops.py) and `tinycuda bench` read.

An entry says what the op is (the tinycuda function and its torch
reference), how to call it (sample inputs: awkward shapes, strided and
misaligned views, every option), how close it must come (float32 rtol/atol;
float16/bfloat16 follow the FlashAttention rule of tests/conftest.py:
assert_matches), which generic tests apply (flags), which bad inputs must
raise which error, and how to benchmark it. From that, tests/test_ops.py
checks every entry on every device and dtype: against torch (outputs and
gradients), gradcheck in float64, torch.library.opcheck of every
torch.ops.tinycuda op that the samples reach (backward ops included),
torch.compile(fullgraph=True), CUDA-graph replay, tinycuda.capi bit for bit
against the torch op, and the error messages. A new op family adds one entry
here; tests/test_<family>.py keeps only what is particular to the family.

Importing this module loads the kernels (tinycuda.ops) and nothing else:
no pytest, no NumPy.
"""
import importlib
import inspect
import itertools
import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

import tinycuda.nn
import tinycuda.ops as ops

MODES = ("fwd", "bwd", "fwd+bwd")


# ---------------------------------------------------------------------------
# the records

@dataclass
class Sample:
    """One call, fn(*args, **kwargs), the same for tinycuda and torch.

    grad: the indices of the args that get a gradient; None: every
    floating-point tensor; (): none (a forward-only case). grad_out: the
    layout of the random grad_out fed to the backward (see `view`)."""
    name: str
    args: tuple
    kwargs: dict = field(default_factory=dict)
    grad: tuple = None
    grad_out: str = "contig"

    def needs_grad(self, i):
        t = self.args[i]
        return isinstance(t, torch.Tensor) and t.is_floating_point() and (self.grad is None or i in self.grad)


@dataclass
class ErrorCase:
    """fn(*args, **kwargs) raises `exc` with a message matching `match`, which
    names the op (tinycuda::<op>) and the offending argument."""
    match: str
    fn: callable
    args: tuple
    kwargs: dict = field(default_factory=dict)
    exc: type = RuntimeError


@dataclass
class Bench:
    """What `tinycuda bench` times: the entry's fn against its ref (eager and
    torch.compile), on args = make(shape, dtype, device).

    shapes: "small"/"large"/"all"/"cpu" (/"sweep") -> shapes; cost(shape, mode, itemsize)
    -> ("GB/s", bytes) or ("TFLOP/s", flops); liger: args -> output through
    Liger-Kernel, if it has the op; variants: extra named callables besides
    tinycuda.variants' (which the bench adds itself), run in variant_modes;
    fp32_tol: agreement with eager required before timing, in float32."""
    shapes: dict
    make: callable
    cost: callable
    modes: tuple = MODES
    liger: callable = None
    loss: bool = False               # fwd+bwd backpropagates 1, as loss.backward()
    variants: dict = field(default_factory=dict)
    variant_modes: tuple = ("fwd",)
    fp32_tol: float = 1e-5
    ref: callable = None             # eager's function when not the entry's ref (attention: torch's SDPA)
    grad: tuple = None               # the indices of make's args that get gradients; None: every floating tensor
    shape_modes: callable = None     # shape -> the modes it runs (of `modes`); None: every one


@dataclass
class OpInfo:
    name: str
    fn: callable                     # the tinycuda function (tinycuda.<name>)
    ref: callable                    # torch's, same arguments
    samples: callable                # (device, dtype) -> iterable of Sample
    rtol: float = 1e-5               # float32 against the float64 reference
    atol: float = 1e-5
    grad_rtol: float = None          # float32 gradients (default: rtol, atol)
    grad_atol: float = None
    differentiable: bool = True      # compare gradients too
    gradcheck: bool = True           # torch.autograd.gradcheck in float64 (small samples)
    compile: bool = True             # torch.compile(fullgraph=True)
    cuda_graph: bool = True          # forward + backward captured in one CUDA graph and replayed
    racecheck: bool = False          # runs shared-memory kernels: `make sanitize` racechecks it
    capi: bool = True                # tinycuda.capi has its ops (bit for bit against the torch ops)
    backward_once: bool = False      # the saved gradient is scaled in place: one backward per graph
    # opcheck test_utils for calls of one torch op whose inputs require grad,
    # where not all of them apply (why: at the entry)
    opcheck_utils: dict = field(default_factory=dict)
    errors: callable = None          # () -> iterable of ErrorCase, on the CPU
    cuda_errors: callable = None     # () -> iterable of ErrorCase, on a GPU
    bench: Bench = None


# ---------------------------------------------------------------------------
# sample helpers

def randn(shape, device, dtype, scale=1.0, shift=0.0):
    """Fresh standard-normal values (drawn in float32, then rounded to dtype)."""
    return (scale * torch.randn(shape, device=device) + shift).to(dtype)


def view(t, layout):
    """t's values in a memory layout: 'contig'; 'strided' (every other element
    of a tensor twice as wide in the last dim); 'offset' (flat, one element
    past an aligned start: off the 16-byte grid, the scalar paths on CUDA)."""
    if layout == "contig" or t.dim() == 0 or t.numel() == 0:
        return t
    if layout == "strided":
        wide = torch.empty((*t.shape[:-1], 2 * t.shape[-1]), dtype=t.dtype, device=t.device)
        wide[..., ::2] = t
        return wide[..., ::2]
    assert layout == "offset", layout
    flat = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)
    flat[1:] = t.reshape(-1)
    return flat[1:].view(t.shape)


def outputs(out):
    """An op's outputs as a tuple: one tensor, or the tuple of an op with several (add_rms_norm, rope)."""
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def differentiable(out):
    """The outputs of `out` that carry a gradient (not, e.g., cross_entropy's z_loss, which is for logging)."""
    return tuple(o for o in outputs(out) if o.requires_grad)


def grad_outs(out, layout="contig", dtype=None):
    """A fresh random gradient for each output of `out`, laid out as `layout` says (see `view`)."""
    return tuple(view(torch.randn(o.shape, device=o.device).to(dtype or o.dtype), layout) for o in outputs(out))


def noncontiguous(t):
    return view(t, "strided")


def targets(rows, classes, device, ignore_index=-100, ignored=(1,)):
    """Random class indices, with ignore_index at the rows `ignored`."""
    t = torch.randint(0, classes, (rows,), device=device)
    for r in ignored:
        if r < rows:
            t[r] = ignore_index
    return t


def _layouts(make, name, layouts=("contig", "strided")):
    """Samples of make(layout) -> (args, kwargs, grad) for each layout; grad_out takes the same layout."""
    for layout in layouts:
        args, kwargs = make(layout)
        yield Sample(f"{name}-{layout}", args, kwargs, grad_out=layout)


def _shape_id(shape):
    return "x".join(map(str, shape)) or "scalar"


# ---------------------------------------------------------------------------
# elementwise: relu, relu_backward, square, gelu, swiglu, geglu

ELEMENTWISE_SHAPES = [(0,), (1,), (7,), (33,), (1000,), (4097,), (3, 0), (5, 33), (2, 3, 4097), ()]


def _unary(scale=1.0, kwargs=({},)):
    def samples(device, dtype):
        for kw in kwargs:
            tag = "-".join(f"{v}" for v in kw.values())
            for shape in ELEMENTWISE_SHAPES:
                x = randn(shape, device, dtype, scale)
                yield from _layouts(lambda lay: ((view(x, lay),), kw), f"{_shape_id(shape)}{tag and '-' + tag}")
            # n % 4 != 0 at a 4-byte offset: the scalar path on CUDA
            x = randn(4097, device, dtype, scale)
            yield Sample(f"4097-offset{tag and '-' + tag}", (view(x, "offset"),), kw, grad_out="offset")
    return samples


def _relu_backward_samples(device, dtype):
    for shape in ELEMENTWISE_SHAPES:
        g, x = randn(shape, device, dtype), randn(shape, device, dtype)
        for layout in ("contig", "strided", "offset"):  # grad_out in the layout, x contiguous
            yield Sample(f"{_shape_id(shape)}-{layout}", (view(g, layout), x), grad=())


def _pair_samples(kwargs=({},)):
    """a (3 x randn) and b; both strided, a alone strided, and 4-byte offsets of
    a, b or grad_out (the scalar path on CUDA, n % 4 != 0)."""
    def samples(device, dtype):
        for kw in kwargs:
            tag = "".join(f"-{v}" for v in kw.values())
            for shape in ELEMENTWISE_SHAPES:
                a, b = randn(shape, device, dtype, 3), randn(shape, device, dtype)
                sid = _shape_id(shape) + tag
                yield Sample(f"{sid}-contig", (a, b), kw)
                yield Sample(f"{sid}-strided", (view(a, "strided"), view(b, "strided")), kw, grad_out="strided")
                yield Sample(f"{sid}-a_strided", (view(a, "strided"), b), kw)
            a, b = randn(4097, device, dtype, 3), randn(4097, device, dtype)
            for oa, ob, og in ((1, 1, 1), (0, 1, 0), (0, 0, 1)):
                lay = ("contig", "offset")
                yield Sample(f"4097-offsets{oa}{ob}{og}{tag}", (view(a, lay[oa]), view(b, lay[ob])), kw,
                             grad_out=lay[og])
            if dtype == torch.float32:  # a gradient for a alone
                yield Sample(f"5x9-grad_a{tag}", (randn((5, 9), device, dtype), randn((5, 9), device, dtype)), kw,
                             grad=(0,))
    return samples


def _swiglu_ref(a, b):
    return F.silu(a) * b


def _geglu_ref(a, b, approximate="tanh"):
    return F.gelu(a, approximate=approximate) * b


def _relu_backward_ref(grad_out, x):
    return torch.where(x > 0, grad_out, torch.zeros_like(grad_out))


def _not_float(name, fn, arg="x", got="Long", make=lambda: torch.arange(4)):
    return ErrorCase(rf"tinycuda::{name}: {arg} must be float32.*got {got}", fn, (make(),))


def _relu_errors():
    mask_bwd = torch.ops.tinycuda.relu_mask_backward
    return [
        _not_float("relu", ops.relu),
        ErrorCase(r"tinycuda::relu_mask_backward: mask must have shape \[2\]", mask_bwd,
                  (torch.randn(9), torch.zeros(1, dtype=torch.uint8))),
        ErrorCase(r"tinycuda::relu_mask_backward: mask must be a uint8 tensor", mask_bwd,
                  (torch.randn(9), torch.zeros(2))),
    ]


def _relu_backward_errors():
    return [
        ErrorCase(r"tinycuda::relu_backward: x has dtype Double but grad_out has dtype Float", ops.relu_backward,
                  (torch.randn(3), torch.randn(3, dtype=torch.float64))),
        ErrorCase(r"tinycuda::relu_backward: grad_out has shape \[3\] but x has shape \[4\]", ops.relu_backward,
                  (torch.randn(3), torch.randn(4))),
    ]


def _square_errors():
    return [
        _not_float("square", ops.square, got="Int", make=lambda: torch.ones(3, dtype=torch.int32)),
        ErrorCase(r"tinycuda::square_backward: grad_out has shape", torch.ops.tinycuda.square_backward,
                  (torch.randn(2, 3), torch.randn(3, 2))),
    ]


def _gelu_errors():
    bwd, meta = torch.ops.tinycuda.gelu_backward, torch.empty(3, device="meta")
    approx = r"approximate must be 'none' or 'tanh', got"
    return [
        _not_float("gelu", ops.gelu),
        ErrorCase(rf"tinycuda::gelu: {approx} 'erf'", ops.gelu, (torch.randn(3), "erf")),
        ErrorCase(rf"tinycuda::gelu_backward: {approx} 'x'", bwd, (torch.randn(3), torch.randn(3), "x")),
        ErrorCase(r"tinycuda::gelu_backward: grad_out has shape \[3\] but x has shape \[4\]", bwd,
                  (torch.randn(3), torch.randn(4))),
        ErrorCase(r"tinycuda::gelu_backward: x has dtype Double but grad_out has dtype Float", bwd,
                  (torch.randn(3), torch.randn(3, dtype=torch.float64))),
        # the fake kernels (torch.compile, meta tensors) check the same
        ErrorCase(rf"tinycuda::gelu: {approx} 'erf'", ops.gelu, (meta, "erf")),
        ErrorCase(r"tinycuda::gelu_backward: grad_out and x must have the same shape", bwd,
                  (meta, torch.empty(4, device="meta"))),
    ]


def _swiglu_errors():
    a, bwd, meta = torch.randn(3, 4), torch.ops.tinycuda.swiglu_backward, torch.empty(3, 4, device="meta")
    return [
        ErrorCase(r"tinycuda::swiglu: a must be float32.*got Long", ops.swiglu, (torch.arange(4), torch.arange(4))),
        ErrorCase(r"tinycuda::swiglu: a has shape \[3, 4\] but b has shape \[4, 3\]", ops.swiglu,
                  (a, torch.randn(4, 3))),
        ErrorCase(r"tinycuda::swiglu_backward: grad_out has shape \[3\] but a has shape \[3, 4\]", bwd,
                  (torch.randn(3), a, a)),
        ErrorCase(r"tinycuda::swiglu_backward: a has shape \[3, 4\] but b has shape \[4\]", bwd,
                  (a, a, torch.randn(4))),
        ErrorCase(r"tinycuda::swiglu: a has shape \[3, 4\] but b has shape \[4\]", ops.swiglu,
                  (meta, torch.empty(4, device="meta"))),
    ]


def _geglu_errors():
    a, meta = torch.randn(3, 4), torch.empty(3, 4, device="meta")
    approx = r"approximate must be 'none' or 'tanh'"
    return [
        ErrorCase(r"tinycuda::geglu: b has dtype Half but a has dtype Float", ops.geglu, (a, a.half())),
        ErrorCase(rf"tinycuda::geglu: {approx}, got 'erf'", ops.geglu, (a, a, "erf")),
        ErrorCase(rf"tinycuda::geglu_backward: {approx}", torch.ops.tinycuda.geglu_backward, (a, a, a, "sigmoid")),
        ErrorCase(rf"tinycuda::geglu: {approx}, got 'erf'", ops.geglu, (meta, meta, "erf")),
        ErrorCase(r"tinycuda::geglu: a has dtype torch.float32 but b has dtype torch.float16", ops.geglu,
                  (meta, meta.half())),
    ]


def _swiglu_cuda_errors():
    return [ErrorCase(r"tinycuda::swiglu: b is on cpu but a is on cuda:0", ops.swiglu,
                      (torch.randn(3, device="cuda"), torch.randn(3)))]


# ---------------------------------------------------------------------------
# the elementwise family: sigmoid ... rsqrt, one entry each (the op list itself is the core's)

@dataclass
class _Unary:
    """What the table says of one op of the elementwise family: its torch
    reference, the scale of its random inputs (wide enough to reach its kinks
    and saturate its tails), positive inputs only (log, sqrt, rsqrt), keyword
    variants (every non-default argument value the samples try; the first is
    the bench's), its kinks, the points where its derivative jumps, and its
    own bad inputs beyond the family's (() -> ErrorCases)."""
    ref: callable
    scale: float = 1.0
    positive: bool = False
    kwargs: tuple = ({},)
    kinks: tuple = ()
    errors: callable = list


def _clamp_errors():
    msg = "at least one of min and max must be given"
    return [ErrorCase(rf"tinycuda::clamp: {msg}", ops.clamp, (torch.randn(3),)),
            ErrorCase(rf"tinycuda::clamp: {msg}", ops.clamp, (torch.empty(3, device="meta"),)),
            ErrorCase(rf"tinycuda::clamp_backward: {msg}", torch.ops.tinycuda.clamp_backward,
                      (torch.randn(3), torch.randn(3)))]


UNARY = {
    "sigmoid": _Unary(torch.sigmoid, 4.0),
    "tanh": _Unary(torch.tanh, 3.0),
    "silu": _Unary(F.silu, 4.0),
    "mish": _Unary(F.mish, 4.0),
    "leaky_relu": _Unary(F.leaky_relu, kwargs=({}, {"negative_slope": 0.2}), kinks=(0.0,)),
    "elu": _Unary(F.elu, 2.0, kwargs=({}, {"alpha": 0.5}), kinks=(0.0,)),
    "selu": _Unary(F.selu, 2.0, kinks=(0.0,)),
    # linear above threshold / beta: 20 by default, 2.5 with beta=2, threshold=5
    "softplus": _Unary(F.softplus, 12.0, kwargs=({}, {"beta": 2.0, "threshold": 5.0}), kinks=(20.0, 2.5)),
    "softsign": _Unary(F.softsign, 3.0),
    "hardsigmoid": _Unary(F.hardsigmoid, 4.0, kinks=(-3.0, 3.0)),
    "hardtanh": _Unary(F.hardtanh, 2.0, kwargs=({}, {"min_val": -0.5, "max_val": 2.0}), kinks=(-1.0, 1.0, -0.5, 2.0)),
    "clamp": _Unary(torch.clamp, kwargs=({"min": -0.5, "max": 0.5}, {"min": -0.5}, {"max": 0.5}), kinks=(-0.5, 0.5),
                    errors=_clamp_errors),
    "exp": _Unary(torch.exp, 2.0),
    "log": _Unary(torch.log, positive=True),
    "abs": _Unary(torch.abs, kinks=(0.0,)),
    "neg": _Unary(torch.neg),
    "sqrt": _Unary(torch.sqrt, positive=True),
    "rsqrt": _Unary(torch.rsqrt, positive=True),
}


def _unary_input(u, shape, device, dtype):
    x = randn(shape, device, dtype, u.scale)
    return x.abs() + 0.1 if u.positive else x


def _unary_op_samples(name):
    """The shapes and layouts of _unary, and views the strided kernels read in
    place: a transpose, a permuted 3-D tensor, a broadcast (stride 0); and the
    op's kinks with a neighbour on each side, where torch's one-sided
    derivatives (hardtanh: 0 at its bounds; clamp: 1) must come out exactly."""
    u = UNARY[name]

    def samples(device, dtype):
        for kw in u.kwargs:
            tag = "".join(f"-{k}={v}" for k, v in kw.items())
            for shape in ELEMENTWISE_SHAPES:
                x = _unary_input(u, shape, device, dtype)
                yield from _layouts(lambda lay: ((view(x, lay),), kw), f"{_shape_id(shape)}{tag}")
            yield Sample(f"4097-offset{tag}", (view(_unary_input(u, 4097, device, dtype), "offset"),), kw,
                         grad_out="offset")
            yield Sample(f"33x5-transposed{tag}", (_unary_input(u, (33, 5), device, dtype).t(),), kw)
            yield Sample(f"3x4x5-permuted{tag}", (_unary_input(u, (3, 4, 5), device, dtype).permute(2, 0, 1),), kw)
            yield Sample(f"5x1-expanded{tag}", (_unary_input(u, (5, 1), device, dtype).expand(5, 33),), kw)
            if u.kinks:
                k = torch.tensor(u.kinks, device=device)
                x = torch.stack((k - 0.25, k, k + 0.25), -1).to(dtype)
                # strided: gradcheck takes contiguous samples only, and finite differences straddling a kink
                # measure neither side
                yield Sample(f"kinks{tag}", (view(x, "strided"),), kw, grad_out="strided")
    return samples


def _unary_op_errors(name):
    u = UNARY[name]

    def errors():
        fn, bwd, kw = getattr(ops, name), getattr(torch.ops.tinycuda, name + "_backward"), u.kwargs[0]
        saved = bwd.default._schema.arguments[1].name  # y or x: what the backward reads
        meta = torch.empty(3, device="meta")
        return [
            ErrorCase(rf"tinycuda::{name}: x must be float32.*got Long", fn, (torch.arange(4),), kw),
            ErrorCase(rf"tinycuda::{name}_backward: grad_out has shape \[3\] but {saved} has shape \[4\]", bwd,
                      (torch.randn(3), torch.randn(4)), kw),
            ErrorCase(rf"tinycuda::{name}_backward: {saved} has dtype Double but grad_out has dtype Float", bwd,
                      (torch.randn(3), torch.randn(3, dtype=torch.float64)), kw),
            # the fake kernels (torch.compile, meta tensors) check the same
            ErrorCase(rf"tinycuda::{name}_backward: grad_out has shape \[3\] but {saved} has shape \[4\]", bwd,
                      (meta, torch.empty(4, device="meta")), kw),
            *u.errors(),
        ]
    return errors


def _unary_op_bench(name):
    """The op on its random inputs, with the keyword variant first listed (clamp: both bounds), positionally."""
    u = UNARY[name]
    return lambda sh, dt, dev: [_unary_input(u, sh, dev, dt), *u.kwargs[0].values()]


# ---------------------------------------------------------------------------
# the elementwise family's binary ops: add ... pow, one entry each (the op list is the core's)

def _tensors(fn):
    """fn over tensors (torch.maximum takes no number), a number made a 0-dim tensor first, as tinycuda's
    functions make it: float64 beside a larger floating tensor (it promotes as the number would, and keeps its
    value), of the dtype of a 0-dim floating one (which a float64 one would promote), else of the result type
    of the other and the number."""
    def tensor(v, other):
        if isinstance(v, torch.Tensor):
            return v
        if other.is_floating_point():
            return torch.tensor(v, dtype=other.dtype if other.dim() == 0 else torch.float64)
        return torch.tensor(v, dtype=torch.result_type(other, v))

    def ref(a, b, **kw):
        return fn(tensor(a, b), tensor(b, a), **kw)
    ref.__name__ = fn.__name__
    return ref


def _away_from_zero(t):
    return torch.where(t < 0, t - 0.5, t + 0.5)


@dataclass
class _Binary:
    """What the table says of one binary op: its torch reference (same arguments), its operands
    (make: (shape, device, dtype, which) -> tensor, which 0 for a, 1 for b), keyword variants (the first is
    the bench's), the numbers the samples put in for a or b, whether its backward reads the operands (the
    bench's byte count: add's and sub's read grad_out alone), and its own samples ((device, dtype) -> Samples)."""
    ref: callable
    make: callable = None
    kwargs: tuple = ({},)
    numbers: tuple = (2.5, -1.5)
    reads_operands: bool = True
    special: callable = None

    def operand(self, shape, device, dtype, which):
        return self.make(shape, device, dtype, which) if self.make else randn(shape, device, dtype, 2.0)


def _ties_samples(device, dtype):
    """Equal operands: torch gives each half of the gradient (maximum, minimum), also where one of them is
    broadcast (b, a row of a, ties along a whole row: grad_b sums halves and wholes)."""
    a, b = randn((5, 9), device, dtype), randn((5, 9), device, dtype)
    b[:, ::3] = a[:, ::3]
    yield Sample("ties", (a, b))
    yield Sample("ties-row", (a, a[2].clone()))
    yield Sample("ties-number", (torch.tensor([-0.5, 0.25, 0.25, 1.0], device=device).to(dtype), 0.25))


def _pow_samples(device, dtype):
    """torch's gradient conventions at a zero base and a zero exponent: d/da = 0 where b = 0 (0^0 = 1),
    d/db = 0 where a = 0 and b >= 0; negative bases with integral exponents (the d/db there is NaN, not
    compared). Strided: gradcheck takes contiguous samples only, and d/db at 0^0 has no two-sided limit."""
    a = torch.tensor([[0.0, 0.0, 0.0, 0.0], [1.5, 2.0, 1.0, 0.0]], device=device).to(dtype)
    b = torch.tensor([[0.0, 1.0, 2.0, 3.0], [0.0, 0.0, 2.5, 0.0]], device=device).to(dtype)
    yield Sample("zeros", (view(a, "strided"), view(b, "strided")), grad_out="strided")
    yield Sample("zero-exponent-number", (a, 0))
    yield Sample("zero-base-number", (0.0, view(torch.tensor([0.0, 1.0, 2.0, 0.5], device=device).to(dtype),
                                                  "strided")), grad_out="strided")
    neg = torch.tensor([-2.0, -1.5, -0.5, -3.0, -1.0], device=device).to(dtype)
    yield Sample("negative-base", (neg, torch.tensor([2.0, 3.0, 0.0, 1.0, -2.0], device=device).to(dtype)), grad=(0,))


def _pow_operands(shape, device, dtype, which):
    """a positive (a real power of a negative base is NaN); b, the exponent, in [-3, 3] or so."""
    return randn(shape, device, dtype).abs() + 0.25 if which == 0 else randn(shape, device, dtype, 1.5)


BINARY = {
    "add": _Binary(torch.add, kwargs=({}, {"alpha": 2.5}), reads_operands=False),
    "sub": _Binary(torch.sub, kwargs=({}, {"alpha": -0.5}), reads_operands=False),
    "mul": _Binary(torch.mul),
    # b away from 0: a / b and its gradients stay moderate, finite differences meaningful
    "div": _Binary(torch.div, lambda sh, dev, dt, which: _away_from_zero(randn(sh, dev, dt, 2.0)).to(dt)),
    "maximum": _Binary(_tensors(torch.maximum), numbers=(0.25, -1.5), special=_ties_samples),
    "minimum": _Binary(_tensors(torch.minimum), numbers=(0.25, -1.5), special=_ties_samples),
    "pow": _Binary(torch.pow, _pow_operands, numbers=(2, 0.5), special=_pow_samples),
}

# (a's shape, b's shape): a row and a column each way, both broadcast, a middle dim, leading dims, 8 dims;
# and the CUDA kernel's vector loads along a contiguous or a broadcast inner dim. (An empty result from a
# non-empty operand, (5, 1) with (0,), and a (1, 1) beside a (2, 2) in half precision, summed and rounded
# once, are in tests/test_binary.py.)
BROADCASTS = [((5, 33), (33,)), ((33,), (5, 33)), ((5, 33), (5, 1)), ((5, 1), (5, 33)), ((5, 1), (1, 33)),
              ((3, 1, 5), (4, 1)), ((2, 3, 4, 5), (4, 5)), ((1, 5), (2, 3, 4, 5)),
              ((2, 1, 3, 1, 2, 1, 2, 1), (3, 1, 2, 1, 2, 1, 2)), ((64, 1024), (1024,)), ((64, 1024), (64, 1)),
              ((33, 4097), (4097,))]


def _binary_op_samples(name):
    """Both operands of one shape (the elementwise shapes, contiguous and strided; a 4-byte offset), the
    broadcasts of BROADCASTS, 0-dim operands (on the device, and CPU ones beside CUDA tensors: host scalars),
    views read in place (transposed, sliced, permuted, expanded, a strided row), Python numbers on either
    side, and the op's own cases. Operands of one dtype: promotion (and capi, which does not promote, bit for
    bit against the torch op) is tests/test_binary.py's."""
    u = BINARY[name]

    def samples(device, dtype):
        def ab(sa, sb):
            return u.operand(sa, device, dtype, 0), u.operand(sb, device, dtype, 1)

        for kw in u.kwargs:
            tag = "".join(f"-{k}={v}" for k, v in kw.items())
            for shape in ELEMENTWISE_SHAPES:
                a, b = ab(shape, shape)
                yield from _layouts(lambda lay: ((view(a, lay), view(b, lay)), kw), f"{_shape_id(shape)}{tag}")
            a, b = ab(4097, 4097)
            yield Sample(f"4097-offset{tag}", (view(a, "offset"), b), kw, grad_out="offset")
            for sa, sb in BROADCASTS:
                yield Sample(f"{_shape_id(sa)}-{_shape_id(sb)}{tag}", ab(sa, sb), kw)
            for where in ((device,) if device == "cpu" else (device, "cpu")):
                a, b = ab((5, 33), ())
                yield Sample(f"0dim-{where}-b{tag}", (a, b.to(where)), kw)
                a, b = ab((), (5, 33))
                # torch's own pow backward fails on a CPU base beside a CUDA exponent (for either gradient):
                # forward only (tests/test_binary.py compares ours against torch's on the base moved over)
                grad = () if name == "pow" and where == "cpu" else None
                yield Sample(f"0dim-{where}-a{tag}", (a.to(where), b), kw, grad=grad)
            a, b = ab((33, 5), (5, 33))
            yield Sample(f"transposed{tag}", (a.t(), b), kw)
            a, b = ab((5, 70), (33,))
            yield Sample(f"sliced{tag}", (a[:, 3:36], b), kw)
            a, b = ab((3, 4, 5), (4, 5, 3))
            yield Sample(f"permuted{tag}", (a.permute(2, 0, 1), b.permute(1, 2, 0)), kw)
            a, b = ab((5, 1), (5, 33))
            yield Sample(f"expanded{tag}", (a.expand(5, 33), b), kw)
            a, b = ab((5, 33), (66,))
            yield Sample(f"strided-row{tag}", (a, b[::2]), kw)
            a, b = ab((5, 33), (5, 33))
            for num in u.numbers:
                yield Sample(f"number-b={num}{tag}", (a, num), kw)
                yield Sample(f"number-a={num}{tag}", (num, b), kw)
        if u.special:
            yield from u.special(device, dtype)
    return samples


def _binary_backward(name):
    """torch.ops.tinycuda.<name>_backward(grad_out, a, b, output_mask, **floats) as the table calls it: its own
    entry, since autograd never reaches add's and sub's (a constant partial needs no kernel) and reaches the
    others with both gradients or one."""
    op = getattr(torch.ops.tinycuda, name + "_backward")

    def fn(grad_out, a, b, output_mask, **kw):
        return op(grad_out, a, b, output_mask, **kw)
    fn.__name__ = fn.__qualname__ = name + "_backward"
    return fn


def _binary_backward_ref(name):
    """torch's gradients of the op for each element of the broadcast shape (the partials times grad_out,
    unsummed: torch's autograd on a and b expanded to that shape and copied), an empty [0] one where
    output_mask skips it, as the torch op returns them."""
    u = BINARY[name]

    def ref(grad_out, a, b, output_mask, **kw):
        shape = grad_out.shape
        # on grad_out's device: torch's ops take a 0-dim CPU operand beside CUDA ones, but not once expanded
        full = [t.to(grad_out.device, grad_out.dtype).expand(shape).clone().requires_grad_() for t in (a, b)]
        with torch.enable_grad():
            grads = torch.autograd.grad(u.ref(*full, **kw), full, grad_out)
        return tuple(g if want else grad_out.new_empty(0) for g, want in zip(grads, output_mask))
    return ref


def _binary_backward_samples(name):
    """The backward op on operands of one shape, broadcast each way (a row, a column, 8 dims), a strided view
    and a host scalar (a 0-dim CPU tensor beside a larger one, as a number arrives), each output_mask."""
    u = BINARY[name]

    def samples(device, dtype):
        cases = [((5, 33), (5, 33)), ((5, 33), (33,)), ((5, 1), (5, 33)), ((3, 1, 5), (4, 1)), ((0,), (0,)),
                 ((2, 1, 3, 1, 2, 1, 2, 1), (3, 1, 2, 1, 2, 1, 2)), ((), ())]
        for kw in u.kwargs:
            tag = "".join(f"-{k}={v}" for k, v in kw.items())
            for sa, sb in cases:
                a, b = u.operand(sa, device, dtype, 0), u.operand(sb, device, dtype, 1)
                g = randn(torch.broadcast_shapes(sa, sb), device, dtype)
                for mask in ([True, True], [True, False], [False, True]):
                    yield Sample(f"{_shape_id(sa)}-{_shape_id(sb)}-{''.join('ab'[k] for k in (0, 1) if mask[k])}"
                                 f"{tag}", (g, a, b, mask), kw)
            a, b, g = u.operand((33, 5), device, dtype, 0), u.operand((66,), device, dtype, 1), randn((5, 33), device,
                                                                                                       dtype)
            yield Sample(f"strided{tag}", (view(g, "strided"), a.t(), b[::2], [True, True]), kw)
            s = u.operand((), "cpu", torch.float64, 1)
            yield Sample(f"host-scalar-b{tag}", (g, u.operand((5, 33), device, dtype, 0), s, [True, True]), kw)
    return samples


def _binary_op_errors(name):
    def errors():
        fn, op, bwd = getattr(ops, name), getattr(torch.ops.tinycuda, name), getattr(torch.ops.tinycuda,
                                                                                    name + "_backward")
        kw = BINARY[name].kwargs[-1]
        x, meta = torch.randn(3, 4), torch.empty(3, 4, device="meta")
        bad = r"a has shape \[3, 4\] and b has shape \[4, 3\], which do not broadcast"
        dims = r"at most 8 dims, got 9"
        ints = r"the result dtype Long \(of a Long and b Long\) is not supported"
        grad_shape = r"grad_out has shape \[4, 3\] but a and b broadcast to \[3, 4\]"
        cases = []
        # the C++ layer, and the fake kernels (torch.compile, meta tensors) check the same
        for t in (x, meta):
            nine = t.new_empty((1,) * 9)
            cases += [ErrorCase(rf"tinycuda::{name}: {bad}", fn, (t, t.t()), kw),
                      ErrorCase(rf"tinycuda::{name}: {ints}", op, (t.long(), t.long()), kw),
                      ErrorCase(rf"tinycuda::{name}: {dims}", fn, (nine, t[0, :1]), kw),
                      ErrorCase(rf"tinycuda::{name}_backward: {grad_shape}", bwd, (t.t(), t, t, [True, True]), kw),
                      ErrorCase(rf"tinycuda::{name}_backward: {bad}", bwd, (t, t, t.t(), [True, True]), kw),
                      ErrorCase(rf"tinycuda::{name}_backward: grad_out \(Double on {t.device}\) must match the "
                                rf"result \(Float on {t.device}\)", bwd, (t.double(), t, t, [True, False]), kw)]
        # two devices: the fake kernel's check here (meta beside CPU dispatches to it), the C++ one on a GPU
        cases.append(ErrorCase(rf"tinycuda::{name}: b is on cpu but a is on meta", fn, (meta, x), kw))
        return cases
    return errors


def _binary_op_cuda_errors(name):
    def errors():
        fn = getattr(ops, name)
        return [ErrorCase(rf"tinycuda::{name}: b is on cpu but a is on cuda:0", fn,
                          (torch.randn(3, device="cuda"), torch.randn(3)), BINARY[name].kwargs[-1])]
    return errors


def _where_samples(device, dtype):
    """condition, a and b of one shape (contiguous and strided, the condition too), broadcast in each of the
    three, 8 dims, a 0-dim condition (on the device; a CPU one beside CUDA tensors), 0-dim and number operands,
    transposed views."""
    def cond(shape, where=device):
        return torch.randn(shape, device=where) > 0

    for shape in ELEMENTWISE_SHAPES:
        c, a, b = cond(shape), randn(shape, device, dtype), randn(shape, device, dtype)
        yield from _layouts(lambda lay: ((view(c, lay), view(a, lay), view(b, lay)), {}), _shape_id(shape))
    for sc, sa, sb in (((5, 1), (33,), (5, 33)), ((33,), (5, 1), (5, 33)), ((5, 33), (5, 1), (1, 33)),
                       ((3, 1, 5), (4, 1), (3, 4, 1)), ((2, 1, 3, 1, 2, 1, 2, 1), (3, 1, 2, 1, 2, 1, 2), (2, 1)),
                       ((64, 1024), (1024,), (64, 1)), ((5, 33), (), (5, 33)), ((5, 33), (5, 33), ())):
        yield Sample(f"{_shape_id(sc)}-{_shape_id(sa)}-{_shape_id(sb)}", (cond(sc), randn(sa, device, dtype),
                                                                          randn(sb, device, dtype)))
    for where in ((device,) if device == "cpu" else (device, "cpu")):
        yield Sample(f"0dim-condition-{where}", (cond((), where), randn((5, 33), device, dtype),
                                                  randn((5, 33), device, dtype)))
    yield Sample("0dim-cpu-a", (cond((5, 33)), randn((), "cpu", dtype), randn((5, 33), device, dtype)))
    yield Sample("number-b", (cond((5, 33)), randn((5, 33), device, dtype), 0.0))
    yield Sample("number-a", (cond((5, 33)), -1.5, randn((5, 33), device, dtype)))
    yield Sample("transposed", (cond((33, 5)).t(), randn((33, 5), device, dtype).t(), randn((5, 33), device, dtype)))


def _where_errors():
    x, meta = torch.randn(3, 4), torch.empty(3, 4, device="meta")
    cases = []
    for t in (x, meta):  # the C++ layer, and the fake kernel (torch.compile, meta tensors)
        c = t.new_empty(t.shape, dtype=torch.bool)
        cases += [
            ErrorCase(r"tinycuda::where: condition must be bool, got Float", ops.where, (t, t, t)),
            ErrorCase(r"tinycuda::where: condition has shape \[4, 3\], a has shape \[3, 4\] and b has shape "
                      r"\[3, 4\], which do not broadcast", ops.where, (c.t(), t, t)),
            ErrorCase(r"tinycuda::where: the result dtype Long \(of a Long and b Long\) is not supported",
                      ops.where, (c, t.long(), t.long())),
            ErrorCase(r"tinycuda::where: at most 8 dims, got 9", ops.where, (c, t.new_empty((1,) * 9), t)),
        ]
    return cases


def _where_cuda_errors():
    x = torch.randn(3, device="cuda")
    return [ErrorCase(r"tinycuda::where: condition is on cpu but a and b are on cuda:0", ops.where,
                      (torch.ones(3, dtype=torch.bool), x, x))]


def _binary_op_bench(name):
    """2-D shapes: a and b of that shape; 3-D (B, S, H): a of that shape and b a bias of (H,), broadcast over
    the rows (the broadcasting case: x + bias)."""
    u = BINARY[name]
    return lambda sh, dt, dev: [u.operand(sh, dev, dt, 0), u.operand(sh if len(sh) == 2 else sh[-1:], dev, dt, 1)]


def _binary_bytes(reads_operands):
    """The fewest bytes: fwd reads a and b, writes out; bwd reads grad_out (and a and b where the gradients
    need them: all but add's and sub's) and writes grad_a and grad_b. A bias (3-D shapes) is H elements read
    and, as its gradient, written: its gradient's sum over rows reads grad_out once more only in a
    two-pass implementation (not counted)."""
    def cost(shape, mode, s):
        n = math.prod(shape)
        m = n if len(shape) == 2 else shape[-1]  # b's elements
        fwd = 2 * n + m
        bwd = n + (n + m if reads_operands else 0) + n + m
        return "GB/s", {"fwd": fwd, "bwd": bwd, "fwd+bwd": fwd + bwd}[mode] * s
    return cost


# ---------------------------------------------------------------------------
# scale_bias_relu, softmax, sum, linear

SBR_SHAPES = [(0, 5), (1, 1), (7, 3), (33, 7), (1000, 33), (3, 4097), (2, 3, 129), (4, 0), (9,)]


def _scale_bias_relu_samples(device, dtype):
    for shape in SBR_SHAPES:
        for scale in (0.5, -1.25):
            x, b = randn(shape, device, dtype), randn(shape[-1], device, dtype)
            yield from _layouts(lambda lay: ((view(x, lay), view(b, lay), scale), {}),
                                f"{_shape_id(shape)}-scale{scale}")
    x, b = randn((6, 13), device, dtype), randn(13, device, dtype)
    yield Sample("6x13-grad_x", (x, b, 0.7), grad=(0,))
    yield Sample("6x13-grad_bias", (x, b, 0.7), grad=(1,))


def _softmax_ref(x, dim=-1):
    return torch.softmax(x, dim)


def _log_softmax_ref(x, dim=-1):
    return torch.log_softmax(x, dim)


def _scale_bias_relu_ref(x, bias, scale=1.0):
    return torch.relu(x * scale + bias)


def _scale_bias_relu_errors():
    f = ops.scale_bias_relu
    return [
        ErrorCase(r"tinycuda::scale_bias_relu: bias must have shape \[5\]", f, (torch.randn(3, 5), torch.randn(4), 1.0)),
        ErrorCase(r"tinycuda::scale_bias_relu: bias has dtype Half", f,
                  (torch.randn(3, 5), torch.randn(5, dtype=torch.half), 1.0)),
        ErrorCase(r"tinycuda::scale_bias_relu: x must be float32.*Long", f,
                  (torch.ones(3, 5, dtype=torch.long), torch.randn(5), 1.0)),
        ErrorCase(r"tinycuda::scale_bias_relu: x must have at least 1 dim", f, (torch.tensor(1.0), torch.randn(1), 1.0)),
    ]


SOFTMAX_CASES = [  # (shape, dim)
    ((1, 1), -1), ((7, 1), -1), ((3, 7), -1), ((5, 33), 1), ((4, 1023), -1), ((3, 1025), -1),
    ((2, 4097), -1), ((33, 5), 0), ((2, 3, 17), 1), ((0, 7), -1), ((4, 0), -1), ((9,), 0), ((), 0),
]


def _softmax_samples(device, dtype):
    for shape, dim in SOFTMAX_CASES:
        x = randn(shape, device, dtype, 3)
        yield from _layouts(lambda lay: ((view(x, lay), dim), {}), f"{_shape_id(shape)}-dim{dim}")
    yield Sample("3x5x4-default_dim", (randn((3, 5, 4), device, dtype, 3),))


def _softmax_errors():
    return [
        ErrorCase(r"tinycuda::softmax: dim 2 is out of range for a tensor of 2 dims", ops.softmax,
                  (torch.randn(3, 4), 2)),
        ErrorCase(r"tinycuda::softmax_backward: grad_out has shape", torch.ops.tinycuda.softmax_backward,
                  (torch.randn(3), torch.randn(4), -1, False)),
    ]


def _log_softmax_errors():
    return [_not_float("log_softmax", ops.log_softmax, make=lambda: torch.ones(3, dtype=torch.long))]


# ---------------------------------------------------------------------------
# the reduce family: mean ... prod, one entry each (the op list is the core's: tc_reduce_op)

def _first_index_ref(fn):
    """torch.max or torch.min run on the CPU, the results moved back: CPU torch takes the first index of a tie, as
    tinycuda does (the contract: tinycuda's CUDA kernels take it too), and its gradient follows it."""
    def ref(x, *args, **kwargs):
        return tuple(t.to(x.device) for t in fn(x.cpu(), *args, **kwargs))
    return ref


def _prod_ref(x, dim=None, keepdim=False):
    """torch.prod, whose dim takes no None: every dim then."""
    if dim is not None:
        return torch.prod(x, dim, keepdim)
    return torch.prod(x).reshape((1,) * x.dim()) if keepdim else torch.prod(x)


def _near_one(shape, device, dtype):
    """Values of magnitude 1 +- 0.01, either sign: a product of 35000 of them stays in range (log ~ -2 +- 2)."""
    sign = torch.where(torch.randn(shape, device=device) < 0, -1.0, 1.0)
    return (sign * (1 + randn(shape, device, torch.float32, 0.01))).to(dtype)


def _logsumexp_ref(x, dim, keepdim=False):
    """torch.logsumexp, with dim=[] (every dim, as tinycuda takes it) spelled as every dim: torch's own fails on
    [] with keepdim=True ("output with shape [] doesn't match the broadcast shape [1, 1]")."""
    if isinstance(dim, (list, tuple)) and not dim:
        dim = tuple(range(x.dim()))
    return torch.logsumexp(x, dim, keepdim)


@dataclass
class _Reduce:
    """What the table says of one reduce op: its torch reference (same arguments), its inputs (make:
    (shape, device, dtype) -> x; randn by default), its scalar's variants (var, std: correction; vector_norm:
    ord), every dim as its schema spells it (None; amax's, amin's and logsumexp's int[1]: []), whether dim can
    name every dim (max, min: one int, required), whether dim is one int (argmax, argmin, prod, max, min: no
    lists of dims), whether it has an identity (amax ... argmin, max, min refuse an empty slice), finite(kw, n): whether a slice of n elements makes a finite number (the samples' edges: mean's
    NaN and logsumexp's -inf of an empty slice, var's and std's of no more elements than the correction are
    tests/test_reduce.py's, against torch with NaN equal), constant(kw): whether the variant's gradient is 0
    everywhere (vector_norm's ord 0, whose torch result has no graph back to x: forward-only samples), and its
    float32 tolerances."""
    ref: callable
    make: callable = None
    kwargs: tuple = ({},)
    every_dim: object = None
    every: bool = True
    one_dim: bool = False
    identity: bool = True
    finite: callable = lambda kw, n: n > 0
    constant: callable = lambda kw: False
    rtol: float = 1e-5
    atol: float = 1e-5
    grad_atol: float = None
    eager: callable = None  # what the bench times as eager, when not ref (max, min: ref runs on the CPU)

    def input(self, shape, device, dtype):
        return self.make(shape, device, dtype) if self.make else randn(shape, device, dtype)


def _has_backward(name):
    """Whether the op has a gradient (argmax and argmin, int64 indices, have none)."""
    return hasattr(torch.ops.tinycuda, name + "_backward")


def _value_index(name):
    """Whether the op returns (values, indices): max, min."""
    return len(getattr(torch.ops.tinycuda, name).default._schema.returns) == 2


def _more_than_correction(kw, n):
    return n > kw.get("correction", 1.0)


REDUCE = {
    "mean": _Reduce(torch.mean),
    # randn's values are distinct: no ties where gradcheck runs (an expanded view's, split evenly, where it does not)
    "amax": _Reduce(torch.amax, every_dim=[], identity=False),
    "amin": _Reduce(torch.amin, every_dim=[], identity=False),
    "logsumexp": _Reduce(_logsumexp_ref, lambda sh, dev, dt: randn(sh, dev, dt, 3.0), every_dim=[]),
    "var": _Reduce(torch.var, kwargs=({}, {"correction": 0.0}, {"correction": 2.0}), finite=_more_than_correction),
    "std": _Reduce(torch.std, kwargs=({}, {"correction": 0.0}, {"correction": 2.0}), finite=_more_than_correction),
    # |x| >= 0.5: ord 1's and inf's kinks (x = 0, ties of |x|) and ord 0.5's steep |x|^-0.5 stay away from
    # gradcheck's finite differences; zeros (ord 0's count, the gradient at a zero norm) are test_reduce's
    "vector_norm": _Reduce(torch.linalg.vector_norm, lambda sh, dev, dt: _away_from_zero(randn(sh, dev, dt)).to(dt),
                           kwargs=({}, *({"ord": p} for p in (1.0, math.inf, -math.inf, 0.0, 3.0, 0.5))),
                           # ord +-inf has no identity: an empty slice is refused (test_reduce's)
                           finite=lambda kw, n: n > 0 or abs(kw.get("ord", 2.0)) != math.inf,
                           constant=lambda kw: kw.get("ord") == 0.0),
    "argmax": _Reduce(torch.argmax, one_dim=True, identity=False),
    "argmin": _Reduce(torch.argmin, one_dim=True, identity=False),
    # float32 products of up to 35000 factors: relative error ~ sqrt(n) eps / 2 (its gradient y / x the same);
    # an empty slice's is 1; zeros (one in a slice: the others' product; two: 0) are test_reduce's
    "prod": _Reduce(_prod_ref, _near_one, one_dim=True, finite=lambda kw, n: True, rtol=5e-5),
    # float32 sums of up to 12000 randn terms: atol ~ sqrt(n) eps |x| (mean's divides it by n)
    "sum": _Reduce(torch.sum, atol=2e-4),
    # torch.max(x, dim) / torch.min(x, dim): (values, indices), dim required; the expanded sample's ties take the
    # first index and its gradient alone (torch's, not amax's even split)
    "max": _Reduce(_first_index_ref(torch.max), eager=torch.max, every=False, one_dim=True, identity=False),
    "min": _Reduce(_first_index_ref(torch.min), eager=torch.min, every=False, one_dim=True, identity=False),
}

_EVERY = "every"  # a case's dims: every dim, as the op's schema spells it (_Reduce.every_dim)

# (shape, dims): every dim (0-dim, one element, odd lengths, 4097 past the CPU's 4096-element chunks); one dim,
# negative; several non-adjacent ones; a unit reduced dim; 3-D and 4-D; long slices (3 x 9000 over dim 1: rows
# cut in two on CUDA, past the CPU's chunks; 5000 x 7 over dim 0: the column path, its slice cut in chunks;
# 2 x 3 x 4097 over (0, 2): a long slice of two strided pieces; 4 x 3 x 16 over dim 1: the CUDA backward's vector
# path with adjacent outputs; 3 x 2 x 5 x 8 over (0, 2): columns whose slice is two strided dims; 1003 x 24 over
# dim 0: the CUDA columns' vector path, cut in chunks); empty outputs (a kept dim of 0); and empty
# slices (a reduced dim of 0), taken where the op's `finite` says so.
REDUCE_CASES = [
    ((), _EVERY), ((), 0), ((), -1), ((1,), _EVERY), ((7,), _EVERY), ((4097,), _EVERY), ((5, 33), _EVERY),
    ((5, 33), 0), ((5, 33), 1), ((5, 33), -1), ((3, 4, 5), (0, 2)), ((3, 4, 5), (-1, 0)), ((33, 1, 65), 1),
    ((2, 3, 4, 5), (1, 3)), ((2, 3, 4, 5), (0, 2, -1)), ((2, 3, 4097), (0, 2)), ((3, 9000), 1), ((5000, 7), 0),
    ((4, 3, 16), 1), ((3, 2, 5, 8), (0, 2)), ((1003, 24), 0),
    ((0, 5), 1), ((3, 0), 0), ((4, 0, 3), (0, 2)), ((3, 0), 1), ((0,), _EVERY),
]


def _reduced(shape, dims):
    """Whether reducing `dims` of a tensor of `shape` leaves an output, and the element count of a slice."""
    nd = len(shape)
    if dims == _EVERY:
        red = set(range(nd))
    else:  # a 0-dim tensor takes dim 0 and -1, and reduces nothing
        red = {d % nd for d in ((dims,) if isinstance(dims, int) else dims)} if nd else set()
    return all(s for d, s in enumerate(shape) if d not in red), math.prod(shape[d] for d in red)


def _reduce_op_samples(name):
    """REDUCE_CASES (those whose dims the op takes, and whose slices make a finite number) with keepdim both ways,
    contiguous and strided (the other variants of the op's scalar, whose math alone differs: contiguous,
    keepdim=False); views read in place: transposed (reduced over each dim: the row and the column path),
    sliced, a permuted tensor over non-adjacent dims, an expanded one (stride 0: equal values, amax's gradient
    split evenly, argmax's first index); and the defaults (x alone; logsumexp: dim positional)."""
    u = REDUCE[name]

    dim_required = inspect.signature(getattr(ops, name)).parameters["dim"].default is inspect.Parameter.empty

    def samples(device, dtype):
        for i, kw in enumerate(u.kwargs):
            tag, grad = "".join(f"-{k}={v}" for k, v in kw.items()), () if u.constant(kw) else None

            def reduce(sid, x, dims, keepdims=(False, True), layouts=("contig",)):
                for keepdim in keepdims:
                    args = {"dim": u.every_dim if dims == _EVERY else dims, "keepdim": keepdim, **kw}
                    for layout in layouts:
                        yield Sample(f"{sid}-dim{dims}-keepdim{keepdim}-{layout}{tag}", (view(x, layout),), args,
                                     grad, layout)

            for shape, dims in REDUCE_CASES:
                output, n = _reduced(shape, dims)
                if (u.one_dim and not (dims == _EVERY or isinstance(dims, int))) or (output and not u.finite(kw, n)):
                    continue
                if dims == _EVERY and not u.every:
                    continue
                x = u.input(shape, device, dtype)
                if i == 0:
                    yield from reduce(_shape_id(shape), x, dims, layouts=("contig", "strided"))
                else:
                    yield from reduce(_shape_id(shape), x, dims, (False,))
            x = u.input((33, 5), device, dtype).t()
            yield from reduce("33x5-transposed", x, 0, (False,))
            yield from reduce("33x5-transposed", x, 1, (True,))
            x = u.input((5, 70), device, dtype)[:, 3:36]
            yield from reduce("5x70-sliced", x, 1, (False,))
            if u.every:
                yield from reduce("5x70-sliced", x, _EVERY, (True,))
            yield from reduce("3x4x5-permuted", u.input((3, 4, 5), device, dtype).permute(2, 0, 1),
                              0 if u.one_dim else (0, 2))
            yield from reduce("5x1-expanded", u.input((5, 1), device, dtype).expand(5, 33), 1, (False,))
            x = u.input((5, 33), device, dtype)
            if dim_required:  # logsumexp, max, min
                yield Sample("5x33-dim_positional", (x, 1))
            else:
                yield Sample(f"5x33-defaults{tag}", (x,), kw, grad)
    return samples


def _reduce_op_errors(name):
    """dim out of range, a dim twice, an integer x, an empty slice for an op with no identity (vector_norm's
    ord=-inf too), the backward's grad_out of the wrong shape: each from the C++ layer and from the fake
    kernel (torch.compile, meta tensors); and (the C++ layer) more than 8 dims alternating between kept and
    reduced, beyond what merging neighbours reaches."""
    u = REDUCE[name]

    def errors():
        fn, op = getattr(ops, name), f"tinycuda::{name}"
        no_identity = {} if u.identity else {"dim": 1}
        if name == "vector_norm":
            no_identity = {"dim": 1, "ord": -math.inf}
        cases = []
        for x in (torch.randn(3, 4), torch.empty(3, 4, device="meta")):
            cases += [ErrorCase(rf"{op}: dim 2 is out of range for a tensor of 2 dims", fn, (x,), {"dim": 2}),
                      ErrorCase(rf"{op}: dim -3 is out of range for a tensor of 2 dims", fn, (x,), {"dim": -3}),
                      ErrorCase(rf"{op}: x must be float32, float16, bfloat16 or float64, got Long", fn, (x.long(),),
                                {"dim": 1})]
            if not u.one_dim:
                cases.append(ErrorCase(rf"{op}: dim 1 appears more than once in the list of dims", fn, (x,),
                                       {"dim": (1, -1)}))
            if no_identity:
                cases.append(ErrorCase(rf"{op}: cannot reduce an empty slice \(the reduced dims hold no element\), "
                                       rf"the op has no identity", fn, (x[:, :0],), no_identity))
            if _has_backward(name):
                bwd = getattr(torch.ops.tinycuda, name + "_backward")
                saved = outputs(fn(x, dim=1))[-1]  # y, or max's indices
                cases.append(ErrorCase(rf"{op}_backward: grad_out must have shape \[3\], got \[4\]", bwd,
                                       (x.new_empty(4), x, saved), {"dim": 1}))
            if _value_index(name):
                cases.append(ErrorCase(rf"{op}_backward: indices must be int64, got Float", bwd,
                                       (x.new_empty(3), x, x.new_empty(3)), {"dim": 1}))
        if not u.one_dim:
            cases.append(ErrorCase(rf"{op}: x has 10 dims whose reduced and kept ones alternate 10 times; at most 8",
                                   fn, (torch.randn((1, 2) * 5),), {"dim": (0, 2, 4, 6, 8)}))
        return cases
    return errors


def _reduce_op_bench(name):
    """A bench shape is (outer, reduced, inner): x of that shape without its unit dims, reduced over the middle
    one: (1, n, 1) a full reduction, (m, n, 1) rows (the contiguous dim reduced), (1, n, k) columns (dim 0),
    (m, n, k) a middle dim. vector_norm's ord (2) goes before dim; var's and std's correction is the default."""
    def make(sh, dt, dev):
        outer, red, inner = sh
        x = REDUCE[name].input((outer,) * (outer > 1) + (red,) + (inner,) * (inner > 1), dev, dt)
        return [x, *((2.0,) if name == "vector_norm" else ()), int(outer > 1)]
    return make


def _reduce_bytes(name):
    """fwd reads x and writes y (int64 indices for argmax, argmin; values and int64 indices for max, min); bwd
    reads grad_y, x and y (mean's: grad_y alone, sum's too; max's: grad_y and the indices) and writes grad_x.
    What a backward reduces first into its workspace (var's mean, amax's tie counts), a second read of x, is not
    counted."""
    def cost(shape, mode, s):
        n, m = math.prod(shape), shape[0] * shape[2]
        if _value_index(name):
            fwd, bwd = n * s + m * (s + 8), m * (s + 8) + n * s
            return "GB/s", {"fwd": fwd, "bwd": bwd, "fwd+bwd": fwd + bwd}[mode]
        fwd = n * s + m * (s if _has_backward(name) else 8)
        bwd = (m + n if name in ("mean", "sum") else 2 * m + 2 * n) * s
        return "GB/s", {"fwd": fwd, "bwd": bwd, "fwd+bwd": fwd + bwd}[mode]
    return cost


def _sum_backward_samples(device, dtype):
    """tinycuda::sum_backward called directly (sum's autograd returns grad_out expanded, no kernel): every dim,
    one dim, two strided dims, an empty slice; grad_out strided or not."""
    for shape, dims in (((7,), None), ((5, 33), 1), ((2, 3, 4097), (0, 2)), ((3, 0), 0)):
        x = randn(shape, device, dtype)
        for keepdim in (False, True):
            y = torch.sum(x, dims, keepdim)
            g = randn(y.shape, device, dtype)
            for layout in ("contig", "strided"):
                yield Sample(f"{_shape_id(shape)}-dim{dims}-keepdim{keepdim}-{layout}", (view(g, layout), x, y),
                             {"dim": dims, "keepdim": keepdim}, grad=())


def _sum_backward_ref(grad_out, x, y, dim=None, keepdim=False):
    reduced = range(x.dim()) if dim is None else [dim] if isinstance(dim, int) else dim
    mask = {d % max(x.dim(), 1) for d in reduced}
    return grad_out.reshape([1 if d in mask else n for d, n in enumerate(x.shape)]).expand(x.shape).contiguous()


# (outer, reduced, inner), as _reduce_op_bench makes them: a full reduction, rows, columns; "all" adds many
# short rows, many short columns, a middle dim
REDUCE_SHAPES = {"small": [(1, 2**26, 1), (8192, 8192, 1), (1, 8192, 8192)],
                 "large": [(1, 2**28, 1), (16384, 16384, 1), (1, 16384, 16384)],
                 "all": [(1, 2**24, 1), (1, 2**26, 1), (1, 2**28, 1), (8192, 8192, 1), (1, 8192, 8192),
                         (65536, 1024, 1), (1, 1024, 65536), (64, 1024, 1024)],
                 "cpu": [(1, 2**20, 1), (1024, 1024, 1), (1, 1024, 1024)]}


# ---------------------------------------------------------------------------
# the scan family: cumsum, cumprod, logcumsumexp, one entry each (the op list is the core's: tc_scan_op)

def _scan_ref(name, identity):
    """torch.<name> with tinycuda's flags: reverse (flip, scan, flip) and exclusive (the inclusive scan of all but
    the last element, shifted one on, the identity first: (x * 0) + identity, a NaN of an infinite x made 0, so that
    it has a (zero) gradient)."""
    scan = getattr(torch, name)

    def first(x):
        return (x * 0).nan_to_num(0.0) + identity

    def ref(x, dim, *, reverse=False, exclusive=False):
        if x.dim() == 0:
            return first(x) if exclusive else scan(x, dim)
        d = dim % x.dim()
        x = x.flip(d) if reverse else x
        if exclusive:
            n = x.shape[d]
            y = torch.cat([first(x.narrow(d, 0, min(n, 1))), scan(x.narrow(d, 0, max(n - 1, 0)), d)], d)
        else:
            y = scan(x, d)
        return y.flip(d) if reverse else y
    ref.__name__ = f"{name}_ref"
    return ref


@dataclass
class _Scan:
    """What the table says of one scan op: its torch reference (with the reverse and exclusive flags), its
    inputs (make: (shape, device, dtype) -> x; randn by default) and its float32 tolerances."""
    ref: callable
    make: callable = None
    rtol: float = 1e-5
    atol: float = 1e-5
    grad_rtol: float = None
    grad_atol: float = None

    def input(self, shape, device, dtype):
        return self.make(shape, device, dtype) if self.make else randn(shape, device, dtype)


SCAN = {
    # float32 running sums of up to 5000 unit normals, one add after another on the CPU: |err| ~ n eps / 2
    "cumsum": _Scan(_scan_ref("cumsum", 0.0), atol=1e-3),
    # products of up to 5000 factors near 1 (either sign; their logs stay in +-3): relative error ~ sqrt(n) eps;
    # zeros (torch's gradient there) are test_scan's. The gradient is a float32 scan of affine maps, each step a
    # multiply and an add: over 3 x 5000 (|grad| up to 74-324) its max error is 1.3e-4 to 7.3e-4 on the CPU (seeds
    # 0-2), 1.5e-4 on the H200, ~40 float32 eps of the largest value; torch's CPU accumulates in double (8e-6 to
    # 3.6e-5). A wrong formula errs by O(1).
    "cumprod": _Scan(_scan_ref("cumprod", 1.0), _near_one, rtol=1e-4, atol=1e-5, grad_atol=1e-3),
    # its gradient, torch's formula, is the difference of two exponentials, each of a float32 log-sum-exp of up to
    # 5000 terms: their relative errors, ~sqrt(n) eps each, grow where the two nearly cancel
    "logcumsumexp": _Scan(_scan_ref("logcumsumexp", -math.inf), lambda sh, dev, dt: randn(sh, dev, dt, 3.0),
                          rtol=1e-5, atol=1e-5, grad_rtol=1e-3, grad_atol=1e-4),
}

# (shape, dim): 0-dim (dim 0 and -1), empty, one element, odd lengths, 4097 and 3 x 5000 along the contiguous dim
# (CUDA: past a warp's rows, tiles chained by look-back), every dim of a matrix and a 3-D and 4-D tensor
# (CUDA: a thread a column), a unit and an empty scanned dim
SCAN_CASES = [((), 0), ((), -1), ((0,), 0), ((1,), 0), ((7,), -1), ((4097,), 0), ((5, 33), 0), ((5, 33), 1),
              ((5, 33), -2), ((3, 4, 5), 1), ((33, 1, 65), 1), ((2, 3, 4, 5), -2), ((3, 0, 4), 1), ((3, 0, 4), 0),
              ((3, 5000), 1)]
SCAN_FLAGS = [{}, {"reverse": True}, {"exclusive": True}, {"reverse": True, "exclusive": True}]


def _flags_id(kw):
    return "".join(f"-{k}" for k in kw)


def _scan_op_samples(name):
    """SCAN_CASES with every combination of reverse and exclusive, contiguous; with the default flags strided too;
    views (copied contiguous by the torch layer): transposed (scanned over each dim), sliced, permuted; and dim
    positional."""
    u = SCAN[name]

    def samples(device, dtype):
        for shape, dim in SCAN_CASES:
            x = u.input(shape, device, dtype)
            for kw in SCAN_FLAGS:
                for layout in ("contig", "strided") if not kw else ("contig",):
                    yield Sample(f"{_shape_id(shape)}-dim{dim}{_flags_id(kw)}-{layout}", (view(x, layout),),
                                 {"dim": dim, **kw}, grad_out=layout)
        x = u.input((33, 5), device, dtype).t()
        for dim, kw in ((0, {}), (1, {"reverse": True, "exclusive": True})):
            yield Sample(f"33x5-transposed-dim{dim}{_flags_id(kw)}", (x,), {"dim": dim, **kw})
        yield Sample("5x70-sliced-dim1-reverse", (u.input((5, 70), device, dtype)[:, 3:36],), {"dim": 1, "reverse": True})
        yield Sample("3x4x5-permuted-dim1", (u.input((3, 4, 5), device, dtype).permute(2, 0, 1),), {"dim": 1})
        yield Sample("5x33-dim_positional", (u.input((5, 33), device, dtype), 1))
    return samples


def _scan_op_errors(name):
    """dim out of range, an integer x, the backward's grad_out or y of the wrong shape: each from the C++ layer
    and from the fake kernel (torch.compile, meta tensors)."""
    def errors():
        fn, op = getattr(ops, name), f"tinycuda::{name}"
        bwd = getattr(torch.ops.tinycuda, name + "_backward")
        cases = []
        for x in (torch.randn(3, 4), torch.empty(3, 4, device="meta")):
            y = fn(x, 1)
            cases += [ErrorCase(rf"{op}: dim 2 is out of range for a tensor of 2 dims", fn, (x, 2)),
                      ErrorCase(rf"{op}: dim -3 is out of range for a tensor of 2 dims", fn, (x,), {"dim": -3}),
                      ErrorCase(rf"{op}: x must be float32, float16, bfloat16 or float64, got Long", fn,
                                (x.long(), 1)),
                      ErrorCase(rf"{op}_backward: grad_out has shape \[4\] but x has shape \[3, 4\]", bwd,
                                (x.new_empty(4), x, y, 1)),
                      ErrorCase(rf"{op}_backward: y has shape \[3\] but x has shape \[3, 4\]", bwd,
                                (x, x, y[:, 0], 1))]
        cases.append(ErrorCase(rf"{op}: dim 1 is out of range for a tensor of 0 dims", fn, (torch.tensor(1.0), 1)))
        return cases
    return errors


def _scan_op_bench(name):
    """A bench shape is (outer, n, inner): x of that shape without its unit dims, scanned over the middle one:
    (1, n, 1) one long row (CUDA: look-back), (m, n, 1) rows, (1, n, k) columns (dim 0)."""
    def make(sh, dt, dev):
        outer, n, inner = sh
        return [SCAN[name].input((outer,) * (outer > 1) + (n,) + (inner,) * (inner > 1), dev, dt), int(outer > 1)]
    return make


def _scan_bytes(name):
    """fwd reads x and writes y; bwd reads g (cumprod, logcumsumexp: and x and y) and writes grad_x."""
    def cost(shape, mode, s):
        n = math.prod(shape)
        fwd, bwd = 2 * n * s, (2 if name == "cumsum" else 4) * n * s
        return "GB/s", {"fwd": fwd, "bwd": bwd, "fwd+bwd": fwd + bwd}[mode]
    return cost


# (outer, n, inner), as _scan_op_bench makes them: one long row, rows, columns; "all" adds short rows
SCAN_SHAPES = {"small": [(1, 2**26, 1), (8192, 8192, 1), (1, 8192, 8192)],
               "large": [(1, 2**28, 1), (16384, 16384, 1), (1, 16384, 16384)],
               "all": [(1, 2**24, 1), (1, 2**28, 1), (8192, 8192, 1), (65536, 1024, 1), (1, 8192, 8192),
                       (64, 1024, 1024)],
               "cpu": [(1, 2**20, 1), (1024, 1024, 1), (1, 1024, 1024)]}


# ---------------------------------------------------------------------------
# the transpose family: permute_copy, transpose_copy, contiguous (copies: exact in every dtype)

# (shape, dims): 0-dim, empty, one element, 1-D; 2-D transposes with edge tiles (5 x 33, 33 x 65) and whole ones
# (64 x 128: CUDA's packed units); a unit dim (a copy); 3-D permutations through the tile (k and c the swapped
# dims, the third a batch) and the row copy (1, 0, 2), negative dims; the attention layout [B, S, H, D] ->
# [B, H, S, D] (rows of D) and a permutation moving D (a tile); 5-D with a unit dim
PERMUTE_CASES = [((), []), ((0,), [0]), ((3, 0, 5), [2, 0, 1]), ((1,), [0]), ((7,), [-1]), ((5, 33), [1, 0]),
                 ((33, 65), [1, 0]), ((64, 128), [1, 0]), ((1, 9), [1, 0]), ((3, 4, 5), [0, 2, 1]),
                 ((3, 4, 5), [2, 0, 1]), ((3, 4, 5), [1, 0, 2]), ((4, 6, 7), [-1, 0, -2]), ((2, 5, 3, 8), [0, 2, 1, 3]),
                 ((2, 5, 3, 8), [0, 2, 3, 1]), ((2, 3, 1, 4, 5), [4, 2, 0, 3, 1])]
# (shape, dim0, dim1): torch.transpose_copy's, a 0-dim and 1-D one included
TRANSPOSE_CASES = [((), 0, -1), ((7,), 0, 0), ((5, 33), 0, 1), ((33, 65), -1, 0), ((64, 128), 0, 1),
                   ((3, 4, 5), 0, 2), ((2, 5, 3, 8), 1, 2), ((3, 0, 4), 0, 1)]


def _permute_samples(device, dtype):
    """PERMUTE_CASES, contiguous and strided (every other element of a wider last dim); views read in place:
    a transposed matrix (its permutation back is a plain copy), a slice, a permuted 3-D tensor, a broadcast."""
    for shape, dims in PERMUTE_CASES:
        x = randn(shape, device, dtype)
        for layout in ("contig", "strided") if len(shape) >= 2 else ("contig",):
            yield Sample(f"{_shape_id(shape)}-{'.'.join(map(str, dims))}-{layout}", (view(x, layout), dims),
                         grad_out=layout)
    x = randn((65, 33), device, dtype)
    yield Sample("65x33-transposed-1.0", (x.t(), [1, 0]))
    yield Sample("65x33-sliced-1.0", (x[3:60:2, 1:30], [1, 0]))
    yield Sample("3x4x5-permuted-1.2.0", (randn((3, 4, 5), device, dtype).permute(2, 0, 1), [1, 2, 0]))
    yield Sample("5x1-expanded-1.0", (randn((5, 1), device, dtype).expand(5, 6), [1, 0]))
    yield Sample("33x65-offset-1.0", (view(randn((33, 65), device, dtype), "offset"), [1, 0]), grad_out="offset")


def _transpose_samples(device, dtype):
    for shape, d0, d1 in TRANSPOSE_CASES:
        x = randn(shape, device, dtype)
        for layout in ("contig", "strided") if len(shape) >= 2 else ("contig",):
            yield Sample(f"{_shape_id(shape)}-{d0}.{d1}-{layout}", (view(x, layout), d0, d1), grad_out=layout)
    yield Sample("65x33-transposed-0.1", (randn((65, 33), device, dtype).t(), 0, 1))


def _contiguous_ref(x, memory_format=torch.contiguous_format):
    return x.contiguous(memory_format=memory_format)


def _contiguous_samples(device, dtype):
    """Views made contiguous (transposed, strided, permuted; a contiguous x: itself), and NCHW tensors made
    channels_last, 3-D ones channels_last_3d (the copy in NHWC order)."""
    x = randn((33, 65), device, dtype)
    for name, v in (("transposed", x.t()), ("strided", view(x, "strided")), ("contig", x),
                    ("permuted", randn((3, 4, 5), device, dtype).permute(1, 2, 0))):
        yield Sample(f"{name}", (v,))
    for shape, fmt in (((2, 3, 4, 5), torch.channels_last), ((1, 3, 2, 2), torch.channels_last),
                       ((2, 2, 2, 3, 2), torch.channels_last_3d)):
        yield Sample(f"{_shape_id(shape)}-{str(fmt).split('.')[-1]}", (randn(shape, device, dtype), fmt))


def _permute_errors():
    """dims of the wrong length, out of range, repeated; more than 8 dims of size > 1; an unknown algo: from the
    C++ layer and from the fake kernel; a memory format contiguous refuses, as torch."""
    cases = []
    for x in (torch.randn(3, 4), torch.empty(3, 4, device="meta")):
        cases += [ErrorCase(r"tinycuda::permute_copy: dims must list each of x's 2 dims once, got 3 dims",
                            ops.permute_copy, (x, [0, 1, 2])),
                  ErrorCase(r"tinycuda::permute_copy: dims entry 2 is out of range for a tensor of 2 dims",
                            ops.permute_copy, (x, [0, 2])),
                  ErrorCase(r"tinycuda::permute_copy: dims repeats dim 1", ops.permute_copy, (x, [-1, 1])),
                  ErrorCase(r"tinycuda::transpose_copy: dim1 -3 is out of range for a tensor of 2 dims",
                            ops.transpose_copy, (x, 0, -3))]
    nine = torch.randn((2,) * 9)
    cases += [ErrorCase(r"tinycuda::permute_copy: at most 8 dims of size > 1, got 9", ops.permute_copy,
                        (nine, list(range(9)))),
              ErrorCase(r"tinycuda::permute_copy: algo must be 0 \(auto\), 1 \(naive\), 2 \(shared\) or 3 "
                        r"\(padded\), got 7", torch.ops.tinycuda.permute_copy, (torch.randn(3, 4), [1, 0]),
                        {"algo": 7}),
              ErrorCase(r"tinycuda::contiguous: required rank 4 tensor to use torch.channels_last format",
                        ops.contiguous, (torch.randn(3, 4).t(), torch.channels_last)),
              ErrorCase(r"tinycuda::contiguous: torch.preserve_format is unsupported by the contiguous operator",
                        ops.contiguous, (torch.randn(3, 4).t(), torch.preserve_format))]
    return cases


def _permute_cuda_errors():
    x = torch.randn(3, 4, 5, device="cuda")
    return [ErrorCase(r"tinycuda::permute_copy: algo 1 \(naive\) takes a 2-D transpose",
                      torch.ops.tinycuda.permute_copy, (x, [2, 1, 0]), {"algo": 1})]


def _copy_bytes(shape, mode, s):
    """x read and y written once; the gradient is the same copy the other way."""
    n = 2 * math.prod(shape) * s
    return "GB/s", {"fwd": n, "bwd": n, "fwd+bwd": 2 * n}[mode]


def _permute_bench(sh, dt, dev):
    """A 3-D shape: (0, 2, 1), the batched transpose; a 4-D one: (0, 2, 1, 3), [B, S, H, D] -> [B, H, S, D]
    (attention's layout: rows of D)."""
    return [randn(sh, dev, dt), [0, 2, 1] if len(sh) == 3 else [0, 2, 1, 3]]


TRANSPOSE_SHAPES = {"small": [(8192, 8192)], "large": [(16384, 16384)],
                    "all": [(4096, 4096), (8192, 8192), (16384, 16384), (4096, 16384), (16384, 4096)],
                    "cpu": [(2048, 2048)]}
PERMUTE_SHAPES = {"small": [(16, 2048, 2048), (8, 4096, 32, 128)], "large": [(64, 2048, 2048), (16, 4096, 32, 128)],
                  "all": [(16, 2048, 2048), (64, 2048, 2048), (256, 512, 512), (8, 4096, 32, 128),
                          (16, 4096, 32, 128), (8, 4096, 8, 64)],
                  "cpu": [(4, 1024, 1024), (1, 1024, 32, 128)]}


# ---------------------------------------------------------------------------
# the histogram family: histc, bincount; the triangle family: triu, tril

def _histc_ref(x, bins=100, min=0, max=0):
    """torch.histc in float32, back in x's dtype: the kernels' bins are torch's float32 formula for float32,
    float16 and bfloat16 x, which the float64 copy of such an x holds exactly (a float64 histc would move a value
    within a float32 rounding of an edge to the other bin); 16-bit x runs on the CPU, where torch has its kernel."""
    if x.dtype == torch.float64:
        return torch.histc(x.float(), bins, min, max).double()
    if x.dtype != torch.float32:
        return torch.histc(x.cpu(), bins, min, max).to(x.device)
    return torch.histc(x, bins, min, max)


def _histc_samples(device, dtype):
    """A given range first (torch.compile and CUDA graphs take the first samples: no host sync there); the
    data's range (min == max: 0 and 0 by default, or equal and not 0); bins 1, odd, 256 and past shared memory
    (CUDA: global atomics); values on the edges and past them, NaN and infinities; empty, one element, a flat
    x; several dims, strided and misaligned views."""
    x = randn((1000,), device, dtype)
    yield Sample("1000-bins37-range", (x, 37, -2.0, 2.0))
    yield Sample("5x33-strided-range", (view(randn((5, 33), device, dtype), "strided"), 17, -1.5, 1.0))
    for shape in ((0,), (1,), (7,), (4097,), (5, 33), (2, 3, 129)):
        x = randn(shape, device, dtype)
        yield Sample(f"{_shape_id(shape)}-data", (x,))
        yield Sample(f"{_shape_id(shape)}-bins256-data", (x, 256))
    x = randn((4097,), device, dtype)
    yield Sample("4097-offset-bins1", (view(x, "offset"), 1, -1.0, 1.0))
    yield Sample("4097-bins20000", (x, 20000, -3.0, 3.0))
    yield Sample("4097-equal-range-data", (x, 10, 2.5, 2.5))
    yield Sample("flat-data", (torch.full((9,), 1.5, device=device, dtype=dtype), 4))
    edges = torch.tensor([-1.0, 1.0, 0.0, 0.5, -0.5, -1.5, 1.5, math.nan, math.inf, -math.inf, 0.25, 1.0],
                         device=device).to(dtype)
    for bins in (1, 4, 7):
        yield Sample(f"edges-bins{bins}", (edges, bins, -1.0, 1.0))


def _histc_errors():
    """bins, the range (given or the data's), x's dtype: each from the C++ layer and the fake kernel."""
    fn, op = ops.histc, "tinycuda::histc"
    x = torch.randn(10)
    cases = []
    for t in (x, torch.empty(10, device="meta")):
        cases += [ErrorCase(rf"{op}: bins must be > 0, got 0", fn, (t, 0)),
                  ErrorCase(rf"{op}: x must be float32, float16, bfloat16 or float64, got Long", fn, (t.long(),))]
    nan = torch.tensor([1.0, math.nan])
    return cases + [ErrorCase(rf"{op}: max must be larger than min, got min 2 and max 1", fn, (x, 10, 2, 1)),
                    ErrorCase(rf"{op}: range of \[1, inf\] is not finite", fn, (x, 10, 1, math.inf)),
                    ErrorCase(rf"{op}: range of \[nan, nan\] is not finite", fn, (nan,))]


def _bincount_samples(device, dtype):
    """x of values in [0, k) (its max + 1 against minlength: larger, smaller), weights of dtype (float32 stays,
    the others count in float64, as torch); empty x (int64 zeros of minlength); one element; other integer
    dtypes; a strided x; bins past CUDA's shared memory (counts: global atomics; weights: ranges of bins)."""
    x = torch.randint(0, 37, (1000,), device=device)
    w = randn((1000,), device, dtype)
    yield Sample("1000-weights", (x, w))
    yield Sample("1000-strided-weights", (view(x, "strided"), view(w, "strided")))
    yield Sample("1000-weights-minlength50", (x, w, 50))
    big = torch.randint(0, 20000, (4097,), device=device)
    yield Sample("4097-weights-bins20000", (big, randn((4097,), device, dtype)))
    yield Sample("empty-weights-minlength5", (x[:0], w[:0], 5))
    if dtype != torch.float32:  # the counts do not depend on dtype: once
        return
    yield Sample("1000", (x,))
    yield Sample("1000-minlength3", (x, None, 3))
    yield Sample("1000-minlength100", (x, None, 100))
    yield Sample("1", (torch.tensor([4], device=device),))
    yield Sample("empty", (x[:0],))
    yield Sample("4097-bins20000", (big,))
    for dt in (torch.uint8, torch.int32):
        yield Sample(f"1000-{str(dt)[6:]}", (x.to(dt),))


def _bincount_ref(x, weights=None, minlength=0):
    return torch.bincount(x, weights, minlength)


def _bincount_errors():
    """x's dtype and dims, minlength, the weights' shape, a negative value (the CPU names it): from the C++ layer
    and the fake kernel."""
    fn, op = ops.bincount, "tinycuda::bincount"
    cases = []
    for x in (torch.tensor([1, 2, 3]), torch.empty(3, dtype=torch.long, device="meta")):
        cases += [ErrorCase(rf"{op}: x must be an integer tensor \(uint8, int8, int16, int32 or int64\), got Float",
                            fn, (x.float(),)),
                  ErrorCase(rf"{op}: x must be 1-D, got 2 dims", fn, (x.view(1, 3),)),
                  ErrorCase(rf"{op}: minlength must be >= 0, got -1", fn, (x, None, -1)),
                  ErrorCase(rf"{op}: weights must be 1-D and as long as x \(3\), got shape \[2\]", fn,
                            (x, x[:2].float()))]
    return cases + [ErrorCase(rf"{op}: x\[2\] = -4 is negative", fn, (torch.tensor([1, 2, -4, -5]),))]


def _bincount_cuda_errors():
    """CUDA checks the range pass's minimum on the host: no device-side assert."""
    return [ErrorCase(r"tinycuda::bincount: x must be non-negative, got -5 \(its minimum\)", ops.bincount,
                      (torch.tensor([1, 2, -4, -5], device="cuda"),))]


def _histc_bench(sh, dt, dev):
    """n normals into 256 bins over [-4, 4]: the histogram kernel (a given range: no range pass)."""
    return [randn(sh, dev, dt), 256, -4.0, 4.0]


def _bincount_bench(sh, dt, dev):
    """(n, bins, weighted): n int64 values uniform in [0, bins), with weights of dt (weighted = 1) or without."""
    x = torch.randint(0, sh[1], (sh[0],), device=dev)
    return [x, randn((sh[0],), dev, dt)] if sh[2] else [x]


def _histogram_bytes(shape, mode, s):
    """What is read: x (s: its itemsize), and a bincount's float32 weights."""
    return "GB/s", shape[0] * (s + (4 if len(shape) == 3 and shape[2] else 0))


HISTC_SHAPES = {"small": [(2**24,)], "large": [(2**28,)], "all": [(2**20,), (2**24,), (2**26,), (2**28,)],
                "cpu": [(2**22,)]}
# (n, bins, weighted)
BINCOUNT_SHAPES = {"small": [(2**22, 1000, 0), (2**22, 1000, 1)], "large": [(2**26, 1000, 0), (2**26, 1000, 1)],
                   "all": [(2**22, 1000, 0), (2**22, 1000, 1), (2**26, 1000, 0), (2**26, 1000, 1),
                           (2**26, 100000, 0), (2**26, 100000, 1)],
                   "cpu": [(2**22, 1000, 0), (2**22, 1000, 1)]}


def _triangle_samples(name):
    """Square, wide, tall and batched matrices with diagonals on, above, below and past every edge; empty and
    one-element matrices; a 16-byte multiple row (CUDA: the vector instance) and odd rows (its word instance);
    strided, transposed and offset views."""
    def samples(device, dtype):
        x = randn((8, 8), device, dtype)
        yield Sample("8x8", (x,))
        yield Sample("5x33-strided", (view(randn((5, 33), device, dtype), "strided"), 1))
        for shape in ((0, 3), (1, 1), (5, 5), (7, 33), (33, 7), (3, 4, 5), (2, 3, 8, 16)):
            x = randn(shape, device, dtype)
            for d in (0, 2, -3):
                yield Sample(f"{_shape_id(shape)}-diag{d}", (x, d))
        x = randn((6, 9), device, dtype)
        for d in (9, 100, -6, -100):  # past the last column, past the first row: all or nothing kept
            yield Sample(f"6x9-diag{d}", (x, d))
        yield Sample("33x5-transposed", (randn((5, 33), device, dtype).t(), 2))
        yield Sample("9x7-offset", (view(randn((9, 7), device, dtype), "offset"), -2))
        yield Sample("4x12-diagonal-keyword", (randn((4, 12), device, dtype),), {"diagonal": 5})
    return samples


def _triangle_errors(name):
    fn, op = getattr(ops, name), f"tinycuda::{name}"
    return lambda: [ErrorCase(rf"{op}: x must have at least 2 dims, got 1", fn, (t,))
                    for t in (torch.randn(3), torch.empty(3, device="meta"))]


def _triangle_bench(sh, dt, dev):
    return [randn(sh, dev, dt), 0]


TRIANGLE_SHAPES = {"small": [(4096, 4096)], "large": [(16384, 16384)],
                   "all": [(4096, 4096), (8192, 8192), (16384, 16384), (64, 1024, 1024)], "cpu": [(2048, 2048)]}


# ---------------------------------------------------------------------------
# the losses family: mse_loss ... triplet_margin_loss, one entry each (the op list is the core's: tc_loss_op)

def _signs(shape, device, dtype):
    """+1 and -1 at random (margin_ranking_loss's and hinge_embedding_loss's targets)."""
    return (torch.randint(0, 2, shape, device=device) * 2 - 1).to(dtype)


def _log_probs(shape, device, dtype):
    """log-probabilities over the last dim (kl_div's input, and its log_target)."""
    return torch.log_softmax(torch.randn(shape, device=device), -1).to(dtype) if shape else randn(shape, device, dtype)


def _probs(shape, device, dtype):
    """probabilities over the last dim, none 0 (kl_div's target: t log t's gradient is NaN at 0, torch's too)."""
    return torch.softmax(torch.randn(shape, device=device), -1).to(dtype) if shape else torch.rand(shape, device=device).to(dtype) + 0.1


def _pair(first, second):
    """make(shapes, device, dtype, kw) for two tensors: first at shapes[0], second at shapes[-1]."""
    return lambda shapes, device, dtype, kw: (first(shapes[0], device, dtype), second(shapes[-1], device, dtype))


def _bce_operands(shapes, device, dtype, kw):
    """input (3 x randn), target in [0, 1); weight and pos_weight in [0.5, 1.5) at the shape their kwarg names."""
    x, t = randn(shapes[0], device, dtype, 3.0), torch.rand(shapes[0], device=device).to(dtype)
    for k in ("weight", "pos_weight"):
        if k in kw:
            kw[k] = (torch.rand(kw[k] or shapes[0], device=device) + 0.5).to(dtype)
    return x, t


def _kl_operands(shapes, device, dtype, kw):
    target = _log_probs if kw.get("log_target") else _probs
    return _log_probs(shapes[0], device, dtype), target(shapes[-1], device, dtype)


def _ranking_operands(shapes, device, dtype, kw):
    return randn(shapes[0], device, dtype), randn(shapes[1 % len(shapes)], device, dtype), _signs(shapes[-1], device,
                                                                                                 dtype)


def _triplet_operands(shapes, device, dtype, kw):
    return tuple(randn(shapes[0], device, dtype) for _ in range(3))


@dataclass
class _Loss:
    """What the table says of one loss: its torch reference (torch.nn.functional's, same arguments), its tensors
    (make(shapes, device, dtype, kw) -> the tensor arguments, the first at shapes[0]; it may fill tensors into kw:
    bce's weight and pos_weight, a kwarg given as their shape, None for the input's), its option variants (the
    samples' kwargs beyond reduction), its broadcasts (tuples of shapes, one a tensor argument), which arguments
    get a gradient (None: every float tensor), and its float32 tolerances."""
    ref: callable
    make: callable
    kwargs: tuple = ({},)
    broadcasts: tuple = ()
    grad: tuple = None
    reductions: tuple = ("mean", "sum", "none")
    rtol: float = 1e-5
    atol: float = 1e-5
    grad_rtol: float = None
    grad_atol: float = None


_PAIRS = (((5, 33), (33,)), ((5, 1), (5, 33)), ((4, 1, 3), (5, 1)))
LOSSES = {
    "mse_loss": _Loss(F.mse_loss, _pair(randn, randn), broadcasts=_PAIRS),
    "l1_loss": _Loss(F.l1_loss, _pair(randn, randn), broadcasts=_PAIRS),
    # beta 0 is torch's l1_loss
    "smooth_l1_loss": _Loss(F.smooth_l1_loss, _pair(randn, randn), ({}, {"beta": 0.5}, {"beta": 0.0}),
                            broadcasts=_PAIRS[:1]),
    "huber_loss": _Loss(F.huber_loss, _pair(randn, randn), ({}, {"delta": 0.5}, {"delta": 2.0}), broadcasts=_PAIRS[:1]),
    # weight and pos_weight: the input's shape, or broadcast to it (33 for 5 x 33, as a class weight; torch's
    # scale the loss in place, so not past it); the input's and target's gradients (torch refuses the weights')
    "binary_cross_entropy_with_logits": _Loss(
        F.binary_cross_entropy_with_logits, _bce_operands,
        ({}, {"weight": None, "pos_weight": None}), grad=(0, 1),
        broadcasts=(((5, 33), {"weight": (33,), "pos_weight": (33,)}), ((5, 33), {"weight": (5, 1), "pos_weight": (1,)}),
                    ((2, 4, 3), {"pos_weight": (4, 1), "weight": (3,)}))),
    "kl_div": _Loss(F.kl_div, _kl_operands, ({}, {"log_target": True}), broadcasts=_PAIRS[:2],
                    reductions=("mean", "sum", "none", "batchmean")),
    # one number of dims (torch's check), broadcast within it
    "margin_ranking_loss": _Loss(F.margin_ranking_loss, _ranking_operands, ({}, {"margin": 0.5}),
                                 broadcasts=(((5, 33), (5, 33), (5, 1)), ((5, 1), (1, 33), (5, 33)))),
    "hinge_embedding_loss": _Loss(F.hinge_embedding_loss, _pair(randn, _signs), ({}, {"margin": 0.5}),
                                  broadcasts=_PAIRS[:2], grad=(0,)),
    # rows of the last dim; p 0's gradient (none: torch's graph stops there) is test_losses'
    "triplet_margin_loss": _Loss(F.triplet_margin_loss, _triplet_operands,
                                 ({}, {"margin": 0.5, "p": 1.0}, {"swap": True}, {"p": 3.0, "eps": 1e-3})),
}

# (), an empty tensor, one element, odd lengths, 4097 (CUDA: several blocks; one dim, its last element past the
# vectors), rows, an empty dim, 3-D
LOSS_SHAPES = [(), (0,), (1,), (7,), (33,), (4097,), (5, 33), (3, 0), (2, 3, 129)]


def _loss_op_samples(name):
    """LOSS_SHAPES with each reduction (but the mean of nothing, NaN: test_losses'), contiguous and (the first
    reduction) strided; each option variant with reduction 'none', each broadcast forward only (as few kinds of
    call as give each its own opcheck: their other reductions and the broadcasts' gradients, summed to each
    operand's shape, are test_losses'); a tensor one element off the 16-byte grid (the scalar path on CUDA); the
    defaults."""
    u = LOSSES[name]

    def sample(sid, shapes, device, dtype, kw, layout="contig", grad=None):
        kw = dict(kw)
        tensors = u.make(shapes, device, dtype, kw)
        return Sample(sid + "".join(f"-{k}" if isinstance(v, torch.Tensor) else f"-{k}={v}" for k, v in kw.items()),
                      tuple(view(t, layout) for t in tensors), kw, u.grad if grad is None else grad, layout)

    def samples(device, dtype):
        for shape in LOSS_SHAPES:
            for i, red in enumerate(u.reductions):
                if math.prod(shape) == 0 and red in ("mean", "batchmean"):
                    continue
                for layout in ("contig", "strided") if i == 0 else ("contig",):
                    yield sample(f"{_shape_id(shape)}-{red}-{layout}", (shape,), device, dtype, {"reduction": red},
                                 layout)
        for kw in u.kwargs[1:]:
            for shape in ((33,), (5, 33)):
                yield sample(f"{_shape_id(shape)}-none", (shape,), device, dtype, {"reduction": "none", **kw})
        for shapes in u.broadcasts:  # forward only: the gradients summed over broadcast dims are test_losses'
            extra = shapes[-1] if isinstance(shapes[-1], dict) else {}
            shapes = shapes[:-1] if extra else shapes
            yield sample(f"{'-'.join(map(_shape_id, shapes))}-none", shapes, device, dtype,
                         {"reduction": "none", **extra}, grad=())
        yield sample("4097-offset-sum", ((4097,),), device, dtype, {"reduction": "sum"}, "offset")
        yield sample("5x33-defaults", ((5, 33),), device, dtype, {})
    return samples


def _loss_op_errors(name):
    """Shapes that do not agree (as the op's rule says), a reduction the op has not, an integer input, mixed
    dtypes and devices, the backward's grad_out of the wrong shape: each from the C++ layer and from the fake
    kernel (torch.compile, meta tensors); (the C++ layer) scalars out of range and the weights the op refuses."""
    def errors():
        fn, op, u = getattr(ops, name), f"tinycuda::{name}", LOSSES[name]
        bwd = getattr(torch.ops.tinycuda, name + "_backward")
        rule = ops.losses._rule(name)
        nargs = len(u.make(((3, 4),), "cpu", torch.float32, {}))
        cases = []
        for device in ("cpu", "meta"):
            args = [torch.randn(3, 4, device=device) for _ in range(nargs)]
            bad = list(args)
            if rule == "broadcast":
                bad[-1] = torch.randn(5, device=device)
                msg = r"input has shape \[3, 4\], target has shape \[5\], which do not broadcast"
            elif rule == "same_ndim":
                bad[-1] = torch.randn(4, device=device)
                msg = r"every tensor must have as many dims as input1: .*target has shape \[4\]"
            else:
                bad[1] = torch.randn(3, 5, device=device)
                first, second = (("input", "target") if rule == "target_as_input" else ("anchor", "positive"))
                msg = rf"{second} must have {first}'s shape \[3, 4\], got \[3, 5\]"
            reductions = "'none', 'mean', 'sum' or 'batchmean'" if name == "kl_div" else "'none', 'mean' or 'sum'"
            out = fn(*args, reduction="none")
            cases += [
                ErrorCase(rf"{op}: {msg}", fn, tuple(bad)),
                ErrorCase(rf"{op}: reduction must be {reductions}, got 'avg'", fn, tuple(args), {"reduction": "avg"}),
                ErrorCase(rf"{op}: \w+ must be float32, float16, bfloat16 or float64, got Long", fn,
                          (args[0].long(), *args[1:])),
                ErrorCase(rf"{op}: \w+ has dtype Double but \w+ has dtype Float", fn, (*args[:-1], args[-1].double())),
                ErrorCase(rf"{op}_backward: grad_out must have shape \[3, 4\], got \[4\]", bwd,
                          (out.new_empty(4), *args), {"reduction": "none"}) if rule != "rows" else
                ErrorCase(rf"{op}_backward: grad_out must have shape \[3\], got \[4\]", bwd,
                          (out.new_empty(4), *args), {"reduction": "none"}),
            ]
        x = torch.randn(3, 4)
        cases.append(ErrorCase(rf"{op}: \w+ is on meta but \w+ is on cpu", fn,
                               (x, *(torch.randn(3, 4, device="meta") for _ in range(nargs - 1)))))
        if name != "kl_div":
            cases.append(ErrorCase(rf"{op}: reduction must be 'none', 'mean' or 'sum', got 'batchmean'", fn,
                                   tuple(torch.randn(3, 4) for _ in range(nargs)), {"reduction": "batchmean"}))
        return cases + _loss_option_errors().get(name, lambda: [])()
    return errors


def _loss_option_errors():
    x, t = torch.randn(3, 4), torch.randn(3, 4)
    a = [torch.randn(3, 4) for _ in range(3)]
    bce = ops.binary_cross_entropy_with_logits
    return {
        "mse_loss": lambda: [ErrorCase(r"tinycuda::mse_loss: weight is not supported \(multiply the "
                                       r"reduction='none' loss by it\)", ops.mse_loss, (x, t), {"weight": t})],
        "smooth_l1_loss": lambda: [ErrorCase(r"tinycuda::smooth_l1_loss: beta must be >= 0, got -1", ops.smooth_l1_loss,
                                             (x, t), {"beta": -1.0})],
        "huber_loss": lambda: [ErrorCase(r"tinycuda::huber_loss: delta must be > 0, got 0", ops.huber_loss, (x, t),
                                         {"delta": 0.0})],
        "binary_cross_entropy_with_logits": lambda: [
            *(ErrorCase(r"tinycuda::binary_cross_entropy_with_logits: pos_weight has shape \[2, 1, 4\], which does "
                        r"not broadcast to input's shape \[3, 4\]", bce, (x.to(device), t.to(device)),
                        {"pos_weight": torch.ones(2, 1, 4, device=device)}) for device in ("cpu", "meta")),
            ErrorCase(r"tinycuda::binary_cross_entropy_with_logits: weight gets no gradient", bce,
                      (x.clone().requires_grad_(), t.sigmoid()), {"weight": t.clone().requires_grad_()}),
            ErrorCase(r"tinycuda::binary_cross_entropy_with_logits: pos_weight gets no gradient", bce,
                      (x.clone().requires_grad_(), t.sigmoid()), {"pos_weight": t[0].clone().requires_grad_()})],
        "kl_div": lambda: [ErrorCase(r"tinycuda::kl_div: reduction='batchmean' cannot go with size_average or reduce",
                                     ops.kl_div, (x, t), {"reduce": True, "reduction": "batchmean"})],
        "triplet_margin_loss": lambda: [
            ErrorCase(r"tinycuda::triplet_margin_loss: margin must be > 0, got 0", ops.triplet_margin_loss, a,
                      {"margin": 0.0}),
            ErrorCase(r"tinycuda::triplet_margin_loss: p must be finite .*got inf", ops.triplet_margin_loss, a,
                      {"p": math.inf})],
    }


def _loss_cuda_errors(name):
    def errors():
        fn, n = getattr(ops, name), len(LOSSES[name].make(((3, 4),), "cpu", torch.float32, {}))
        return [ErrorCase(rf"tinycuda::{name}: \w+ is on cpu but \w+ is on cuda:0", fn,
                          (torch.randn(3, 4, device="cuda"), *(torch.randn(3, 4) for _ in range(n - 1))))]
    return errors


def _loss_bench(name):
    """The op's tensors at the bench shape (rows x the last dim), reduction 'mean' (the default)."""
    return lambda sh, dt, dev: list(LOSSES[name].make((sh,), dev, dt, {}))


def _loss_bytes(reads, writes):
    """fwd reads `reads` tensors of the shape; bwd reads them again and writes `writes` gradients (those the
    bench asks for)."""
    def cost(shape, mode, s):
        n = math.prod(shape) * s
        fwd, bwd = reads * n, (reads + writes) * n
        return "GB/s", {"fwd": fwd, "bwd": bwd, "fwd+bwd": fwd + bwd}[mode]
    return cost


# 2^24, 2^26, 2^28 elements; the CPU's 2^22 (its target: within 2x torch's time on 2 cores)
LOSS_SHAPES_BENCH = {"small": [(4096, 4096)], "large": [(8192, 8192), (16384, 16384)],
                     "all": [(4096, 4096), (8192, 8192), (16384, 16384)], "cpu": [(2048, 2048)]}
# triplet_margin_loss: 256-wide embeddings, as many rows
TRIPLET_SHAPES_BENCH = {"small": [(65536, 256)], "large": [(262144, 256), (1048576, 256)],
                        "all": [(65536, 256), (262144, 256), (1048576, 256)], "cpu": [(16384, 256)]}
# reduction 'mean', backpropagated from 1 as loss.backward(); the input's gradient alone (a model's output against
# data), triplet_margin_loss's three (embeddings all learned)
LOSS_BENCH = {
    **{name: Bench(LOSS_SHAPES_BENCH, _loss_bench(name), _loss_bytes(2, 1), modes=("fwd", "fwd+bwd"), loss=True,
                   grad=(0,), fp32_tol=1e-3) for name in ("mse_loss", "binary_cross_entropy_with_logits")},
    "triplet_margin_loss": Bench(TRIPLET_SHAPES_BENCH, _loss_bench("triplet_margin_loss"), _loss_bytes(3, 3),
                                 modes=("fwd", "fwd+bwd"), loss=True, fp32_tol=1e-3),
}
# the sort family: sort, argsort, topk (one stable sort: tinycuda/sort.h)

def _sort_ref(x, dim=-1, descending=False, *, stable=False):
    """torch.sort, stable: ties (float16's, bfloat16's) in the order tinycuda's stable sort keeps them."""
    return torch.sort(x, dim=dim, descending=descending, stable=True)


def _argsort_ref(x, dim=-1, descending=False, *, stable=False):
    return torch.argsort(x, dim=dim, descending=descending, stable=True)


def _topk_ref(x, k, dim=-1, largest=True, sorted=True):
    """torch.topk with its ties settled as tinycuda settles them, to the lower index: the first k of a stable sort."""
    if x.dim() == 0:  # CPU torch gives x for k 0 or 1; CUDA torch leaves k = 0's value unwritten (2.11)
        return tuple(t.to(x.device) for t in torch.topk(x.cpu(), k, dim, largest, sorted))
    v, i = torch.sort(x, dim=dim, descending=largest, stable=True)
    return v.narrow(dim, 0, k), i.narrow(dim, 0, k)


# (shape, dim): 0-dim, empty (the sorted dim and another), one element, odd lengths, each dim of a matrix and of a
# 3-D tensor, and 2 x 5000 (CUDA: past the 4096-element block sort, the radix sort's rows of two tiles; float16's
# and bfloat16's 10000 values hold many ties)
SORT_CASES = [((), 0), ((0,), 0), ((1,), 0), ((7,), -1), ((5, 33), 1), ((5, 33), 0), ((3, 4, 5), 1), ((3, 0), 1),
              ((0, 4), 1), ((2, 5000), 1)]


def _sort_samples(name):
    """SORT_CASES ascending and descending, contiguous (the default order strided too); a transposed view; the
    defaults (x alone)."""
    def samples(device, dtype):
        for shape, dim in SORT_CASES:
            x = randn(shape, device, dtype)
            for descending in (False, True):
                for layout in ("contig",) if descending else ("contig", "strided"):
                    yield Sample(f"{_shape_id(shape)}-dim{dim}-descending{descending}-{layout}", (view(x, layout),),
                                 {"dim": dim, "descending": descending}, grad_out=layout)
        yield Sample("33x5-transposed-dim0", (randn((33, 5), device, dtype).t(),), {"dim": 0, "descending": True})
        yield Sample("5x33-defaults", (randn((5, 33), device, dtype),))
    return samples


# (shape, dim, k): 0-dim (k 0 and 1, as torch: itself either way), k = 0, 1, n, each dim, 2 x 5000 with k = 10
# (CUDA: the radix select, its k sorted by the block sort) and k = 3000 (2k > n: the radix sort's first k), and
# 2 x 9000 with k = 4500 (the select, its k sorted by the radix sort)
TOPK_CASES = [((), 0, 0), ((), -1, 1), ((0,), 0, 0), ((1,), 0, 1), ((7,), -1, 3), ((7,), 0, 7), ((7,), 0, 0),
              ((5, 33), 1, 5), ((5, 33), 0, 2), ((3, 4, 5), 1, 4), ((2, 5000), 1, 10), ((2, 5000), 1, 3000),
              ((2, 9000), 1, 4500)]


def _topk_samples(device, dtype):
    """TOPK_CASES largest and smallest, contiguous (largest strided too); a transposed view; the defaults."""
    for shape, dim, k in TOPK_CASES:
        x = randn(shape, device, dtype)
        for largest in (True, False):
            for layout in ("contig", "strided") if largest else ("contig",):
                yield Sample(f"{_shape_id(shape)}-dim{dim}-k{k}-largest{largest}-{layout}", (view(x, layout), k),
                             {"dim": dim, "largest": largest}, grad_out=layout)
    yield Sample("33x5-transposed-dim0-k4", (randn((33, 5), device, dtype).t(), 4), {"dim": 0, "largest": False})
    yield Sample("5x33-defaults-k3", (randn((5, 33), device, dtype), 3))


_SORT_DTYPES = "float32, float16, bfloat16, float64, int8, int16, int32, int64, uint8 or bool"


def _sort_errors(name):
    """dim out of range and a complex x, from the C++ layer and the fake kernel (meta tensors); topk: k out of
    [0, n] and a bool x; sort_backward: indices not int64, of another shape, n below k, and (the CPU kernel) an
    index out of range."""
    def errors():
        fn, op = getattr(ops, name), f"tinycuda::{name}"
        k = (2,) if name == "topk" else ()
        bwd = torch.ops.tinycuda.sort_backward
        cases = []
        for x in (torch.randn(3, 4), torch.empty(3, 4, device="meta")):
            cases += [ErrorCase(rf"{op}: dim 2 is out of range for a tensor of 2 dims", fn, (x, *k, 2)),
                      ErrorCase(rf"{op}: dim -3 is out of range for a tensor of 2 dims", fn, (x, *k), {"dim": -3})]
            if name == "topk":
                cases += [ErrorCase(rf"{op}: k must be in \[0, 4\] \(the size of dim 1\), got 5", fn, (x, 5)),
                          ErrorCase(rf"{op}: k must be in \[0, 3\] \(the size of dim 0\), got -1", fn, (x, -1, 0)),
                          ErrorCase(rf"{op}: x must not be bool \(as torch.topk\)", fn, (x > 0, 1))]
            else:
                cases.append(ErrorCase(rf"{op}: x must be {_SORT_DTYPES}, got ", fn, (x.to(torch.complex64),)))
            if name == "sort":
                g, i = x[:, :2], torch.zeros(3, 2, dtype=torch.long, device=x.device)
                cases += [ErrorCase(r"tinycuda::sort_backward: indices must be int64, got Float", bwd, (g, g, 1, 4)),
                          ErrorCase(r"tinycuda::sort_backward: indices has shape \[3, 4\] but grad_values has shape "
                                    r"\[3, 2\]", bwd, (g, x.long(), 1, 4)),
                          ErrorCase(r"tinycuda::sort_backward: n must be >= 2", bwd, (g, i, 1, 1))]
        if name == "sort":
            cases.append(ErrorCase(r"tinycuda::sort_backward: indices\[3\] = 4 is out of range \[0, 4\)", bwd,
                                   (torch.ones(2, 2), torch.tensor([[0, 1], [2, 4]]), 1, 4)))
        return cases
    return errors


def _distinct(shape, device, dtype):
    """Rows of distinct values (a random permutation of 0 .. n - 1, exact in float32 up to 2^24): no ties, so
    torch.topk's order among equal values (unspecified) cannot differ from tinycuda's."""
    n = shape[-1]
    return torch.rand(shape, device=device).argsort(-1).to(dtype) - n // 2


def _rows_bench(sh, dt, dev, make=randn):
    """A bench shape (rows, n, ...): x of (n,) for one row, else (rows, n)."""
    rows, n = sh[:2]
    return make((n,) if rows == 1 else (rows, n), dev, dt)


def _sort_bytes(shape, mode, s):
    """sort reads x and writes values and int64 indices: keys/s = n / ms (the table's ms)."""
    n = math.prod(shape)
    return "GB/s", n * (2 * s + 8)


def _topk_bytes(shape, mode, s):
    """topk reads x (its outputs are k a row)."""
    rows, n, k = shape
    return "GB/s", rows * (n * s + k * (s + 8))


# (rows, n): one long row (CUDA: the radix sort's chunks of many tiles), rows of 4096 (the block sort) and longer
# (the radix sort's rows of a few tiles)
SORT_SHAPES = {"small": [(1, 2**24), (1024, 4096)], "large": [(1, 2**28), (4096, 4096)],
               "all": [(1, 2**20), (1, 2**24), (1, 2**28), (65536, 128), (4096, 4096), (512, 65536)],
               "cpu": [(1, 2**22), (1024, 4096)]}
# (rows, n, k): one long row and rows of 32768 (the radix select), k = 10 and 1000
TOPK_SHAPES = {"small": [(1, 2**24, 10), (1, 2**24, 1000)],
               "large": [(1, 2**24, 10), (1, 2**24, 1000), (4096, 32768, 10), (4096, 32768, 1000)],
               "all": [(1, 2**24, 10), (1, 2**24, 1000), (4096, 32768, 10), (4096, 32768, 1000), (65536, 1024, 8)],
               "cpu": [(1, 2**22, 10), (1, 2**22, 1000), (1024, 4096, 10)]}


LINEAR_CASES = [  # (batch shape, in_features, out_features)
    ((0,), 7, 5), ((1,), 1, 1), ((7,), 33, 17), ((3, 11), 129, 65), ((1000,), 31, 7),
    ((2,), 4097, 3), ((), 9, 4), ((5,), 0, 3), ((5,), 3, 0), ((130,), 20, 129),
    ((12, 11), 64, 36),  # every extent a multiple of 4: the vectorized CUDA tile loads
]


def _linear_samples(device, dtype):
    for batch, k, n in LINEAR_CASES:
        x, w = randn((*batch, k), device, dtype), randn((n, k), device, dtype, 1 / max(k, 1) ** 0.5)
        b = randn(n, device, dtype)
        for bias in (True, False):
            yield from _layouts(lambda lay: ((view(x, lay), view(w, lay)) + ((b,) if bias else ()), {}),
                                f"{_shape_id(batch)}-{k}-{n}-{'bias' if bias else 'nobias'}")
    x, w, b = randn((2, 3, 7), device, dtype), randn((5, 7), device, dtype), randn(5, device, dtype)
    yield Sample("2x3x7-5-grad_weight", (x, w, b), grad=(1,))
    yield Sample("2x3x7-5-grad_x_bias", (x, w, b), grad=(0, 2))


def _linear_errors():
    x, w = torch.randn(4, 5), torch.randn(3, 5)
    f = ops.linear
    return [
        ErrorCase(r"tinycuda::linear: x's last dim \(6\) must equal weight's in_features \(5\)", f,
                  (torch.randn(4, 6), w)),
        ErrorCase(r"tinycuda::linear: weight must be 2-D", f, (x, torch.randn(5))),
        ErrorCase(r"tinycuda::linear: bias must have shape \[3\]", f, (x, w, torch.randn(4))),
        ErrorCase(r"tinycuda::linear: weight has dtype BFloat16 but x has dtype Float", f, (x, w.bfloat16())),
        ErrorCase(r"tinycuda::linear: x must be float32.*Long", f, (x.long(), w.long())),
    ]


def _linear_cuda_errors():
    return [ErrorCase(r"tinycuda::linear: weight is on cpu but x is on cuda", ops.linear,
                      (torch.randn(4, 5, device="cuda"), torch.randn(3, 5)))]


_ACTS = {"relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh")}


def _linear_act_ref(x, weight, bias=None, activation="gelu"):
    return _ACTS[activation](F.linear(x, weight, bias))


def _linear_act_samples(device, dtype):
    # linear's shapes that reach every CUDA path: empty, 1 x 1, tile remainders, K = 0, every extent a multiple of 4
    cases = [((0,), 7, 5), ((1,), 1, 1), ((7,), 33, 17), ((3, 11), 129, 65), ((5,), 0, 3), ((130,), 20, 129),
             ((12, 11), 64, 36)]
    for i, (batch, k, n) in enumerate(cases):
        x, w = randn((*batch, k), device, dtype), randn((n, k), device, dtype, 1 / max(k, 1) ** 0.5)
        b = randn(n, device, dtype)
        act = list(_ACTS)[i % 3]
        yield from _layouts(lambda lay: ((view(x, lay), view(w, lay), b), {"activation": act}),
                            f"{_shape_id(batch)}-{k}-{n}-{act}")
        yield Sample(f"{_shape_id(batch)}-{k}-{n}-{act}-nobias", (x, w), {"activation": act})


def _linear_act_errors():
    x, w = torch.randn(4, 5), torch.randn(3, 5)
    f = ops.linear_act
    return [
        ErrorCase(r"tinycuda::linear_act: activation must be 'relu', 'gelu' or 'gelu_tanh', got 'tanh'", f,
                  (x, w), {"activation": "tanh"}),
        ErrorCase(r"tinycuda::linear_act: x's last dim \(6\) must equal weight's in_features \(5\)", f,
                  (torch.randn(4, 6), w)),
        ErrorCase(r"tinycuda::linear_act: bias must have shape \[3\]", f, (x, w, torch.randn(4))),
    ]


# (a shape, b shape): 2-D and batched, broadcast batches, vectors, empty and
# unit dims, K past the 4097-term mark, tile remainders (the CUDA tiles are
# 128 x 128 and 128 x 256)
MATMUL_CASES = [
    ((7, 33), (33, 17)), ((1, 1), (1, 1)), ((0, 5), (5, 3)), ((4, 0), (0, 3)), ((5, 3), (3, 0)),
    ((130, 20), (20, 129)), ((12, 64), (64, 36)), ((65, 4097), (4097, 3)), ((1, 40), (40, 24)),
    ((3, 11, 9), (3, 9, 5)), ((3, 11, 9), (9, 5)), ((11, 9), (3, 9, 5)), ((1, 11, 9), (4, 9, 5)),
    ((2, 16, 24), (1, 24, 8)), ((2, 3, 5, 8), (8, 6)), ((2, 1, 5, 8), (3, 8, 6)),
    ((9,), (9, 4)), ((4, 9), (9,)), ((9,), (9,)), ((2, 5, 9), (9,)),
]


def _transposed(t, on):
    """t's values as the transpose (last two dims) of a contiguous tensor, when `on`."""
    return t.mT.contiguous().mT if on and t.dim() >= 2 else t


def _matmul_samples(device, dtype):
    for sa, sb in MATMUL_CASES:
        a, b = randn(sa, device, dtype), randn(sb, device, dtype, 1 / max(sa[-1], 1) ** 0.5)
        name = f"{_shape_id(sa)}@{_shape_id(sb)}"
        for ta, tb in ((0, 0), (1, 0), (0, 1), (1, 1)):  # torch's NN, TN, NT, TT
            yield Sample(f"{name}-{'NT'[ta]}{'NT'[tb]}", (_transposed(a, ta), _transposed(b, tb)))
        yield Sample(f"{name}-strided", (view(a, "strided"), view(b, "strided")), grad_out="strided")
    a, b = randn((3, 6, 5), device, dtype), randn((3, 5, 4), device, dtype)
    yield Sample("3x6x5@3x5x4-grad_b", (a, b), grad=(1,))
    yield Sample("3x6x5@3x5x4-batch_view", (a[::2], b.transpose(0, 1).contiguous().transpose(0, 1)[1:]))


def _matmul_errors():
    f = ops.matmul
    a = torch.randn(3, 5)
    return [
        ErrorCase(r"tinycuda::matmul: a's last dim \(5\) must equal b's second to last \(4\)", f,
                  (a, torch.randn(4, 2))),
        ErrorCase(r"tinycuda::matmul: batch sizes 2 and 3 do not broadcast", f,
                  (torch.randn(2, 3, 4), torch.randn(3, 4, 5))),
        ErrorCase(r"tinycuda::matmul: batch dims \(2, 3\) and \(3, 2\) do not broadcast", f,
                  (torch.randn(2, 3, 4, 5), torch.randn(3, 2, 5, 6))),
        ErrorCase(r"tinycuda::matmul: a and b need at least 1 dim each", f, (torch.tensor(2.0), a)),
        ErrorCase(r"tinycuda::matmul: b has dtype BFloat16 but a has dtype Float", f, (a, a.T.bfloat16())),
        ErrorCase(r"tinycuda::matmul: a must be float32.*Long", f, (a.long(), a.T.long())),
        ErrorCase(r"tinycuda::matmul: a must be 2-D \[M, K\] or 3-D", torch.ops.tinycuda.matmul,
                  (torch.randn(2, 2, 3, 5), torch.randn(5, 2))),
        ErrorCase(r"tinycuda::matmul: algo must be 0 \(auto\)", torch.ops.tinycuda.matmul, (a, a.T), {"algo": 9}),
    ]


def _matmul_cuda_errors():
    return [ErrorCase(r"tinycuda::matmul: b is on cpu but a is on cuda", ops.matmul,
                      (torch.randn(4, 5, device="cuda"), torch.randn(5, 3)))]


# ---------------------------------------------------------------------------
# layer_norm, rms_norm

# (x shape, normalized_shape). On CUDA: 16-byte vectors with the row in
# registers (1024, 8192 and the many-row shapes), single elements in registers
# (odd widths up to 4096), the loop path for longer rows (10000: vectors;
# 4097: single elements); one and several row groups a block; empty tensors.
NORM_CASES = [
    ((0, 5), (5,)), ((4, 0), (0,)), ((1, 1), (1,)), ((7, 3), (3,)), ((5, 33), (33,)), ((4, 1023), (1023,)),
    ((3, 1024), (1024,)), ((2, 4097), (4097,)), ((2, 8192), (8192,)), ((2, 10000), (10000,)),
    ((2, 3, 4, 5), (4, 5)), ((9,), (9,)), ((100, 2048), (2048,)), ((300, 64), (64,)),
    # 3 x 2^k 16-byte vectors of 16-bit elements: groups of 2^k threads holding 3 each on CUDA (norm.cuh's
    # thirds), from 8 threads (192) through a warp (GPT-2's 768; 37 rows: a block's 16 groups, then 5) to a block
    ((5, 192), (192,)), ((37, 768), (768,)), ((3, 12288), (12288,)),
]


def _norm_x(shape, device, dtype):
    return randn(shape, device, dtype, 2, 0.5)


def _misaligned_rows(device, dtype):
    """33 rows of 64 starting one element past the 16-byte grid: the single-element path on CUDA."""
    return view(randn((33, 64), device, dtype), "offset")


def _layer_norm_samples(device, dtype):
    for shape, ns in NORM_CASES:
        x = _norm_x(shape, device, dtype)
        w, b = randn(ns, device, dtype, 0.5, 1), randn(ns, device, dtype)
        for affine in ("weight+bias", "weight", "bias", "none"):
            wa, ba = (w if "weight" in affine else None), (b if "bias" in affine else None)
            yield from _layouts(lambda lay: ((view(x, lay), ns, wa if wa is None else view(wa, lay),
                                              ba if ba is None else view(ba, lay)), {}),
                                f"{_shape_id(shape)}-{affine}")
    w, b = randn(64, device, dtype), randn(64, device, dtype)
    yield Sample("33x64-misaligned", (_misaligned_rows(device, dtype), (64,), w, b))
    x = _norm_x((3, 4, 5), device, dtype)
    yield Sample("3x4x5-int_shape-eps0.1", (x, 5), {"eps": 0.1})
    w, b = randn((4, 5), device, dtype, 0.5, 1), randn((4, 5), device, dtype)
    yield Sample("3x4x5-grad_x", (x, (4, 5), w, b), grad=(0,))
    yield Sample("3x4x5-grad_weight_bias", (x, (4, 5), w, b), grad=(2, 3))


def _shape(normalized_shape):
    """torch's F.layer_norm and F.rms_norm want a sequence; tinycuda takes an int too."""
    return (normalized_shape,) if isinstance(normalized_shape, int) else normalized_shape


def _layer_norm_ref(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    return F.layer_norm(x, _shape(normalized_shape), weight, bias, eps)


def _rms_norm_ref(x, normalized_shape, weight=None, eps=None, offset=0.0, casting_mode="gemma"):
    """torch's F.rms_norm, or with the options as Hugging Face's modules compute them (rms_norm.h)."""
    if offset == 0.0 and casting_mode == "gemma":
        return F.rms_norm(x, _shape(normalized_shape), weight, eps)
    dims = tuple(range(-len(_shape(normalized_shape)), 0))
    xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    eps = torch.finfo(xf.dtype).eps if eps is None else eps
    rstd = torch.rsqrt(xf.square().mean(dims, keepdim=True) + eps)
    if casting_mode == "gemma":  # Gemma: all in float32, rounded once
        return (xf * rstd * (offset + weight.to(xf.dtype))).to(x.dtype)
    if casting_mode == "none":
        rstd = rstd.to(x.dtype)
    return (xf * rstd).to(x.dtype) * (offset + weight)  # LLaMA: weight * hidden.to(input_dtype)


def _layer_norm_errors():
    x, f = torch.randn(3, 4), ops.layer_norm
    y, mean, rstd = torch.ops.tinycuda.layer_norm(x, [4], None, None, 1e-5)
    bwd, mask = torch.ops.tinycuda.layer_norm_backward, [True, False, False]
    return [
        ErrorCase(r"tinycuda::layer_norm: normalized_shape \[5\] must equal the last dims of x, whose shape is "
                  r"\[3, 4\]", f, (x, 5)),
        ErrorCase(r"tinycuda::layer_norm: normalized_shape must have at least 1 dim", f, (x, ())),
        ErrorCase(r"tinycuda::layer_norm: weight must have shape \[4\] \(normalized_shape\), got \[3\]", f,
                  (x, 4, torch.randn(3))),
        ErrorCase(r"tinycuda::layer_norm: bias has dtype Half but x has dtype Float", f,
                  (x, 4, None, torch.randn(4, dtype=torch.half))),
        ErrorCase(r"tinycuda::layer_norm: x must be float32.*Long", f, (torch.ones(3, 4, dtype=torch.long), 4)),
        ErrorCase(r"tinycuda::layer_norm_backward: grad_out has shape \[3, 5\]", bwd,
                  (torch.randn(3, 5), x, [4], mean, rstd, None, mask)),
        ErrorCase(r"tinycuda::layer_norm_backward: mean must be Float for x of dtype Float, got Double", bwd,
                  (y, x, [4], mean.double(), rstd, None, mask)),
        ErrorCase(r"tinycuda::layer_norm_backward: rstd must have 3 elements \(one per row\), got 2", bwd,
                  (y, x, [4], mean, rstd[:2], None, mask)),
    ]


# One column is degenerate for rms_norm: y = sign(x) * w, and grad_x is pure
# cancellation (rstd * wg * eps / (x^2 + eps)), so the half-precision rule
# would compare rounding noise; two columns instead.
RMS_NORM_CASES = [((1, 2), (2,)) if case == ((1, 1), (1,)) else case for case in NORM_CASES]


def _rms_norm_samples(device, dtype):
    # An explicit eps: torch's default depends on the dtype, so the float64
    # reference would use another one (the default: one sample, where the
    # difference, 1e-7 of mean(x^2) ~ 1, is below every tolerance).
    for shape, ns in RMS_NORM_CASES:
        x, w = _norm_x(shape, device, dtype), randn(ns, device, dtype, 0.5, 1)
        for weight in (True, False):
            yield from _layouts(lambda lay: ((view(x, lay), ns, view(w, lay) if weight else None, 1e-6), {}),
                                f"{_shape_id(shape)}-{'weight' if weight else 'no_weight'}")
    yield Sample("33x64-misaligned", (_misaligned_rows(device, dtype), (64,), randn(64, device, dtype), 1e-6))
    x, w = _norm_x((3, 4, 5), device, dtype), randn((4, 5), device, dtype, 0.5, 1)
    yield Sample("3x4x5-int_shape-eps0.1", (x, 5), {"eps": 0.1})
    yield Sample("3x4x5-default_eps", (x, (4, 5), w))
    yield Sample("3x4x5-grad_x", (x, (4, 5), w, 1e-6), grad=(0,))
    yield Sample("3x4x5-grad_weight", (x, (4, 5), w, 1e-6), grad=(2,))
    # Hugging Face's casting modes and Gemma's offset (weight near 0: 1 + weight near 1)
    for shape, ns in (((5, 33), (33,)), ((100, 2048), (2048,)), ((2, 10000), (10000,))):
        x, w = _norm_x(shape, device, dtype), randn(ns, device, dtype, 0.1)
        for kw in ({"offset": 1.0}, {"offset": 1.0, "casting_mode": "llama"}, {"casting_mode": "llama"},
                   {"casting_mode": "none"}, {"offset": 1.0, "casting_mode": "none"}):
            yield Sample(f"{_shape_id(shape)}-" + "-".join(f"{k}_{v}" for k, v in kw.items()),
                         (x, ns, w if "offset" in kw else w + 1, 1e-6), kw)


def _rms_norm_errors():
    x, f = torch.randn(3, 4), ops.rms_norm
    y, rstd = torch.ops.tinycuda.rms_norm(x, [4], None, None)
    bwd = torch.ops.tinycuda.rms_norm_backward
    return [
        ErrorCase(r"tinycuda::rms_norm: normalized_shape \[2, 4\] must equal the last dims of x, whose shape is "
                  r"\[3, 4\]", f, (x, (2, 4))),
        ErrorCase(r"tinycuda::rms_norm: weight must have shape \[4\] \(normalized_shape\), got \[1, 4\]", f,
                  (x, 4, torch.randn(1, 4))),
        ErrorCase(r"tinycuda::rms_norm: weight has dtype BFloat16 but x has dtype Float", f,
                  (x, 4, torch.randn(4, dtype=torch.bfloat16))),
        ErrorCase(r"tinycuda::rms_norm_backward: rstd must be Float for x of dtype Float, got Half", bwd,
                  (y, x, [4], rstd.half(), None, [True, False])),
        ErrorCase(r"tinycuda::rms_norm_backward: x has dtype Double but grad_out has dtype Float", bwd,
                  (y, x.double(), [4], rstd, None, [True, False])),
        ErrorCase(r"tinycuda::rms_norm: casting_mode must be 'gemma', 'llama' or 'none', got 'float'", f,
                  (x, 4, torch.randn(4)), {"casting_mode": "float"}),
        ErrorCase(r"tinycuda::rms_norm: offset 1 needs a weight", f, (x, 4), {"offset": 1.0}),
        ErrorCase(r"tinycuda::rms_norm_: x must be contiguous to be normalized in place", ops.rms_norm_,
                  (torch.randn(4, 3).t(), 4)),
        ErrorCase(r"tinycuda::rms_norm_: x requires grad; the in-place form has no backward", ops.rms_norm_,
                  (torch.randn(3, 4, requires_grad=True), 4)),
    ]


def _rms_norm_inplace(x, *args, **kwargs):
    """rms_norm_ on a copy of x: the generic tests hand the reference the same tensors."""
    return ops.rms_norm_(x.detach().clone(), *args, **kwargs)


def _rms_norm_inplace_samples(device, dtype):
    """rms_norm's forward samples with contiguous x (in place needs it)."""
    for sample in _rms_norm_samples(device, dtype):
        if sample.args[0].is_contiguous():
            yield Sample(sample.name, sample.args, sample.kwargs, grad=())


def _add_rms_norm_samples(device, dtype):
    # rms_norm's shapes (explicit eps, as there), normalized over weight's dims
    # or, with no weight, the last dim; the residual in every layout
    for shape, ns in RMS_NORM_CASES:
        x, r, w = _norm_x(shape, device, dtype), randn(shape, device, dtype), randn(ns, device, dtype, 0.5, 1)
        for weight in (True, False):
            yield from _layouts(lambda lay: ((view(x, lay), view(r, lay), view(w, lay) if weight else None, 1e-6),
                                             {}), f"{_shape_id(shape)}-{'weight' if weight else 'no_weight'}")
    x, r = _misaligned_rows(device, dtype), randn((33, 64), device, dtype)
    yield Sample("33x64-misaligned", (x, r, randn(64, device, dtype), 1e-6))
    x, r, w = _norm_x((3, 4, 5), device, dtype), randn((3, 4, 5), device, dtype), randn((4, 5), device, dtype, 0.5, 1)
    yield Sample("3x4x5-default_eps", (x, r, w))
    yield Sample("3x4x5-grad_residual", (x, r, w, 1e-6), grad=(1,))
    yield Sample("3x4x5-grad_weight", (x, r, w, 1e-6), grad=(2,))


def _add_rms_norm_ref(x, residual, weight=None, eps=None):
    s = x + residual
    return F.rms_norm(s, weight.shape if weight is not None else s.shape[-1:], weight, eps), s


def _add_rms_norm_errors():
    x, f = torch.randn(3, 4), ops.add_rms_norm
    y, s, rstd = torch.ops.tinycuda.add_rms_norm(x, x, [4], None, None)
    bwd = torch.ops.tinycuda.add_rms_norm_backward
    return [
        ErrorCase(r"tinycuda::add_rms_norm: residual has shape \[3, 5\] but x has shape \[3, 4\]", f,
                  (x, torch.randn(3, 5))),
        ErrorCase(r"tinycuda::add_rms_norm: residual has dtype Half but x has dtype Float", f,
                  (x, x.half())),
        ErrorCase(r"tinycuda::add_rms_norm: weight must have shape \[4\] \(normalized_shape\), got \[3\]",
                  torch.ops.tinycuda.add_rms_norm, (x, x, [4], torch.randn(3), None)),
        ErrorCase(r"tinycuda::add_rms_norm: normalized_shape \[2, 4\] must equal the last dims of x", f,
                  (x, x, torch.randn(2, 4))),
        ErrorCase(r"tinycuda::add_rms_norm_backward: grad_residual_out has shape \[3, 5\]", bwd,
                  (y, torch.randn(3, 5), s, [4], rstd, None, [True, False])),
        ErrorCase(r"tinycuda::add_rms_norm_backward: rstd must have 3 elements \(one per row\), got 2", bwd,
                  (y, None, s, [4], rstd[:2], None, [True, False])),
    ]


def _add_layer_norm_samples(device, dtype):
    # layer_norm's shapes and affine options; the residual in every layout
    for shape, ns in NORM_CASES:
        x, r = _norm_x(shape, device, dtype), randn(shape, device, dtype)
        w, b = randn(ns, device, dtype, 0.5, 1), randn(ns, device, dtype)
        for affine in ("weight+bias", "none"):
            wa, ba = (w, b) if affine != "none" else (None, None)
            yield from _layouts(lambda lay: ((view(x, lay), view(r, lay), ns, wa if wa is None else view(wa, lay),
                                              ba if ba is None else view(ba, lay)), {}),
                                f"{_shape_id(shape)}-{affine}")
    x, r = _misaligned_rows(device, dtype), randn((33, 64), device, dtype)
    yield Sample("33x64-misaligned", (x, r, (64,), randn(64, device, dtype), randn(64, device, dtype)))
    x, r = _norm_x((3, 4, 5), device, dtype), randn((3, 4, 5), device, dtype)
    w, b = randn((4, 5), device, dtype, 0.5, 1), randn((4, 5), device, dtype)
    yield Sample("3x4x5-eps0.1", (x, r, (4, 5), w, b), {"eps": 0.1})
    yield Sample("3x4x5-grad_residual", (x, r, (4, 5), w, b), grad=(1,))
    yield Sample("3x4x5-grad_bias", (x, r, (4, 5), w, b), grad=(4,))


def _add_layer_norm_ref(x, residual, normalized_shape, weight=None, bias=None, eps=1e-5):
    s = x + residual
    return F.layer_norm(s, normalized_shape, weight, bias, eps), s


def _add_layer_norm_errors():
    x, f = torch.randn(3, 4), ops.add_layer_norm
    y, s, mean, rstd = torch.ops.tinycuda.add_layer_norm(x, x, [4])
    bwd = torch.ops.tinycuda.add_layer_norm_backward
    return [
        ErrorCase(r"tinycuda::add_layer_norm: residual has shape \[3, 5\] but x has shape \[3, 4\]", f,
                  (x, torch.randn(3, 5), 4)),
        ErrorCase(r"tinycuda::add_layer_norm: residual has dtype Half but x has dtype Float", f, (x, x.half(), 4)),
        ErrorCase(r"tinycuda::add_layer_norm: bias must have shape \[4\] \(normalized_shape\), got \[3\]",
                  torch.ops.tinycuda.add_layer_norm, (x, x, [4], None, torch.randn(3))),
        ErrorCase(r"tinycuda::add_layer_norm: normalized_shape \[2, 4\] must equal the last dims of x", f,
                  (x, x, (2, 4))),
        ErrorCase(r"tinycuda::add_layer_norm_backward: grad_residual_out has shape \[3, 5\]", bwd,
                  (y, torch.randn(3, 5), s, [4], mean, rstd, None, [True, False, False])),
        ErrorCase(r"tinycuda::add_layer_norm_backward: mean must have 3 elements \(one per row\), got 2", bwd,
                  (y, None, s, [4], mean[:2], rstd, None, [True, False, False])),
    ]


def _add_layer_norm_bench(sh, dt, dev):
    return [randn(sh, dev, dt), randn(sh, dev, dt), sh[-1:], randn(sh[-1], dev, dt, 0.1, 1),
            randn(sh[-1], dev, dt, 0.1)]


# ---------------------------------------------------------------------------
# cross_entropy, fused_linear_cross_entropy

CE_SHAPES = [(1, 1), (5, 1), (3, 7), (33, 5), (4, 1023), (3, 1025), (3, 4097), (2, 8193), (2, 32000),
             (2, 50257), (1, 128256)]
REDUCTIONS = ("mean", "sum", "none")


def _cross_entropy_samples(device, dtype):
    for shape in CE_SHAPES:
        x, t = randn(shape, device, dtype, 3), targets(*shape, device)
        for red in REDUCTIONS:
            yield Sample(f"{_shape_id(shape)}-{red}", (x, t), {"reduction": red})
    for shape in ((9, 7), (3, 4097), (2, 50257)):
        x, t = randn(shape, device, dtype, 3), targets(*shape, device, ignored=(0,))
        for red in REDUCTIONS:
            for eps in (0.1, 1.0):
                yield Sample(f"{_shape_id(shape)}-{red}-smoothing{eps}", (x, t),
                             {"reduction": red, "label_smoothing": eps})
    for shape in ((6, 33), (4, 4097)):  # strided logits; 3, an in-range class, is the ignore_index
        x, t = randn(shape, device, dtype, 3), targets(*shape, device, ignore_index=3, ignored=(0, 2))
        t[1] = 4
        for red in REDUCTIONS:
            yield Sample(f"{_shape_id(shape)}-strided-ignore3-{red}", (view(x, "strided"), t),
                         {"ignore_index": 3, "reduction": red, "label_smoothing": 0.2}, grad_out="strided")
    x, t = randn(11, device, dtype, 3), torch.tensor(4, device=device)  # 1-D logits, a 0-dim target
    for red in REDUCTIONS:
        yield Sample(f"11-one_dim-{red}", (x, t), {"reduction": red})
    # Gemma 2's softcap and PaLM's z-loss, with smoothing and an ignored row; logits up to ~3 x softcap
    for shape in ((9, 7), (3, 4097), (2, 50257)):
        x, t = randn(shape, device, dtype, 10), targets(*shape, device, ignored=(0,))
        for red in REDUCTIONS:
            for kw in ({"softcap": 3.0}, {"lse_square_scale": 1e-2, "return_z_loss": True},
                       {"softcap": 5.0, "lse_square_scale": 1e-3, "label_smoothing": 0.1}):
                yield Sample(f"{_shape_id(shape)}-{red}-" + "-".join(f"{k}{v}" for k, v in kw.items()), (x, t),
                             {"reduction": red, **kw})
    yield from _weighted_cross_entropy_samples(device, dtype)
    yield from _token_accuracy_samples(device, dtype)


def accuracy_targets(x, ignored=(0,)):
    """Targets for x [rows >= 4, classes] with every case of token accuracy: row 1 a tie for
    the max whose later index is the target (wrong: argmax is the first), row 2 a tie at its
    target's index first (right), row 3 and every other odd row right, the rest random, the
    rows `ignored` -100. x is changed in place (the ties)."""
    rows, classes = x.shape
    t = torch.randint(0, classes, (rows,), device=x.device)
    top = x.amax(-1) + 1
    for r, (first, later) in ((1, (0, classes - 1)), (2, (classes // 2, classes - 1))):
        x[r, first] = x[r, later] = top[r]
        t[r] = later if r == 1 else first
    t[3::2] = x[3::2].argmax(-1)
    t[list(ignored)] = -100
    return t


def _token_accuracy_samples(device, dtype):
    """return_token_accuracy (Liger-Kernel's): ties, ignored rows, every reduction, with
    softcap and z-loss, with class weights; 1-D logits."""
    for shape in ((9, 7), (4, 4097)):
        x = randn(shape, device, dtype, 3)
        t = accuracy_targets(x)
        for red in REDUCTIONS:
            for kw in ({}, {"softcap": 3.0, "lse_square_scale": 1e-2, "return_z_loss": True},
                       {"weight": class_weights(shape[1], device, dtype), "label_smoothing": 0.1}):
                name = "-".join(f"{k}{v}" for k, v in kw.items() if k != "weight") + ("-weight" if kw else "")
                yield Sample(f"{_shape_id(shape)}-{red}-token_accuracy{'-' + name if kw else ''}", (x, t),
                             {"reduction": red, "return_token_accuracy": True, **kw})
    x = randn(11, device, dtype, 3)
    for red in ("mean", "none"):
        yield Sample(f"11-one_dim-{red}-token_accuracy", (x, x.argmax()), {"reduction": red,
                                                                           "return_token_accuracy": True})


def class_weights(classes, device, dtype, zero=()):
    """Class weights in [0.5, 1.5) (0 at the classes `zero`), rounded to dtype."""
    w = torch.rand(classes, device=device) + 0.5
    for c in zero:
        w[c] = 0
    return w.to(dtype)


def _weighted_cross_entropy_samples(device, dtype):
    """torch's class weights, with an ignored row, smoothing and each reduction;
    then with softcap and z-loss (the z terms unweighted, as Liger's)."""
    for shape in ((1, 1), (5, 1), (9, 7), (33, 5), (3, 1025), (2, 8193)):
        x, t = randn(shape, device, dtype, 3), targets(*shape, device, ignored=(0,) if shape[0] > 1 else ())
        w = class_weights(shape[1], device, dtype)
        for red in REDUCTIONS:
            for eps in (0.0, 0.1):
                yield Sample(f"{_shape_id(shape)}-weight-{red}-smoothing{eps}", (x, t),
                             {"reduction": red, "label_smoothing": eps, "weight": w})
    # a class of weight 0; strided logits with an in-range ignore_index; full smoothing
    x, t = randn((6, 33), device, dtype, 3), targets(6, 33, device, ignore_index=3, ignored=(0, 2))
    t[1], t[4] = 4, 5
    w = class_weights(33, device, dtype, zero=(5,))
    for red in REDUCTIONS:
        yield Sample(f"6x33-weight-zero-strided-ignore3-{red}", (view(x, "strided"), t),
                     {"ignore_index": 3, "reduction": red, "label_smoothing": 0.2, "weight": w}, grad_out="strided")
        yield Sample(f"6x33-weight-smoothing1.0-{red}", (x, t), {"reduction": red, "label_smoothing": 1.0, "weight": w})
    x, t = randn(11, device, dtype, 3), torch.tensor(4, device=device)  # 1-D logits, a 0-dim target
    yield Sample("11-one_dim-weight", (x, t), {"weight": class_weights(11, device, dtype)})
    for shape in ((9, 7), (3, 4097)):
        x, t = randn(shape, device, dtype, 10), targets(*shape, device, ignored=(0,))
        w = class_weights(shape[1], device, dtype)
        for red in REDUCTIONS:
            for kw in ({"softcap": 3.0}, {"lse_square_scale": 1e-2, "return_z_loss": True},
                       {"softcap": 5.0, "lse_square_scale": 1e-3, "label_smoothing": 0.1}):
                yield Sample(f"{_shape_id(shape)}-weight-{red}-" + "-".join(f"{k}{v}" for k, v in kw.items()),
                             (x, t), {"reduction": red, "weight": w, **kw})


def _cross_entropy_ref(logits, target, ignore_index=-100, reduction="mean", label_smoothing=0.0, softcap=None,
                       lse_square_scale=0.0, return_z_loss=False, weight=None, return_token_accuracy=False):
    """F.cross_entropy, or with softcap and z-loss as Liger-Kernel computes them (cross_entropy.h): with
    class weights the z terms are not weighted, and 'mean' divides them by the count of rows not ignored.
    return_token_accuracy: then (loss, [z_loss,] token_accuracy), token_accuracy_ref's."""
    if return_token_accuracy:
        loss = _cross_entropy_ref(logits, target, ignore_index, reduction, label_smoothing, softcap,
                                  lse_square_scale, return_z_loss, weight)
        return (*outputs(loss), token_accuracy_ref(logits, target, ignore_index, reduction))
    weight = weight if weight is None else weight.to(logits.dtype)  # the float64 reference: weights upcast too
    kw = dict(ignore_index=ignore_index, label_smoothing=label_smoothing, weight=weight)
    if not softcap and not lse_square_scale and not return_z_loss:
        return F.cross_entropy(logits, target, reduction=reduction, **kw)
    x = softcap * torch.tanh(logits / softcap) if softcap else logits
    valid = target != ignore_index
    z = lse_square_scale * torch.logsumexp(x.float() if x.dtype in (torch.float16, torch.bfloat16) else x,
                                            -1).square() * valid
    ce = F.cross_entropy(x, target, reduction="none", **kw)
    loss = ce + z
    if reduction != "none":
        div = valid.sum() if reduction == "mean" else 1
        if weight is not None and reduction == "mean":  # torch's W: the weights of the targets not ignored
            loss = ce.sum() / weight[target[valid]].sum() + z.sum() / div
        else:
            loss = loss.sum() / div
        z = z.sum() / div
    loss, z = loss.to(logits.dtype), z.to(logits.dtype)
    return (loss, z.detach()) if return_z_loss else loss  # z_loss is for logging: no gradient of its own


def token_accuracy_ref(logits, target, ignore_index=-100, reduction="mean"):
    """Liger-Kernel's token accuracy, in float32: per row for 'none' ((argmax == target), 0 where ignored),
    else (logits.argmax(-1) == target)[target != ignore_index].float().mean() (NaN when all are ignored)."""
    valid = target != ignore_index
    correct = ((logits.argmax(-1) == target) & valid).float()
    return correct if reduction == "none" else correct.sum() / valid.sum()


def _cross_entropy_errors():
    x, t, f, op = torch.randn(3, 4), torch.tensor([0, 1, 2]), ops.cross_entropy, torch.ops.tinycuda.cross_entropy
    ce = "tinycuda::cross_entropy"
    return [
        ErrorCase(rf"{ce}: target must be int64 class indices, got Int", f, (x, t.int())),
        ErrorCase(rf"{ce}: target must have shape \[3\] \(logits's rows\), got \[2\]", f, (x, t[:2])),
        ErrorCase(rf"{ce}: reduction must be 'mean', 'sum' or 'none', got 'avg'", f, (x, t), {"reduction": "avg"}),
        ErrorCase(rf"{ce}: label_smoothing must be in \[0, 1\], got 1.5", f, (x, t), {"label_smoothing": 1.5}),
        ErrorCase(rf"{ce}: softcap must be >= 0 \(0: off\), got -1", f, (x, t), {"softcap": -1.0}),
        ErrorCase(rf"{ce}: lse_square_scale must be >= 0, got -0.1", f, (x, t), {"lse_square_scale": -0.1}),
        ErrorCase(rf"{ce}: logits must be 2-D \[rows, classes\]", f, (torch.randn(2, 3, 4), t)),
        ErrorCase(rf"{ce}: logits must be float32.*Long", f, (torch.ones(3, 4, dtype=torch.long), t)),
        ErrorCase(rf"{ce}_backward: grad_loss must be 0-dim or have shape \[3\]",
                  torch.ops.tinycuda.cross_entropy_backward, (torch.randn(3, 4), torch.randn(4))),
        ErrorCase(rf"{ce}_backward: grad_logits must be contiguous", torch.ops.tinycuda.cross_entropy_backward,
                  (torch.randn(4, 3).t(), torch.tensor(2.0))),
        # grad_loss (the autograd backward's): the loss's shape and logits' dtype, with compute_grad
        ErrorCase(rf"{ce}: grad_loss must have shape \[\] \(the loss's\), got \[3\]", op, (x, t),
                  {"compute_grad": True, "grad_loss": torch.ones(3)}),
        ErrorCase(rf"{ce}: grad_loss must have shape \[3\] \(the loss's\), got \[\]", op, (x, t),
                  {"reduction": "none", "compute_grad": True, "grad_loss": torch.tensor(2.0)}),
        ErrorCase(rf"{ce}: grad_loss has dtype Double but logits has dtype Float", op, (x, t),
                  {"compute_grad": True, "grad_loss": torch.tensor(2.0, dtype=torch.float64)}),
        ErrorCase(rf"{ce}: grad_loss is given but compute_grad is False", op, (x, t), {"grad_loss": torch.tensor(2.0)}),
        # the backward's recompute in place (with logits): target with them, grad_loss of the loss's shape
        ErrorCase(rf"{ce}_backward: logits is given without target", torch.ops.tinycuda.cross_entropy_backward,
                  (torch.randn(3, 4), torch.tensor(2.0)), {"logits": x}),
        ErrorCase(rf"{ce}_backward: grad_loss must have shape \[3\] \(the loss's\), got \[\]",
                  torch.ops.tinycuda.cross_entropy_backward, (torch.randn(3, 4), torch.tensor(2.0)),
                  {"logits": x, "target": t, "reduction": "none"}),
        ErrorCase(rf"{ce}_backward: grad_logits has shape \[4, 3\] but logits has shape \[3, 4\]",
                  torch.ops.tinycuda.cross_entropy_backward, (torch.randn(4, 3), torch.tensor(2.0)),
                  {"logits": x, "target": t}),
        # out of range targets: an error naming the row on the CPU (a device-side assert on CUDA)
        ErrorCase(rf"{ce}: target 7 at row 3 is out of range \[0, 5\)", f,
                  (torch.randn(5, 5), torch.tensor([0, 1, 2, 7, 4]))),
        ErrorCase(rf"{ce}: target -3 at row 0 is out of range", f,
                  (torch.randn(5, 5), torch.tensor([-3, 0, 0, 0, 0]))),
        ErrorCase(rf"{ce}: target 7 at row 3 is out of range \[0, 5\)", f,
                  (torch.randn(5, 5), torch.tensor([0, 1, 2, 7, 4])), {"weight": torch.ones(5)}),
        # class weights: [classes] of logits' dtype and device, no gradient
        ErrorCase(rf"{ce}: weight must have shape \[4\] \(one weight per class\), got \[5\]", f, (x, t),
                  {"weight": torch.ones(5)}),
        ErrorCase(rf"{ce}: weight must have shape \[4\] \(one weight per class\), got \[2, 2\]", f, (x, t),
                  {"weight": torch.ones(2, 2)}),
        ErrorCase(rf"{ce}: weight has dtype Double but logits has dtype Float", f, (x, t),
                  {"weight": torch.ones(4, dtype=torch.float64)}),
        ErrorCase(rf"{ce}: weight must be float32, float16, bfloat16 or float64, got Long", f, (x, t),
                  {"weight": torch.ones(4, dtype=torch.long)}),
        ErrorCase(rf"{ce}: weight is on meta but logits is on cpu", f, (x, t),
                  {"weight": torch.ones(4, device="meta")}),
        ErrorCase(rf"{ce}: weight \(the class weights\) gets no gradient", f, (x.clone().requires_grad_(), t),
                  {"weight": torch.ones(4, requires_grad=True)}),
    ]


def flce_inputs(n, h, v, device, dtype, bias=False, ignored=(1,)):
    hidden, weight = randn((n, h), device, dtype), randn((v, h), device, dtype, 1 / h**0.5)
    return hidden, weight, targets(n, v, device, ignored=ignored), (randn(v, device, dtype) if bias else None)


# (tokens, hidden, classes, chunk_size): chunks that do not divide the tokens,
# a single chunk, one-token chunks, Liger's automatic size (0).
FLCE_CASES = [(37, 24, 50, 8), (37, 24, 50, 0), (5, 16, 7, 1), (16, 8, 1023, 5), (9, 32, 4097, 4), (64, 40, 300, 64)]


def _flce_samples(device, dtype):
    for n, h, v, chunk in FLCE_CASES:
        for bias in (False, True):
            hid, w, t, b = flce_inputs(n, h, v, device, dtype, bias)
            for red in ("mean", "sum"):
                yield Sample(f"{n}-{h}-{v}-chunk{chunk}-{red}-{'bias' if bias else 'nobias'}",
                             (hid, w, t) + ((b,) if bias else ()), {"reduction": red, "chunk_size": chunk})
    # grad_weight accumulated in float32 is rounded once: the 3x-torch rule
    # holds at any number of chunks (86 here). In the weight's dtype (the
    # default) each chunk adds a rounding: 16 chunks still pass in every
    # seed tried, 86 fail in 15 of 20 (the cost the default documents).
    hid, w, t, _ = flce_inputs(256, 32, 300, device, dtype, ignored=(0, 100))
    yield Sample("256-32-300-chunk16", (hid, w, t), {"chunk_size": 16})
    for chunk in (3, 16):
        yield Sample(f"256-32-300-chunk{chunk}-accum_fp32", (hid, w, t),
                     {"chunk_size": chunk, "accum_dtype": torch.float32})
    hid, w, t, b = flce_inputs(21, 16, 130, device, dtype, bias=True, ignored=())
    t[[0, 4]] = 7  # 7 is the ignore_index: an in-range class
    yield Sample("21-16-130-strided-ignore7-smoothing0.2", (view(hid, "strided"), w, t, b),
                 {"ignore_index": 7, "label_smoothing": 0.2, "chunk_size": 4})
    hid, w, t, b = flce_inputs(7, 5, 9, device, dtype, bias=True)
    yield Sample("7-5-9-smoothing0.3", (hid, w, t, b), {"label_smoothing": 0.3})
    yield Sample("7-5-9-sum-grad_hidden", (hid, w, t, b), {"reduction": "sum", "chunk_size": 3}, grad=(0,))
    # reduction='none': the loss per row; the backward runs the chunks again with grad_loss per row
    hid, w, t, b = flce_inputs(13, 8, 20, device, dtype, bias=True)
    yield Sample("13-8-20-none-no_grad", (hid, w, t), {"reduction": "none", "chunk_size": 4}, grad=())
    yield Sample("13-8-20-none", (hid, w, t, b), {"reduction": "none", "chunk_size": 4})
    # softcap and z-loss (logits ~ 3 x softcap)
    hid, w, t, b = flce_inputs(37, 24, 50, device, dtype, bias=True)
    for kw in ({"softcap": 1.0, "chunk_size": 8}, {"lse_square_scale": 1e-2, "return_z_loss": True, "chunk_size": 8},
               {"reduction": "none", "softcap": 2.0, "lse_square_scale": 1e-3, "return_z_loss": True},
               {"reduction": "sum", "lse_square_scale": 1e-3, "return_z_loss": True, "chunk_size": 16}):
        yield Sample("37-24-50-" + "-".join(f"{k}{v}" for k, v in kw.items()), (hid, w, t, b), kw)
    # class weights (ce_weight): MEAN divides by the batch's W in every chunk; with z-loss the z terms by the count
    cw = class_weights(50, device, dtype, zero=(3,))
    for kw in ({"chunk_size": 8}, {"reduction": "sum", "chunk_size": 16, "label_smoothing": 0.1},
               {"chunk_size": 0, "label_smoothing": 0.2}, {"reduction": "none", "chunk_size": 8},
               {"chunk_size": 8, "softcap": 1.0, "lse_square_scale": 1e-2, "return_z_loss": True},
               {"chunk_size": 16, "lse_square_scale": 1e-3, "label_smoothing": 0.1}):
        yield Sample("37-24-50-ce_weight-" + "-".join(f"{k}{v}" for k, v in kw.items()), (hid, w, t, b),
                     {"ce_weight": cw, **kw})
    hid, w, t, _ = flce_inputs(21, 16, 130, device, dtype, ignored=())
    t[[0, 4]] = 7  # 7 is the ignore_index: an in-range class
    yield Sample("21-16-130-strided-ignore7-ce_weight", (view(hid, "strided"), w, t),
                 {"ignore_index": 7, "label_smoothing": 0.2, "chunk_size": 4,
                  "ce_weight": class_weights(130, device, dtype)})
    # token accuracy: every third row's target its argmax (right), row 1 ignored; chunks that split the batch
    hid, w, t, b = flce_inputs(37, 24, 50, device, dtype, bias=True)
    t[::3] = F.linear(hid.float(), w.float(), b.float())[::3].argmax(-1)
    for kw in ({"reduction": "mean", "chunk_size": 8}, {"reduction": "none", "chunk_size": 16},
               {"reduction": "sum", "chunk_size": 0, "lse_square_scale": 1e-2, "return_z_loss": True}):
        yield Sample("37-24-50-token_accuracy-" + "-".join(f"{k}{v}" for k, v in kw.items()), (hid, w, t, b),
                     {"return_token_accuracy": True, **kw})


def _flce_ref(hidden, weight, target, bias=None, ignore_index=-100, reduction="mean", label_smoothing=0.0,
              chunk_size=0, accum_dtype=None, ce_weight=None, **options):
    return _cross_entropy_ref(F.linear(hidden, weight, bias), target, ignore_index, reduction, label_smoothing,
                              weight=ce_weight, **options)


def _flce_errors():
    hidden, weight, target, b = flce_inputs(4, 6, 10, "cpu", torch.float32, bias=True)
    f, name = ops.fused_linear_cross_entropy, "tinycuda::fused_linear_cross_entropy"
    h, w, t, _ = flce_inputs(10, 4, 6, "cpu", torch.float32, ignored=())
    t[7] = 6
    return [
        ErrorCase(rf"{name}: weight must be 2-D \[classes, 6\] \(hidden's last dim\)", f,
                  (hidden, weight[:, :5], target)),
        ErrorCase(rf"{name}: bias must have shape \[10\] \(weight's rows\), got \[9\]", f,
                  (hidden, weight, target, b[:9])),
        ErrorCase(rf"{name}: weight has dtype Double but hidden has dtype Float", f,
                  (hidden, weight.double(), target)),
        ErrorCase(rf"{name}: target must have shape \[4\] \(hidden's rows\)", f, (hidden, weight, target[:3])),
        ErrorCase(rf"{name}: chunk_size must be >= 0", f, (hidden, weight, target), {"chunk_size": -1}),
        ErrorCase(rf"{name}: accum_dtype must be None, the weight's dtype \(Float\) or Float.*got Half", f,
                  (hidden.requires_grad_(), weight, target), {"accum_dtype": torch.float16}),
        ErrorCase(rf"{name}: hidden must be 2-D", f, (hidden[None], weight, target)),
        ErrorCase(rf"{name}: reduction='none' makes its gradient from a per-row grad_loss, which must be given as "
                  "row_scale", torch.ops.tinycuda.fused_linear_cross_entropy,
                  (hidden, weight, target, None, -100, "none", 0.0, True)),
        ErrorCase(rf"{name}: row_scale must have shape \[4\] \(hidden's rows\), got \[3\]",
                  torch.ops.tinycuda.fused_linear_cross_entropy,
                  (hidden, weight, target, None, -100, "none", 0.0, True, 0, None, 0.0, 0.0, False, torch.ones(3))),
        ErrorCase(rf"{name}: target 6 at row 7 is out of range \[0, 6\)", f, (h, w, t), {"chunk_size": 3}),
        ErrorCase(rf"{name}: ce_weight must have shape \[10\] \(one weight per class\), got \[6\]", f,
                  (hidden, weight, target), {"ce_weight": torch.ones(6)}),
        ErrorCase(rf"{name}: ce_weight has dtype Double but hidden has dtype Float", f, (hidden, weight, target),
                  {"ce_weight": torch.ones(10, dtype=torch.float64)}),
        ErrorCase(rf"{name}: ce_weight \(the class weights\) gets no gradient", f,
                  (hidden.detach().requires_grad_(), weight, target),
                  {"ce_weight": torch.ones(10, requires_grad=True)}),
    ]


# ---------------------------------------------------------------------------
# flash_attention, scaled_dot_product_attention

def _attention_ref(q, k, v, causal=False, scale=None, window=(-1, -1), softcap=0.0, top_left=False,
                   cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None):
    """The math, materialized, in q's dtype (as torch's math backend): q [B, Sq, Hq, D],
    k and v [B, Sk, Hkv, D]; a query that sees no key gives zeros. Varlen: each
    sequence on its own, rows in no sequence 0."""
    if cu_seqlens_q is not None:
        cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
        parts, end = [], 0
        for a, b_, c, d_ in zip(cq, cq[1:], ck, ck[1:]):
            parts += [q.new_zeros((a - end, *q.shape[1:])),
                      _attention_ref(q[None, a:b_], k[None, c:d_], v[None, c:d_], causal, scale, window, softcap,
                                     top_left)[0]]
            end = b_
        return torch.cat(parts + [q.new_zeros((q.shape[0] - end, *q.shape[1:]))])
    (b, sq, hq, d), (sk, hkv) = q.shape, k.shape[1:3]
    scale = 1 / math.sqrt(d) if scale is None else scale
    qt = q.transpose(1, 2)
    kt, vt = (t.transpose(1, 2).repeat_interleave(hq // hkv if hkv else 1, 1) for t in (k, v))
    s = (qt * scale) @ kt.transpose(-1, -2)
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(sq, device=q.device)[:, None] + (0 if top_left else sk - sq)  # the diagonal
    j = torch.arange(sk, device=q.device)[None, :]
    left, right = window[0], 0 if causal else window[1]
    seen = torch.ones(sq, sk, dtype=torch.bool, device=q.device)
    if left >= 0:  # j - i: no overflow at windows near 2**63
        seen &= j - i >= -left
    if right >= 0:
        seen &= j - i <= right
    p = torch.softmax(s.masked_fill(~seen, -math.inf), -1)
    p = torch.where(seen.any(-1, keepdim=True), p, torch.zeros_like(p))
    return (p @ vt).transpose(1, 2)


# (batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, options): GQA and MQA, seqlen_q above and below
# seqlen_k (rows that see no key), windows, softcap, head dims off the CUDA tiles (96, odd), empty dims.
ATTENTION_CASES = [
    (2, 17, 17, 2, 2, 16, {}), (1, 1, 1, 1, 1, 8, {}), (2, 33, 17, 4, 2, 32, {"causal": True}),
    (1, 17, 45, 3, 1, 24, {"causal": True}), (2, 40, 40, 2, 1, 64, {"window": (8, 4)}),
    (1, 29, 29, 2, 2, 40, {"causal": True, "softcap": 1.5}), (1, 70, 70, 2, 2, 128, {"causal": True, "window": (16, -1)}),
    (1, 130, 100, 1, 1, 256, {}), (1, 65, 67, 2, 2, 96, {"scale": 0.3}), (1, 9, 11, 2, 2, 7, {}),
    (1, 3, 4, 2, 1, 8, {"causal": True}), (1, 4, 4, 1, 1, 8, {"softcap": 1.0, "window": (1, 1)}),
    (2, 2, 3, 1, 1, 8, {}), (1, 5, 3, 1, 1, 4, {"causal": True}),
    (0, 5, 5, 1, 1, 8, {}), (1, 0, 5, 1, 1, 8, {}), (1, 5, 0, 1, 1, 8, {}), (1, 3, 4, 0, 0, 8, {}),
    (1, 6, 4, 1, 1, 8, {"window": (2**63 - 1, -1)}), (1, 6, 4, 1, 1, 8, {"window": (-1, 2**63 - 1)}),  # no bound
    (1, 2, 100, 4, 2, 64, {"causal": True}),  # decode: CUDA's split-KV path (7 splits of 15 keys)
]


def _attention_id(b, sq, sk, hq, hkv, d, kw):
    return f"{b}-{sq}-{sk}-{hq}-{hkv}-{d}" + "".join(f"-{k}{v}" for k, v in kw.items())


def _flash_attention_samples(device, dtype):
    for b, sq, sk, hq, hkv, d, kw in ATTENTION_CASES:
        q, k, v = (randn((b, s, h, d), device, dtype) for s, h in ((sq, hq), (sk, hkv), (sk, hkv)))
        yield Sample(_attention_id(b, sq, sk, hq, hkv, d, kw), (q, k, v), kw)
    # torch's [B, H, S, D] layout, transposed: read in place through the strides
    q, k, v = (randn((2, h, s, 64), device, dtype).transpose(1, 2) for s, h in ((33, 4), (40, 2), (40, 2)))
    yield Sample("2-33-40-4-2-64-bhsd-causal", (q, k, v), {"causal": True})
    # a non-contiguous head dim: copied
    q, k, v = (view(randn((1, 6, 2, 8), device, dtype), "strided") for _ in range(3))
    yield Sample("1-6-6-2-2-8-strided", (q, k, v), {"window": (2, 0)})
    for name, hq, hkv, d, lens_q, lens_k, kw in VARLEN_CASES:
        q, k, v = (randn((sum(n), h, d), device, dtype) for n, h in ((lens_q, hq), (lens_k, hkv), (lens_k, hkv)))
        yield Sample(f"varlen-{name}", (q, k, v), varlen(lens_q, lens_k, device, **kw))


# Packed batches (q heads, kv heads, head dim, lengths of q, of k, options): lengths 0 and 1, q shorter and
# longer than k (bottom-right causal per sequence), GQA, windows, softcap.
VARLEN_CASES = [
    ("gqa", 4, 2, 16, (5, 1, 17, 0, 9), (5, 3, 17, 2, 9), {}),
    ("causal", 2, 1, 32, (7, 33, 1), (12, 20, 1), {"causal": True}),
    ("window", 2, 2, 24, (40, 3), (40, 8), {"window": (6, 2), "softcap": 2.0}),
    ("one", 1, 1, 8, (1,), (1,), {}),
    ("tiny", 2, 1, 4, (2, 0, 3), (3, 1, 2), {"causal": True}),  # small enough for gradcheck
]


def varlen(lens_q, lens_k, device, extra_q=0, **kw):
    """flash_attention's varlen keywords for sequences of these lengths (extra_q: max_seqlen_q above the
    longest), with kw."""
    cu = [torch.tensor([0, *itertools.accumulate(n)], dtype=torch.int32, device=device) for n in (lens_q, lens_k)]
    return {"cu_seqlens_q": cu[0], "cu_seqlens_k": cu[1], "max_seqlen_q": max(lens_q) + extra_q,
            "max_seqlen_k": max(lens_k), **kw}


def _sdpa_samples(device, dtype):
    def qkv(b, hq, hkv, sq, sk, d):
        return tuple(randn((b, h, s, d), device, dtype) for h, s in ((hq, sq), (hkv, sk), (hkv, sk)))
    yield Sample("2-3-3-17-17-16", qkv(2, 3, 3, 17, 17, 16))
    # is_causal aligns top-left in torch: query i sees keys 0..i whatever the lengths
    yield Sample("1-2-2-33-17-32-causal", qkv(1, 2, 2, 33, 17, 32), {"is_causal": True})
    yield Sample("1-2-2-17-40-64-causal", qkv(1, 2, 2, 17, 40, 64), {"is_causal": True})
    yield Sample("2-4-2-20-20-40-gqa-scale", qkv(2, 4, 2, 20, 20, 40), {"enable_gqa": True, "scale": 0.5})
    yield Sample("3d-2-9-9-8", tuple(t[0] for t in qkv(1, 2, 2, 9, 9, 8)), {"is_causal": True})
    yield Sample("1-1-1-3-4-8-causal", qkv(1, 1, 1, 3, 4, 8), {"is_causal": True})
    yield Sample("1-2-1-4-4-8-gqa", qkv(1, 2, 1, 4, 4, 8), {"enable_gqa": True})
    yield Sample("1-1-1-5-3-8-scale", qkv(1, 1, 1, 5, 3, 8), {"scale": 0.7})


# qkv [B, S, 3, H, D] (batch, seqlen, heads, head_dim, options): a projection's output viewed, a strided one
# (rows wider than 3 H D: a slice of a larger buffer), and the options; the last three small for gradcheck.
QKVPACKED_CASES = [(2, 17, 2, 16, {}, "contig"), (1, 33, 3, 32, {"causal": True}, "contig"),
                   (2, 40, 2, 64, {"window": (8, 4)}, "rows"), (1, 29, 2, 40, {"causal": True, "softcap": 1.5}, "rows"),
                   (1, 9, 1, 8, {"scale": 0.3}, "contig"), (1, 4, 1, 8, {"causal": True}, "contig"),
                   (2, 3, 2, 4, {}, "contig"), (1, 5, 2, 4, {"window": (1, 1)}, "contig")]


def _qkvpacked_samples(device, dtype):
    for b, s, h, d, kw, layout in QKVPACKED_CASES:
        if layout == "rows":  # each token's 3 H D values at the start of a row of 3 H D + 8
            qkv = randn((b, s, 3 * h * d + 8), device, dtype)[..., :3 * h * d].unflatten(-1, (3, h, d))
        else:
            qkv = randn((b, s, 3 * h * d), device, dtype).view(b, s, 3, h, d)
        yield Sample(f"{b}-{s}-{h}-{d}-{layout}" + "".join(f"-{k}{v}" for k, v in kw.items()), (qkv,), kw)


def _qkvpacked_ref(qkv, **kw):
    return _attention_ref(*qkv.unbind(2), **kw)


def _qkvpacked_errors():
    f, name = ops.flash_attention_qkvpacked, "tinycuda::flash_attention_qkvpacked"
    qkv = torch.randn(1, 5, 3, 2, 8)
    return [
        ErrorCase(rf"{name}: qkv must be 5-D \[batch, seqlen, 3, heads, head_dim\], got shape \[1, 5, 2, 2, 8\]", f,
                  (qkv[:, :, :2],)),
        ErrorCase(rf"{name}: qkv must be 5-D \[batch, seqlen, 3, heads, head_dim\], got shape \[5, 3, 2, 8\]", f,
                  (qkv[0],)),
        ErrorCase(rf"{name}: qkv must be float32.*got Long", f, (qkv.long(),)),
        ErrorCase(rf"{name}: head_dim must be > 0", f, (qkv[..., :0],)),
        # the core's check, which names the core's op after the torch op
        ErrorCase(rf"{name}: (flash_attention: )?softcap must be >= 0 and finite, got -1", f, (qkv,), {"softcap": -1.0}),
    ]


def _flash_attention_errors():
    f, name = ops.flash_attention, "tinycuda::flash_attention"
    q, k = torch.randn(1, 5, 4, 8), torch.randn(1, 6, 2, 8)
    cu = torch.tensor([0, 5], dtype=torch.int32)
    vl = {"cu_seqlens_q": cu, "cu_seqlens_k": torch.tensor([0, 6], dtype=torch.int32), "max_seqlen_q": 5,
          "max_seqlen_k": 6}
    return [
        ErrorCase(rf"{name}: q must be 4-D \[batch, seqlen, heads, head_dim\], got shape \[5, 4, 8\]", f, (q[0], k, k)),
        ErrorCase(rf"{name}: v has shape \[1, 6, 2, 4\] but k has shape \[1, 6, 2, 8\]", f, (q, k, k[..., :4])),
        ErrorCase(rf"{name}: q's heads \(4\) must be a multiple of k's and v's heads \(3\)", f,
                  (q, torch.randn(1, 6, 3, 8), torch.randn(1, 6, 3, 8))),
        ErrorCase(rf"{name}: q has head_dim 8 but k has head_dim 4", f, (q, k[..., :4], k[..., :4])),
        ErrorCase(rf"{name}: q has batch 1 but k has batch 2", f, (q, k.expand(2, -1, -1, -1), k.expand(2, -1, -1, -1))),
        ErrorCase(rf"{name}: k has dtype Double but q has dtype Float", f, (q, k.double(), k)),
        ErrorCase(rf"{name}: q must be float32.*got Long", f, (q.long(), k.long(), k.long())),
        ErrorCase(rf"{name}: softcap must be >= 0 and finite, got -1", f, (q, k, k), {"softcap": -1.0}),
        ErrorCase(rf"{name}: scale must be finite", f, (q, k, k), {"scale": math.inf}),
        ErrorCase(rf"{name}: head_dim must be > 0", f, (q[..., :0], k[..., :0], k[..., :0])),
        ErrorCase(rf"{name}: algo must be 0 \(auto\), 1 \(naive\), 2 \(mma\) or 3 \(wgmma\), got 7",
                  torch.ops.tinycuda.flash_attention, (q, k, k), {"algo": 7}),
        ErrorCase(rf"{name}: cu_seqlens_q and cu_seqlens_k must be given together", torch.ops.tinycuda.flash_attention,
                  (q[0], k[0], k[0]), {"cu_seqlens_q": cu}),
        ErrorCase(rf"{name}: max_seqlen_q and max_seqlen_k must be given with cu_seqlens", f,
                  (q[0], k[0], k[0]), {"cu_seqlens_q": cu, "cu_seqlens_k": cu}, ValueError),
        ErrorCase(rf"{name}: q must be 3-D \[total, heads, head_dim\] with cu_seqlens, got shape \[1, 5, 4, 8\]", f,
                  (q, k, k), {**vl, "max_seqlen_q": 5}),
        ErrorCase(rf"{name}: cu_seqlens_q must be a 1-D int32 tensor of batch \+ 1 offsets, got Long \[2\]", f,
                  (q[0], k[0], k[0]), {**vl, "cu_seqlens_q": cu.long()}),
        ErrorCase(rf"{name}: cu_seqlens_q has 2 entries but cu_seqlens_k has 3", f,
                  (q[0], k[0], k[0]), {**vl, "cu_seqlens_k": torch.tensor([0, 3, 6], dtype=torch.int32)}),
        ErrorCase(rf"{name}: max_seqlen_q and max_seqlen_k are read only with cu_seqlens_q/k",
                  torch.ops.tinycuda.flash_attention, (q, k, k), {"max_seqlen_q": 5}),
        ErrorCase(rf"{name}: sequence 0 has length 5, above seqlen_q \(4\)", f,
                  (q[0], k[0], k[0]), {**vl, "max_seqlen_q": 4}),
        ErrorCase(rf"{name}: cu_seqlens_k must be non-decreasing, got 2 after 6", f, (q[0], k[0], k[0]),
                  {**vl, "cu_seqlens_q": torch.tensor([0, 2, 5], dtype=torch.int32),
                   "cu_seqlens_k": torch.tensor([0, 6, 2], dtype=torch.int32)}),
        ErrorCase(rf"{name}: cu_seqlens_q ends at 7, past the 5 packed rows", f, (q[0], k[0], k[0]),
                  {**vl, "cu_seqlens_q": torch.tensor([0, 7], dtype=torch.int32), "max_seqlen_q": 7}),
        ErrorCase(r"tinycuda::flash_attention_backward: lse must have shape \[1, 4, 5\], got \[1, 4, 4\]",
                  torch.ops.tinycuda.flash_attention_backward,
                  (q, q, k, k, q, torch.zeros(1, 4, 4), False, 1.0, -1, -1, 0.0, False)),
    ]


def _sdpa_errors():
    f, name = ops.scaled_dot_product_attention, "tinycuda::scaled_dot_product_attention"
    q, kv = torch.randn(1, 4, 5, 8), torch.randn(1, 2, 6, 8)
    return [
        ErrorCase(rf"{name}: attn_mask is not supported", f, (q, q, q), {"attn_mask": torch.ones(5, 5)}, ValueError),
        ErrorCase(rf"{name}: dropout_p must be 0.0, got 0.1", f, (q, q, q), {"dropout_p": 0.1}, ValueError),
        ErrorCase(rf"{name}: query has 4 heads but key has 2: pass enable_gqa=True", f, (q, kv, kv), {}, ValueError),
        ErrorCase(rf"{name}: value's head dim \(4\) must equal query's \(8\)", f, (q, q, q[..., :4]), {}, ValueError),
        ErrorCase(rf"{name}: query must be 3-D or 4-D", f, (q[None], q, q), {}, ValueError),
    ]


# ---------------------------------------------------------------------------
# bench: shapes, inputs, costs

def _elementwise_bytes(reads_fwd, reads_bwd):
    def cost(shape, mode, s):
        n = math.prod(shape)
        per = {"fwd": reads_fwd + 1, "bwd": reads_bwd + 1, "fwd+bwd": reads_fwd + reads_bwd + 2}[mode]
        return "GB/s", per * n * s
    return cost


def _relu_bytes(shape, mode, s):
    """relu needs only the sign of x for its backward: 1 bit (tinycuda's
    bitmask). fwd without grad: 2ns; with grad add the n/8-byte mask."""
    n = math.prod(shape)
    return "GB/s", {"fwd": 2 * n * s, "bwd": 2 * n * s + n // 8, "fwd+bwd": 4 * n * s + n // 4}[mode]


def _sbr_bytes(shape, mode, s):
    n, c = math.prod(shape), shape[-1]
    return "GB/s", {"fwd": 2 * n * s + c * s, "bwd": 3 * n * s + c * s,
                    "fwd+bwd": 5 * n * s + 2 * c * s}[mode]


def _glu_bytes(shape, mode, s):
    """a, b -> y forward; grad_y, a, b -> grad_a, grad_b backward (nothing saved)."""
    return "GB/s", {"fwd": 3, "bwd": 5, "fwd+bwd": 8}[mode] * math.prod(shape) * s


def _norm_bytes(shape, mode, s):
    """fwd reads x and writes y; bwd reads x and grad_y and writes grad_x
    (weight, bias, their gradients and the per-row statistics are < 0.1%)."""
    n = math.prod(shape)
    return "GB/s", {"fwd": 2 * n * s, "bwd": 3 * n * s, "fwd+bwd": 5 * n * s}[mode]


def _add_rms_norm_bytes(shape, mode, s):
    """fwd reads x and residual, writes y and s; bwd reads grad_y, grad_s and s,
    writes grad_x (which is also grad_residual)."""
    n = math.prod(shape)
    return "GB/s", {"fwd": 4 * n * s, "bwd": 4 * n * s, "fwd+bwd": 8 * n * s}[mode]


def _add_rms_norm_bench(sh, dt, dev):
    return [randn(sh, dev, dt), randn(sh, dev, dt), randn(sh[-1], dev, dt, 0.1, 1), 1e-6]


def _liger_add_rms_norm(x, residual, weight, eps):
    """Liger's fused add + RMSNorm: (y, s), in Liger's default casting mode ("llama")."""
    f = importlib.import_module("liger_kernel.ops.fused_add_rms_norm").LigerFusedAddRMSNormFunction
    return f.apply(x, residual, weight, eps)


def _linear_flops(shape, mode, s):
    m, n, k = shape
    return "TFLOP/s", {"fwd": 2, "bwd": 4, "fwd+bwd": 6}[mode] * m * n * k


def _matmul_flops(shape, mode, s):
    """(batch,) m, n, k: 2mnk a product; the backward is two more."""
    return "TFLOP/s", {"fwd": 2, "bwd": 4, "fwd+bwd": 6}[mode] * math.prod(shape)


def _cross_entropy_bytes(shape, mode, s):
    """Read the logits once; with the gradient (made by the forward kernel)
    also write it once: N V s and 2 N V s (the backward of grad_loss = 1
    reads grad_loss alone)."""
    n, v = shape
    return "GB/s", {"fwd": n * v * s, "fwd+bwd": 2 * n * v * s}[mode]


def _flce_flops(shape, mode, s):
    """hidden @ weight.T forward; grad_hidden and grad_weight matmuls backward."""
    n, h, v = shape
    return "TFLOP/s", {"fwd": 2, "fwd+bwd": 6}[mode] * n * h * v


def _liger(module, name, adapt=None, several=False):
    """Liger-Kernel's `name` from liger_kernel.<module> (a function, or an
    autograd Function), called with adapt(*args) (default: the args as they
    are); imported on first call, since Liger is optional. Only the loss of
    (loss, z_loss) is kept, unless the op has `several` outputs (rope's q and
    k). Some Liger backwards write their gradients over saved inputs (swiglu,
    geglu, cross-entropy), and its rope rotates q and k in place: a timed
    case's inputs change after the first, checked call, which changes no
    timing. Liger runs after the other implementations."""
    def run(*args):
        f = getattr(importlib.import_module(f"liger_kernel.{module}"), name)
        a = adapt(*args) if adapt else args
        out = f.apply(*a) if hasattr(f, "apply") else f(*a)
        return out[0] if isinstance(out, tuple) and not several else out
    return run


def _one(sh, dt, dev):
    return [randn(sh, dev, dt)]


def _pair(sh, dt, dev):
    return [randn(sh, dev, dt), randn(sh, dev, dt)]


EW_SHAPES = {"small": [(1024, 2048)], "large": [(8192, 8192)],
             "all": [(256, 1024), (1024, 2048), (2048, 4096), (4096, 8192), (8192, 8192)],
             "cpu": [(256, 512), (1024, 1024)]}
# the binary ops: EW_SHAPES with both operands of the shape, and as many elements (B, S, H) plus a bias of (H,)
BINARY_SHAPES = {k: v + [(4, sh[0] // 4, sh[1]) for sh in v if sh[0] % 4 == 0] for k, v in EW_SHAPES.items()}
GLU_SHAPES = {"small": [(1024, 14336)], "large": [(8192, 14336)],  # LLaMA-3 8B's MLP: 14336 wide
              "all": [(1024, 4096), (4096, 4096), (1024, 14336), (8192, 14336)], "cpu": [(256, 1024)]}
# The row-length sweep QuACK publishes: M x N = 2^27 elements, N from 256 to
# 262144 (`tinycuda bench --shapes sweep`).
SWEEP = [(2**27 // n, n) for n in (256, 1024, 4096, 16384, 65536, 262144)]
NORM_SHAPES = {"small": [(4096, 4096)], "large": [(32768, 4096)],
               "all": [(4096, 1024), (4096, 4096), (32768, 4096), (8192, 8192)], "cpu": [(256, 512)],
               "sweep": SWEEP}
SOFTMAX_SHAPES = {"small": [(4096, 4096)], "large": [(32768, 4096), (8192, 32768)],
                  "all": [(4096, 1024), (4096, 4096), (32768, 4096), (8192, 32768)], "cpu": [(256, 512)],
                  "sweep": SWEEP}


# weight and bias near 1 and 0, as trained models have them; rms_norm takes
# LLaMA's eps=1e-6 for all three implementations (its default differs by dtype)
def _layer_norm_bench(sh, dt, dev):
    return [randn(sh, dev, dt), sh[-1:], randn(sh[-1], dev, dt, 0.1, 1), randn(sh[-1], dev, dt, 0.1)]


def _rms_norm_bench(sh, dt, dev):
    return [randn(sh, dev, dt), sh[-1:], randn(sh[-1], dev, dt, 0.1, 1), 1e-6]


def _linear_bench(sh, dt, dev):
    m, n, k = sh
    return [randn((m, k), dev, dt), randn((n, k), dev, dt, 1 / k**0.5), randn(n, dev, dt)]


def _matmul_bench(sh, dt, dev):
    *batch, m, n, k = sh
    return [randn((*batch, m, k), dev, dt), randn((*batch, k, n), dev, dt, 1 / k**0.5)]


def _attention_bench(sh, dt, dev):
    """q, k, v [B, S, H, D] for (batch, heads, seqlen, head_dim), or a decode step's (batch, heads, seqlen_q,
    seqlen_k, head_dim): q [B, Sq, H, D] against k, v [B, Sk, H, D]."""
    b, h, *s, d = sh
    sq, sk = s if len(s) == 2 else (s[0], s[0])
    return [randn((b, sq, h, d), dev, dt)] + [randn((b, sk, h, d), dev, dt) for _ in range(2)]


def _attention_flops(shape, mode, s):
    """(batch, heads, seqlen, head_dim): QK^T and PV are 4 B H S^2 D; the
    backward is 2.5x the forward (FlashAttention's count). A decode step
    (batch, heads, seqlen_q, seqlen_k, head_dim) is memory-bound: GB/s over
    K and V read once and q and O once, 2 (Sk + Sq) B H D itemsize."""
    if len(shape) == 5:
        b, h, sq, sk, d = shape
        return "GB/s", 2 * (sk + sq) * b * h * d * s
    b, h, n, d = shape
    return "TFLOP/s", {"fwd": 4, "bwd": 10, "fwd+bwd": 14}[mode] * b * h * n * n * d


def _attention_modes(shape):
    """Decode shapes (5-tuples) are benched forward only: generation runs no backward."""
    return ("fwd",) if len(shape) == 5 else MODES


def _causal_bench(sh, dt, dev):
    """scaled_dot_product_attention's arguments on [B, H, S, D]: attn_mask None, dropout 0, is_causal."""
    b, h, s, d = sh
    return [randn((b, h, s, d), dev, dt) for _ in range(3)] + [None, 0.0, True]


def _causal_flops(shape, mode, s):
    """Half of _attention_flops: a causal mask skips the upper triangle (FlashAttention's count)."""
    unit, flops = _attention_flops(shape, mode, s)
    return unit, flops // 2


def _sdpa_on(backend=None):
    """F.scaled_dot_product_attention on one of torch's backends (None: torch's pick)."""
    if backend is None:
        return F.scaled_dot_product_attention

    def run(*args):
        from torch.nn.attention import SDPBackend, sdpa_kernel
        with sdpa_kernel(getattr(SDPBackend, backend)):
            return F.scaled_dot_product_attention(*args)
    return run


def _sdpa_bshd(backend=None):
    """_sdpa_on(backend) on [B, S, H, D] tensors (transposed views)."""
    sdpa = _sdpa_on(backend)

    def run(q, k, v):
        return sdpa(*(t.transpose(1, 2) for t in (q, k, v))).transpose(1, 2)
    return run


def _flce_bench(sh, dt, dev):
    n, h, v = sh
    return [randn((n, h), dev, dt), randn((v, h), dev, dt, 1 / h**0.5), torch.randint(0, v, (n,), device=dev)]


# ---------------------------------------------------------------------------
# rope

def _rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), -1)


def _rotate_every_two(x):
    return torch.stack((-x[..., 1::2], x[..., ::2]), -1).flatten(-2)


def _rope_ref(q, k, cos, sin, position_ids=None, unsqueeze_dim=1, interleaved=False):
    """Hugging Face's apply_rotary_pos_emb: x * cos + rotate_half(x) * sin, cos and sin
    gathered by position_ids first (as its older versions did) and unsqueezed at unsqueeze_dim."""
    if position_ids is not None:
        cos, sin = (t.reshape(t.shape[-2:])[position_ids] for t in (cos, sin))
    cos, sin = ((t[None] if t.dim() == 2 else t).unsqueeze(unsqueeze_dim) for t in (cos, sin))
    rot = _rotate_every_two if interleaved else _rotate_half
    return q * cos + rot(q) * sin, k * cos + rot(k) * sin


# (B, S, Hq, Hk, D): one token, odd lengths, D = 2 (the scalar path only), 12
# (scalar in every dtype), 64, 96, 128 (16-byte vectors), 1030 (more pairs than
# a block has threads), GQA and MQA, empty dims
ROPE_CASES = [(2, 5, 4, 2, 64), (1, 1, 2, 2, 128), (2, 7, 3, 1, 96), (1, 3, 2, 1, 2), (2, 3, 2, 1, 4),
              (1, 1, 2, 2, 2), (3, 4, 1, 1, 12), (2, 9, 8, 8, 128), (1, 2, 1, 2, 1030), (0, 3, 2, 1, 8),
              (2, 0, 2, 1, 8), (2, 3, 0, 1, 8), (2, 3, 2, 0, 8), (1, 3, 2, 1, 0)]
# cos and sin: [S, D], [1, S, D], [B, S, D]; or tables of P = S + 3 rows and position_ids [B, S], [1, S], [S]
ROPE_TABLES = ("S", "1S", "BS", "ids-BS", "ids-1S", "ids-S")


def _rope_args(shape, device, dtype, table="1S", unsqueeze_dim=1, layout="contig"):
    """(q, k, cos, sin, position_ids) for (B, S, Hq, Hk, D); layout 'transposed': q and k are
    views of tensors laid out with heads and tokens swapped (a projection viewed [B, S, H, D] and
    transposed to [B, H, S, D], or the reverse), else a view of optable.view's."""
    b, s, hq, hk, d = shape

    def qk(h):
        dims = (b, h, s, d) if unsqueeze_dim == 1 else (b, s, h, d)
        if layout == "transposed":
            return randn((dims[0], dims[2], dims[1], dims[3]), device, dtype).transpose(1, 2)
        return view(randn(dims, device, dtype), layout)

    ids = None
    if table.startswith("ids"):
        p = s + 3
        lead = {"ids-BS": (b, s), "ids-1S": (1, s), "ids-S": (s,)}[table]
        ids = torch.randint(0, p, lead, device=device)
        cs = (p, d)
    else:
        cs = {"S": (s, d), "1S": (1, s, d), "BS": (b, s, d)}[table]
    return qk(hq), qk(hk), randn(cs, device, dtype), randn(cs, device, dtype), ids


def _rope_samples(device, dtype):
    for n, shape in enumerate(ROPE_CASES):
        for i, (ud, inter) in enumerate(itertools.product((1, 2), (False, True))):
            table = ROPE_TABLES[(n + i) % len(ROPE_TABLES)]
            q, k, cos, sin, ids = _rope_args(shape, device, dtype, table, ud)
            yield Sample(f"{_shape_id(shape)}-{table}-dim{ud}-{'interleaved' if inter else 'half'}",
                         (q, k, cos, sin, ids, ud, inter), grad=(0, 1))
    # strided layouts: transposed views (read in place), a strided head dim (copied), one element off the
    # 16-byte grid (the scalar path on CUDA), for q and k or cos and sin
    for shape, ud, inter in (((2, 6, 4, 2, 64), 1, False), ((2, 5, 3, 1, 32), 2, True), ((1, 4, 2, 2, 128), 1, True)):
        for layout in ("transposed", "strided", "offset"):
            q, k, cos, sin, ids = _rope_args(shape, device, dtype, "ids-BS" if inter else "1S", ud, layout)
            yield Sample(f"{_shape_id(shape)}-{layout}-dim{ud}-{'interleaved' if inter else 'half'}",
                         (q, k, cos, sin, ids, ud, inter), grad=(0, 1), grad_out="contig" if layout == "transposed"
                         else layout)
        q, k, cos, sin, ids = _rope_args(shape, device, dtype, "BS", ud)
        yield Sample(f"{_shape_id(shape)}-cos_offset-dim{ud}", (q, k, view(cos, "offset"), view(sin, "offset"), None,
                                                                ud, inter), grad=(0, 1))
    q, k, cos, sin, _ = _rope_args((2, 3, 2, 1, 8), device, dtype)
    yield Sample("2x3x2x1x8-defaults", (q, k, cos, sin), grad=(0, 1))


def _rope_inplace(q, k, cos, sin, position_ids=None, unsqueeze_dim=1, interleaved=False):
    """rope_ on copies of q and k, returned: the generic tests feed the same tensors to torch after ours."""
    return ops.rope_(q.clone(), k.clone(), cos, sin, position_ids, unsqueeze_dim, interleaved)


def _rope_inplace_samples(device, dtype):
    """rope's samples without gradients, one in three (the layouts and paths are rope's)."""
    for i, sample in enumerate(_rope_samples(device, dtype)):
        if i % 3 == 0 or "offset" in sample.name or "transposed" in sample.name:
            yield Sample(sample.name, sample.args, sample.kwargs, grad=())


def _rope_errors():
    f, bwd, meta = ops.rope, torch.ops.tinycuda.rope_backward, torch.empty(1, 2, 3, 5, device="meta")
    q, k, cos = torch.randn(2, 2, 3, 4), torch.randn(2, 1, 3, 4), torch.randn(3, 4)
    table = torch.randn(8, 4)
    r = "tinycuda::rope"
    return [
        ErrorCase(rf"{r}: head_dim D \(the last dim of q\) must be even, got D = 5", f,
                  (torch.randn(1, 2, 3, 5), torch.randn(1, 1, 3, 5), torch.randn(3, 5), torch.randn(3, 5))),
        ErrorCase(rf"{r}: cos must have shape \[S, D\], \[1, S, D\] or \[B, S, D\] = \[2, 3, 4\], got \[4, 4\]", f,
                  (q, k, torch.randn(4, 4), torch.randn(4, 4))),
        ErrorCase(rf"{r}: cos must have shape .* got \[3, 3, 4\]", f,
                  (q, k, torch.randn(3, 3, 4), torch.randn(3, 3, 4))),
        ErrorCase(rf"{r}: sin has shape \[1, 3, 4\] but cos has shape \[3, 4\]", f, (q, k, cos, cos[None])),
        ErrorCase(rf"{r}: cos has dtype Half but q has dtype Float", f, (q, k, cos.half(), cos.half())),
        ErrorCase(rf"{r}: k has shape \[2, 1, 2, 4\] but q has shape \[2, 2, 3, 4\]", f,
                  (q, torch.randn(2, 1, 2, 4), cos, cos)),
        ErrorCase(rf"{r}: q must be 4-D \[B, S, H, D\] \(unsqueeze_dim=2\), got shape \[2, 3, 4\]", f,
                  (q[0], k, cos, cos), {"unsqueeze_dim": 2}),
        ErrorCase(rf"{r}: unsqueeze_dim must be 1 .* or 2 .*, got 3", f, (q, k, cos, cos), {"unsqueeze_dim": 3}),
        ErrorCase(rf"{r}: position_ids\[1, 2\] = 8 is out of range \[0, 8\)", f,
                  (q, k, table, table, torch.tensor([[0, 1, 2], [3, 4, 8]]))),
        ErrorCase(rf"{r}: position_ids\[0\] = -1 is out of range \[0, 8\)", f,
                  (q, k, table, table, torch.tensor([-1, 0, 0]))),
        ErrorCase(rf"{r}: position_ids must be int64, got Int", f, (q, k, table, table, torch.tensor([0, 1, 2]).int())),
        ErrorCase(rf"{r}: position_ids must have shape \[B, S\], \[1, S\] or \[S\] = \[2, 3\], got \[4\]", f,
                  (q, k, table, table, torch.arange(4))),
        ErrorCase(rf"{r}: with position_ids cos must be a table \[P, D\] or \[1, P, D\]", f,
                  (q, k, table.expand(2, 8, 4), table.expand(2, 8, 4), torch.arange(3))),
        ErrorCase(rf"{r}: cos and sin get no gradient", f, (q, k, cos.clone().requires_grad_(), cos)),
        ErrorCase(rf"{r}_backward: grad_k_out has shape \[2, 1, 2, 4\] but grad_q_out has shape", bwd,
                  (q, torch.randn(2, 1, 2, 4), cos, cos)),
        ErrorCase(rf"{r}_: q or k requires grad", ops.rope_, (q.clone().requires_grad_(), k, cos, cos)),
        ErrorCase(rf"{r}_: cos must have shape", ops.rope_, (q, k, torch.randn(4, 4), torch.randn(4, 4))),
        # the fake kernels (torch.compile, meta tensors) check the same
        ErrorCase(rf"{r}: head_dim D must be even, got D = 5", f,
                  (meta, torch.empty(1, 1, 3, 5, device="meta"), torch.empty(3, 5, device="meta"),
                   torch.empty(3, 5, device="meta"))),
    ]


def _rope_cuda_errors():
    q = torch.randn(1, 2, 3, 4, device="cuda")
    return [ErrorCase(r"tinycuda::rope: position_ids is on cpu but q is on cuda", ops.rope,
                      (q, q, torch.randn(8, 4, device="cuda"), torch.randn(8, 4, device="cuda"), torch.arange(3)))]


def _rope_bench(sh, dt, dev):
    """q and k as Hugging Face's attention makes them: projections viewed [B, S, H, D] and
    transposed to [B, H, S, D]; cos and sin [1, S, D], real angles (base 10000)."""
    b, s, hq, hk, d = sh
    q, k = (randn((b, s, h, d), dev, dt).transpose(1, 2) for h in (hq, hk))
    tables = tinycuda.nn.RotaryEmbedding(d, s, device=dev, dtype=dt)
    return [q, k, tables.cos_cached[None], tables.sin_cached[None]]


def _rope_bytes(shape, mode, s):
    """q and k read and written once, and one cos and sin row per token ([1, S, D]); the backward the same
    with the gradients."""
    b, sl, hq, hk, d = shape
    n = (2 * b * sl * (hq + hk) * d + 2 * sl * d) * s
    return "GB/s", {"fwd": n, "bwd": n, "fwd+bwd": 2 * n}[mode]


# (B, S, Hq, Hk, D): LLaMA-3 8B (32 query heads, 8 key/value heads of 128), LLaMA-2 7B (32 and 32), LLaMA-3 70B
ROPE_SHAPES = {"small": [(1, 2048, 32, 8, 128)], "large": [(4, 4096, 32, 8, 128)],
               "all": [(1, 2048, 32, 8, 128), (4, 4096, 32, 8, 128), (4, 4096, 32, 32, 128), (2, 4096, 64, 8, 128)],
               "cpu": [(1, 256, 8, 2, 64)]}


# ---------------------------------------------------------------------------
# embedding

def _embedding_ref(input, weight, padding_idx=None):
    return F.embedding(input, weight, padding_idx)


# (input shape, num_embeddings, embedding_dim, padding_idx): no index (the backward writes zeros), a 0-dim input,
# one id of one column, odd widths (the scalar path on CUDA), 2-D and 3-D input, GPT-2's width, padding_idx counted
# from either end; repeated ids: 300 positions over 4 ids (CUDA's chunks of 32 sorted positions share every id: the
# carry of partial sums), 5000 positions (past the sort's 4096-element block: its radix sort), 70000 ids (past
# 65535: int32 sort keys), and one id at every position ("same"). A padding_idx sample's weight has over 200
# elements, so that test_gradcheck leaves it out: finite differences see the padding row, whose gradient is 0 by
# definition (torch's F.embedding fails gradcheck there alike)
EMBEDDING_CASES = [((0,), 5, 3, None), ((2, 0), 5, 17, None), ((), 7, 4, None), ((1,), 1, 1, None),
                   ((7,), 10, 17, None), ((2, 5), 70, 3, 4), ((2, 3, 4), 6, 768, -1), ((5, 40), 3, 1, None),
                   ((300,), 4, 33, None), ((2, 2500), 50, 8, 7), ((64,), 70000, 2, 69999), ((100,), 5, 16, "same")]


def _embedding_input(shape, v, padding_idx, device):
    """Random ids in [0, v); with a padding_idx, every third position names it (so its row's zero gradient is
    tested); "same": one id everywhere."""
    if padding_idx == "same":
        return torch.full(shape, v // 2, device=device)
    input = torch.randint(0, v, shape, device=device)
    if padding_idx is not None and input.numel():
        input.view(-1)[::3] = padding_idx % v
    return input


def _embedding_samples(device, dtype):
    for shape, v, d, pad in EMBEDDING_CASES:
        input, weight = _embedding_input(shape, v, pad, device), randn((v, d), device, dtype)
        kwargs = {} if pad in (None, "same") else {"padding_idx": pad}
        yield Sample(f"{_shape_id(shape)}-{v}x{d}-pad{pad}", (input, weight), kwargs)
    # layouts: a strided weight (copied) and one off the 16-byte grid (read in place: CUDA's scalar path), a
    # transposed input (copied), a strided grad_out
    input = _embedding_input((6, 50), 40, 3, device)
    for layout in ("strided", "offset"):
        yield Sample(f"6x50-40x64-weight_{layout}", (input, view(randn((40, 64), device, dtype), layout)),
                     {"padding_idx": 3}, grad_out=layout)
    yield Sample("50x6-transposed-40x24", (input.t(), randn((40, 24), device, dtype)), grad_out="strided")


def _embedding_errors():
    f, bwd, e = ops.embedding, torch.ops.tinycuda.embedding_backward, "tinycuda::embedding"
    w, i = torch.randn(5, 3), torch.tensor([0, 1, 2, 4])
    cases = [
        # an index out of range: an error naming its position in the flattened input (a device-side assert on CUDA)
        ErrorCase(rf"{e}: index 7 at position 3 of input \(flattened\) is out of range \[0, num_embeddings = 5\)", f,
                  (torch.tensor([0, 1, 2, 7]), w)),
        ErrorCase(rf"{e}: index -1 at position 4 of input \(flattened\)", f,
                  (torch.tensor([[0, 1], [2, 3], [-1, 0]]), w)),
        ErrorCase(rf"{e}_backward: index 5 at position 1 of input \(flattened\) is out of range", bwd,
                  (torch.randn(2, 3), torch.tensor([0, 5]), 5)),
        # F.embedding's options the kernels do not have
        ErrorCase(rf"{e}: max_norm is not supported", f, (i, w), {"max_norm": 1.0}, NotImplementedError),
        ErrorCase(rf"{e}: scale_grad_by_freq=True is not supported", f, (i, w, None, None, 2.0, True),
                  exc=NotImplementedError),
        ErrorCase(rf"{e}: sparse=True is not supported", f, (i, w), {"sparse": True}, NotImplementedError),
    ]
    # the C++ layer and the fake kernels (meta tensors) check the same
    for dev in ("cpu", "meta"):
        wd, id_, g = w.to(dev), i.to(dev), torch.randn(4, 3, device=dev)
        cases += [
            ErrorCase(rf"{e}: input must be int64 indices, got Int", f, (id_.int(), wd)),
            ErrorCase(rf"{e}: weight must be 2-D \[num_embeddings, embedding_dim\], got shape \[5\]", f,
                      (id_, wd[:, 0])),
            ErrorCase(rf"{e}: weight must be float32, float16, bfloat16 or float64, got Long", f, (id_, wd.long())),
            ErrorCase(rf"{e}: padding_idx must be in \[-num_embeddings, num_embeddings\) = \[-5, 5\), got 5", f,
                      (id_, wd, 5)),
            ErrorCase(rf"{e}: padding_idx must be in .* got -6", f, (id_, wd), {"padding_idx": -6}),
            ErrorCase(rf"{e}_backward: grad_out must have shape input.shape \+ \[embedding_dim\] = \[4\] \+ \[D\], "
                      rf"got \[3, 3\]", bwd, (g[:3], id_, 5)),
            ErrorCase(rf"{e}_backward: padding_idx must be in .* got -6", bwd, (g, id_, 5, -6)),
            ErrorCase(rf"{e}_backward: num_embeddings must be >= 0, got -1", bwd, (g, id_, -1)),
        ]
    return cases


def _embedding_cuda_errors():
    w = torch.randn(5, 3, device="cuda")
    return [ErrorCase(r"tinycuda::embedding: input is on cpu but weight is on cuda", ops.embedding,
                      (torch.tensor([0, 1]), w))]


def _embedding_bench(sh, dt, dev):
    b, sl, v, d = sh
    return [torch.randint(0, v, (b, sl), device=dev), randn((v, d), dev, dt)]


def _embedding_bytes(shape, mode, s):
    """(batch, seqlen, num_embeddings, embedding_dim): the forward reads the N looked-up rows and writes them, and
    reads the int64 ids; the backward reads grad_out and the ids and writes every row of grad_weight (zeros too)."""
    b, sl, v, d = shape
    n = b * sl
    fwd, bwd = 2 * n * d * s + 8 * n, n * d * s + v * d * s + 8 * n
    return "GB/s", {"fwd": fwd, "bwd": bwd, "fwd+bwd": fwd + bwd}[mode]


# (B, S, V, D): GPT-2 small's token embedding (8 x 1024 tokens, its 50304-padded vocabulary, 768 wide), its
# position embedding (1024 rows), GPT-2 XL's width (1600)
EMBEDDING_SHAPES = {"small": [(8, 1024, 50304, 768)], "large": [(16, 1024, 50304, 1600)],
                    "all": [(8, 1024, 50304, 768), (8, 1024, 1024, 768), (16, 1024, 50304, 1600)],
                    "cpu": [(4, 64, 1000, 64)]}


# ---------------------------------------------------------------------------
# the table

_AOT_SAVED_GRAD = {
    # With compute_grad the op's gradient outputs are what its backward scales
    # in place; opcheck's AOT test returns those outputs from the graph as
    # well, which AOTAutograd cannot partition. The real use (the functional
    # API drops them) is checked by the torch.compile test.
    "test_utils": ("test_schema", "test_autograd_registration", "test_faketensor"),
}

# ---------------------------------------------------------------------------
# adamw: one AdamW step over lists of tensors, the L2 norm of many tensors. The
# table's calls take flat tensors (params, grads, exp_avgs, exp_avg_sqs of one
# tensor after another: the generic tests handle tensors, not lists); the step
# runs on copies and returns the new params, exp_avgs and exp_avg_sqs.

ADAMW_SHAPES = [(0,), (1,), (3, 5), (16385,), (7, 33)]  # 16385: past a 16384-element chunk
ADAMW_KW = dict(lr=1e-2, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1, step=3)


def _quads(flat):
    return [list(flat[i::4]) for i in range(4)]


def _adamw_step(*flat, max_grad_norm=None, **kw):
    """tinycuda.adamw_ on copies (clipped by multi_tensor_l2norm's norm with max_grad_norm)."""
    p, g, m, v = _quads(flat)
    p, m, v = ([t.detach().clone() for t in ts] for ts in (p, m, v))
    norm = ops.multi_tensor_l2norm(g) if max_grad_norm else None
    ops.adamw_(p, g, m, v, **kw, grad_norm=norm, max_grad_norm=max_grad_norm or 0.0)
    return (*p, *m, *v)


def _adamw_ref(*flat, lr, beta1, beta2, eps, weight_decay, step, max_grad_norm=None):
    """torch.optim.AdamW's update (its foreach path's ops) in the tensors' dtype, after
    clip_grad_norm_'s scaling (the norm in float32, float64 for float64)."""
    p, g, m, v = _quads(flat)
    if max_grad_norm:
        norm = torch.linalg.vector_norm(torch.cat([t.reshape(-1).to(ops.adamw.norm_dtype(t.dtype)) for t in g]))
        g = [t * (max_grad_norm / (norm + 1e-6)).clamp(max=1.0).to(t.dtype) for t in g]
    bias1, bias2 = 1 - beta1 ** step, 1 - beta2 ** step
    outs = []
    for pi, gi, mi, vi in zip(p, g, m, v):
        mi = mi.lerp(gi, 1 - beta1)
        vi = vi.mul(beta2).addcmul(gi, gi, value=1 - beta2)
        denom = (vi.sqrt() / bias2 ** 0.5).add(eps)
        outs.append((pi.mul(1 - lr * weight_decay).addcdiv(mi, denom, value=-lr / bias1), mi, vi))
    return tuple(t for k in range(3) for t in (o[k] for o in outs))


def _adamw_samples(device, dtype):
    def state():
        flat = []
        for s in ADAMW_SHAPES:
            flat += [randn(s, device, dtype), randn(s, device, dtype), randn(s, device, dtype, 0.1),
                     randn(s, device, dtype).abs() * 0.01]
        return flat

    yield Sample("several tensors", tuple(state()), ADAMW_KW, grad=())
    yield Sample("clipped", tuple(state()), {**ADAMW_KW, "max_grad_norm": 1.0}, grad=())
    flat = state()
    flat[1::4] = [view(t, "offset") for t in flat[1::4]]  # grads off the 16-byte grid: the scalar path
    yield Sample("misaligned grads", tuple(flat), ADAMW_KW, grad=())


def _multi_tensor_l2norm(*ts):
    return ops.multi_tensor_l2norm(ts)


def _multi_tensor_l2norm_ref(*ts):
    return torch.linalg.vector_norm(torch.cat([t.reshape(-1).to(ops.adamw.norm_dtype(t.dtype)) for t in ts]))


def _multi_tensor_l2norm_samples(device, dtype):
    yield Sample("several tensors", tuple(randn(s, device, dtype) for s in ADAMW_SHAPES), grad=())
    yield Sample("one, misaligned", (view(randn((40000,), device, dtype), "offset"),), grad=())
    yield Sample("empty", (randn((0,), device, dtype),), grad=())


OPS = [
    OpInfo("relu", ops.relu, torch.relu, _unary(), errors=_relu_errors,
           bench=Bench(EW_SHAPES, _one, _relu_bytes)),
    OpInfo("relu_backward", ops.relu_backward, _relu_backward_ref, _relu_backward_samples, differentiable=False,
           gradcheck=False, errors=_relu_backward_errors),
    OpInfo("square", ops.square, torch.square, _unary(), errors=_square_errors,
           bench=Bench(EW_SHAPES, _one, _elementwise_bytes(1, 2))),
    OpInfo("gelu", ops.gelu, F.gelu, _unary(3.0, ({"approximate": "none"}, {"approximate": "tanh"})),
           errors=_gelu_errors, bench=Bench(EW_SHAPES, _one, _elementwise_bytes(1, 2))),
    OpInfo("swiglu", ops.swiglu, _swiglu_ref, _pair_samples(), errors=_swiglu_errors,
           cuda_errors=_swiglu_cuda_errors,
           bench=Bench(GLU_SHAPES, _pair, _glu_bytes, liger=_liger("ops.swiglu", "LigerSiLUMulFunction"))),
    OpInfo("geglu", ops.geglu, _geglu_ref, _pair_samples(({}, {"approximate": "none"})), errors=_geglu_errors,
           # tanh form (geglu's default), as Liger's
           bench=Bench(GLU_SHAPES, _pair, _glu_bytes, liger=_liger("ops.geglu", "LigerGELUMulFunction"))),
    # fwd reads x and writes y; bwd reads grad_y and the saved x or y, writes grad_x
    *(OpInfo(name, getattr(ops, name), u.ref, _unary_op_samples(name), errors=_unary_op_errors(name),
             bench=Bench(EW_SHAPES, _unary_op_bench(name), _elementwise_bytes(1, 2))) for name, u in UNARY.items()),
    *(OpInfo(name, getattr(ops, name), u.ref, _binary_op_samples(name), errors=_binary_op_errors(name),
             cuda_errors=_binary_op_cuda_errors(name),
             bench=Bench(BINARY_SHAPES, _binary_op_bench(name), _binary_bytes(u.reads_operands)))
      for name, u in BINARY.items()),
    *(OpInfo(name + "_backward", _binary_backward(name), _binary_backward_ref(name), _binary_backward_samples(name),
             differentiable=False, gradcheck=False) for name in BINARY),
    # no bench: `tinycuda bench` counts bytes in the first argument's itemsize, here the bool condition's
    OpInfo("where", ops.where, torch.where, _where_samples, errors=_where_errors, cuda_errors=_where_cuda_errors),
    # grad_bias sums over up to 1000 rows: fp32 atol follows sqrt(rows) * eps.
    OpInfo("scale_bias_relu", ops.scale_bias_relu, _scale_bias_relu_ref, _scale_bias_relu_samples, grad_atol=1e-4,
           racecheck=True, errors=_scale_bias_relu_errors,
           bench=Bench(EW_SHAPES, lambda sh, dt, dev: [randn(sh, dev, dt), randn(sh[-1], dev, dt), 0.5], _sbr_bytes)),
    OpInfo("softmax", ops.softmax, _softmax_ref, _softmax_samples, grad_atol=1e-4, racecheck=True,
           errors=_softmax_errors,
           bench=Bench(SOFTMAX_SHAPES, lambda sh, dt, dev: [randn(sh, dev, dt), -1], _elementwise_bytes(1, 2),
                       liger=_liger("transformers.functional", "liger_softmax", lambda x, dim: (x,)))),
    OpInfo("log_softmax", ops.log_softmax, _log_softmax_ref, _softmax_samples, grad_atol=1e-4, racecheck=True,
           errors=_log_softmax_errors,
           bench=Bench({k: v for k, v in SOFTMAX_SHAPES.items() if k in ("cpu", "sweep")},
                       lambda sh, dt, dev: [randn(sh, dev, dt), -1], _elementwise_bytes(1, 2))),
    OpInfo("layer_norm", ops.layer_norm, _layer_norm_ref, _layer_norm_samples, grad_atol=1e-4, racecheck=True,
           errors=_layer_norm_errors,  # grad_weight / grad_bias add up to 300 rows: atol ~ sqrt(rows) * eps
           bench=Bench(NORM_SHAPES, _layer_norm_bench, _norm_bytes,
                       liger=_liger("transformers.functional", "liger_layer_norm",
                                    lambda x, shape, w, b: (x, w, b, 1e-5)))),
    OpInfo("rms_norm", ops.rms_norm, _rms_norm_ref, _rms_norm_samples, grad_atol=1e-4, racecheck=True,
           errors=_rms_norm_errors,
           bench=Bench(NORM_SHAPES, _rms_norm_bench, _norm_bytes,
                       liger=_liger("transformers.functional", "liger_rms_norm",
                                    lambda x, shape, w, eps: (x, w, eps)))),
    OpInfo("rms_norm_", _rms_norm_inplace, _rms_norm_ref, _rms_norm_inplace_samples, differentiable=False,
           gradcheck=False),
    OpInfo("add_rms_norm", ops.add_rms_norm, _add_rms_norm_ref, _add_rms_norm_samples, grad_atol=1e-4,
           racecheck=True, errors=_add_rms_norm_errors,
           bench=Bench(NORM_SHAPES, _add_rms_norm_bench, _add_rms_norm_bytes, liger=_liger_add_rms_norm)),
    OpInfo("add_layer_norm", ops.add_layer_norm, _add_layer_norm_ref, _add_layer_norm_samples, grad_atol=1e-4,
           racecheck=True, errors=_add_layer_norm_errors,
           bench=Bench(NORM_SHAPES, _add_layer_norm_bench, _add_rms_norm_bytes)),
    # the reduce family, in the core's op order (tinycuda.ops.reduce reads it from tc_reduce_op): fwd (and fwd+bwd
    # where there is a gradient) on a full reduction, rows and columns; an op of the list with no REDUCE line
    # fails test_every_op_and_function_is_in_the_table
    *(OpInfo(name, getattr(ops, name), u.ref, _reduce_op_samples(name), rtol=u.rtol, atol=u.atol,
             grad_atol=u.grad_atol, differentiable=grad, gradcheck=grad, racecheck=True,
             errors=_reduce_op_errors(name),
             bench=Bench(REDUCE_SHAPES, _reduce_op_bench(name), _reduce_bytes(name),
                         modes=("fwd", "fwd+bwd") if grad else ("fwd",), fp32_tol=1e-3, ref=u.eager))
      for name, u, grad in ((n, REDUCE[n], _has_backward(n)) for n in ops.reduce.__all__ if n in REDUCE)),
    OpInfo("sum_backward", torch.ops.tinycuda.sum_backward, _sum_backward_ref, _sum_backward_samples,
           differentiable=False, gradcheck=False),
    # the scan family, in the core's op order (tinycuda.ops.scan reads it from tc_scan_op): fwd and fwd+bwd on
    # one long row, rows and columns; an op of the list with no SCAN line fails
    # test_every_op_and_function_is_in_the_table
    *(OpInfo(name, getattr(ops, name), u.ref, _scan_op_samples(name), rtol=u.rtol, atol=u.atol,
             grad_rtol=u.grad_rtol, grad_atol=u.grad_atol, racecheck=True, errors=_scan_op_errors(name),
             bench=Bench(SCAN_SHAPES, _scan_op_bench(name), _scan_bytes(name), modes=("fwd", "fwd+bwd"),
                         fp32_tol=1e-3))
      for name, u in ((n, SCAN[n]) for n in ops.scan.__all__ if n in SCAN)),
    # the transpose family: copies, exact (rtol = atol = 0); any dtype (test_transpose: integers, bool, float64,
    # complex); benched against eager's .contiguous() of the view and its torch.compile
    OpInfo("permute_copy", ops.permute_copy, torch.permute_copy, _permute_samples, rtol=0, atol=0, racecheck=True,
           errors=_permute_errors, cuda_errors=_permute_cuda_errors,
           bench=Bench(PERMUTE_SHAPES, _permute_bench, _copy_bytes, modes=("fwd",), fp32_tol=0.0,
                       ref=lambda x, dims: x.permute(dims).contiguous())),
    OpInfo("transpose_copy", ops.transpose_copy, torch.transpose_copy, _transpose_samples, rtol=0, atol=0,
           racecheck=True,
           bench=Bench(TRANSPOSE_SHAPES, lambda sh, dt, dev: [randn(sh, dev, dt), 0, 1], _copy_bytes, modes=("fwd",),
                       fp32_tol=0.0, ref=lambda x, d0, d1: x.transpose(d0, d1).contiguous())),
    OpInfo("contiguous", ops.contiguous, _contiguous_ref, _contiguous_samples, rtol=0, atol=0, racecheck=True),
    # counts: exact against torch's float32 bins (_histc_ref); no gradient, as torch's
    OpInfo("histc", ops.histc, _histc_ref, _histc_samples, rtol=0, atol=0, differentiable=False, gradcheck=False,
           racecheck=True, errors=_histc_errors,
           bench=Bench(HISTC_SHAPES, _histc_bench, _histogram_bytes, modes=("fwd",))),
    # weighted sums of ~30 float32 terms a bin, as torch's but in another order (the bench: ~67K terms a bin);
    # bincount's length is the data's (a host sync): no CUDA graph
    OpInfo("bincount", ops.bincount, _bincount_ref, _bincount_samples, rtol=1e-5, atol=1e-5, differentiable=False,
           gradcheck=False, cuda_graph=False, racecheck=True, errors=_bincount_errors,
           cuda_errors=_bincount_cuda_errors,
           bench=Bench(BINCOUNT_SHAPES, _bincount_bench, _histogram_bytes, modes=("fwd",), fp32_tol=1e-4)),
    # the triangle family, in the core's op order (tinycuda.ops.triangle reads it from tc_triangle_op): bytes
    # counted as a copy's (x read, y written), though the zeroed half of x is never read
    *(OpInfo(name, getattr(ops, name), getattr(torch, name), _triangle_samples(name), rtol=0, atol=0,
             errors=_triangle_errors(name),
             bench=Bench(TRIANGLE_SHAPES, _triangle_bench, _elementwise_bytes(1, 1), modes=("fwd", "fwd+bwd")))
      for name in ops.triangle.__all__),
    # the losses family, in the core's op order (tinycuda.ops.losses reads it from tc_loss_op); an op of the list
    # with no LOSSES line fails test_every_op_and_function_is_in_the_table
    *(OpInfo(name, getattr(ops, name), u.ref, _loss_op_samples(name), rtol=u.rtol, atol=u.atol,
             grad_rtol=u.grad_rtol, grad_atol=u.grad_atol, racecheck=True, errors=_loss_op_errors(name),
             cuda_errors=_loss_cuda_errors(name), bench=LOSS_BENCH.get(name))
      for name, u in ((n, LOSSES[n]) for n in ops.losses.__all__ if n in LOSSES)),
    # the sort family: exact (the elements' bits move), so the default tolerances hold; fwd only (the indices
    # take no grad_out). Eager in the bench: torch.sort(stable=True) (a CUB radix sort on CUDA, stable either way:
    # its indices are checked against ours) and torch.topk on rows of distinct values
    OpInfo("sort", ops.sort, _sort_ref, _sort_samples("sort"), racecheck=True, errors=_sort_errors("sort"),
           bench=Bench(SORT_SHAPES, lambda sh, dt, dev: [_rows_bench(sh, dt, dev)], _sort_bytes, modes=("fwd",))),
    OpInfo("argsort", ops.argsort, _argsort_ref, _sort_samples("argsort"), differentiable=False, gradcheck=False,
           racecheck=True, errors=_sort_errors("argsort")),
    OpInfo("topk", ops.topk, _topk_ref, _topk_samples, racecheck=True, errors=_sort_errors("topk"),
           bench=Bench(TOPK_SHAPES, lambda sh, dt, dev: [_rows_bench(sh, dt, dev, _distinct), sh[2]], _topk_bytes,
                       modes=("fwd",), ref=torch.topk)),
    # fp32 dot products of up to 4097 terms: |err| ~ sqrt(k) * eps * |terms|.
    OpInfo("linear", ops.linear, F.linear, _linear_samples, rtol=1e-4, atol=1e-4, grad_atol=5e-4, racecheck=True,
           errors=_linear_errors, cuda_errors=_linear_cuda_errors,
           bench=Bench({"small": [(1024, 1024, 1024)], "large": [(4096, 4096, 4096)],
                        "all": [(512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096)],
                        "cpu": [(128, 256, 128), (512, 512, 512)]},
                       _linear_bench, _linear_flops, fp32_tol=1e-3)),
    OpInfo("linear_act", ops.linear_act, _linear_act_ref, _linear_act_samples, rtol=1e-4, atol=1e-4,
           grad_atol=5e-4, errors=_linear_act_errors,
           bench=Bench({"small": [(1024, 1024, 1024)], "large": [(8192, 4096, 14336)],
                        "all": [(4096, 4096, 4096), (8192, 14336, 4096), (8192, 4096, 14336)],
                        "cpu": [(128, 256, 128), (512, 512, 512)]},
                       lambda sh, dt, dev: _linear_bench(sh, dt, dev) + ["gelu"], _linear_flops, fp32_tol=1e-3)),
    # fp32 dot products of up to 4097 terms, as linear's
    OpInfo("matmul", ops.matmul, torch.matmul, _matmul_samples, rtol=1e-4, atol=1e-4, grad_atol=5e-4,
           racecheck=True, errors=_matmul_errors, cuda_errors=_matmul_cuda_errors,
           bench=Bench({"small": [(1024, 1024, 1024)], "large": [(4096, 4096, 4096)],
                        "all": [(1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
                                (8192, 4096, 4096), (8192, 14336, 4096), (8192, 4096, 14336),
                                (8192, 128256, 4096), (32, 2048, 2048, 128)],
                        "cpu": [(128, 256, 128), (512, 512, 512)]},
                       _matmul_bench, _matmul_flops, fp32_tol=1e-3)),
    # fp32 softmax-weighted sums of up to 130 keys (scores of up to 256 terms), as linear's
    OpInfo("flash_attention", ops.flash_attention, _attention_ref, _flash_attention_samples, rtol=1e-4, atol=1e-4,
           grad_atol=5e-4, racecheck=True, errors=_flash_attention_errors,
           bench=Bench({"small": [(4, 16, 1024, 64)], "large": [(4, 32, 4096, 128)],
                        "all": [(16, 32, 512, 128), (4, 32, 1024, 128), (4, 32, 4096, 64), (4, 32, 4096, 128),
                                (4, 16, 4096, 256), (2, 16, 8192, 128), (1, 32, 16384, 128),
                                # decode steps, GPT-2 small's heads (batch, heads, seqlen_q, seqlen_k, head_dim):
                                # the split-KV path, forward only, GB/s
                                (1, 12, 1, 1024, 64), (16, 12, 1, 1024, 64), (1, 12, 1, 8192, 64),
                                (16, 12, 1, 8192, 64)],
                        "cpu": [(1, 2, 256, 64)]},
                       _attention_bench, _attention_flops, modes=("fwd", "fwd+bwd"), shape_modes=_attention_modes,
                       fp32_tol=1e-3,
                       ref=_sdpa_bshd(),
                       variants={f"eager[{b.lower()}]": _sdpa_bshd(b) for b in ("FLASH_ATTENTION", "CUDNN_ATTENTION")})),
    # the GPT's form: one tensor in, one gradient out (no stack of q, k, v's gradients)
    OpInfo("flash_attention_qkvpacked", ops.flash_attention_qkvpacked, _qkvpacked_ref, _qkvpacked_samples, rtol=1e-4,
           atol=1e-4, grad_atol=5e-4, errors=_qkvpacked_errors),
    # benched causal (is_causal=True, [B, H, S, D]); flash_attention's bench is the unmasked case
    OpInfo("scaled_dot_product_attention", ops.scaled_dot_product_attention, F.scaled_dot_product_attention,
           _sdpa_samples, rtol=1e-4, atol=1e-4, grad_atol=5e-4, errors=_sdpa_errors,
           bench=Bench({"small": [(4, 16, 1024, 64)], "large": [(4, 32, 4096, 128)],
                        "all": [(16, 32, 512, 128), (4, 32, 4096, 64), (4, 32, 4096, 128), (1, 32, 16384, 128)],
                        "cpu": [(1, 2, 256, 64)]},
                       _causal_bench, _causal_flops, modes=("fwd", "fwd+bwd"), fp32_tol=1e-3,
                       variants={f"eager[{b.lower()}]": _sdpa_on(b) for b in ("FLASH_ATTENTION", "CUDNN_ATTENTION")})),
    OpInfo("cross_entropy", ops.cross_entropy, _cross_entropy_ref, _cross_entropy_samples, racecheck=True,
           opcheck_utils={"cross_entropy": _AOT_SAVED_GRAD}, errors=_cross_entropy_errors,
           bench=Bench({"small": [(4096, 32000)], "large": [(8192, 128256)],
                        "all": [(4096, 32000), (8192, 32000), (8192, 128256)], "cpu": [(128, 4096)],
                        "sweep": SWEEP},
                       lambda sh, dt, dev: [randn(sh, dev, dt), torch.randint(0, sh[1], (sh[0],), device=dev)],
                       _cross_entropy_bytes, modes=("fwd", "fwd+bwd"),
                       liger=_liger("transformers.functional", "liger_cross_entropy"), loss=True)),
    # fused_linear_cross_entropy stays torch-only (no capi): three GEMMs a chunk around the cross_entropy kernel
    OpInfo("fused_linear_cross_entropy", ops.fused_linear_cross_entropy, _flce_ref, _flce_samples, grad_rtol=1e-4,
           capi=False, backward_once=True, opcheck_utils={"fused_linear_cross_entropy": _AOT_SAVED_GRAD},
           errors=_flce_errors,
           bench=Bench({"small": [(2048, 2048, 32000)], "large": [(8192, 4096, 128256)],
                        "all": [(2048, 2048, 32000), (8192, 4096, 128256)], "cpu": [(64, 64, 1000)]},
                       _flce_bench, _flce_flops, modes=("fwd", "fwd+bwd"), fp32_tol=1e-3,
                       liger=_liger("transformers.functional", "liger_fused_linear_cross_entropy"), loss=True,
                       # chunk size trades memory for time (auto: Liger's 256 tokens at the large shape)
                       variants={f"tinycuda[chunk={c}]": (lambda c: lambda h, w, t: ops.fused_linear_cross_entropy(
                           h, w, t, chunk_size=c))(c) for c in (512, 1024)},
                       variant_modes=("fwd+bwd",))),
    # cos and sin get no gradient (Sample.grad = (0, 1)); rope_ (in place) on copies, rope's samples without grad
    OpInfo("rope", ops.rope, _rope_ref, _rope_samples, errors=_rope_errors, cuda_errors=_rope_cuda_errors,
           bench=Bench(ROPE_SHAPES, _rope_bench, _rope_bytes, grad=(0, 1),
                       liger=_liger("transformers.rope", "liger_rotary_pos_emb", several=True))),
    OpInfo("rope_", _rope_inplace, _rope_ref, _rope_inplace_samples, differentiable=False, gradcheck=False),
    # the forward copies rows (exact); weight's gradient sums ~100 float32 terms a row at most (5000 positions
    # over 50 ids): within the default tolerances. input gets no gradient (int64); the bench times weight's
    OpInfo("embedding", ops.embedding, _embedding_ref, _embedding_samples, errors=_embedding_errors,
           cuda_errors=_embedding_cuda_errors,
           bench=Bench(EMBEDDING_SHAPES, _embedding_bench, _embedding_bytes, modes=("fwd", "fwd+bwd"), grad=(1,),
                       fp32_tol=1e-4)),
    # lists of tensors: the capi door's bit-for-bit check and its errors are in tests/test_adamw.py
    OpInfo("adamw_", _adamw_step, _adamw_ref, _adamw_samples, rtol=2e-6, atol=1e-7, differentiable=False,
           gradcheck=False, capi=False),
    OpInfo("multi_tensor_l2norm", _multi_tensor_l2norm, _multi_tensor_l2norm_ref, _multi_tensor_l2norm_samples,
           differentiable=False, gradcheck=False, capi=False, racecheck=True),
]

BY_NAME = {info.name: info for info in OPS}
