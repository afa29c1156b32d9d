"""Rows too long for one block: softmax, log_softmax, layer_norm and rms_norm
split them across a thread-block cluster on sm_90 (kit/cluster.cuh) and fall
back to their loop kernels past 16 blocks, on other GPUs and for unaligned
rows. The lengths below cross each cluster size (2, 4, 8, 16 blocks), with
tails that leave blocks of a cluster part-empty; forward and backward against
float64 under the project's rule (conftest.assert_matches)."""
import pytest
import torch

import tinycuda
from conftest import check_op, requires_cuda

pytestmark = [requires_cuda, pytest.mark.racecheck]

# 16-byte vectors of 8 (16-bit) or 4 (fp32) elements; one block holds 4096 of
# them a row in softmax (32768 bf16), 1024 (norms: 8192 bf16, 2048 for fp32)
SOFTMAX_COLS = {torch.bfloat16: [32776, 100000, 262144, 524288, 524296],
                torch.float16: [40000],
                torch.float32: [16388, 100000, 262144, 262148]}
NORM_COLS = {torch.bfloat16: [8200, 20000, 40000, 262144, 300000],
             torch.float16: [12345 * 8],
             torch.float32: [10000, 131072, 140000]}


def _cases(table):
    return [(dt, n) for dt, cols in table.items() for n in cols]


@pytest.mark.parametrize("dtype,cols", _cases(SOFTMAX_COLS), ids=str)
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_softmax_long_rows(dtype, cols, log):
    f, ref = (tinycuda.log_softmax, torch.log_softmax) if log else (tinycuda.softmax, torch.softmax)
    x = 4 * torch.randn(3, cols, device="cuda", dtype=dtype)
    check_op(f, ref, (x, -1), grad_rtol32=1e-4, grad_atol32=1e-6)


@pytest.mark.parametrize("dtype,cols", _cases(NORM_COLS), ids=str)
def test_layer_norm_long_rows(dtype, cols):
    # 5 rows: a few clusters, each owning a band of rows in the backward
    x = 1 + torch.randn(5, cols, device="cuda", dtype=dtype)
    w = 1 + 0.1 * torch.randn(cols, device="cuda", dtype=dtype)
    b = 0.1 * torch.randn(cols, device="cuda", dtype=dtype)
    check_op(tinycuda.layer_norm, torch.nn.functional.layer_norm, (x, (cols,), w, b), rtol32=1e-4, atol32=1e-4)


@pytest.mark.parametrize("dtype,cols", _cases(NORM_COLS), ids=str)
def test_rms_norm_long_rows(dtype, cols):
    x = torch.randn(5, cols, device="cuda", dtype=dtype)
    w = 1 + 0.1 * torch.randn(cols, device="cuda", dtype=dtype)
    check_op(tinycuda.rms_norm, torch.nn.functional.rms_norm, (x, (cols,), w, 1e-6), rtol32=1e-4, atol32=1e-4)


@pytest.mark.parametrize("cols", [40000, 262144])
def test_long_rows_are_deterministic(cols):
    # the cluster's blocks fold each other's partials in rank order: same bits every run
    x = torch.randn(7, cols, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(cols, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    g = torch.randn(7, cols, device="cuda", dtype=torch.bfloat16)

    def run():
        y = tinycuda.softmax(x, -1)
        z = tinycuda.layer_norm(x, (cols,), w, None)
        return (y, z, *torch.autograd.grad((y, z), (x, w), (g, g)))

    for first, second in zip(run(), run()):
        assert torch.equal(first, second)


def test_softmax_registers_variant_reaches_cluster_lengths():
    # algo 2 (registers) runs 262144 bf16 columns now (a cluster of 8), and
    # names its limit past 16 blocks
    x = torch.randn(2, 262144, device="cuda", dtype=torch.bfloat16)
    torch.testing.assert_close(torch.ops.tinycuda.softmax(x, -1, algo=2), torch.softmax(x.float(), -1).bfloat16(),
                               rtol=0.02, atol=1e-6)
    with pytest.raises(RuntimeError, match=r"algo 2 \(registers\) needs cols a multiple of 8 and at most 524288"):
        torch.ops.tinycuda.softmax(torch.randn(2, 524296, device="cuda", dtype=torch.bfloat16), -1, algo=2)


@pytest.mark.parametrize("dtype,cols", _cases(NORM_COLS), ids=str)
def test_add_rms_norm_long_rows(dtype, cols):
    x, r = torch.randn(5, cols, device="cuda", dtype=dtype), torch.randn(5, cols, device="cuda", dtype=dtype)
    w = 1 + 0.1 * torch.randn(cols, device="cuda", dtype=dtype)
    check_op(tinycuda.add_rms_norm, lambda x, r, w, eps: (torch.nn.functional.rms_norm(x + r, (cols,), w, eps), x + r),
             (x, r, w, 1e-6), rtol32=1e-4, atol32=1e-4)
