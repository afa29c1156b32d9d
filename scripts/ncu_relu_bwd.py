"""Profiler evidence for docs/BENCHMARKS.md: DRAM bytes and time of the relu
backward kernels of tinycuda and torch.compile at 8192^2 fp32.

    ncu --profile-from-start off --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \\
        python3 scripts/ncu_relu_bwd.py
"""
import torch

import tinycuda

x = torch.randn(8192, 8192, device="cuda", requires_grad=True)
g = torch.randn(8192, 8192, device="cuda")
compiled = torch.compile(torch.relu)
for fn in (tinycuda.relu, compiled):  # warm up (and compile) outside the profiled range
    torch.autograd.grad(fn(x), x, g)
torch.cuda.synchronize()
for name, fn in (("tinycuda", tinycuda.relu), ("compile", compiled)):
    y = fn(x)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    torch.autograd.grad(y, x, g)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    print(f"profiled {name} relu backward")
