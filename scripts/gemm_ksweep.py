"""Where a wgmma GEMM's time goes: the GPT's forward product (16384 x 3072, bf16, x @ W^T) timed at several K.
Each block walks its output tiles one after another, so time = tiles_per_sm x (E + k_tiles x m): the slope per
64-deep k-tile is the mainloop's cost m, the intercept a tile's fixed cost E (its epilogue and hand-over).
    python3 scripts/gemm_ksweep.py [K ...]      # default 768 1536 3072 6144
"""
import sys

import numpy as np
import torch
import torch.nn.functional as F

import tinycuda  # noqa: F401  (the ops)
from tinycuda.bench import Timer

M, N = 16 * 1024, 3072
ks = [int(k) for k in sys.argv[1:]] or [768, 1536, 3072, 6144]
ops, timer = torch.ops.tinycuda, Timer("cuda", 30)
sms = torch.cuda.get_device_properties(0).multi_processor_count
per_sm = (M // 128) * (N // 256) / sms  # 128 x 256 tiles a block
rows = {"tinycuda": [], "cublas": []}
for K in ks:
    x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16) / K**0.5
    for name, fn in (("tinycuda", lambda: ops.linear(x, w, None)), ("cublas", lambda: F.linear(x, w))):
        ms = timer(fn)
        rows[name].append(ms)
        print(f"K {K:5d} {name:8s} {ms:.3f} ms  {2 * M * N * K / ms / 1e9:6.1f} TFLOP/s  "
              f"{ms * 1e3 / per_sm:6.2f} us a 128x256 tile")
for name, ms in rows.items():
    slope, icpt = np.polyfit([k / 64 for k in ks], [t * 1e3 / per_sm for t in ms], 1)
    print(f"{name:8s} fit: {slope:.3f} us a k-tile ({2 * 128 * 256 * 64 / slope / 1e6 * sms:.0f} TFLOP/s), "
          f"{icpt:.2f} us a tile besides")
