"""Drop-in modules. Linear, ReLU and GELU subclass their torch.nn counterparts, so
constructor, initialization, state_dict keys and repr are torch's own; only
forward runs tinycuda kernels."""
import torch

from .. import ops


class Linear(torch.nn.Linear):
    """torch.nn.Linear whose forward and backward are tinycuda kernels."""

    def forward(self, x):
        return ops.linear(x, self.weight, self.bias)


class ReLU(torch.nn.ReLU):
    """torch.nn.ReLU on tinycuda kernels. `inplace=True` is accepted for
    drop-in use but the result is a new tensor (same values)."""

    def forward(self, x):
        return ops.relu(x)


class GELU(torch.nn.GELU):
    """torch.nn.GELU(approximate='none' | 'tanh') on tinycuda kernels."""

    def forward(self, x):
        return ops.gelu(x, self.approximate)


class SwiGLU(torch.nn.Module):
    """silu(a) * b where a, b = x.chunk(2, dim=-1): the gate of a LLaMA-style
    MLP applied to the output of one fused up/gate projection (torch has no
    such module). The last dim of x must be even; the output has half of it.
    The halves are strided views, which the op copies to contiguous tensors
    first: to avoid those copies, call tinycuda.swiglu(a, b) on separate
    contiguous projections. No parameters."""

    def forward(self, x):
        if x.dim() == 0 or x.shape[-1] % 2:
            raise ValueError(f"tinycuda.nn.SwiGLU: the last dim of x must be even, got shape {list(x.shape)}")
        a, b = x.chunk(2, dim=-1)
        return ops.swiglu(a, b)


class ScaleBiasReLU(torch.nn.Module):
    """relu(x * scale + bias) with a learnable bias over the last dim
    (initialized to zeros) and a fixed float scale."""

    def __init__(self, num_features, scale=1.0, device=None, dtype=None):
        super().__init__()
        self.num_features = num_features
        self.scale = float(scale)
        self.bias = torch.nn.Parameter(torch.zeros(num_features, device=device, dtype=dtype))

    def forward(self, x):
        return ops.scale_bias_relu(x, self.bias, self.scale)

    def extra_repr(self):
        return f"{self.num_features}, scale={self.scale}"


__all__ = ["GELU", "Linear", "ReLU", "ScaleBiasReLU", "SwiGLU"]
