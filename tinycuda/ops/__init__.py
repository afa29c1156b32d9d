"""The functional API, one module per op family. Importing this package loads
the compiled kernels (tinycuda._C, which registers the torch.ops.tinycuda.*
schemas and kernels), then every family module here, each of which registers
its fake kernels and autograd formula with torch.library and names its public
functions in its __all__. A new family is a new module: nothing here lists it.
"""
import importlib
import pkgutil

from .. import _loader

_loader.load()

__all__ = []
for _m in pkgutil.iter_modules(__path__):
    if _m.name.startswith("_"):
        continue
    _mod = importlib.import_module(f"{__name__}.{_m.name}")
    # one namespace for every family: a second `exp` would silently replace the first
    if _clash := set(_mod.__all__) & set(__all__):
        raise ImportError(f"tinycuda.ops.{_m.name} exports {sorted(_clash)}, which another family exports already")
    for _name in _mod.__all__:
        globals()[_name] = getattr(_mod, _name)
    __all__ += _mod.__all__
__all__.sort()

from . import _autocast  # noqa: E402  (after the families: it names their ops)

_autocast.register()
