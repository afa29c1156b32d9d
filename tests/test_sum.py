"""sum beyond the op table (tests/test_ops.py): half inputs accumulate in float32."""
import pytest
import torch

import tinycuda

pytestmark = pytest.mark.racecheck


def test_sum_half_accumulates_in_float32(device):
    # 4096 x 8.0 = 32768, exact in fp16. A fp16 accumulator stalls once its
    # spacing (16 above 16384) makes "+ 8" a tie that rounds back down.
    x = torch.full((4096,), 8.0, device=device, dtype=torch.float16)
    assert tinycuda.sum(x).item() == 32768.0
