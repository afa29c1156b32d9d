"""fused_linear_cross_entropy forward+backward by chunk size, at the GPT-2 step's head (16384 x 768 x 50304,
bf16, float32 grad_weight accumulator) and issue 13's shape (8192 x 4096 x 128256, bf16 accumulator): the
time, and the memory above the inputs (the [chunk, V] buffer, grad_weight, its float32 accumulator).
tc_fused_linear_cross_entropy_chunk (cross_entropy.h) picks the chunk the op takes by default ("auto").

    python3 scripts/flce_chunk_sweep.py             # CUDA
    python3 scripts/flce_chunk_sweep.py --profile   # the default chunk only, and where one call's time goes,
                                                    # by kernel (torch.profiler)
"""
import sys

import torch

import tinycuda
from tinycuda.bench import Timer

CASES = [("gpt2 head", 16384, 768, 50304, torch.float32), ("issue 13", 8192, 4096, 128256, None)]


def main():
    profile = "--profile" in sys.argv
    timer = Timer("cuda", 20)
    for name, n, h, v, accum in CASES:
        x = (torch.randn(n, h, device="cuda", dtype=torch.bfloat16) * 0.5).requires_grad_()
        w = (torch.randn(v, h, device="cuda", dtype=torch.bfloat16) * 0.02).requires_grad_()
        t = torch.randint(0, v, (n,), device="cuda")
        for chunk in (0,) if profile else (0, 512, 1024, 2048, 4096, 8192):
            if chunk > n:
                continue

            def run():
                x.grad = w.grad = None
                tinycuda.ops.fused_linear_cross_entropy(x, w, t, chunk_size=chunk, accum_dtype=accum).backward()

            run()  # warm-up
            x.grad = w.grad = None
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            run()  # the memory of one call, its gradients included
            torch.cuda.synchronize()
            extra = (torch.cuda.max_memory_allocated() - base) / 2**30
            ms = timer(run)
            print(f"{name:9s} {n}x{h}x{v} chunk {chunk or 'auto':>5}: {ms:7.2f} ms "
                  f"{6 * n * h * v / ms / 1e9:6.1f} TFLOP/s, peak {extra:.2f} GiB above the inputs", flush=True)
            if profile:
                with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                    run()
                    torch.cuda.synchronize()
                print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=70))


if __name__ == "__main__":
    main()
