import math

import pytest
import torch

import tinycuda
from conftest import assert_matches, check_op, noncontiguous, requires_cuda

CASES = [  # (shape, dim)
    ((1, 1), -1), ((7, 1), -1), ((3, 7), -1), ((5, 33), 1), ((4, 1023), -1), ((3, 1025), -1),
    ((2, 4097), -1), ((33, 5), 0), ((2, 3, 17), 1), ((0, 7), -1), ((4, 0), -1), ((9,), 0), ((), 0),
]


@pytest.mark.parametrize("shape,dim", CASES, ids=str)
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("contiguous", [True, False], ids=["contig", "strided"])
def test_softmax_matches_torch(device, dtype, shape, dim, log, contiguous):
    x = (3 * torch.randn(shape, device=device)).to(dtype)
    if not contiguous:
        x = noncontiguous(x)
    ours = (lambda t: tinycuda.log_softmax(t, dim)) if log else (lambda t: tinycuda.softmax(t, dim))
    ref = (lambda t: torch.log_softmax(t, dim)) if log else (lambda t: torch.softmax(t, dim))
    check_op(ours, ref, [x], rtol32=1e-5, atol32=1e-5, grad_atol32=1e-4)


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_softmax_infinities_and_nan(device, log):
    inf, nan = math.inf, math.nan
    x = torch.tensor([[-inf, -inf, -inf], [-inf, 1.0, 2.0], [inf, 1.0, 2.0], [nan, 1.0, 2.0],
                      [0.0, 0.0, 0.0]], device=device)
    f = tinycuda.log_softmax if log else tinycuda.softmax
    ref = torch.log_softmax if log else torch.softmax
    torch.testing.assert_close(f(x, -1), ref(x, -1), equal_nan=True)


def test_softmax_long_row_extremes(device):
    # a block-per-row case where the max sits in a late column and most entries are -inf
    x = torch.full((3, 5000), -math.inf, device=device)
    x[:, 4999] = 30.0
    x[:, 7] = 29.0
    torch.testing.assert_close(tinycuda.softmax(x), torch.softmax(x, -1))
    torch.testing.assert_close(tinycuda.log_softmax(x), torch.log_softmax(x, -1))


def test_softmax_gradcheck():
    x = torch.randn(3, 5, 4, dtype=torch.float64, requires_grad=True)
    for dim in (0, 1, -1):
        assert torch.autograd.gradcheck(lambda t: tinycuda.softmax(t, dim), (x,))
        assert torch.autograd.gradcheck(lambda t: tinycuda.log_softmax(t, dim), (x,))


def test_softmax_opcheck(device, dtype):
    x = torch.randn(5, 33, device=device, dtype=dtype, requires_grad=True)
    for op in (torch.ops.tinycuda.softmax.default, torch.ops.tinycuda.log_softmax.default):
        torch.library.opcheck(op, (x, -1))
        torch.library.opcheck(op, (x, 0))
    y = torch.ops.tinycuda.softmax(x.detach(), -1)
    torch.library.opcheck(torch.ops.tinycuda.softmax_backward.default, (torch.randn_like(y), y, -1, False))


def test_softmax_errors():
    with pytest.raises(RuntimeError, match=r"tinycuda::softmax: dim 2 is out of range for a tensor of 2 dims"):
        tinycuda.softmax(torch.randn(3, 4), 2)
    with pytest.raises(RuntimeError, match=r"tinycuda::log_softmax: x must be float32.*Long"):
        tinycuda.log_softmax(torch.ones(3, dtype=torch.long))
    with pytest.raises(RuntimeError, match=r"tinycuda::softmax_backward: grad_out has shape"):
        torch.ops.tinycuda.softmax_backward(torch.randn(3), torch.randn(4), -1, False)


@requires_cuda
@pytest.mark.parametrize("algo", ["online", "registers"])
@pytest.mark.parametrize("cols", [8, 1000, 4096, 16384, 32768])
def test_softmax_variants(dtype, algo, cols):
    x = 4 * torch.randn(5, cols, device="cuda", dtype=dtype)
    if algo == "registers" and dtype == torch.float32 and cols > 16384:
        with pytest.raises(RuntimeError, match="algo 2 \\(registers\\) needs cols a multiple of 4 and at most 16384"):
            tinycuda.softmax(x, algo=algo)
        return
    for ours, ref in ((tinycuda.softmax, torch.softmax), (tinycuda.log_softmax, torch.log_softmax)):
        assert_matches(ours(x, -1, algo=algo), ref(x, -1), ref(x.double(), -1))


def test_softmax_rejects_unknown_algo():
    with pytest.raises(ValueError, match="tinycuda.softmax: algo must be one of"):
        tinycuda.softmax(torch.randn(2, 3), algo="fast")
    with pytest.raises(RuntimeError, match="tinycuda::softmax: algo must be 0"):
        torch.ops.tinycuda.softmax(torch.randn(2, 3), -1, algo=7)
