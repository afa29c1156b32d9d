"""softmax and log_softmax beyond the op table (tests/test_ops.py):
infinities and NaN, long rows of -inf, the CUDA variants (tinycuda.variants)."""
import math

import pytest
import torch

import tinycuda
from conftest import assert_matches, requires_cuda
from tinycuda import variants

pytestmark = pytest.mark.racecheck


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


@requires_cuda
@pytest.mark.parametrize("variant", variants.names("softmax"))
@pytest.mark.parametrize("cols", [8, 1000, 4096, 16384, 32768])
def test_softmax_variants(dtype, variant, cols):
    x = 4 * torch.randn(5, cols, device="cuda", dtype=dtype)
    # one block holds 16384 fp32 columns; before sm_90 (no clusters) that is the limit
    if variant == "registers" and dtype == torch.float32 and cols > 16384 and torch.cuda.get_device_capability()[0] < 9:
        with pytest.raises(RuntimeError, match="algo 2 \\(registers\\) needs cols a multiple of 4 and at most 262144 "
                                               "\\(16 blocks of a cluster on sm_90, else 16384\\)"):
            variants.call("softmax", variant, x)
        return
    for op, ref in (("softmax", torch.softmax), ("log_softmax", torch.log_softmax)):
        assert_matches(variants.call(op, variant, x, -1), ref(x, -1), ref(x.double(), -1))


def test_softmax_rejects_unknown_variant():
    with pytest.raises(ValueError, match="tinycuda.variants: softmax has no variant 'fast'; its variants: online"):
        variants.get("softmax", "fast")
    with pytest.raises(RuntimeError, match="tinycuda::softmax: algo must be 0"):
        torch.ops.tinycuda.softmax(torch.randn(2, 3), -1, algo=7)
