"""tinycuda: hand-written CUDA (and CPU) kernels as real torch custom ops.

    import tinycuda
    y = tinycuda.linear(x, weight, bias)          # torch.ops.tinycuda.linear
    model = torch.nn.Sequential(tinycuda.nn.Linear(784, 256), tinycuda.nn.ReLU())
"""
from . import _loader

_loader.load()

from . import nn, ops  # noqa: E402  (ops register fake kernels and autograd)
from .ops import linear, relu, scale_bias_relu, square, sum  # noqa: E402,A004

build_info = _loader.build_info
__version__ = "0.1.0"
__all__ = ["linear", "relu", "scale_bias_relu", "square", "sum", "nn", "ops", "build_info"]
