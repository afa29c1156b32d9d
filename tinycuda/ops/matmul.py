"""matmul: torch.matmul on tinycuda kernels (csrc/*/matmul.*).

The op, tinycuda::matmul, takes bmm's shapes: a [M, K] or [Ba, M, K] and
b [K, N] or [Bb, K, N], a batch of 1 broadcasting, any strides (a transposed
view is read where it lies). matmul() below reduces torch.matmul's other
shapes (vectors, more batch dims, broadcasting) to those with views. The
backward is two more matmuls, on transposed views of the saved operands.
"""
import math

import torch

from ._fake import register_fake

__all__ = ["matmul"]


def matmul(a, b):
    """torch.matmul(a, b): 1-D operands are vectors, leading dims broadcast.
    fp16/bf16 accumulate in fp32. (The CUDA GEMM's kept variants: tinycuda.variants.)"""
    if a.dim() == 0 or b.dim() == 0:
        raise RuntimeError(f"tinycuda::matmul: a and b need at least 1 dim each, got shapes {tuple(a.shape)} "
                           f"and {tuple(b.shape)}")
    k_b = b.shape[0] if b.dim() == 1 else b.shape[-2]
    if a.shape[-1] != k_b:
        raise RuntimeError(f"tinycuda::matmul: a's last dim ({a.shape[-1]}) must equal b's "
                           f"{'only dim' if b.dim() == 1 else 'second to last'} ({k_b}): shapes {list(a.shape)} "
                           f"and {list(b.shape)}")
    vec_a, vec_b = a.dim() == 1, b.dim() == 1
    a = a.unsqueeze(0) if vec_a else a
    b = b.unsqueeze(-1) if vec_b else b
    if a.dim() <= 3 and b.dim() <= 3:
        out = torch.ops.tinycuda.matmul(a, b)
    else:
        batch = _broadcast(a.shape[:-2], b.shape[:-2])
        out = torch.ops.tinycuda.matmul(_flat(a, batch), _flat(b, batch))
        out = out.reshape(*batch, *out.shape[-2:])
    if vec_a:
        out = out.squeeze(-2)
    return out.squeeze(-1) if vec_b else out


def _broadcast(sa, sb):
    try:
        return torch.broadcast_shapes(sa, sb)
    except RuntimeError:
        raise RuntimeError(f"tinycuda::matmul: batch dims {tuple(sa)} and {tuple(sb)} do not broadcast") from None


def _flat(t, batch):
    """t [..., R, C] as the op takes it: [R, C] when its batch dims hold one
    matrix (broadcast by the op), else [prod(batch), R, C]."""
    if t.shape[:-2].numel() == 1:
        return t.reshape(t.shape[-2:])
    return t.expand(*batch, *t.shape[-2:]).reshape(math.prod(batch), *t.shape[-2:])  # (-1 fails on 0 elements)


@register_fake("tinycuda::matmul")
def _matmul_fake(a, b, algo):
    torch._check(a.dim() in (2, 3), lambda: "tinycuda::matmul: a must be 2-D [M, K] or 3-D [batch, M, K]")
    torch._check(b.dim() in (2, 3), lambda: "tinycuda::matmul: b must be 2-D [K, N] or 3-D [batch, K, N]")
    torch._check(a.shape[-1] == b.shape[-2], lambda: "tinycuda::matmul: a's last dim must equal b's second to last")
    if a.dim() == 2 and b.dim() == 2:
        return a.new_empty((a.shape[0], b.shape[1]))
    ba, bb = (a.shape[0] if a.dim() == 3 else 1), (b.shape[0] if b.dim() == 3 else 1)
    torch._check(ba == bb or ba == 1 or bb == 1, lambda: "tinycuda::matmul: batch sizes do not broadcast")
    return a.new_empty((bb if ba == 1 else ba, a.shape[-2], b.shape[-1]))


def _setup(ctx, inputs, keyword_only_inputs, output):
    ctx.save_for_backward(*inputs)
    ctx.algo = keyword_only_inputs.get("algo", 0)


def _unbroadcast(grad, like):
    """grad [batch, R, C] summed over the batches in which `like` (2-D, or a batch of 1) was reused."""
    if grad.dim() == 3 and (like.dim() == 2 or like.shape[0] == 1) and grad.shape[0] != 1:
        return torch.ops.tinycuda.sum(grad, 0, like.dim() == 3)
    return grad.reshape(like.shape)


def _backward(ctx, grad):
    a, b = ctx.saved_tensors
    mm = lambda x, y: torch.ops.tinycuda.matmul(x, y, algo=ctx.algo)  # noqa: E731
    ga = gb = None
    if ctx.needs_input_grad[0]:
        ga = _unbroadcast(mm(grad, b.mT), a)          # grad_a = grad @ b^T
    if ctx.needs_input_grad[1]:
        if b.dim() == 2 and a.dim() == 3:             # b shared by every batch: one tall product
            rows = a.shape[0] * a.shape[1]
            gb = mm(a.reshape(rows, a.shape[-1]).mT, grad.reshape(rows, grad.shape[-1]))
        else:
            gb = _unbroadcast(mm(a.mT, grad), b)      # grad_b = a^T @ grad
    return ga, gb


torch.library.register_autograd("tinycuda::matmul", _backward, setup_context=_setup)
