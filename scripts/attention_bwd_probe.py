"""The attention backward alone, deterministic=True against False (the accumulator path), and SDPA's pick
(cuDNN on the H200), bf16: CUDA events around autograd.grad on a retained graph, median of 20 after a 0.5 ms
GPU wait (the bench's method). BENCHMARKS "flash_attention, step 4".

    python3 scripts/attention_bwd_probe.py [out.json]   # the table
    ncu --kernel-name regex:dkv_wgmma --launch-count 2 ... python3 scripts/attention_bwd_probe.py --ncu
                                                        # one backward each way at 4 x 4096 x 32 x 128
"""
import json
import sys

import torch
import torch.nn.functional as F

import tinycuda.ops as ops

SHAPES = [(16, 1024, 12, 64, True), (4, 4096, 32, 64, False), (4, 4096, 32, 128, False), (4, 4096, 32, 128, True),
          (16, 512, 32, 128, False), (2, 8192, 16, 128, False)]


def median_ms(fn, reps=20):
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(500000)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[reps // 2]


def inputs(B, S, H, D):
    q, k, v = (torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    return q, k, v, torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16)


def emit(rows):
    """Prints each row as it comes (a JSON line), then writes them all to argv[1] when it is given."""
    out = []
    for row in rows:
        print(json.dumps(row), flush=True)
        out.append(row)
    if len(sys.argv) > 1:
        json.dump(out, open(sys.argv[1], "w"), indent=1)


def table():
    for B, S, H, D, causal in SHAPES:
        q, k, v, g = inputs(B, S, H, D)
        row = dict(shape=[B, S, H, D], causal=causal)
        for det in (True, False):
            o = ops.flash_attention(q, k, v, causal=causal, deterministic=det)
            row[f"bwd_det{int(det)}_ms"] = median_ms(lambda: torch.autograd.grad(o, (q, k, v), g, retain_graph=True))
        qt, kt, vt = (t.detach().transpose(1, 2).requires_grad_() for t in (q, k, v))
        o = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
        row["bwd_sdpa_ms"] = median_ms(lambda: torch.autograd.grad(o, (qt, kt, vt), g.transpose(1, 2),
                                                                   retain_graph=True))
        yield row


def main():
    if "--ncu" in sys.argv:
        q, k, v, g = inputs(4, 4096, 32, 128)
        for det in (False, True):
            torch.autograd.grad(ops.flash_attention(q, k, v, deterministic=det), (q, k, v), g)
        torch.cuda.synchronize()
        return
    emit(table())


if __name__ == "__main__":
    main()
