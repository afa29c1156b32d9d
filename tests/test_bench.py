"""`tinycuda bench` end to end on whatever device is here (CPU figures in CI):
the table prints, the JSON is complete and sane, the plots are PNGs."""
import json

from tinycuda.cli import main


def test_bench_writes_json_and_plots(tmp_path, capsys):
    out, plots = tmp_path / "bench.json", tmp_path / "plots"
    rc = main(["bench", "relu", "scale_bias_relu", "--shapes", "small", "--modes", "fwd,bwd",
               "--reps", "20", "--json", str(out), "--plot", str(plots)])
    assert rc == 0
    assert "tinycuda bench on" in capsys.readouterr().out
    data = json.loads(out.read_text())
    meta, rows = data["meta"], data["results"]
    assert meta["torch"] and meta["date"] and meta["peaks"]["copy_GBps"] > 0
    assert {r["impl"] for r in rows} >= {"tinycuda", "eager", "compile"}
    assert {(r["op"], r["mode"]) for r in rows} == {(op, m) for op in ("relu", "scale_bias_relu")
                                                    for m in ("fwd", "bwd")}
    for r in rows:
        assert r["ms"] > 0 and r["rate"] > 0 and r["unit"] == "GB/s" and r["vs_eager"] > 0
    for name in ("speedup.png", "bandwidth.png"):
        assert (plots / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_baseline_comparison_flags_only_slower_tinycuda_cases(tmp_path, capsys):
    """--baseline: a tinycuda case slower than the saved run by more than the
    tolerance is listed and the command exits 1; others pass; other impls and
    cases the baseline lacks are ignored."""
    from tinycuda.bench import compare

    def row(op, impl, ms, shape=(4, 8)):
        return dict(op=op, mode="fwd", shape=list(shape), dtype="float32", impl=impl, ms=ms)

    base = [row("relu", "tinycuda", 1.0), row("sum", "tinycuda", 1.0), row("relu", "eager", 1.0),
            row("softmax", "tinycuda[online]", 2.0)]
    now = [row("relu", "tinycuda", 1.04), row("sum", "tinycuda", 1.2), row("relu", "eager", 9.0),
           row("softmax", "tinycuda[online]", 1.0), row("gelu", "tinycuda", 5.0)]
    lines, slower = compare(now, base, 0.05)
    assert len(lines) == 3 and len(slower) == 1 and slower[0].startswith("sum ")

    out = tmp_path / "bench.json"
    assert main(["bench", "relu", "--shapes", "small", "--modes", "fwd", "--reps", "20", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    for r in data["results"]:
        r["ms"] /= 10  # a baseline ten times faster than anything this run can do
    fast = tmp_path / "fast.json"
    fast.write_text(json.dumps(data))
    assert main(["bench", "relu", "--shapes", "small", "--modes", "fwd", "--reps", "20",
                 "--baseline", str(fast)]) == 1
    assert "SLOWER relu" in capsys.readouterr().out


def test_grad_out_is_the_same_whatever_the_output_layout():
    """Two implementations of one function get the same grad_out even when
    one returns a transposed view (as SDPA's does), so their gradients compare."""
    import torch

    from tinycuda.bench import _runner

    x = torch.randn(3, 5)
    grads = []
    for fn in (lambda t: t * 2, lambda t: (t.t() * 2).contiguous().t()):
        torch.manual_seed(1)
        grads.append(_runner(fn, [x], "fwd+bwd")()[0])
    assert torch.equal(*grads)


def _case(eager, ours, mode, fp32_tol=1e-5):
    """run_case on a made-up op (x of 4096 float32 normals, an integer arg) with eager `eager` and tinycuda
    `ours`, on the CPU; the float64 calls of eager are counted."""
    import torch

    from tinycuda.bench import Timer, run_case
    from tinycuda.optable import Bench, OpInfo

    calls64 = []

    def ref(x, k):
        calls64.append(x.dtype == torch.float64)
        return eager(x, k)

    bench = Bench(shapes={}, make=lambda sh, dt, dev: [torch.randn(sh, dtype=dt, device=dev), 3],
                  cost=lambda sh, mode, s: ("GB/s", 2 * sh[0] * s), fp32_tol=fp32_tol)
    info = OpInfo("made_up", ours, ref, samples=None, bench=bench)
    peaks = {"copy_GBps": 1.0, "matmul_bf16_TFLOPs": 1.0, "matmul_fp32_TFLOPs": 1.0}
    rows = run_case(info, mode, (4096,), torch.float32, "cpu", Timer("cpu", 20), {"tinycuda"}, peaks)
    return rows, sum(calls64)


def test_check_against_eager_falls_back_to_float64():
    """The check before timing: an implementation that misses eager's float32 result by more than the tolerance
    passes when it is as close to eager's float64 result as eager is (2x its error plus one rounding; 3x for
    gradients); one clearly wrong is rejected naming the case and both errors; where eager cannot run in float64,
    the quick check's error stands. Float64 runs only when the quick check fails."""
    import re

    import pytest
    import torch

    def eager(x, k):  # x / 3 * 3: two float32 roundings, in float64 ~exact
        return x / k * k

    def same_accuracy(x, k):  # other roundings of the same size: misses eager by ~1 ulp
        return x * k / k

    def wrong(x, k):
        return x / k * k * 1.001

    def no_float64(x, k):
        if x.dtype == torch.float64:
            raise RuntimeError("no float64 kernel")
        return eager(x, k)

    for mode in ("fwd", "bwd", "fwd+bwd"):
        assert _case(eager, eager, mode)[1] == 0  # equal: the fast path, no float64 run
        # tolerance 0: the ~1 ulp difference fails the quick check, float64 accepts it
        rows, calls = _case(eager, same_accuracy, mode, fp32_tol=0.0)
        assert calls == 1 and [r["impl"] for r in rows] == ["eager", "tinycuda"]
        factor = 3 if mode != "fwd" else 2
        with pytest.raises(AssertionError, match=rf"made_up {re.escape(mode)} \(4096,\) tinycuda: max error \S+ "
                                                 rf"against float64 > {factor} x eager's \S+ \+ one rounding \S+"):
            _case(eager, wrong, mode)
        with pytest.raises(AssertionError, match="Tensor-likes are not close"):
            _case(no_float64, wrong, mode)
