"""The functional API, one module per op family. Importing this package loads
the compiled kernels (tinycuda._C, which registers the torch.ops.tinycuda.*
schemas and kernels); each family module then registers its fake kernels and
autograd formula with torch.library."""
from .. import _loader

_loader.load()

from .cross_entropy import cross_entropy  # noqa: E402
from .fused_linear_cross_entropy import fused_linear_cross_entropy
from .gelu import gelu
from .glu import geglu, swiglu
from .layer_norm import layer_norm
from .linear import linear
from .relu import relu, relu_backward
from .rms_norm import rms_norm
from .scale_bias_relu import scale_bias_relu
from .softmax import log_softmax, softmax
from .square import square
from .sum import sum  # noqa: A004

__all__ = ["cross_entropy", "fused_linear_cross_entropy", "geglu", "gelu", "layer_norm", "linear", "log_softmax",
           "relu", "relu_backward", "rms_norm", "scale_bias_relu", "softmax", "square", "sum", "swiglu"]
