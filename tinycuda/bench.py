"""`tinycuda bench`: tinycuda against torch eager and torch.compile, side by side.

For every op, mode (fwd, bwd, fwd+bwd) and shape, each implementation is
checked against eager torch, then timed: CUDA events around one call, the L2
cache flushed before every repetition (a 256 MB write), median of --reps
(>= 20). Before each timed call the GPU is also kept busy for ~0.5 ms
(torch.cuda._sleep), so the host's dispatch work (dynamo guards, autograd,
Python) is queued ahead and the events measure the kernels, not the host: the
first H100 run without it charged torch.compile up to 150 us of host time at
small shapes.
Losses (cross_entropy, fused_linear_cross_entropy) are backpropagated with
grad_loss = 1, as loss.backward() does in training; other ops with a random
grad_out.
Figures: milliseconds; GB/s over the fewest bytes the op must move (memory-
bound ops) or TFLOP/s (linear); the percentage of this device's measured
peak (copy bandwidth, cuBLAS bf16/fp32 rates, measured at the start); the
speedup over eager and torch.compile; the peak memory a call allocates.
Without a GPU the CPU kernels run at small shapes and the figures say so.
"""
import datetime
import json
import math
import os
import statistics
import time

import torch

import tinycuda
from tinycuda import optable, variants
from tinycuda.optable import MODES


# ---------------------------------------------------------------------------
# what is benchmarked: the op table's entries with a Bench (tinycuda/optable.py)

SPECS = {info.name: info for info in optable.OPS if info.bench is not None}


# ---------------------------------------------------------------------------
# timing

class Timer:
    """Median time of fn() in ms, with the L2 flushed before each repetition."""

    def __init__(self, device, reps):
        self.device, self.reps = device, max(reps, 20)
        self.flush = torch.empty(256 * 2**20, dtype=torch.int8, device=device) if device == "cuda" else None

    def __call__(self, fn):
        for _ in range(3):
            fn()
        times = []
        if self.device == "cuda":
            torch.cuda.synchronize()
            for _ in range(self.reps):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                self.flush.zero_()
                torch.cuda._sleep(1_000_000)  # ~0.5 ms at 1.98 GHz: hides the host's dispatch time
                start.record()
                fn()
                end.record()
                times.append((start, end))
            torch.cuda.synchronize()
            return statistics.median(s.elapsed_time(e) for s, e in times)
        for _ in range(self.reps):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)


def profiled(name, fn):
    """One call of fn in an NVTX range `name`, between cudaProfilerStart and Stop, synchronized: what
    `ncu --profile-from-start off --nvtx` measures of the scripts' cases (warm fn up first)."""
    torch.cuda.profiler.start()
    torch.cuda.nvtx.range_push(name)
    fn()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
    torch.cuda.profiler.stop()


def has_liger():
    """Liger-Kernel (Triton) is an optional comparison: `pip install liger-kernel`."""
    try:
        import liger_kernel  # noqa: F401
    except ImportError:
        return False
    return True


def measure_peaks(device, timer):
    """The device's own ceilings: copy bandwidth (bytes read + written) and
    matmul rates of torch (cuBLAS on a GPU) in bf16 and fp32."""
    n = 2**28 if device == "cuda" else 2**24
    a = torch.empty(n, dtype=torch.float32, device=device).uniform_()
    b = torch.empty_like(a)
    copy_ms = timer(lambda: b.copy_(a))
    del a, b
    peaks = {"copy_GBps": 2 * n * 4 / copy_ms / 1e6}
    size = 4096 if device == "cuda" else 512
    for dt, key in ((torch.bfloat16, "matmul_bf16_TFLOPs"), (torch.float32, "matmul_fp32_TFLOPs")):
        x, y = torch.randn(size, size, device=device, dtype=dt), torch.randn(size, size, device=device, dtype=dt)
        peaks[key] = 2 * size**3 / timer(lambda: x @ y) / 1e9
    return peaks


def peak_memory_mb(device, fn):
    """Extra memory one call allocates beyond what exists before it (CUDA)."""
    if device != "cuda":
        return None
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    out = fn()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    del out
    return peak / 2**20


# ---------------------------------------------------------------------------
# one case

def _tolerance(dtype, bench):
    """Agreement with eager required before timing: the entry's in float32
    (reductions of 4096+ terms in another order differ by ~1e-4 relative);
    half types by their eps."""
    return bench.fp32_tol if dtype == torch.float32 else 2e-2


def _runner(fn, inputs, mode, loss=False, grad=None, grads=None):
    """A zero-argument callable for one mode, and its result for checking;
    a loss's gradient is 1, other outputs' a fixed random tensor each (or
    `grads`, given: the float64 reference backpropagates eager's, cast; its
    own draw in float64 would be other numbers); run.grad_out is the one used.
    inputs: the args, tensors (the floating ones get gradients, or those whose
    indices `grad` lists) and other values."""
    if mode == "fwd":
        def run():
            with torch.no_grad():
                return fn(*inputs)
        return run
    leaves = [t.detach().requires_grad_(t.is_floating_point() and (grad is None or i in grad))
              if isinstance(t, torch.Tensor) else t for i, t in enumerate(inputs)]
    wrt = [t for t in leaves if isinstance(t, torch.Tensor) and t.requires_grad]
    # grad_out by shape, not randn_like: that follows the output's strides, so
    # two implementations whose outputs are laid out differently (SDPA's, a
    # transposed view here) would get different gradients
    # (one for each floating output of an op with several: add_rms_norm, rope; max's values, not its indices)
    def grad_out(out):
        return [torch.ones_like(o) if loss else torch.randn(o.shape, dtype=o.dtype, device=o.device)
                for o in _floating(out)]

    if mode == "bwd":
        out = _floating(fn(*leaves))
        g = grads or grad_out(out)

        def run():
            return torch.autograd.grad(out, wrt, g, retain_graph=True)
    else:
        if grads is None:
            with torch.no_grad():
                grads = grad_out(fn(*inputs))
        g = grads

        def run():
            return torch.autograd.grad(_floating(fn(*leaves)), wrt, g)
    run.grad_out = g
    return run


def _as_list(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _floating(out):
    """The outputs that take a gradient (max's int64 indices do not)."""
    return [o for o in _as_list(out) if o.is_floating_point()]


def _reference64(eager, inputs, mode, spec, grad_out):
    """Eager on float64 copies of the floating inputs, backpropagating the same
    grad_out (cast): the truth both eager and an implementation are judged
    against. None where it cannot run (no float64 kernel, out of memory)."""
    try:
        inputs64 = [t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in inputs]
        grads = grad_out and [g.double() for g in grad_out]
        return _as_list(_runner(eager, inputs64, mode, spec.loss, spec.grad, grads)())
    except (RuntimeError, ValueError, TypeError, NotImplementedError):  # torch.OutOfMemoryError: a RuntimeError
        return None


def _max_err(a, ref):
    """The largest |a - ref|; equal values (equal infinities: logcumsumexp's -inf) count 0; a NaN makes it NaN."""
    a, ref = a.double(), ref.double()
    return torch.where(a == ref, 0.0, a - ref).abs().max().item() if a.numel() else 0.0


def _arbitrate(o, r, r64, grad, what, quick):
    """When `o` missed eager's `r` in the quick check (the AssertionError
    `quick`). Eager is rounded too: over a 16M-element float32 scan and its
    cancelling backward, an implementation as accurate as eager still differs
    from it by more than the fixed tolerance (logcumsumexp on the H100). So
    `o` passes if its error against the float64 `r64` is at most 2x eager's
    own (3x for gradients: they round the forward's error once more) plus one
    rounding of o's dtype at the reference's scale -- the FlashAttention-style
    rule of tests/conftest.py's assert_matches. Without a float64 reference
    to judge by (None, an integer output), the quick check's error stands."""
    if r64 is None or not o.is_floating_point() or o.shape != r64.shape:
        raise quick
    factor = 3.0 if grad else 2.0
    e_o, e_r = _max_err(o, r64), _max_err(r, r64)
    finite = r64[r64.isfinite()].abs()
    rounding = torch.finfo(o.dtype).eps * (finite.max().item() if finite.numel() else 0.0)
    if not e_o <= factor * e_r + rounding:  # `not <=`: a NaN error fails too
        raise AssertionError(f"{what}: max error {e_o:.3g} against float64 > {factor:g} x eager's {e_r:.3g} "
                             f"+ one rounding {rounding:.3g}") from quick


def _variants(info):
    """The entry's kept kernel variants (tinycuda.variants) and its bench's own, by impl name."""
    found = {f"tinycuda[{v}]": variants.get(info.name, v) for v in variants.names(info.name)}
    return {**found, **info.bench.variants}


def run_case(info, mode, shape, dtype, device, timer, impls, peaks):
    spec = info.bench
    torch.manual_seed(0)
    inputs = spec.make(shape, dtype, device)
    eager = spec.ref or info.ref
    fns = {"eager": eager, "tinycuda": info.fn}  # eager first: the reference
    if "compile" in impls:
        torch._dynamo.reset()
        fns["compile"] = torch.compile(eager, fullgraph=True)
    if mode in spec.variant_modes and device == "cuda" and "variants" in impls:
        fns.update(_variants(info))
    if spec.liger is not None and device == "cuda" and "liger" in impls and has_liger():
        fns["liger"] = spec.liger
    itemsize = next(t for t in inputs if isinstance(t, torch.Tensor)).element_size()
    unit, amount = spec.cost(shape, mode, itemsize)
    tol = _tolerance(dtype, spec)
    rows, ref, ref64 = [], None, None
    for name, fn in fns.items():
        if name not in ("eager", "compile", "liger") and name.split("[")[0] not in impls:
            continue
        torch.manual_seed(1)  # the same grad_out for every implementation
        try:
            run = _runner(fn, inputs, mode, spec.loss, spec.grad)
            out = _as_list(run())
        except (RuntimeError, ValueError) as e:
            if name in ("eager", "tinycuda"):
                raise
            # a variant that does not take this case (mma in float32; SDPA's flash backend in float32)
            print(f"{info.name} {mode} {list(shape)} {name}: skipped ({str(e).splitlines()[0][:120]})")
            continue
        if ref is None:
            ref, eager_grad_out = out, getattr(run, "grad_out", None)
        for k, (o, r) in enumerate(zip(out, ref)):  # checked before it is timed
            scale = max(1.0, r.float().abs().max().item())
            try:
                torch.testing.assert_close(o.float(), r.float(), rtol=tol, atol=tol * scale,
                                           msg=lambda m: f"{info.name} {mode} {shape} {name}: {m}")
            except AssertionError as e:
                # eager is not the truth: float64 decides, computed only now (the fast path stays
                # float32) and once a case; False: it could not run
                if ref64 is None:
                    ref64 = _reference64(eager, inputs, mode, spec, eager_grad_out) or False
                # every output of a bwd or fwd+bwd run is a gradient (torch.autograd.grad's)
                _arbitrate(o, r, ref64[k] if ref64 else None, mode != "fwd",
                           f"{info.name} {mode} {shape} {name}", e)
        ms = timer(run)
        rate = amount / ms / 1e6 if unit == "GB/s" else amount / ms / 1e9
        peak = peaks["copy_GBps"] if unit == "GB/s" else (
            peaks["matmul_fp32_TFLOPs"] if dtype == torch.float32 else peaks["matmul_bf16_TFLOPs"])
        rows.append(dict(op=info.name, mode=mode, shape=list(shape), dtype=str(dtype).replace("torch.", ""),
                         impl=name, ms=ms, unit=unit, rate=rate, pct_peak=100 * rate / peak,
                         extra_mb=peak_memory_mb(device, run)))
    by = {r["impl"]: r["ms"] for r in rows}
    for r in rows:
        r["vs_eager"] = by["eager"] / r["ms"]
        r["vs_compile"] = by["compile"] / r["ms"] if "compile" in by else None
        r["vs_liger"] = by["liger"] / r["ms"] if "liger" in by else None
    return rows


# ---------------------------------------------------------------------------
# output

def print_table(rows, device, peaks):
    from rich.console import Console
    from rich.markup import escape  # a variant's "tinycuda[mma]" is not a style tag
    from rich.table import Table

    title = (f"tinycuda bench on {device_name(device)} -- peaks: copy {peaks['copy_GBps']:.0f} GB/s, "
             f"matmul bf16 {peaks['matmul_bf16_TFLOPs']:.0f} / fp32 {peaks['matmul_fp32_TFLOPs']:.1f} TFLOP/s")
    if device != "cuda":
        title += "\n(CPU figures: no GPU visible; the CPU kernels are single-threaded references)"
    t = Table(title=title)
    for col in ("op", "mode", "shape", "dtype", "impl", "ms", "rate", "% peak", "vs eager", "vs compile", "vs liger",
                "extra MiB"):
        t.add_column(col, justify="right" if col not in ("op", "mode", "impl") else "left")
    for r in rows:
        t.add_row(r["op"], r["mode"], "x".join(map(str, r["shape"])), r["dtype"], escape(r["impl"]), f"{r['ms']:.4f}",
                  f"{r['rate']:.1f} {r['unit']}", f"{r['pct_peak']:.0f}%", f"{r['vs_eager']:.2f}x",
                  "-" if r["vs_compile"] is None else f"{r['vs_compile']:.2f}x",
                  "-" if r.get("vs_liger") is None else f"{r['vs_liger']:.2f}x",
                  "-" if r["extra_mb"] is None else f"{r['extra_mb']:.1f}")
    Console(width=200).print(t)


def markdown(rows, device, peaks):
    """The results as a Markdown table (docs/bench/h100.md is this output)."""
    lines = [f"Device: {device_name(device)}; measured peaks: copy {peaks['copy_GBps']:.0f} GB/s, "
             f"matmul bf16 {peaks['matmul_bf16_TFLOPs']:.0f} TFLOP/s, fp32 {peaks['matmul_fp32_TFLOPs']:.1f} TFLOP/s.",
             "", "| op | mode | shape | dtype | impl | ms | rate | % peak | vs eager | vs compile | vs liger | extra MiB |",
             "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['op']} | {r['mode']} | {'x'.join(map(str, r['shape']))} | {r['dtype']} | {r['impl']} | "
                     f"{r['ms']:.4f} | {r['rate']:.1f} {r['unit']} | {r['pct_peak']:.0f}% | {r['vs_eager']:.2f}x | "
                     f"{'-' if r['vs_compile'] is None else format(r['vs_compile'], '.2f') + 'x'} | "
                     f"{'-' if r.get('vs_liger') is None else format(r['vs_liger'], '.2f') + 'x'} | "
                     f"{'-' if r['extra_mb'] is None else format(r['extra_mb'], '.1f')} |")
    return "\n".join(lines) + "\n"


def plot(rows, directory, peak_gbps=None):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(directory, exist_ok=True)
    tc = [r for r in rows if r["impl"] == "tinycuda"]
    ops = list(dict.fromkeys(r["op"] for r in tc))
    fig, axes = plt.subplots(len(ops), 1, figsize=(10, 2.6 * len(ops)), squeeze=False)
    for ax, op in zip(axes[:, 0], ops):
        mine = [r for r in tc if r["op"] == op]
        xs = range(len(mine))
        ax.bar([x - 0.27 for x in xs], [r["vs_eager"] for r in mine], 0.27, label="vs eager")
        ax.bar(list(xs), [r["vs_compile"] or 0 for r in mine], 0.27, label="vs torch.compile")
        if any(r.get("vs_liger") for r in mine):
            ax.bar([x + 0.27 for x in xs], [r.get("vs_liger") or 0 for r in mine], 0.27, label="vs Liger")
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xticks(list(xs), [f"{r['mode']}\n{'x'.join(map(str, r['shape']))}" for r in mine], fontsize=6)
        ax.set_title(f"{op}: speedup of tinycuda ({mine[0]['dtype']})", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(directory, "speedup.png"), dpi=110)
    plt.close(fig)

    series = _series(rows)
    ops = list(dict.fromkeys(op for op, _, _ in series))
    if not ops:
        return
    fig, axes = plt.subplots(1, len(ops), figsize=(4 * len(ops), 3.6), squeeze=False, sharey=True)
    colors = {"tinycuda": "tab:red", "compile": "tab:blue", "eager": "tab:gray", "liger": "tab:green"}
    styles = {"fwd": "-", "bwd": "--", "fwd+bwd": ":"}
    for ax, op in zip(axes[0], ops):
        for (o, mode, impl), pts in series.items():
            if o == op:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], styles.get(mode, "-"), marker="o", ms=3,
                        color=colors.get(impl.split("[")[0], "k"), label=f"{impl} {mode}")
        if peak_gbps:
            ax.axhline(peak_gbps, color="k", lw=0.6)
        ax.set_xscale("log")
        ax.set_xlabel("elements")
        ax.set_title(op, fontsize=9)
        ax.legend(fontsize=6)
    axes[0][0].set_ylabel("achieved GB/s (line: measured copy)")
    fig.tight_layout()
    fig.savefig(os.path.join(directory, "bandwidth.png"), dpi=110)
    plt.close(fig)


def _series(rows):
    series = {}
    for r in rows:
        if r["unit"] == "GB/s":
            series.setdefault((r["op"], r["mode"], r["impl"]), []).append((math.prod(r["shape"]), r["rate"]))
    return {k: sorted(v) for k, v in series.items()}


def device_name(device):
    return torch.cuda.get_device_name() if device == "cuda" else "CPU"


# ---------------------------------------------------------------------------
# entry point

def replot(json_file, directory):
    """Plots from a saved --json file (how docs/bench/*.png are regenerated)."""
    with open(json_file) as f:
        data = json.load(f)
    plot(data["results"], directory, data["meta"]["peaks"]["copy_GBps"])


def add_arguments(p):
    p.add_argument("ops", nargs="*", help=f"ops to run (default all: {', '.join(SPECS)})")
    p.add_argument("--shapes", choices=("small", "large", "all", "sweep"), default="all",
                   help="sweep: M x N = 2^27 with N from 256 to 262144, for the row-wise ops that have it")
    p.add_argument("--modes", default=",".join(MODES), help="comma list of fwd,bwd,fwd+bwd")
    p.add_argument("--dtype", default="float32", choices=("float32", "float16", "bfloat16"))
    p.add_argument("--impls", default="tinycuda,eager,compile,liger,variants",
                   help="comma list of tinycuda,eager,compile,liger,variants (liger: when liger_kernel imports)")
    p.add_argument("--reps", type=int, default=50, help="timed repetitions (at least 20)")
    p.add_argument("--json", metavar="FILE")
    p.add_argument("--plot", metavar="DIR")
    p.add_argument("--markdown", metavar="FILE", help="also write the table as Markdown")
    p.add_argument("--baseline", metavar="FILE", action="append", default=[],
                   help="a saved --json (e.g. docs/bench/h100.json; repeatable): list every tinycuda case "
                        "slower than there by more than --tolerance, and exit 1 if any")
    p.add_argument("--tolerance", type=float, default=0.05, help="allowed slowdown against --baseline (0.05: 5%%)")


def compare(rows, baseline_rows, tolerance):
    """(lines, slower): each tinycuda case (op, mode, shape, dtype, impl tinycuda*) of `rows` that
    the baseline also timed, its time against the baseline's; `slower`: those over 1 + tolerance."""
    def key(r):
        return r["op"], r["mode"], tuple(r["shape"]), r["dtype"], r["impl"]

    base = {key(r): r for r in baseline_rows if r["impl"].startswith("tinycuda")}
    lines, slower = [], []
    for r in rows:
        b = base.get(key(r))
        if b is None or not r["impl"].startswith("tinycuda"):
            continue
        ratio = r["ms"] / b["ms"]
        line = (f"{r['op']:<28} {r['mode']:<8} {'x'.join(map(str, r['shape'])):<22} {r['dtype']:<9} "
                f"{r['impl']:<22} {b['ms']:.4f} -> {r['ms']:.4f} ms ({ratio:.3f}x)")
        lines.append(line)
        if ratio > 1 + tolerance:
            slower.append(line)
    return lines, slower


def run(args):
    from rich.progress import Progress

    unknown = [o for o in args.ops if o not in SPECS]
    if unknown:
        raise SystemExit(f"tinycuda bench: unknown op(s) {unknown}; choose from {list(SPECS)}")
    device = "cuda" if torch.cuda.is_available() and "cuda" in tinycuda.build_info.get("backends", []) else "cpu"
    dtype = getattr(torch, args.dtype)
    impls = set(args.impls.split(","))
    modes = args.modes.split(",")
    timer = Timer(device, args.reps)
    peaks = measure_peaks(device, timer)
    cases = [(info, m, sh) for info in (SPECS[o] for o in (args.ops or SPECS)) for m in info.bench.modes
             if m in modes for sh in info.bench.shapes.get("cpu" if device == "cpu" else args.shapes, [])
             if info.bench.shape_modes is None or m in info.bench.shape_modes(sh)]
    rows = []
    with Progress(transient=True) as progress:
        task = progress.add_task("benchmarking", total=len(cases))
        for info, mode, shape in cases:
            progress.update(task, description=f"{info.name} {mode} {'x'.join(map(str, shape))}")
            rows += run_case(info, mode, shape, dtype, device, timer, impls, peaks)
            progress.advance(task)
    print_table(rows, device, peaks)
    if args.json:
        meta = dict(device=device_name(device), torch=torch.__version__, cuda=torch.version.cuda,
                    date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                    cpu_figures=device != "cuda", peaks=peaks, reps=timer.reps)
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "results": rows}, f, indent=1)
    if args.plot:
        plot(rows, args.plot, peaks["copy_GBps"])
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown(rows, device, peaks))
    slower_any = False
    for path in args.baseline:
        with open(path) as f:
            lines, slower = compare(rows, json.load(f)["results"], args.tolerance)
        print(f"\nagainst {path}: {len(lines)} tinycuda cases compared, {len(slower)} slower by more than "
              f"{args.tolerance:.0%}")
        for line in slower:
            print("  SLOWER " + line)
        slower_any |= bool(slower)
    return 1 if slower_any else 0
