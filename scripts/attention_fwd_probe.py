"""The attention forward alone against SDPA's pick (cuDNN on the H200), bf16, TFLOP/s (4 B H S^2 D, halved
when causal): attention_bwd_probe's median_ms (CUDA events, median of 20 after a 0.5 ms GPU wait). BENCHMARKS
"flash_attention, step 5".

    python3 scripts/attention_fwd_probe.py [out.json]   # the table
    ncu --kernel-name regex:attention_wgmma --launch-count 1 ... python3 scripts/attention_fwd_probe.py --ncu
                                                         # one forward at 4 x 4096 x 32 x 128
"""
import sys

import torch
import torch.nn.functional as F

import tinycuda.ops as ops
from attention_bwd_probe import emit, median_ms  # scripts/ is sys.path[0]: the backward probe's timing

# B, S, H, D, causal: the bench's shapes, and causal where the issue names it
SHAPES = [(4, 4096, 32, 128, False), (4, 4096, 32, 128, True), (4, 4096, 32, 64, False), (4, 4096, 32, 64, True),
          (4, 4096, 16, 256, False), (16, 512, 32, 128, False), (1, 16384, 32, 128, True),
          (16, 1024, 12, 64, True)]


def table():
    for B, S, H, D, causal in SHAPES:
        q, k, v = (torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        flop = 4 * B * H * S * S * D / (2 if causal else 1)
        row = dict(shape=[B, S, H, D], causal=causal)
        ms = median_ms(lambda: ops.flash_attention(q, k, v, causal=causal))
        row.update(tinycuda_ms=ms, tinycuda_tflops=flop / ms / 1e9)
        qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
        ms = median_ms(lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal))
        row.update(sdpa_ms=ms, sdpa_tflops=flop / ms / 1e9)
        yield row


def main():
    if "--ncu" in sys.argv:
        q, k, v = (torch.randn(4, 4096, 32, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        ops.flash_attention(q, k, v)
        torch.cuda.synchronize()
        return
    with torch.no_grad():
        emit(table())


if __name__ == "__main__":
    main()
