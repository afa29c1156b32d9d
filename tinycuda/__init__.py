"""tinycuda: hand-written CUDA (and CPU) kernels as real torch custom ops.

    import tinycuda
    y = tinycuda.linear(x, weight, bias)          # torch.ops.tinycuda.linear
    model = torch.nn.Sequential(tinycuda.nn.Linear(784, 256), tinycuda.nn.ReLU())

The torch front door (tinycuda.ops, tinycuda.nn and the functions below) is
loaded on first use, so that `import tinycuda.capi`, the C ABI front door,
never imports torch.
"""
import importlib

__version__ = "0.1.0"

_FROM_OPS = ("cross_entropy", "fused_linear_cross_entropy", "geglu", "gelu", "layer_norm", "linear", "log_softmax",
             "relu", "rms_norm", "scale_bias_relu", "softmax", "square", "sum", "swiglu")
__all__ = [*_FROM_OPS, "nn", "ops", "capi", "build_info"]


def __getattr__(name):
    if name in ("nn", "ops", "capi"):
        return importlib.import_module(f"{__name__}.{name}")
    if name in _FROM_OPS:
        return getattr(importlib.import_module(f"{__name__}.ops"), name)
    if name == "build_info":
        importlib.import_module(f"{__name__}.ops")  # loads the kernels
        return importlib.import_module(f"{__name__}._loader").build_info
    raise AttributeError(f"module 'tinycuda' has no attribute {name!r}")
