"""`tinycuda gpt`: the model on tinycuda's kernels trains as the same model on
torch's (same seed, same batches: losses within 2% a step), its checkpoints
resume exactly and load on either kernel set, and KV-cache decoding gives the
logits of the full forward."""
import dataclasses
import json

import numpy as np
import pytest
import torch

from conftest import DEVICES, requires_cuda
from tinycuda import gpt
from tinycuda.cli import main
from tinycuda.nn.gpt import GPT, GPTConfig, PRESETS

SMALL = ["--n-layer", "2", "--n-head", "2", "--n-embd", "64", "--context", "64", "--batch-size", "8",
         "--eval-every", "25", "--eval-batches", "2"]


def _train(tmp_path, name, *extra):
    out = tmp_path / f"{name}.json"
    assert main(["gpt", "train", *SMALL, "--json", str(out), *extra]) == 0
    return json.loads(out.read_text())["results"]


def test_tinycuda_and_torch_train_alike_on_cpu(tmp_path):
    """The issue's CPU target: 50 steps, float32, every step's loss within 2%
    of the torch backend's (and the loss falls)."""
    logs = {log["backend"]: log for log in _train(tmp_path, "both", "--steps", "50", "--device", "cpu",
                                                  "--backend", "tinycuda")
            + _train(tmp_path, "torch", "--steps", "50", "--device", "cpu", "--backend", "torch")}
    a, b = np.array(logs["tinycuda"]["loss"]), np.array(logs["torch"]["loss"])
    assert len(a) == len(b) == 50
    assert np.max(np.abs(a - b) / b) <= 0.02, np.max(np.abs(a - b) / b)
    assert a[-5:].mean() < a[:5].mean() - 1.0, (a[:5], a[-5:])  # ~5.5 -> ~3 nats a byte
    np.testing.assert_allclose(logs["tinycuda"]["val_loss"], logs["torch"]["val_loss"], rtol=0.02)


@requires_cuda
@pytest.mark.parametrize("backend", ["tinycuda", "torch"])
def test_cuda_graph_step_trains_as_the_eager_one(tmp_path, backend):
    """--cuda-graph replays one captured forward + backward: the same losses as
    launching every kernel each step (bf16 autocast, so to rounding: the graph
    turns off autocast's cast cache), and the parameters the optimizer updates
    are the ones the graph reads next step."""
    eager = _train(tmp_path, "eager", "--steps", "12", "--device", "cuda", "--backend", backend)[0]
    graph = _train(tmp_path, "graph", "--steps", "12", "--device", "cuda", "--backend", backend, "--cuda-graph")[0]
    np.testing.assert_allclose(graph["loss"], eager["loss"], rtol=2e-3)
    assert graph["loss"][-1] < graph["loss"][0] - 0.5


@requires_cuda
def test_master_weights_train_alike_on_cuda(tmp_path):
    """The GPU form of the issue's bound for --master-weights (bf16 model, float32 masters) against the
    torch backend under autocast: every step's loss within 2% over 50 steps, launched and graphed."""
    ref = np.array(_train(tmp_path, "ref", "--steps", "50", "--device", "cuda", "--backend", "torch")[0]["loss"])
    for extra in ((), ("--cuda-graph",)):
        mw = _train(tmp_path, "mw", "--steps", "50", "--device", "cuda", "--master-weights", *extra)[0]
        a = np.array(mw["loss"])
        assert np.max(np.abs(a - ref) / ref) <= 0.02, (extra, np.max(np.abs(a - ref) / ref))


def test_cuda_graph_needs_cuda():
    with pytest.raises(SystemExit, match="--cuda-graph needs CUDA and one process"):
        main(["gpt", "train", *SMALL, "--steps", "1", "--device", "cpu", "--cuda-graph"])


def test_master_weights_train_alike_on_cpu(tmp_path):
    """--master-weights: the tinycuda model held and run in bfloat16, the optimizer stepping float32 copies.
    Every step's loss within 2% of the float32 torch backend's over 50 steps (the issue's bound; bf16's own
    rounding of the printed loss is up to 0.4% of it), and a resumed run continues exactly."""
    mw = _train(tmp_path, "mw", "--steps", "50", "--device", "cpu", "--backend", "tinycuda", "--master-weights")[0]
    ref = _train(tmp_path, "ref", "--steps", "50", "--device", "cpu", "--backend", "torch")[0]
    a, b = np.array(mw["loss"]), np.array(ref["loss"])
    assert np.max(np.abs(a - b) / b) <= 0.02, np.max(np.abs(a - b) / b)
    assert a[-5:].mean() < a[:5].mean() - 1.0
    whole = _train(tmp_path, "whole", "--steps", "6", "--device", "cpu", "--master-weights")[0]
    _train(tmp_path, "half", "--steps", "3", "--device", "cpu", "--master-weights", "--save", str(tmp_path / "h.pt"))
    ck = torch.load(tmp_path / "h.pt", weights_only=True)
    assert all(t.dtype == torch.bfloat16 for t in ck["model"].values() if t.is_floating_point())
    assert all("master" in st for st in ck["optimizer"]["state"].values())
    rest = _train(tmp_path, "rest", "--steps", "6", "--device", "cpu", "--master-weights", "--resume",
                  str(tmp_path / "h.pt"))[0]
    assert rest["loss"] == whole["loss"][3:]


def test_resume_continues_exactly(tmp_path):
    """A 30-step run checkpointing every 20 steps, resumed from step 20, repeats the run's last 10 losses
    (batches are a function of the step; the optimizer state and the LR schedule travel)."""
    ck = tmp_path / "ck.pt"
    whole = _train(tmp_path, "whole", "--steps", "30", "--device", "cpu", "--save", str(ck), "--save-every", "20")[0]
    assert (tmp_path / "ck_step20.pt").exists() and ck.exists()
    rest = _train(tmp_path, "rest", "--steps", "30", "--device", "cpu", "--resume", str(tmp_path / "ck_step20.pt"))[0]
    assert rest["steps"] == list(range(20, 30))
    np.testing.assert_allclose(rest["loss"], whole["loss"][20:], rtol=1e-5)
    # resumed past its schedule's end: the last rate (a tenth of lr), not a stretched cosine
    assert gpt._lr(45, torch.load(ck, weights_only=True)["schedule"]) == pytest.approx(1e-4)
    with pytest.raises(SystemExit, match="at step 30 already"):
        main(["gpt", "train", *SMALL, "--steps", "30", "--device", "cpu", "--resume", str(ck)])


def _save(tmp_path, steps):
    path = tmp_path / f"at{steps}.pt"
    _train(tmp_path, f"at{steps}", "--steps", str(steps), "--device", "cpu", "--save", str(path))
    return path


@pytest.mark.parametrize("device", DEVICES)
def test_state_dict_is_the_torch_models(device):
    """Same keys as a model on torch's kernels; loaded there, the same loss."""
    cfg = GPTConfig(vocab_size=256, context=32, n_layer=2, n_head=2, n_embd=64)
    torch.manual_seed(1)
    ours = GPT(cfg, kernels="tinycuda").to(device)
    ref = GPT(cfg, kernels="torch").to(device)
    assert list(ours.state_dict()) == list(ref.state_dict())
    assert "transformer.h.1.attn.c_attn.weight" in ours.state_dict() and "lm_head.weight" in ours.state_dict()
    ref.load_state_dict(ours.state_dict())
    idx = torch.randint(0, 256, (3, 32), device=device)
    tgt = torch.randint(0, 256, (3, 32), device=device)
    with torch.no_grad():
        torch.testing.assert_close(ours(idx, tgt).float(), ref(idx, tgt).float(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kernels", ["tinycuda", "torch"])
@pytest.mark.parametrize("device", DEVICES)
def test_kv_cache_decode_matches_the_full_forward(device, kernels):
    """The prompt at once, then one token a call: each step's logits are the
    full forward's last-position logits over the sequence so far."""
    cfg = GPTConfig(vocab_size=256, context=24, n_layer=2, n_head=2, n_embd=32)
    torch.manual_seed(2)
    model = GPT(cfg, kernels=kernels).to(device).eval()
    seq = torch.randint(0, 256, (2, 20), device=device)
    cache = model.new_cache(2)
    steps = [model.decode(seq[:, :7], cache, 0)] + [model.decode(seq[:, p:p + 1], cache, p) for p in range(7, 20)]
    with torch.no_grad():
        for n, logits in zip(range(7, 21), steps):
            torch.testing.assert_close(logits, model(seq[:, :n]), rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="one token a call"):
        model.decode(seq[:, :2], cache, 5)
    with pytest.raises(ValueError, match="exceed the context"):
        model.decode(seq[:, :1], cache, 24)


def test_generate_from_a_checkpoint(tmp_path, capsys):
    path = _save(tmp_path, 5)
    capsys.readouterr()
    assert main(["gpt", "generate", str(path), "--prompt", "ROMEO:", "--tokens", "20", "--batch-size", "2",
                 "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert out.count("ROMEO:") == 2 and "tokens/s" in out
    with pytest.raises(SystemExit, match="exceeds the model's context"):
        main(["gpt", "generate", str(path), "--tokens", "64", "--device", "cpu"])


def test_generate_compares_kernel_sets(tmp_path, capsys):
    """--kernels all: tinycuda's, torch's and torch.compile's decoding of one checkpoint, each timed after a
    warm-up."""
    path, out = _save(tmp_path, 5), tmp_path / "gen.json"
    capsys.readouterr()
    assert main(["gpt", "generate", str(path), "--prompt", "ROMEO:", "--tokens", "3", "--kernels", "all",
                 "--device", "cpu", "--json", str(out)]) == 0
    results = json.loads(out.read_text())["results"]
    assert [r["kernels"] for r in results] == ["tinycuda", "torch", "compile"]
    assert all(r["tokens_per_s"] > 0 and r["batch"] == 1 for r in results)
    assert capsys.readouterr().out.count("tokens/s") == 3


def test_data_and_presets():
    text = gpt.load_text()
    assert len(text) == 1_569_824 and text.max() < 128  # ASCII Shakespeare
    assert bytes(text[:8]) == b"HAMLET, "
    b = gpt.Batches(text, 4, 16, seed=3)
    x, y = b.training(7)
    np.testing.assert_array_equal(x[:, 1:], y[:, :-1])
    np.testing.assert_array_equal(b.training(7)[0], x)  # a function of (seed, step)
    assert not np.array_equal(b.training(8)[0], x)
    assert x.flags.c_contiguous and y.flags.c_contiguous  # (test_batches_reach_the_gpu_from_pinned_memory)
    gpt2 = GPT(dataclasses.replace(PRESETS["gpt2"], n_layer=1), kernels="torch")
    per_layer = 12 * 768 * 768 + 13 * 768  # attention + MLP weights and biases, two LayerNorms
    assert gpt2.num_params() == 50304 * 768 + per_layer + 2 * 768
    with pytest.raises(ValueError, match="multiple of n_head"):
        GPTConfig(n_embd=100, n_head=3)
    with pytest.raises(ValueError, match="kernels must be"):
        GPT(GPTConfig(), kernels="cudnn")


def test_loss_chunk_follows_the_gpus_memory(monkeypatch):
    """The head's logits go in one chunk up to 4 GiB, or a sixteenth of a smaller GPU's memory; the device's
    total, not its free memory, so every step chunks alike. (No GPU needed: the properties are stubbed.)"""
    from types import SimpleNamespace

    from tinycuda.nn import gpt as gpt_module
    assert gpt_module.loss_chunk_bytes(torch.device("cpu")) == 4 << 30
    for total, expect in [(141 << 30, 4 << 30), (64 << 30, 4 << 30), (16 << 30, 1 << 30), (8 << 30, 512 << 20)]:
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d, t=total: SimpleNamespace(total_memory=t))
        assert gpt_module.loss_chunk_bytes(torch.device("cuda", 0)) == expect


@requires_cuda
def test_batches_reach_the_gpu_from_pinned_memory():
    """gpt train's batches go to the GPU by copies from pinned memory only: a copy from pageable memory
    waits for the stream's queued work, and a strided batch (a window's [:-1] view) went through a
    pageable temporary: the GPU idled ~0.4 ms at every GPT-2 step's start."""
    b = gpt.Batches(gpt.load_text(), 4, 64, seed=0)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        x, y = gpt.to_device("cuda", b.training(3))
        torch.cuda.synchronize()
    copies = [e.name for e in prof.events() if e.name.startswith("Memcpy")]
    assert copies == ["Memcpy HtoD (Pinned -> Device)"] * 2, copies
    want = b.training(3)
    assert torch.equal(x.cpu(), torch.from_numpy(want[0])) and torch.equal(y.cpu(), torch.from_numpy(want[1]))


def test_torchrun_ranks_train_as_one_process_with_their_batch(tmp_path):
    """`torchrun --nproc-per-node 2 -m tinycuda gpt train` on the CPU (gloo): 2 ranks of batch 4 take the
    halves of the global batch of 8 and DDP averages their gradients, so they train as one process with
    batch 8 (losses equal to rounding), and end with identical replicas."""
    import subprocess
    import sys
    two = tmp_path / "two.json"
    common = [*SMALL, "--steps", "8", "--device", "cpu", "--eval-every", "4"]
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                        "-m", "tinycuda", "gpt", "train", *common, "--batch-size", "4", "--json", str(two)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "2 processes (DDP)" in r.stdout
    ddp = json.loads(two.read_text())["results"][0]
    one = _train(tmp_path, "one", *common, "--batch-size", "8")[0]
    assert ddp["world_size"] == 2 and ddp["replicas_in_sync"]
    np.testing.assert_allclose(ddp["loss"], one["loss"], rtol=2e-5)
    np.testing.assert_allclose(ddp["val_loss"], one["val_loss"], rtol=2e-5)


# The training step's kernels that are still torch's, by launching op, each with where it comes from. Issue 15
# asks for none; until then any kernel of another op fails the test, and so does a listed op gone (drop it here).
TORCH_OPS_LEFT = {
    # autograd's sum of two gradients of one tensor: the tied embedding / head weight's
    "aten::add_": "autograd's gradient accumulation",
    # fused_linear_cross_entropy's torch door: the loss cast to the weight's bf16 (and, where the head still
    # chunks, its float32 grad_weight accumulator rounded to it), the count of targets not ignored, the row
    # losses' sum and the mean's division
    "aten::copy_": "fused_linear_cross_entropy's casts",
    "aten::ne": "fused_linear_cross_entropy's n_valid",
    "aten::sum": "fused_linear_cross_entropy's n_valid and loss",
    "aten::div": "fused_linear_cross_entropy's mean",
    # loss.backward()'s seed gradient, torch.ones_like(loss)
    "aten::fill_": "autograd's seed",
}


@requires_cuda
def test_training_step_kernels_are_tinycudas():
    """One training step of the GPT with --master-weights (bf16 model, no autocast casts) under
    torch.profiler: forward, backward, AdamW with clipping. Every kernel is tinycuda's but those of
    TORCH_OPS_LEFT's ops (memcpy and memset aside), and those take a small share of the step."""
    import argparse
    args = argparse.Namespace(lr=6e-4, weight_decay=0.1, grad_clip=1.0, master_weights=True)  # what the optimizer reads
    cfg = GPTConfig(vocab_size=256, context=128, n_layer=2, n_head=4, n_embd=128)
    model = gpt.build(cfg, "tinycuda", "cuda", 0, master_weights=True)
    opt = gpt._optimizer(model, args, "tinycuda")
    batches = gpt.Batches(gpt.load_text(), 4, cfg.context, 0)

    def step(i):
        x, y = (torch.from_numpy(t).to("cuda") for t in batches.training(i))
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    step(0)  # warm-up: the ops' first calls (tensor maps, workspaces)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as prof:
        step(1)
        torch.cuda.synchronize()
    total, foreign, _, _ = gpt.kernel_owners(prof)
    ops = {op for op, _ in foreign}
    assert ops <= set(TORCH_OPS_LEFT), f"torch kernels from ops not listed: {sorted(ops - set(TORCH_OPS_LEFT))}"
    assert set(TORCH_OPS_LEFT) <= ops, f"listed ops that launched nothing: {sorted(set(TORCH_OPS_LEFT) - ops)}"
    assert total["tinycuda"] > 0 and total["other"] < 0.2 * (total["tinycuda"] + total["other"]), dict(total)
