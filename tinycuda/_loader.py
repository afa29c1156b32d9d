"""Loads tinycuda._C, which registers the torch.ops.tinycuda.* kernels.

Three outcomes, each said plainly:
  * the prebuilt module matches the running torch: load it;
  * it was built for another torch: refuse, naming both versions and the
    command that rebuilds (a stale build otherwise fails with undefined
    symbols, or worse);
  * there is none: with TINYCUDA_JIT=1, compile the sources of this checkout
    with torch.utils.cpp_extension.load into a cache and load that.
"""
import importlib
import json
import os
import sys

import torch

from . import _build

REBUILD = "pip install --no-build-isolation -e ."
_HERE = os.path.dirname(os.path.abspath(__file__))
_INFO_FILE = os.path.join(_HERE, "_build_info.json")

build_info = {}
module = None  # the loaded extension module (tinycuda._C, or the JIT build's): its few Python functions


def _read_info(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _mismatch(built_for, detail=""):
    return ImportError(
        f"tinycuda: the compiled module tinycuda._C was built for torch {built_for}, "
        f"but torch {torch.__version__} is installed{detail}. "
        f"Rebuild it with: {REBUILD}"
    )


def _jit():
    from torch.utils import cpp_extension

    with_cuda = _build.want_cuda(torch, cpp_extension.CUDA_HOME)
    debug = os.environ.get("DEBUG", "0") not in ("0", "")
    tag = f"torch{torch.__version__}-{'cuda' if with_cuda else 'cpu'}{'-debug' if debug else ''}"
    cache = os.path.join(os.environ.get("TINYCUDA_CACHE", os.path.expanduser("~/.cache/tinycuda")), tag)
    os.makedirs(cache, exist_ok=True)
    archs = None
    if with_cuda:
        archs = _build.arch_list(torch)
        os.environ.setdefault("TORCH_CUDA_ARCH_LIST", archs)
    cxx, nvcc = _build.flags(with_cuda, debug)
    print(f"tinycuda: JIT-compiling the kernels ({'CPU+CUDA' if with_cuda else 'CPU'}) into {cache}; "
          "the first import takes minutes, later ones reuse the cache", file=sys.stderr)
    # load() names objects by file basename, and csrc/cpu/linear.cpp and
    # csrc/torch/linear.cpp would collide: compile one-line wrappers with
    # unique names that #include the real files.
    srcdir = os.path.join(cache, "src")
    os.makedirs(srcdir, exist_ok=True)
    wrappers = []
    for path in _build.sources(with_cuda):
        wrapper = os.path.join(srcdir, os.path.relpath(path, _build.CSRC).replace(os.sep, "_"))
        text = f'#include "{path}"\n'
        if not os.path.exists(wrapper) or open(wrapper).read() != text:
            with open(wrapper, "w") as f:
                f.write(text)
        wrappers.append(wrapper)
    global module
    module = cpp_extension.load(
        name="tinycuda_C",
        sources=wrappers,
        extra_cflags=cxx,
        extra_cuda_cflags=nvcc,
        extra_include_paths=[_build.INCLUDE],
        build_directory=cache,
        with_cuda=with_cuda,
        is_python_module=True,
        verbose=os.environ.get("TINYCUDA_VERBOSE") == "1",
    )
    return _build.build_info(torch, with_cuda, archs, debug, "jit")


def load():
    """Registers the ops; returns the build info dict."""
    info = _read_info(_INFO_FILE)
    if info is not None and info.get("torch") != torch.__version__:
        raise _mismatch(info.get("torch"))
    global module
    try:
        module = importlib.import_module("tinycuda._C")
    except ImportError as e:
        msg = str(e)
        if "undefined symbol" in msg:
            raise _mismatch((info or {}).get("torch", "another version"), f" ({msg})") from e
        if info is not None or os.environ.get("TINYCUDA_JIT") != "1":
            raise ImportError(
                f"tinycuda: the compiled module tinycuda._C is missing or unloadable ({msg}). "
                f"Build it with: {REBUILD}   (or set TINYCUDA_JIT=1 to compile it on import)"
            ) from e
        info = _jit()
    build_info.update(info or {"mode": "prebuilt"})
    return build_info
