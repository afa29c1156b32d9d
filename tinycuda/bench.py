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
import importlib
import json
import math
import os
import statistics
import time
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

import tinycuda.ops  # noqa: F401  (loads the kernels)
import tinycuda

MODES = ("fwd", "bwd", "fwd+bwd")


# ---------------------------------------------------------------------------
# what is benchmarked

@dataclass
class OpSpec:
    name: str
    modes: tuple
    shapes: dict                     # "small"/"large"/"all"/"cpu" -> list of shapes
    make: callable                   # (shape, dtype, device) -> list of input tensors
    tinycuda: callable               # inputs -> output
    torch: callable                  # inputs -> output (eager reference)
    cost: callable                   # (shape, mode, itemsize) -> ("GB/s", bytes) or ("TFLOP/s", flops)
    variants: dict = field(default_factory=dict)  # extra tinycuda variants (CUDA), in variant_modes
    variant_modes: tuple = ("fwd",)
    liger: callable = None           # inputs -> output through Liger-Kernel (imported lazily), if it has the op
    loss: bool = False               # a loss: fwd+bwd backpropagates 1, as loss.backward()


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


def _liger(module, name, *extra):
    """Liger-Kernel's `name` from liger_kernel.<module> (a function, or an
    autograd Function), called with the inputs and then `extra`; imported on
    first call, since Liger is optional. Only the loss of (loss, z_loss) is kept.
    Some Liger backwards write their gradients over saved inputs (swiglu, geglu,
    cross-entropy): a timed case's inputs change after the first, checked call,
    which changes no timing. Liger runs after the other implementations."""
    def run(*inputs):
        f = getattr(importlib.import_module(f"liger_kernel.{module}"), name)
        out = f.apply(*inputs, *extra) if hasattr(f, "apply") else f(*inputs, *extra)
        return out[0] if isinstance(out, tuple) else out
    return run


def _norm_bytes(shape, mode, s):
    """fwd reads x and writes y; bwd reads x and grad_y and writes grad_x
    (weight, bias, their gradients and the per-row statistics are < 0.1%)."""
    n = math.prod(shape)
    return "GB/s", {"fwd": 2 * n * s, "bwd": 3 * n * s, "fwd+bwd": 5 * n * s}[mode]


def _linear_flops(shape, mode, s):
    m, n, k = shape
    return "TFLOP/s", {"fwd": 2, "bwd": 4, "fwd+bwd": 6}[mode] * m * n * k


def _cross_entropy_bytes(shape, mode, s):
    """Read the logits once; with the gradient (made by the forward kernel)
    also write it once: N V s and 2 N V s."""
    n, v = shape
    return "GB/s", {"fwd": n * v * s, "fwd+bwd": 2 * n * v * s}[mode]


def _flce_flops(shape, mode, s):
    """hidden @ weight.T forward; grad_hidden and grad_weight matmuls backward."""
    n, h, v = shape
    return "TFLOP/s", {"fwd": 2, "fwd+bwd": 6}[mode] * n * h * v


def _randn(*shape, dtype, device):
    return torch.randn(*shape, device=device, dtype=torch.float32).to(dtype)


EW_SHAPES = {"small": [(1024, 2048)], "large": [(8192, 8192)],
             "all": [(256, 1024), (1024, 2048), (2048, 4096), (4096, 8192), (8192, 8192)],
             "cpu": [(256, 512), (1024, 1024)]}
GLU_SHAPES = {"small": [(1024, 14336)], "large": [(8192, 14336)],  # LLaMA-3 8B's MLP: 14336 wide
              "all": [(1024, 4096), (4096, 4096), (1024, 14336), (8192, 14336)], "cpu": [(256, 1024)]}


def _pair(sh, dt, dev):
    return [_randn(*sh, dtype=dt, device=dev), _randn(*sh, dtype=dt, device=dev)]


NORM_SHAPES = {"small": [(4096, 4096)], "large": [(32768, 4096)],
               "all": [(4096, 1024), (4096, 4096), (32768, 4096), (8192, 8192)], "cpu": [(256, 512)]}

SPECS = {
    "relu": OpSpec("relu", MODES, EW_SHAPES, lambda sh, dt, dev: [_randn(*sh, dtype=dt, device=dev)],
                   lambda x: tinycuda.relu(x), torch.relu, _relu_bytes),
    "square": OpSpec("square", MODES, EW_SHAPES, lambda sh, dt, dev: [_randn(*sh, dtype=dt, device=dev)],
                     lambda x: tinycuda.square(x), torch.square, _elementwise_bytes(1, 2)),
    "gelu": OpSpec("gelu", MODES, EW_SHAPES, lambda sh, dt, dev: [_randn(*sh, dtype=dt, device=dev)],
                   lambda x: tinycuda.gelu(x), F.gelu, _elementwise_bytes(1, 2)),
    "swiglu": OpSpec("swiglu", MODES, GLU_SHAPES, _pair, lambda a, b: tinycuda.swiglu(a, b),
                     lambda a, b: F.silu(a) * b, _glu_bytes, liger=_liger("ops.swiglu", "LigerSiLUMulFunction")),
    "geglu": OpSpec("geglu", MODES, GLU_SHAPES, _pair, lambda a, b: tinycuda.geglu(a, b),  # tanh form, as Liger's
                    lambda a, b: F.gelu(a, approximate="tanh") * b, _glu_bytes,
                    liger=_liger("ops.geglu", "LigerGELUMulFunction")),
    "scale_bias_relu": OpSpec(
        "scale_bias_relu", MODES, EW_SHAPES,
        lambda sh, dt, dev: [_randn(*sh, dtype=dt, device=dev), _randn(sh[-1], dtype=dt, device=dev)],
        lambda x, b: tinycuda.scale_bias_relu(x, b, 0.5), lambda x, b: torch.relu(x * 0.5 + b), _sbr_bytes),
    "softmax": OpSpec(
        "softmax", MODES, {"small": [(4096, 4096)], "large": [(32768, 4096), (8192, 32768)],
                           "all": [(4096, 1024), (4096, 4096), (32768, 4096), (8192, 32768)],
                           "cpu": [(256, 512)]},
        lambda sh, dt, dev: [_randn(*sh, dtype=dt, device=dev)],
        lambda x: tinycuda.softmax(x, -1), lambda x: torch.softmax(x, -1), _elementwise_bytes(1, 2),
        variants={f"tinycuda[{a}]": (lambda a: lambda x: tinycuda.softmax(x, -1, algo=a))(a)
                  for a in ("online", "registers")}),
    # weight and bias near 1 and 0, as trained models have them; rms_norm takes
    # LLaMA's eps=1e-6 for all three implementations (its default differs by dtype)
    "layer_norm": OpSpec(
        "layer_norm", MODES, NORM_SHAPES,
        lambda sh, dt, dev: [_randn(*sh, dtype=dt, device=dev), 1 + 0.1 * _randn(sh[-1], dtype=dt, device=dev),
                             0.1 * _randn(sh[-1], dtype=dt, device=dev)],
        lambda x, w, b: tinycuda.layer_norm(x, x.shape[-1:], w, b), lambda x, w, b: F.layer_norm(x, x.shape[-1:], w, b),
        _norm_bytes, liger=_liger("transformers.functional", "liger_layer_norm", 1e-5)),
    "rms_norm": OpSpec(
        "rms_norm", MODES, NORM_SHAPES,
        lambda sh, dt, dev: [_randn(*sh, dtype=dt, device=dev), 1 + 0.1 * _randn(sh[-1], dtype=dt, device=dev)],
        lambda x, w: tinycuda.rms_norm(x, x.shape[-1:], w, 1e-6), lambda x, w: F.rms_norm(x, x.shape[-1:], w, 1e-6),
        _norm_bytes, liger=_liger("transformers.functional", "liger_rms_norm", 1e-6)),
    "sum": OpSpec("sum", ("fwd",), {"small": [(2**20,)], "large": [(2**28,)],
                                    "all": [(2**16,), (2**20,), (2**24,), (2**28,)], "cpu": [(2**16,), (2**20,)]},
                  lambda sh, dt, dev: [_randn(*sh, dtype=dt, device=dev)],
                  lambda x: tinycuda.sum(x), torch.sum, lambda sh, mode, s: ("GB/s", math.prod(sh) * s)),
    "linear": OpSpec(
        "linear", MODES, {"small": [(1024, 1024, 1024)], "large": [(4096, 4096, 4096)],
                          "all": [(512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096)],
                          "cpu": [(128, 256, 128), (512, 512, 512)]},
        lambda sh, dt, dev: [_randn(sh[0], sh[2], dtype=dt, device=dev),
                             _randn(sh[1], sh[2], dtype=dt, device=dev) / sh[2] ** 0.5,
                             _randn(sh[1], dtype=dt, device=dev)],
        lambda x, w, b: tinycuda.linear(x, w, b), F.linear, _linear_flops,
        variants={f"tinycuda[{a}]": (lambda a: lambda x, w, b: tinycuda.linear(x, w, b, algo=a))(a)
                  for a in ("naive", "tiled", "regtile")}),
    "cross_entropy": OpSpec(
        "cross_entropy", ("fwd", "fwd+bwd"),
        {"small": [(4096, 32000)], "large": [(8192, 128256)],
         "all": [(4096, 32000), (8192, 32000), (8192, 128256)], "cpu": [(128, 4096)]},
        lambda sh, dt, dev: [_randn(*sh, dtype=dt, device=dev), torch.randint(0, sh[1], (sh[0],), device=dev)],
        lambda x, t: tinycuda.cross_entropy(x, t), F.cross_entropy, _cross_entropy_bytes,
        liger=_liger("transformers.functional", "liger_cross_entropy"), loss=True),
    "fused_linear_cross_entropy": OpSpec(
        "fused_linear_cross_entropy", ("fwd", "fwd+bwd"),
        {"small": [(2048, 2048, 32000)], "large": [(8192, 4096, 128256)],
         "all": [(2048, 2048, 32000), (8192, 4096, 128256)], "cpu": [(64, 64, 1000)]},
        lambda sh, dt, dev: [_randn(sh[0], sh[1], dtype=dt, device=dev),
                             _randn(sh[2], sh[1], dtype=dt, device=dev) / sh[1] ** 0.5,
                             torch.randint(0, sh[2], (sh[0],), device=dev)],
        lambda h, w, t: tinycuda.fused_linear_cross_entropy(h, w, t), lambda h, w, t: F.cross_entropy(h @ w.T, t),
        _flce_flops, liger=_liger("transformers.functional", "liger_fused_linear_cross_entropy"), loss=True,
        # chunk size trades memory for time (auto: Liger's 256 tokens at the large shape)
        variants={f"tinycuda[chunk={c}]": (lambda c: lambda h, w, t: tinycuda.fused_linear_cross_entropy(
            h, w, t, chunk_size=c))(c) for c in (512, 1024)}, variant_modes=("fwd+bwd",)),
}


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

def _tolerance(dtype, spec):
    """Agreement with eager required before timing: fp32 reductions of 4096+
    terms in another order differ by ~1e-4 relative; half types by their eps."""
    if dtype == torch.float32:
        return 1e-3 if spec.name in ("linear", "sum", "fused_linear_cross_entropy") else 1e-5
    return 2e-2


def _runner(fn, inputs, mode, loss=False):
    """A zero-argument callable for one mode, and its result for checking;
    a loss's gradient is 1, other outputs' a fixed random tensor."""
    if mode == "fwd":
        def run():
            with torch.no_grad():
                return fn(*inputs)
        return run
    leaves = [t.detach().requires_grad_(t.is_floating_point()) for t in inputs]
    wrt = [t for t in leaves if t.requires_grad]
    if mode == "bwd":
        out = fn(*leaves)
        g = torch.ones_like(out) if loss else torch.randn_like(out)
        return lambda: torch.autograd.grad(out, wrt, g, retain_graph=True)
    out = fn(*inputs).detach()
    g = torch.ones_like(out) if loss else torch.randn_like(out)
    return lambda: torch.autograd.grad(fn(*leaves), wrt, g)


def _as_list(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def run_case(spec, mode, shape, dtype, device, timer, impls, peaks):
    torch.manual_seed(0)
    inputs = spec.make(shape, dtype, device)
    fns = {"eager": spec.torch, "tinycuda": spec.tinycuda}  # eager first: the reference
    if "compile" in impls:
        torch._dynamo.reset()
        fns["compile"] = torch.compile(spec.torch, fullgraph=True)
    if mode in spec.variant_modes and device == "cuda" and "variants" in impls:
        fns.update(spec.variants)
    if spec.liger is not None and device == "cuda" and "liger" in impls and has_liger():
        fns["liger"] = spec.liger
    unit, amount = spec.cost(shape, mode, inputs[0].element_size())
    tol = _tolerance(dtype, spec)
    rows, ref = [], None
    for name, fn in fns.items():
        if name not in ("eager", "compile", "liger") and name.split("[")[0] not in impls:
            continue
        torch.manual_seed(1)  # the same grad_out for every implementation
        run = _runner(fn, inputs, mode, spec.loss)
        out = _as_list(run())
        if ref is None:
            ref = out
        for o, r in zip(out, ref):  # checked before it is timed
            scale = max(1.0, r.float().abs().max().item())
            torch.testing.assert_close(o.float(), r.float(), rtol=tol, atol=tol * scale,
                                       msg=lambda m: f"{spec.name} {mode} {shape} {name}: {m}")
        ms = timer(run)
        rate = amount / ms / 1e6 if unit == "GB/s" else amount / ms / 1e9
        peak = peaks["copy_GBps"] if unit == "GB/s" else (
            peaks["matmul_fp32_TFLOPs"] if dtype == torch.float32 else peaks["matmul_bf16_TFLOPs"])
        rows.append(dict(op=spec.name, mode=mode, shape=list(shape), dtype=str(dtype).replace("torch.", ""),
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
        t.add_row(r["op"], r["mode"], "x".join(map(str, r["shape"])), r["dtype"], r["impl"], f"{r['ms']:.4f}",
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
    p.add_argument("--shapes", choices=("small", "large", "all"), default="all")
    p.add_argument("--modes", default=",".join(MODES), help="comma list of fwd,bwd,fwd+bwd")
    p.add_argument("--dtype", default="float32", choices=("float32", "float16", "bfloat16"))
    p.add_argument("--impls", default="tinycuda,eager,compile,liger,variants",
                   help="comma list of tinycuda,eager,compile,liger,variants (liger: when liger_kernel imports)")
    p.add_argument("--reps", type=int, default=50, help="timed repetitions (at least 20)")
    p.add_argument("--json", metavar="FILE")
    p.add_argument("--plot", metavar="DIR")
    p.add_argument("--markdown", metavar="FILE", help="also write the table as Markdown")


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
    cases = [(s, m, sh) for s in (SPECS[o] for o in (args.ops or SPECS)) for m in s.modes if m in modes
             for sh in s.shapes["cpu" if device == "cpu" else args.shapes]]
    rows = []
    with Progress(transient=True) as progress:
        task = progress.add_task("benchmarking", total=len(cases))
        for spec, mode, shape in cases:
            progress.update(task, description=f"{spec.name} {mode} {'x'.join(map(str, shape))}")
            rows += run_case(spec, mode, shape, dtype, device, timer, impls, peaks)
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
    return 0
