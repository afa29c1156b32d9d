"""fused_linear_cross_entropy's three chunk products at issue 13's shape (8192 x 4096 x 128256 bf16), each
timed alone on tinycuda's GEMM (through tinycuda.capi.matmul, the core the op calls) and on cuBLAS (torch):
  logits       [chunk, V] = hidden_c @ weight.T          M = chunk, N = 128256, K = 4096
  grad_hidden  [chunk, H] = grad_c @ weight              M = chunk, N = 4096,  K = 128256
  grad_weight  [V, H]    += grad_c.T @ hidden_c          M = 128256, N = 4096, K = chunk (bf16 or float32 C)
    python3 scripts/flce_products.py [chunk ...]         # CUDA; ms and TFLOP/s per product
With --ncu, one call of each tinycuda product in an NVTX range (for ncu --nvtx --profile-from-start off)."""
import sys

import torch

from tinycuda import capi
from tinycuda.bench import Timer, profiled

N, H, V = 8192, 4096, 128256


def main():
    ncu = "--ncu" in sys.argv
    chunks = [int(c) for c in sys.argv[1:] if c != "--ncu"] or [512, 1024, 2048]
    dt, timer = torch.bfloat16, Timer("cuda", 20)
    x = torch.randn(N, H, device="cuda", dtype=dt) * 0.5
    w = torch.randn(V, H, device="cuda", dtype=dt) * 0.02
    gw, gw32 = torch.zeros(V, H, device="cuda", dtype=dt), torch.zeros(V, H, device="cuda")
    for chunk in chunks:
        hc, buf = x[:chunk], torch.randn(chunk, V, device="cuda", dtype=dt) * 1e-3
        gh = torch.empty(chunk, H, device="cuda", dtype=dt)
        cases = {
            "logits": (lambda: capi.matmul(hc, w, transpose_b=True, out=buf), lambda: torch.mm(hc, w.t(), out=buf)),
            "grad_hidden": (lambda: capi.matmul(buf, w, out=gh), lambda: torch.mm(buf, w, out=gh)),
            "grad_weight": (lambda: capi.matmul(buf, hc, transpose_a=True, out=gw, accumulate=True),
                            lambda: gw.addmm_(buf.t(), hc)),
            "grad_weight_f32": (lambda: capi.matmul(buf, hc, transpose_a=True, out=gw32, accumulate=True,
                                                    c_float=True), None),
        }
        flops = 2 * chunk * H * V
        for name, (tc, cublas) in cases.items():
            tc()
            torch.cuda.synchronize()
            if ncu:
                profiled(f"{name}_{chunk}", tc)
                continue
            t = timer(tc)
            line = f"chunk {chunk:5d} {name:16s} tinycuda {t:7.3f} ms {flops / t / 1e9:6.1f} TFLOP/s"
            if cublas is not None:
                c = timer(cublas)
                line += f" | cuBLAS {c:7.3f} ms {flops / c / 1e9:6.1f} TFLOP/s | {c / t:.2f}x"
            print(line, flush=True)


if __name__ == "__main__":
    main()
