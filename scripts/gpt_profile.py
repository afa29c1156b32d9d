"""Where a tinycuda GPT training step spends its GPU time, and which of its
kernels are not tinycuda's.

    python scripts/gpt_profile.py --preset gpt2 --batch-size 16 [--json out.json] [--backend compile]

Runs warm-up steps, then one step (forward, backward, clipping, AdamW) under
torch.profiler. A kernel is someone else's when its name is torch's, Triton's
or a library's (tinycuda.gpt.kernel_owners); each such kernel is listed with
the innermost op that launched it. Memcpy and memset are reported apart, and
the GPU's busy time (gpu_time) against the span of the step's kernels: the
idle gaps between them. Then the step's kernels by total time, whoever's.
--backend torch or compile profiles gpt train's other backends the same way
(every kernel foreign), to see where a step's time differs.
"""
import argparse
import json
import sys

import torch

sys.path.insert(0, ".")
from tinycuda import gpt  # noqa: E402


def gpu_time(prof):
    """(busy, span) in us: the union of the GPU events' intervals, and the first one's start to the last one's
    end; span - busy is the time the GPU sat idle between them. Where kernels overlap (programmatic dependent
    launch opens a kernel's interval before the one ahead of it has completed, its blocks waiting in
    griddepcontrol.wait; most with step 14's early trigger), their durations add up to more than the GPU spent,
    and "ms of kernels" with them."""
    iv = sorted((e.time_range.start, e.time_range.end) for e in prof.events()
                if e.device_type == torch.autograd.DeviceType.CUDA)
    busy, end = 0, None
    for start, stop in iv:
        if end is None or start >= end:
            busy, end = busy + stop - start, stop
        elif stop > end:
            busy, end = busy + stop - end, stop
    return busy, (end - iv[0][0] if iv else 0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--preset", default="gpt2")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--json")
    p.add_argument("--device", default="cuda", help="cpu: the same step and op table, no kernels (a dry run)")
    p.add_argument("--master-weights", action="store_true", help="bf16 parameters, float32 masters (gpt train's)")
    p.add_argument("--backend", default="tinycuda", choices=["tinycuda", "torch", "compile"])
    a = p.parse_args()
    args = argparse.Namespace(preset=a.preset, n_layer=None, n_head=None, n_embd=None, context=None, lr=6e-4,
                              weight_decay=0.1, warmup=10, steps=100, grad_clip=1.0, master_weights=a.master_weights)
    cfg = gpt.config_from(args)
    model = gpt.build(cfg, a.backend, a.device, 0, a.master_weights)
    opt = gpt._optimizer(model, args, a.backend)
    forward = torch.compile(model) if a.backend == "compile" else model
    batches = gpt.Batches(gpt.load_text(), a.batch_size, cfg.context, 0)

    def step(i):
        x, y = gpt.to_device(a.device, batches.training(i))
        with torch.autocast(a.device, torch.bfloat16, enabled=a.device == "cuda"):
            loss = forward(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gpt.clip(model, opt, args)
        opt.step()

    for i in range(a.warmup):
        step(i)
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    sync()
    activities = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if a.device == "cuda"
                                                           else [])
    with torch.profiler.profile(activities=activities) as prof:
        step(a.warmup)
        sync()

    total, foreign, by_kernel, calls = gpt.kernel_owners(prof)
    step_us = sum(total.values()) or 1
    print(f"step: {step_us / 1e3:.2f} ms of kernels; " + ", ".join(f"{k} {v / step_us:.1%}" for k, v in total.items()))
    busy, span = gpu_time(prof)
    if span:
        print(f"GPU: busy {busy / 1e3:.2f} ms (the union of its kernels' intervals), first start to last end "
              f"{span / 1e3:.2f} ms, idle {(span - busy) / 1e3:.2f} ms")
    print("kernels not tinycuda's (op -> kernel: ms):")
    for (op, name), us in foreign.most_common(40):
        print(f"  {us / 1e3:8.3f}  {op:40s} {name}")
    print("the step's kernels by total time (ms, launches):")
    for name, us in by_kernel.most_common(30):
        print(f"  {us / 1e3:8.3f} {calls[name]:5d}  {name}")
    print(prof.key_averages().table(sort_by="cuda_time_total" if a.device == "cuda" else "cpu_time_total",
                                    row_limit=30, max_name_column_width=60))
    if a.json:
        json.dump({"total_us": dict(total), "busy_us": busy, "span_us": span,
                   "foreign": [[op, k, us] for (op, k), us in foreign.most_common()],
                   "kernels": [[k, calls[k], us] for k, us in by_kernel.most_common()]},
                  open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
