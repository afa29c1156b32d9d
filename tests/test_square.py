import pytest
import torch

import tinycuda
from conftest import check_op, noncontiguous

SHAPES = [(0,), (1,), (7,), (33,), (1000,), (4097,), (5, 33), (2, 3, 4097), ()]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("contiguous", [True, False], ids=["contig", "strided"])
def test_square_matches_torch(device, dtype, shape, contiguous):
    x = torch.randn(shape, device=device).to(dtype)
    if not contiguous:
        x = noncontiguous(x)
    check_op(tinycuda.square, torch.square, [x])


def test_square_gradcheck():
    x = torch.randn(5, 17, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(tinycuda.square, (x,))


def test_square_opcheck(device, dtype):
    x = torch.randn(4, 9, device=device, dtype=dtype, requires_grad=True)
    torch.library.opcheck(torch.ops.tinycuda.square.default, (x,))
    torch.library.opcheck(torch.ops.tinycuda.square_backward.default, (torch.randn_like(x), x.detach()))


def test_square_errors():
    with pytest.raises(RuntimeError, match=r"tinycuda::square: x must be float32.*got Int"):
        tinycuda.square(torch.ones(3, dtype=torch.int32))
    with pytest.raises(RuntimeError, match=r"tinycuda::square_backward: grad_out has shape"):
        torch.ops.tinycuda.square_backward(torch.randn(2, 3), torch.randn(3, 2))
