"""torch.autocast runs tinycuda's GEMMs, attention and norms in the autocast
dtype (tinycuda/ops/_autocast.py): the result is the op on inputs cast by hand,
bit for bit, and float32 leaves get float32 gradients. Other ops keep their
input's dtype."""
import pytest
import torch

import tinycuda
from conftest import DEVICES
from tinycuda.ops._autocast import LOWER


def _cases(device):
    g = torch.Generator(device="cpu").manual_seed(0)

    def r(*shape):
        return torch.randn(*shape, generator=g).to(device).requires_grad_()

    t = torch.randint(0, 11, (7,), generator=g).to(device)
    return {
        "linear": (lambda x, w, b: tinycuda.linear(x, w, b), (r(5, 8), r(6, 8), r(6))),
        "linear_act": (lambda x, w, b: tinycuda.linear_act(x, w, b, "gelu"), (r(5, 8), r(6, 8), r(6))),
        "matmul": (tinycuda.matmul, (r(5, 8), r(8, 6))),
        "flash_attention": (lambda q, k, v: tinycuda.flash_attention(q, k, v, causal=True),
                            (r(2, 9, 2, 16), r(2, 9, 2, 16), r(2, 9, 2, 16))),
        "flash_attention_qkvpacked": (lambda qkv: tinycuda.flash_attention_qkvpacked(qkv, causal=True),
                                      (r(2, 9, 3, 2, 16),)),
        "fused_linear_cross_entropy": (lambda h, w: tinycuda.fused_linear_cross_entropy(h, w, t), (r(7, 8), r(11, 8))),
        "layer_norm": (lambda x, w, b: tinycuda.layer_norm(x, (8,), w, b), (r(5, 8), r(8), r(8))),
        "rms_norm": (lambda x, w: tinycuda.rms_norm(x, (8,), w), (r(5, 8), r(8))),
    }


def test_every_lower_op_has_a_case():
    assert set(_cases("cpu")) == set(LOWER)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", LOWER)
@pytest.mark.parametrize("device", DEVICES)
def test_autocast_casts_inputs(device, name, dtype):
    fn, inputs = _cases(device)[name]
    with torch.autocast(device, dtype):
        out = fn(*inputs)
    assert out.dtype == dtype
    grads = torch.autograd.grad(out.float().sum(), inputs)
    assert all(gr.dtype == torch.float32 for gr in grads)
    by_hand = fn(*(x.to(dtype) for x in inputs))
    assert torch.equal(out, by_hand)
    for gr, ref in zip(grads, torch.autograd.grad(by_hand.float().sum(), inputs)):
        assert torch.equal(gr, ref)


@pytest.mark.parametrize("device", DEVICES)
def test_other_ops_keep_their_dtype(device):
    x = torch.randn(4, 8, device=device)
    with torch.autocast(device, torch.bfloat16):
        assert tinycuda.softmax(x, -1).dtype == torch.float32
        assert tinycuda.gelu(x).dtype == torch.float32


def test_autocast_compiles():
    x, w = torch.randn(4, 8), torch.randn(3, 8)
    f = torch.compile(lambda x, w: tinycuda.linear(x, w), fullgraph=True)
    with torch.autocast("cpu", torch.bfloat16):
        assert torch.equal(f(x, w), tinycuda.linear(x.bfloat16(), w.bfloat16()))


def test_float64_left_alone():
    """As torch's autocast: float64 inputs keep their dtype (the op then sees float64 and float32 mixed, and says so)."""
    x, w = torch.randn(4, 8, dtype=torch.float64), torch.randn(3, 8, dtype=torch.float64)
    with torch.autocast("cpu", torch.bfloat16):
        assert tinycuda.linear(x, w).dtype == torch.float64
