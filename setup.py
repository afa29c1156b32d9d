"""Builds tinycuda._C (torch custom ops over the kernel core) and libtinycuda.

    make install                                # what the README's commands run (incremental)
    python setup.py build_ext --inplace         # the same build step by hand
    USE_CUDA=0 ...                              # CPU only
    DEBUG=1 ...                                 # -O0 -g, nvcc -lineinfo
    TORCH_CUDA_ARCH_LIST="8.0;9.0a" ...         # choose GPU archs
    TINYCUDA_EXT=0 pip install -e .             # install the package without building (make does that)

The build is incremental: ninja keeps its objects in build/ext (the Makefile
passes --build-temp), and csrc/Makefile keeps libtinycuda's in build/capi.
"""
import importlib.util
import json
import os
import shutil
import subprocess

import torch
from setuptools import setup
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("_tc_build", os.path.join(HERE, "tinycuda", "_build.py"))
build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build)

with_cuda = build.want_cuda(torch, CUDA_HOME)
debug = os.environ.get("DEBUG", "0") not in ("0", "")
jobs = int(os.environ.get("MAX_JOBS") or os.cpu_count() or 2)
os.environ.setdefault("MAX_JOBS", str(jobs))  # ninja's parallelism in BuildExtension: every core
cxx, nvcc = build.flags(with_cuda, debug)
srcs = [os.path.relpath(s, HERE) for s in build.sources(with_cuda)]
kw = dict(include_dirs=[build.INCLUDE], depends=build.depends())
archs = None
if with_cuda:
    archs = build.arch_list(torch)
    os.environ["TORCH_CUDA_ARCH_LIST"] = archs  # read by torch.utils.cpp_extension
    ext = CUDAExtension("tinycuda._C", srcs, extra_compile_args={"cxx": cxx, "nvcc": nvcc}, **kw)
else:
    ext = CppExtension("tinycuda._C", srcs, extra_compile_args={"cxx": cxx}, **kw)

with open(os.path.join(HERE, "tinycuda", "_build_info.json"), "w") as f:
    json.dump(build.build_info(torch, with_cuda, archs, debug, "prebuilt"), f, indent=2)


class BuildExtAndLib(BuildExtension):
    """Builds _C, then libtinycuda (csrc/Makefile) from the same sources, with
    the same CUDA decision and archs, into tinycuda/lib/ (with its headers)."""

    def run(self):
        super().run()
        out = os.path.join(HERE, "build", "capi")
        cmd = ["make", "-C", "csrc", f"OUT={out}", f"USE_CUDA={int(with_cuda)}", f"-j{jobs}"]
        if with_cuda:
            cmd.append("CUDA_ARCHS=" + " ".join(build.gencode_flags(archs)))
        if debug:
            cmd.append("OPT=-O0 -g")
        subprocess.check_call(cmd, cwd=HERE)
        for dest in {os.path.join(HERE, "tinycuda", "lib"), os.path.join(self.build_lib, "tinycuda", "lib")}:
            os.makedirs(dest, exist_ok=True)
            shutil.copy2(os.path.join(out, "libtinycuda.so"), dest)
            shutil.copytree(os.path.join(out, "include"), os.path.join(dest, "include"), dirs_exist_ok=True)


want_ext = os.environ.get("TINYCUDA_EXT", "1") not in ("0", "")
setup(ext_modules=[ext] if want_ext else [], cmdclass={"build_ext": BuildExtAndLib})
