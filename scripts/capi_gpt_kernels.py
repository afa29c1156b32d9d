"""The GPT's new kernels (adamw_, multi_tensor_l2norm, embedding) through the
C ABI on torch CUDA tensors: no torch extension build needed, so a GPU
machine can check and time them on libtinycuda alone (scripts/gpu_capi_gpt.sh
runs both on the prebuilt core):

    TINYCUDA_LIB=build/prebuilt/libtinycuda.so python scripts/capi_gpt_kernels.py check   # under compute-sanitizer
    TINYCUDA_LIB=build/prebuilt/libtinycuda.so python scripts/capi_gpt_kernels.py bench

check: results against float64 references (many tensors: several launches
of the multi-tensor batches; heavy id collisions). bench: GPT-2 124M's
parameter list, one AdamW step (tinycuda vs torch.optim.AdamW foreach and
fused), and GPT-2's embedding backward (8 x 1024 ids into 50304 x 768).
"""
import sys

import torch

from tinycuda import capi

dev = "cuda"


def check():
    torch.manual_seed(0)
    shapes = [(0,), (1,), (3, 5), (16385,), (7, 9001)] + [(i % 5 + 1, 300 + 7 * i) for i in range(40)]
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.float64):
        p, g = [torch.randn(s, device=dev).to(dtype) for s in shapes], [torch.randn(s, device=dev).to(dtype) for s in shapes]
        m, v = [torch.randn(s, device=dev).to(dtype) * 0.1 for s in shapes], [torch.rand(s, device=dev).to(dtype) for s in shapes]
        ref = [[t.double().clone() for t in ts] for ts in (p, g, m, v)]  # float64's .double() is itself
        norm = capi.multi_tensor_l2norm(g)
        want = torch.linalg.vector_norm(torch.cat([t.reshape(-1) for t in ref[1]]))
        assert abs(norm.double().item() - want.item()) <= 1e-5 * want.item(), (dtype, norm, want)
        kw = dict(lr=1e-2, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1, step=3)
        capi.adamw_(p, g, m, v, **kw, grad_norm=norm, max_grad_norm=1.0)
        coef = min(1.0, 1.0 / (want.item() + 1e-6))
        b1, b2 = 1 - 0.9 ** 3, 1 - 0.95 ** 3
        tol = {torch.float32: 1e-5, torch.float64: 1e-12, torch.bfloat16: 2e-2, torch.float16: 3e-3}[dtype]
        for k, (pk, gk, mk, vk) in enumerate(zip(*ref)):
            gk = gk * coef
            mk = mk + 0.1 * (gk - mk)
            vk = 0.95 * vk + 0.05 * gk * gk
            pk = pk * (1 - 1e-3) - 1e-2 / b1 * mk / (vk.sqrt() / b2 ** 0.5 + 1e-8)
            for name, got, exp in (("p", p[k], pk), ("m", m[k], mk), ("v", v[k], vk)):
                err = (got.double() - exp).abs().max().item() if exp.numel() else 0.0
                assert err <= tol * (1 + exp.abs().max().item() if exp.numel() else 1), (dtype, k, name, err)
    for n, num, d in ((1, 1, 1), (1000, 5, 17), (8 * 1024, 50304, 768), (3000, 70000, 64)):
        idx = torch.randint(0, num, (n,), device=dev)
        idx[: n // 3] = idx[0]  # a third of the positions on one id
        for dtype in (torch.float32, torch.bfloat16):
            w = torch.randn(num, d, device=dev).to(dtype)
            out = capi.embedding(idx, w)
            assert torch.equal(out, w[idx]), (n, num, d, dtype)
            go = torch.randn(n, d, device=dev).to(dtype)
            pad = 1 if num > 1 else None
            gw = capi.embedding_backward(go, idx, num, padding_idx=pad)
            want = torch.zeros(num, d, dtype=torch.float64, device=dev).index_add_(0, idx, go.double())
            if pad is not None:
                want[pad] = 0
            err = (gw.double() - want).abs().max().item()
            assert err <= (1e-4 if dtype == torch.float32 else 2e-2) * (1 + want.abs().max().item()), (n, num, d, err)
            assert torch.equal(gw, capi.embedding_backward(go, idx, num, padding_idx=pad))  # deterministic
    torch.cuda.synchronize()
    print("check: adamw_, multi_tensor_l2norm, embedding and embedding_backward agree with float64")


def timed(fn, reps=20):
    """(median ms between CUDA events, median ms of the kernels alone): through the C ABI the host's
    argument conversion (DLPack, a pointer array) can leave the GPU idle between launches, which the events
    count and the kernels' own durations (the profiler's) do not."""
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
    kernels = sum(e.device_time_total for e in prof.key_averages()) / 1e3 / 5
    return sorted(times)[len(times) // 2], kernels


def bench():
    torch.manual_seed(0)
    c, L, V = 768, 12, 50304
    shapes = [(V, c), (1024, c)] + [s for _ in range(L) for s in
              ((c,), (c,), (3 * c, c), (3 * c,), (c, c), (c,), (c,), (c,), (4 * c, c), (4 * c,), (c, 4 * c), (c,))] + [(c,), (c,)]
    n = sum(torch.Size(s).numel() for s in shapes)
    params = [torch.nn.Parameter(torch.randn(s, device=dev) * 0.02) for s in shapes]
    for p in params:
        p.grad = torch.randn_like(p)
    gs = [p.grad for p in params]
    ms, vs = [torch.zeros_like(p) for p in params], [torch.zeros_like(p) for p in params]
    ps = [p.data for p in params]
    kw = dict(lr=1e-4, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1, step=1)
    ours = timed(lambda: capi.adamw_(ps, gs, ms, vs, **kw))
    ours_clip = timed(lambda: capi.adamw_(ps, gs, ms, vs, **kw, grad_norm=capi.multi_tensor_l2norm(gs),
                                          max_grad_norm=1.0))
    norm = timed(lambda: capi.multi_tensor_l2norm(gs))
    res = {"params": n, "tinycuda adamw_": ours, "tinycuda multi_tensor_l2norm + adamw_ (clipped)": ours_clip,
           "tinycuda multi_tensor_l2norm": norm}
    for name, kwargs in (("torch AdamW foreach", dict(foreach=True)), ("torch AdamW fused", dict(fused=True))):
        opt = torch.optim.AdamW(params, lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1, **kwargs)
        res[name] = timed(opt.step)
        res[name + " + clip_grad_norm_"] = timed(lambda: (torch.nn.utils.clip_grad_norm_(params, 1.0,
                                                                                          foreach=True), opt.step()))
    idx = torch.randint(0, V, (8 * 1024,), device=dev)
    go = torch.randn(8 * 1024, c, device=dev, dtype=torch.bfloat16)
    res["tinycuda embedding_backward bf16 8x1024 -> 50304x768"] = timed(lambda: capi.embedding_backward(go, idx, V))
    res["torch embedding_dense_backward"] = timed(
        lambda: torch.ops.aten.embedding_dense_backward(go, idx, V, -1, False))
    w = torch.randn(V, c, device=dev, dtype=torch.bfloat16)
    res["tinycuda embedding fwd"] = timed(lambda: capi.embedding(idx, w))
    res["torch embedding fwd"] = timed(lambda: torch.nn.functional.embedding(idx, w))
    gb = 28 * n / 1e9
    print(f"params {res.pop('params'):,}; ms: events (host included), kernels alone")
    for k, (ev, kern) in res.items():
        extra = f"  (kernels at {gb / (kern / 1e3):.0f} GB/s for 28 B/param)" if k.endswith("adamw_") else ""
        print(f"{k:60s} {ev:7.3f} {kern:7.3f}{extra}")


if __name__ == "__main__":
    {"check": check, "bench": bench}[sys.argv[1]]()
