"""fused_linear_cross_entropy's chunk size, timed with the bench's Timer (L2 flushed, median):
the three cuBLAS products of each chunk (logits, grad_hidden, grad_weight +=)
as the op runs them, at 8192 x 4096 x 128256 bf16, for chunk sizes 256 to
4096; and torch.compile of linear + cross_entropy (fwd+bwd) in the same run.

    python3 scripts/flce_chunks.py      # CUDA; prints ms per chunk size
"""
import torch
import torch.nn.functional as F

from tinycuda.bench import Timer


def main():
    timer = Timer("cuda", 20)
    n, h, v = 8192, 4096, 128256
    dt = torch.bfloat16
    x = torch.randn(n, h, device="cuda", dtype=dt) * 0.5
    w = torch.randn(v, h, device="cuda", dtype=dt) * 0.02
    t = torch.randint(0, v, (n,), device="cuda")
    gh = torch.empty_like(x)
    gw = torch.empty_like(w)
    for chunk in (256, 512, 1024, 2048, 4096):
        buf = torch.empty(chunk, v, device="cuda", dtype=dt)

        def run():
            for s in range(0, n, chunk):
                hc = x[s:s + chunk]
                torch.mm(hc, w.t(), out=buf)
                buf.mul_(1e-3)  # stands in for the CE kernel's pass over the chunk
                torch.mm(buf, w, out=gh[s:s + chunk])
                if s == 0:
                    torch.mm(buf.t(), hc, out=gw)
                else:
                    gw.addmm_(buf.t(), hc)

        ms = timer(run)
        extra = (chunk * v * 2 + n * h * 2 + v * h * 2) / 2**30
        print(f"chunk {chunk:5d}: {ms:7.2f} ms  ({6 * n * h * v / ms / 1e9:6.1f} TFLOP/s)  buffer+grads {extra:.2f} GiB",
              flush=True)
        del buf

    xr = x.clone().requires_grad_()
    wr = w.clone().requires_grad_()

    def loss_fn(a, b, tt):
        return F.cross_entropy(F.linear(a, b), tt)

    comp = torch.compile(loss_fn, fullgraph=True)

    def step():
        xr.grad = wr.grad = None
        comp(xr, wr, t).backward()

    step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    ms = timer(step)
    peak = (torch.cuda.max_memory_allocated() - base) / 2**30
    print(f"torch.compile linear+cross_entropy fwd+bwd: {ms:.2f} ms, peak extra {peak:.2f} GiB", flush=True)


if __name__ == "__main__":
    main()
