"""Shared test helpers.

Accuracy rule for float16/bfloat16 (FlashAttention's): tinycuda's max error
against a float64 reference may be at most FACTOR x PyTorch's own max error
when PyTorch runs the same op in the same precision (2x for outputs, 3x for
gradients), plus one rounding step at the output's magnitude + 0.3 (the
atol of FlashAttention's tests, the rounding of ref + 0.3), so that a case
where PyTorch happens to round exactly does not demand better than exact: a
gradient that is 0 in exact arithmetic (dQ of a query seeing one key) comes
out exactly 0 from torch's cancellation but as rounding noise from a kernel
that sums the two cancelling terms in different orders.
float32 and float64 are compared to the float64 reference with tolerances
that follow from the op's accumulation length.
"""
import gc
import os
import subprocess
import sys
import zlib

import pytest
import torch

import tinycuda.ops  # noqa: F401  (loads the kernels, registers the ops)
from tinycuda.optable import grad_outs, noncontiguous, outputs, view  # noqa: F401  (re-exported for the family tests)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _inductor_cache_for_these_sources():
    """torch.compile's on-disk caches keyed by this tree's sources. AOTAutograd's cache does not hash a
    custom op's Python autograd formula: after cross_entropy's backward changed, a cache left by an older
    checkout served the old backward graph (the new op arguments are optional, so it still ran) and
    test_compile_fullgraph failed on bits. A fresh CI machine has no cache; this keeps a developer's runs
    honest too."""
    crc = 0
    for top in ("tinycuda", "csrc"):
        for d, _, files in sorted(os.walk(os.path.join(ROOT, top))):
            for f in sorted(files):
                if f.endswith((".py", ".cpp", ".cu", ".cuh", ".h")):
                    with open(os.path.join(d, f), "rb") as fh:
                        crc = zlib.crc32(fh.read(), crc)
    # One directory per xdist worker: two workers compiling the same graph into one shared directory
    # raced, and one loaded the other's half-written .so ("file too short", CI of b93511f).
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    return os.path.join(os.environ.get("TMPDIR", "/tmp"), f"torchinductor_tinycuda_{crc:08x}_{worker}")


os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", _inductor_cache_for_these_sources())
HAS_CUDA = torch.cuda.is_available() and torch._C._dispatch_has_kernel_for_dispatch_key(
    "tinycuda::relu", "CUDA")
DEVICES = ["cpu"] + (["cuda"] if HAS_CUDA else [])
HALF = [torch.float16, torch.bfloat16]
DTYPES = [torch.float32] + HALF
CUDA_REASON = "needs a CUDA GPU and a CUDA build"
requires_cuda = pytest.mark.skipif(not HAS_CUDA, reason=CUDA_REASON)


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


@pytest.fixture(params=DTYPES, ids=lambda d: str(d).replace("torch.", ""))
def dtype(request):
    return request.param


@pytest.fixture(autouse=True)
def _fresh_seed(request):
    # fresh random inputs per test, but reproducible from the test's id
    torch.manual_seed(zlib.crc32(request.node.nodeid.encode()))


@pytest.fixture(autouse=True)
def _large_gives_memory_back(request):
    # A `large` test (tensors past 2^31 elements: up to 21 GB live) leaves its blocks in the caching allocator,
    # where another worker of the GPU run (pytest -n 16, one GPU) cannot have them. H200, 2026-11-29: in one full
    # run 7 flash_attention decode tests failed on "CUDA out of memory" while two workers held 42 and 30 GiB
    # (another run lost 21 decode tests, its messages not kept); each passed when run again. Hand them back.
    yield
    if request.node.get_closest_marker("large") and torch.cuda.is_available():
        gc.collect()
        torch.cuda.empty_cache()


def _on_cuda(value):
    return (isinstance(value, str) and value.split(":")[0] == "cuda") or (
        isinstance(value, torch.device) and value.type == "cuda")


# Tests that take minutes (test_build's two builds: 5-10 minutes each on CI's 2 cores) run first, so that they
# overlap the rest of the suite on the other worker. In collection order the nvcc check started two thirds of the
# way through and ran on with the other worker idle: CI took 33 minutes, 23.6 after this and the check's cuts
SLOW_FIRST = ("test_cuda_library_builds_for_sm80_and_sm90a", "test_jit_build_from_a_source_checkout")


def pytest_collection_modifyitems(items):
    """Marks every test that runs on the GPU `cuda` (a `device` or other
    parameter naming it, or requires_cuda), so that `make sanitize` can
    select them with -m (the markers: pyproject.toml); puts SLOW_FIRST first."""
    items.sort(key=lambda item: item.name not in SLOW_FIRST)  # stable: the rest keep their order
    for item in items:
        callspec = getattr(item, "callspec", None)
        params = callspec.params.values() if callspec else ()
        if any(_on_cuda(v) for v in params) or any(
                m.kwargs.get("reason") == CUDA_REASON for m in item.iter_markers("skipif")):
            item.add_marker(pytest.mark.cuda)


def assert_device_assert(op, *lines):
    """The statements `lines` (CUDA work on a value only the device reads) stop with a device-side assert naming
    tinycuda::<op>, as torch's kernels do, reported at the next synchronization. In a child process: the CUDA
    context is lost after it."""
    r = run_child("\n".join(["import torch, tinycuda.ops", *lines, "torch.cuda.synchronize()", "print('no error')"]))
    # the device's assert line goes to the process's output, the host's error to stderr
    assert r.returncode != 0 and "no error" not in r.stdout, (r.stdout, r.stderr)
    assert f"tinycuda::{op}" in r.stderr + r.stdout, (r.stdout, r.stderr)
    assert "device-side assert" in r.stderr, r.stderr


def max_err(a, ref):
    """The largest |a - ref|; equal values (equal infinities: logcumsumexp's -inf) count 0."""
    if not a.numel():
        return 0.0
    a, ref = a.double(), ref.double()
    return torch.where(a == ref, 0.0, a - ref).abs().max().item()


def assert_matches(ours, torch_same_precision, ref, *, grad=False, rtol32=1e-5, atol32=1e-5):
    """`ours` vs the float64 `ref` under the per-dtype rule above."""
    assert ours.shape == ref.shape, (ours.shape, ref.shape)
    assert ours.dtype == torch_same_precision.dtype
    if ours.numel() == 0:
        return
    assert not torch.isnan(ours).any() or torch.isnan(ref).any(), "NaN in output"
    if ours.dtype in HALF:
        factor = 3.0 if grad else 2.0
        e_ours = max_err(ours, ref)
        e_torch = max_err(torch_same_precision, ref)
        finite = ref[ref.isfinite()].abs()
        one_rounding = torch.finfo(ours.dtype).eps * ((finite.max().item() if finite.numel() else 0.0) + 0.3)
        assert e_ours <= factor * e_torch + one_rounding, (
            f"{ours.dtype}: error {e_ours:.3g} > {factor} x torch's {e_torch:.3g} + {one_rounding:.3g}")
    else:
        torch.testing.assert_close(ours.double(), ref.double(), rtol=rtol32, atol=atol32)


def check_op(ours_fn, torch_fn, args, kwargs=None, *, grad=True, grad_out="contig", rtol32=1e-5, atol32=1e-5,
             grad_rtol32=None, grad_atol32=None):
    """Runs ours_fn and torch_fn on `args` (views are kept as given: strides
    matter) and torch_fn on float64 copies; compares outputs, then the
    gradients of the floating tensors among args for one random grad_out
    (laid out as `grad_out` says: optable.view). grad: True (every floating
    tensor), False, or the indices of the args that get one."""
    kwargs = kwargs or {}
    wants = [isinstance(t, torch.Tensor) and t.is_floating_point() and (grad is True or (grad and i in grad))
             for i, t in enumerate(args)]

    def leaves(cast):
        return [cast(t).detach().requires_grad_(w) if isinstance(t, torch.Tensor) and t.is_floating_point() else t
                for t, w in zip(args, wants)]

    ours_in, lp_in, ref_in = leaves(lambda t: t), leaves(lambda t: t), leaves(lambda t: t.double())
    out, out_lp, out_ref = ours_fn(*ours_in, **kwargs), torch_fn(*lp_in, **kwargs), torch_fn(*ref_in, **kwargs)
    outs, outs_lp, outs_ref = outputs(out), outputs(out_lp), outputs(out_ref)
    assert len(outs) == len(outs_ref), (len(outs), len(outs_ref))
    for k, (a, b, r) in enumerate(zip(outs, outs_lp, outs_ref)):
        try:
            assert_matches(a, b, r, rtol32=rtol32, atol32=atol32)
        except AssertionError as e:
            if len(outs) > 1:
                e.add_note(f"(output {k})")
            raise
    idx = [i for i, w in enumerate(wants) if w]
    if not idx:
        return out
    # the outputs that depend on the inputs asked for (add_rms_norm's s does not on its weight)
    live = [k for k, r in enumerate(outs_ref) if r.requires_grad]
    outs, outs_lp, outs_ref = ([o[k] for k in live] for o in (outs, outs_lp, outs_ref))
    g = grad_outs(outs_ref, grad_out, outs[0].dtype)
    gs = torch.autograd.grad(outs, [ours_in[i] for i in idx], g)
    gs_lp = torch.autograd.grad(outs_lp, [lp_in[i] for i in idx], g)
    gs_ref = torch.autograd.grad(outs_ref, [ref_in[i] for i in idx], [t.double() for t in g])
    for i, a, b, r in zip(idx, gs, gs_lp, gs_ref):
        assert a.dtype == args[i].dtype
        try:
            assert_matches(a, b, r, grad=True, rtol32=grad_rtol32 or rtol32, atol32=grad_atol32 or atol32)
        except AssertionError as e:
            e.add_note(f"(the gradient of argument {i})")
            raise
    return out


def check_compiled(fn, args, kwargs=None, *, wrt=(), grad_out=None, reps=3, rtol=None, atol=None,
                   **compile_kwargs):
    """torch.compile(fn, fullgraph=True) (no graph break) gives fn's output
    and, when `wrt` is given, the gradients of those tensors for grad_out
    (None: a scalar output), on each of `reps` calls (the CUDA-graph mode,
    mode="reduce-overhead", records on a later call, then replays);
    rtol/atol: torch.testing.assert_close's (None: its defaults)."""
    kwargs = kwargs or {}
    torch._dynamo.reset()

    def run(f):
        out = f(*args, **kwargs)
        live = [o for o in (out if isinstance(out, (tuple, list)) else (out,)) if o.requires_grad]
        return out, (torch.autograd.grad(live, list(wrt), grad_out) if wrt else ())

    ref_out, ref_grads = run(fn)
    compiled = torch.compile(fn, fullgraph=True, **compile_kwargs)
    for _ in range(reps):
        out, grads = run(compiled)
        torch.testing.assert_close(out, ref_out, rtol=rtol, atol=atol, equal_nan=True)
        for g, r in zip(grads, ref_grads, strict=True):
            torch.testing.assert_close(g, r, rtol=rtol, atol=atol, equal_nan=True)


def assert_drop_in_module(ours, ref, x):
    """`ours` is a drop-in for the torch.nn module `ref`: the same state_dict
    keys and repr, and the same output after loading the other's (random)
    parameters, in both directions."""
    assert list(ours.state_dict()) == list(ref.state_dict()) and repr(ours) == repr(ref)
    for src, dst in ((ref, ours), (ours, ref)):
        for p in src.parameters():
            torch.nn.init.normal_(p)
        dst.load_state_dict(src.state_dict())
        torch.testing.assert_close(ours(x), ref(x))


def launched(fn, kernel):
    """Whether one call of fn launches a CUDA kernel whose name contains `kernel`: how a test shows that it
    reached the path it is about (a TMA-only kernel, say, and not its fallback). Under compute-sanitizer
    CUPTI cannot start, so the profiler sees no kernel at all; the Makefile's and scripts' sanitizer runs set
    TC_SANITIZER=1, and there the answer is True (that run checks memory; the same test without the
    sanitizer checks the path). Anywhere else a profile without kernels fails."""
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = [e.name for e in prof.events()]
    if not names:
        assert os.environ.get("TC_SANITIZER") == "1", "the profiler saw no CUDA kernel (no CUPTI here?)"
        return True
    return any(kernel in n for n in names)


def run_child(code):
    """`code` run by a fresh Python with this checkout's tinycuda (a device-side assert ends its CUDA context,
    so the tests that provoke one do it in a child): the CompletedProcess, output captured."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
