import pytest
import torch

import tinycuda
from conftest import check_op, noncontiguous

CASES = [  # (shape, dim)
    ((0,), None), ((1,), None), ((7,), None), ((4097,), None), ((100003,), None), ((3, 0), None),
    ((), None), ((), 0), ((5, 33), 0), ((5, 33), 1), ((5, 33), -1), ((2, 3, 4097), 1),
    ((2, 3, 4097), 2), ((1000, 7), 0), ((4, 0, 3), 1), ((4, 0, 3), 0), ((33, 1, 65), 1),
    ((20000, 3), 0), ((3, 70001), 1),
]


@pytest.mark.parametrize("shape,dim", CASES, ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("contiguous", [True, False], ids=["contig", "strided"])
def test_sum_matches_torch(device, dtype, shape, dim, keepdim, contiguous):
    x = torch.randn(shape, device=device).to(dtype)
    if not contiguous:
        x = noncontiguous(x)

    def ref(t):
        return torch.sum(t, dim=dim, keepdim=keepdim) if dim is not None else (
            torch.sum(t).reshape((1,) * t.dim()) if keepdim else torch.sum(t))

    # fp32 sums of up to 1e5 terms: atol ~ sqrt(n) * eps * |x|.
    check_op(lambda t: tinycuda.sum(t, dim, keepdim), ref, [x], rtol32=1e-5, atol32=2e-4)


def test_sum_gradcheck():
    x = torch.randn(3, 4, 5, dtype=torch.float64, requires_grad=True)
    for dim in (None, 0, 1, -1):
        assert torch.autograd.gradcheck(lambda t: tinycuda.sum(t, dim), (x,))
        assert torch.autograd.gradcheck(lambda t: tinycuda.sum(t, dim, True), (x,))


def test_sum_half_accumulates_in_float32(device):
    # 4096 x 8.0 = 32768, exact in fp16. A fp16 accumulator stalls once its
    # spacing (16 above 16384) makes "+ 8" a tie that rounds back down.
    x = torch.full((4096,), 8.0, device=device, dtype=torch.float16)
    assert tinycuda.sum(x).item() == 32768.0


def test_sum_opcheck(device, dtype):
    x = torch.randn(4, 33, device=device, dtype=dtype, requires_grad=True)
    for dim, keepdim in ((None, False), (0, False), (1, True), (None, True)):
        torch.library.opcheck(torch.ops.tinycuda.sum.default, (x, dim, keepdim))
    g = torch.randn(33, device=device, dtype=dtype)
    torch.library.opcheck(torch.ops.tinycuda.sum_backward.default, (g, [4, 33], 0, False))


def test_sum_errors():
    with pytest.raises(RuntimeError, match=r"tinycuda::sum: dim 2 is out of range for a tensor of 2 dims"):
        tinycuda.sum(torch.randn(3, 4), 2)
    with pytest.raises(RuntimeError, match=r"tinycuda::sum: x must be float32.*Bool"):
        tinycuda.sum(torch.ones(3, dtype=torch.bool))
    with pytest.raises(RuntimeError, match=r"tinycuda::sum_backward: grad_out must have shape \[4\]"):
        torch.ops.tinycuda.sum_backward(torch.randn(3), [3, 4], 0, False)
