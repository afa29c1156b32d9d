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
