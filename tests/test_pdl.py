"""Programmatic dependent launch (csrc/cuda/kit/pdl.cuh): on Hopper, the kernels of a training step start while
the kernel before them is finishing, and each must still see every write of the kernels it depends on.

A chain of dependent ops, each reading what the one before it wrote, runs three ways with the same inputs:
queued back to back (each kernel's launch overlaps the previous one's tail), with the host waiting after every
op (nothing in flight to overlap), and replayed from a CUDA graph (the programmatic edges captured). All three
must give the same bits. The chain covers every kernel launched with launch_pdl: the wgmma GEMM with its
epilogues, split-K's and stream-K's sums, the norms and their weight-gradient sums, the GELU backward's column
sums, reduce_columns, attention's forward, delta, dq and dK/dV, cross-entropy forward and backward, and the
optimizer's norm and AdamW kernels. Elsewhere (no sm_90, TC_PDL=0) the same chain runs on plain launches."""
import pytest
import torch

import tinycuda

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


def _inputs(seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    dt = torch.bfloat16

    def randn(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g, device="cuda", dtype=torch.float32) * scale).to(dt)

    # C = 384: the norms' rows are 3 x 16 vectors, norm.cuh's three-a-thread kernels
    B, S, H, D, C, V = 2, 256, 6, 64, 384, 1000
    return dict(
        x=randn(B * S, C), res=randn(B * S, C), ln_w=randn(C, scale=0.1) + 1, ln_b=randn(C, scale=0.1),
        w_qkv=randn(3 * C, C, scale=C ** -0.5), b_qkv=randn(3 * C, scale=0.1),
        w_fc=randn(4 * C, C, scale=C ** -0.5), b_fc=randn(4 * C, scale=0.1),
        w_proj=randn(C, 4 * C, scale=(4 * C) ** -0.5), b_proj=randn(C, scale=0.1),
        # few output tiles and a long K: the plan splits K (split-K or stream-K, then a sum kernel)
        w_long=randn(64, 16384, scale=16384 ** -0.5), x_long=randn(256, 16384),
        w_head=randn(V, C, scale=C ** -0.5),
        target=torch.randint(0, V, (B * S,), generator=g, device="cuda"),
        shape=(B, S, H, D),
    )


def _step(t, wait):
    """One forward and backward through the chain, then an AdamW step; `wait` is called after every op."""
    B, S, H, D = t["shape"]
    params = [t[k].clone().requires_grad_() for k in ("ln_w", "ln_b", "w_qkv", "b_qkv", "w_fc", "b_fc", "w_proj",
                                                     "b_proj", "w_long", "w_head")]
    ln_w, ln_b, w_qkv, b_qkv, w_fc, b_fc, w_proj, b_proj, w_long, w_head = params
    x = t["x"].clone().requires_grad_()
    h, s = tinycuda.add_layer_norm(x, t["res"], (x.shape[-1],), ln_w, ln_b)
    wait()
    qkv = tinycuda.linear(h, w_qkv, b_qkv).view(B, S, 3, H, D)
    wait()
    # deterministic: the chain's bits are compared, and dQ's accumulator adds in no fixed order
    o = tinycuda.flash_attention(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], causal=True,
                                 deterministic=True).reshape(B * S, H * D)
    wait()
    f = tinycuda.linear_act(tinycuda.layer_norm(o + s, (o.shape[-1],), ln_w, ln_b), w_fc, b_fc, "gelu")
    wait()
    y = tinycuda.linear(f, w_proj, b_proj)
    wait()
    loss = tinycuda.cross_entropy(tinycuda.linear(y, w_head), t["target"])
    wait()
    loss = loss + tinycuda.linear(t["x_long"], w_long).float().square().mean()
    wait()
    loss.backward()
    wait()
    grads = [p.grad for p in params]
    norm = tinycuda.multi_tensor_l2norm(grads)
    wait()
    avg, avg_sq = [torch.zeros_like(p) for p in params], [torch.zeros_like(p) for p in params]
    with torch.no_grad():
        tinycuda.adamw_(params, grads, avg, avg_sq, 1e-3, 0.9, 0.95, 1e-8, 0.1, 1, norm, 1.0)
    wait()
    return [loss.detach(), x.grad, norm, *grads, *params]


def _same_bits(a, b):
    return all(torch.equal(u.view(torch.uint8) if u.dim() else u.view(1).view(torch.uint8),
                           v.view(torch.uint8) if v.dim() else v.view(1).view(torch.uint8)) for u, v in zip(a, b))


@pytest.mark.parametrize("seed", [0, 1])
def test_chained_kernels_see_their_inputs(seed):
    t = _inputs(seed)
    queued = _step(t, lambda: None)
    waited = _step(t, torch.cuda.synchronize)
    assert all(torch.isfinite(v).all() for v in queued[:3])
    assert _same_bits(queued, waited)


def test_chained_kernels_in_a_cuda_graph():
    t = _inputs(2)
    eager = _step(t, lambda: None)
    # the graph replays the forward and the optimizer's kernels (autograd's backward is captured as well)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        _step(t, lambda: None)  # warm-up: workspaces, smem attributes, autograd's graph
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = _step(t, lambda: None)
    graph.replay()
    torch.cuda.synchronize()
    assert _same_bits(eager, captured)
