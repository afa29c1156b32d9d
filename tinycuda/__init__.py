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

_SUBMODULES = ("nn", "ops", "optim", "capi", "variants", "optable")


def __getattr__(name):
    """The submodules, build_info, and every function of tinycuda.ops (loaded on first use)."""
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name.startswith("_"):  # private names and submodules being imported (from . import _build)
        raise AttributeError(name)
    ops = importlib.import_module(f"{__name__}.ops")  # loads torch and the kernels
    if name == "build_info":
        return importlib.import_module(f"{__name__}._loader").build_info
    if name in ops.__all__:
        return getattr(ops, name)
    raise AttributeError(f"module 'tinycuda' has no attribute {name!r}")


def __dir__():
    return [*globals(), *_SUBMODULES, "build_info"]
