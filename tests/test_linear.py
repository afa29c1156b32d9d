"""linear beyond the op table (tests/test_ops.py): the CUDA GEMM's kept
variants (tinycuda.variants), the nn.Linear drop-in."""
import pytest
import torch
import torch.nn.functional as F

import tinycuda
from conftest import check_op, requires_cuda
from tinycuda import variants

pytestmark = pytest.mark.racecheck


# The mma variant copies 16-byte chunks with cp.async when every extent with
# unit stride is a multiple of 8 ((256, 64, 136) on: forward, grad_x and
# grad_weight each pair the operands' layouts differently; ragged M, and K over
# many 4-stage rounds) and gathers element by element otherwise (k = 17, 300, 132).
@requires_cuda
@pytest.mark.parametrize("variant", variants.names("linear"))
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (33, 17, 129), (257, 300, 130), (260, 132, 68), (256, 64, 136),
                                   (300, 64, 136), (129, 1000, 264)], ids=str)
def test_linear_cuda_variants(dtype, variant, m, k, n):
    x = torch.randn(m, k, device="cuda").to(dtype)
    w = torch.randn(n, k, device="cuda").to(dtype)
    b = torch.randn(n, device="cuda").to(dtype)
    if variant in ("mma", "wgmma") and dtype == torch.float32:
        with pytest.raises(RuntimeError, match=rf"tinycuda::linear: .*the {variant} variant takes float16 or bfloat16"):
            variants.call("linear", variant, x, w, b)
        return
    check_op(variants.get("linear", variant), F.linear, [x, w, b], rtol32=1e-4, atol32=1e-3, grad_atol32=2e-3)


def test_linear_rejects_unknown_variant():
    with pytest.raises(ValueError, match=r"tinycuda.variants: linear has no variant 'fast'"):
        variants.get("linear", "fast")
    with pytest.raises(ValueError, match=r"tinycuda.variants: 'relu' has no variants"):
        variants.get("relu", "naive")
    with pytest.raises(RuntimeError, match=r"tinycuda::linear: algo must be"):
        torch.ops.tinycuda.linear(torch.randn(4, 5), torch.randn(3, 5), None, algo=9)


def test_linear_module_is_drop_in():
    torch.manual_seed(0)
    ref = torch.nn.Linear(6, 4)
    torch.manual_seed(0)
    ours = tinycuda.nn.Linear(6, 4)
    assert list(ours.state_dict()) == list(ref.state_dict()) == ["weight", "bias"]
    torch.testing.assert_close(ours.weight, ref.weight)  # same initialization
    ours.load_state_dict(ref.state_dict())
    x = torch.randn(3, 6)
    torch.testing.assert_close(ours(x), ref(x))
    assert tinycuda.nn.Linear(6, 4, bias=False).bias is None
