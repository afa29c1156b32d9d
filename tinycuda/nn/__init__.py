"""Drop-in modules. Linear, ReLU, LayerNorm and RMSNorm subclass their torch.nn counterparts, so
constructor, initialization, state_dict keys and repr are torch's own; only
forward runs tinycuda kernels."""
import torch

from .. import ops


class Linear(torch.nn.Linear):
    """torch.nn.Linear whose forward and backward are tinycuda kernels."""

    def forward(self, x):
        return ops.linear(x, self.weight, self.bias)


class LayerNorm(torch.nn.LayerNorm):
    """torch.nn.LayerNorm (same constructor, init and state_dict) whose forward
    and backward are tinycuda kernels."""

    def forward(self, x):
        return ops.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


class RMSNorm(torch.nn.RMSNorm):
    """torch.nn.RMSNorm (same constructor, init and state_dict) whose forward
    and backward are tinycuda kernels."""

    def forward(self, x):
        return ops.rms_norm(x, self.normalized_shape, self.weight, self.eps)


class ReLU(torch.nn.ReLU):
    """torch.nn.ReLU on tinycuda kernels. `inplace=True` is accepted for
    drop-in use but the result is a new tensor (same values)."""

    def forward(self, x):
        return ops.relu(x)


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


__all__ = ["LayerNorm", "Linear", "ReLU", "RMSNorm", "ScaleBiasReLU"]
