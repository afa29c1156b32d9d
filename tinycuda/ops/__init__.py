"""The functional API, one module per op family. Importing this package loads
the compiled kernels (tinycuda._C, which registers the torch.ops.tinycuda.*
schemas and kernels); each family module then registers its fake kernels and
autograd formula with torch.library."""
from .. import _loader

_loader.load()

from .layer_norm import layer_norm  # noqa: E402
from .linear import linear
from .relu import relu, relu_backward
from .rms_norm import rms_norm
from .scale_bias_relu import scale_bias_relu
from .softmax import log_softmax, softmax
from .square import square
from .sum import sum  # noqa: A004

__all__ = ["layer_norm", "linear", "log_softmax", "relu", "relu_backward", "rms_norm", "scale_bias_relu", "softmax",
           "square", "sum"]
