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
