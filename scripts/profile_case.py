"""Kernel by kernel: where one `tinycuda bench` case spends its GPU time.

    python3 scripts/profile_case.py mean fwd+bwd 16384,16384,1 [--impls tinycuda,compile] [--dtype float32]

Builds the case as the bench does (its inputs, its grad_out), warms it up,
then runs it 5 times under torch.profiler and prints each CUDA kernel's mean
time per run, per implementation: the first question METHOD.md asks of a case
that misses (is it the kernel, or a kernel we did not expect?). ncu then says
why a kernel is slow.
"""
import argparse

import torch
from torch.profiler import ProfilerActivity, profile

from tinycuda import bench


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("op")
    p.add_argument("mode", choices=("fwd", "bwd", "fwd+bwd"))
    p.add_argument("shape", help="comma list, as the bench table prints it with x")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--impls", default="tinycuda,compile")
    a = p.parse_args()
    info = bench.SPECS[a.op]
    shape = tuple(int(s) for s in a.shape.replace("x", ",").split(","))
    torch.manual_seed(0)
    inputs = info.bench.make(shape, getattr(torch, a.dtype), "cuda")
    for impl in a.impls.split(","):
        fn = {"tinycuda": info.fn, "eager": info.bench.ref or info.ref}.get(impl)
        if impl == "compile":
            torch._dynamo.reset()
            fn = torch.compile(info.bench.ref or info.ref, fullgraph=True)
        run = bench._runner(fn, inputs, a.mode, info.bench.loss, info.bench.grad)
        for _ in range(3):
            run()
        torch.cuda.synchronize()
        reps = 5
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(reps):
                run()
            torch.cuda.synchronize()
        times = {}
        for e in prof.events():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                times[e.name] = times.get(e.name, 0.0) + e.device_time / 1e3 / reps
        total = sum(times.values())
        print(f"{a.op} {a.mode} {a.shape} {a.dtype} {impl}: {total:.4f} ms of kernels a run")
        for name, ms in sorted(times.items(), key=lambda kv: -kv[1]):
            print(f"  {ms:8.4f} ms  {name[:150]}")


if __name__ == "__main__":
    main()
