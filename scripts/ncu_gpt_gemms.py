"""GPT-2 124M's linear products in bf16 (16 x 1024 tokens), tinycuda's and cuBLAS's, one call each in an NVTX
range named for it, for Nsight Compute (scripts/gpu_gpt.sh ncu):
  ncu --profile-from-start off --clock-control none --nvtx --section SpeedOfLight --section WarpStateStats
      --section MemoryWorkloadAnalysis --csv python3 scripts/ncu_gpt_gemms.py [case ...]
  python3 scripts/ncu_gpt_gemms.py --time [case ...]   # each case's median time and TFLOP/s instead
In the GPT's profile (BENCHMARKS, step 3) the forward products ran at ~360 TFLOP/s, the input gradients at ~540
and the weight gradients at ~370 on as many FLOPs: these cases separate the forward's epilogue (bias, GELU, pre),
its operand layout, and the weight gradient's few tiles (split-K)."""
import sys

import torch
import torch.nn.functional as F

import tinycuda  # noqa: F401  (the ops)
from tinycuda.bench import Timer, profiled

torch.manual_seed(0)
T, C = 16 * 1024, 768
dev, bf = "cuda", torch.bfloat16
ops = torch.ops.tinycuda
x, x4 = torch.randn(T, C, device=dev, dtype=bf), torch.randn(T, 4 * C, device=dev, dtype=bf)
w_fc, b_fc = torch.randn(4 * C, C, device=dev, dtype=bf) / C**0.5, torch.randn(4 * C, device=dev, dtype=bf)
w_qkv, b_qkv = torch.randn(3 * C, C, device=dev, dtype=bf) / C**0.5, torch.randn(3 * C, device=dev, dtype=bf)
g_fc, g_qkv = torch.randn(T, 4 * C, device=dev, dtype=bf), torch.randn(T, 3 * C, device=dev, dtype=bf)
cases = {
    # forward: the MLP's first linear with GELU (y and pre), without the activation, without the bias
    "fc_fwd_gelu": lambda: ops.linear_act(x, w_fc, b_fc, "gelu_tanh", save_pre=True),
    "fc_fwd": lambda: ops.linear(x, w_fc, b_fc),
    "fc_fwd_nobias": lambda: ops.linear(x, w_fc, None),
    "fc_fwd_cublas": lambda: F.linear(x, w_fc, b_fc),
    "qkv_fwd": lambda: ops.linear(x, w_qkv, b_qkv),
    "qkv_fwd_cublas": lambda: F.linear(x, w_qkv, b_qkv),
    # backward: grad_x (M = tokens, K = 3072) and grad_weight (K = tokens: few tiles, split)
    "fc_grad_x": lambda: ops.matmul(g_fc, w_fc),
    "fc_grad_x_cublas": lambda: g_fc @ w_fc,
    "fc_grad_w": lambda: ops.matmul(g_fc.t(), x),
    "fc_grad_w_cublas": lambda: g_fc.t() @ x,
    "qkv_grad_w": lambda: ops.matmul(g_qkv.t(), x),
    "qkv_grad_w_cublas": lambda: g_qkv.t() @ x,
    "proj_grad_w": lambda: ops.matmul(x4.t()[:C], x),
    "mlp_proj_grad_w": lambda: ops.matmul(x.t(), x4),
    "mlp_proj_grad_w_cublas": lambda: x.t() @ x4,
}
# (M, N, K) of each case's product, for --time's TFLOP/s
mnk = {"fc": (T, 4 * C, C), "qkv": (T, 3 * C, C), "fc_grad_x": (T, C, 4 * C), "fc_grad_w": (4 * C, C, T),
       "qkv_grad_w": (3 * C, C, T), "proj_grad_w": (C, C, T),
       "mlp_proj_grad_w": (C, 4 * C, T)}
timing = "--time" in sys.argv
which = [a for a in sys.argv[1:] if a != "--time"] or list(cases)
for name in which:
    cases[name]()  # warm-up: allocations, tensor maps' shared-memory attributes
torch.cuda.synchronize()
timer = Timer("cuda", 30) if timing else None
for name in which:
    if timing:
        M, N, K = next(v for k, v in sorted(mnk.items(), key=lambda kv: -len(kv[0])) if name.startswith(k))
        ms = timer(cases[name])
        print(f"{name:20s} {M}x{N}x{K}  {ms:.3f} ms  {2 * M * N * K / ms / 1e9:6.1f} TFLOP/s")
    else:
        profiled(name, cases[name])
