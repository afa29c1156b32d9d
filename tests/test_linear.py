import pytest
import torch
import torch.nn.functional as F

import tinycuda
from conftest import HAS_CUDA, check_op, noncontiguous

CASES = [  # (batch shape, in_features, out_features)
    ((0,), 7, 5), ((1,), 1, 1), ((7,), 33, 17), ((3, 11), 129, 65), ((1000,), 31, 7),
    ((2,), 4097, 3), ((), 9, 4), ((5,), 0, 3), ((5,), 3, 0), ((130,), 20, 129),
    ((12, 11), 64, 36),  # every extent a multiple of 4: the vectorized CUDA tile loads
]


@pytest.mark.parametrize("batch,k,n", CASES, ids=str)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("contiguous", [True, False], ids=["contig", "strided"])
def test_linear_matches_torch(device, dtype, batch, k, n, bias, contiguous):
    x = torch.randn(*batch, k, device=device).to(dtype)
    w = (torch.randn(n, k, device=device) / max(k, 1) ** 0.5).to(dtype)
    b = torch.randn(n, device=device).to(dtype) if bias else None
    if not contiguous:
        x, w = noncontiguous(x), noncontiguous(w)
    inputs = [x, w] + ([b] if bias else [])
    # fp32 dot products of up to 4097 terms: |err| ~ sqrt(k) * eps * |terms|.
    check_op(lambda *a: tinycuda.linear(*a), lambda *a: F.linear(*a), inputs,
             rtol32=1e-4, atol32=1e-4, grad_atol32=5e-4)


@pytest.mark.skipif(not HAS_CUDA, reason="variants are CUDA kernels")
@pytest.mark.parametrize("algo", ["naive", "tiled", "regtile"])
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (33, 17, 129), (257, 300, 130), (260, 132, 68)], ids=str)
def test_linear_cuda_variants(dtype, algo, m, k, n):
    x = torch.randn(m, k, device="cuda").to(dtype)
    w = torch.randn(n, k, device="cuda").to(dtype)
    b = torch.randn(n, device="cuda").to(dtype)
    check_op(lambda *a: tinycuda.linear(*a, algo=algo), F.linear, [x, w, b],
             rtol32=1e-4, atol32=1e-3, grad_atol32=2e-3)


def test_linear_gradcheck():
    x = torch.randn(2, 3, 7, dtype=torch.float64, requires_grad=True)
    w = torch.randn(5, 7, dtype=torch.float64, requires_grad=True)
    b = torch.randn(5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(tinycuda.linear, (x, w, b))
    assert torch.autograd.gradcheck(tinycuda.linear, (x, w))


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


def test_linear_opcheck(device, dtype):
    x = torch.randn(5, 7, device=device, dtype=dtype, requires_grad=True)
    w = torch.randn(3, 7, device=device, dtype=dtype, requires_grad=True)
    b = torch.randn(3, device=device, dtype=dtype, requires_grad=True)
    torch.library.opcheck(torch.ops.tinycuda.linear.default, (x, w, b))
    torch.library.opcheck(torch.ops.tinycuda.linear.default, (x, w, None))
    g = torch.randn(5, 3, device=device, dtype=dtype)
    for mask in ([True, True, True], [False, True, False], [True, False, True]):
        torch.library.opcheck(torch.ops.tinycuda.linear_backward.default,
                              (g, x.detach(), w.detach(), mask))


def test_linear_errors():
    x, w = torch.randn(4, 5), torch.randn(3, 5)
    with pytest.raises(RuntimeError, match=r"tinycuda::linear: x's last dim \(6\) must equal weight's in_features \(5\)"):
        tinycuda.linear(torch.randn(4, 6), w)
    with pytest.raises(RuntimeError, match=r"tinycuda::linear: weight must be 2-D"):
        tinycuda.linear(x, torch.randn(5))
    with pytest.raises(RuntimeError, match=r"tinycuda::linear: bias must have shape \[3\]"):
        tinycuda.linear(x, w, torch.randn(4))
    with pytest.raises(RuntimeError, match=r"tinycuda::linear: weight has dtype BFloat16 but x has dtype Float"):
        tinycuda.linear(x, w.bfloat16())
    with pytest.raises(RuntimeError, match=r"tinycuda::linear: x must be float32.*Long"):
        tinycuda.linear(x.long(), w.long())
    with pytest.raises(RuntimeError, match=r"tinycuda::linear: algo must be"):
        torch.ops.tinycuda.linear(x, w, None, algo=9)
    with pytest.raises(ValueError, match=r"tinycuda.linear: algo must be one of"):
        tinycuda.linear(x, w, algo="fast")


@pytest.mark.skipif(not HAS_CUDA, reason="needs a GPU")
def test_linear_device_mismatch():
    with pytest.raises(RuntimeError, match=r"tinycuda::linear: weight is on cpu but x is on cuda"):
        tinycuda.linear(torch.randn(4, 5, device="cuda"), torch.randn(3, 5))
