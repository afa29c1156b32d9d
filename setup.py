"""Builds tinycuda._C (torch custom ops over the kernel core).

    pip install --no-build-isolation -e .      # CUDA if torch+toolkit have it
    USE_CUDA=0 pip install ...                  # CPU only
    DEBUG=1 pip install ...                     # -O0 -g, nvcc -lineinfo
    TORCH_CUDA_ARCH_LIST="8.0;9.0a" pip ...     # choose GPU archs
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
cxx, nvcc = build.flags(with_cuda, debug)
srcs = [os.path.relpath(s, HERE) for s in build.sources(with_cuda)]
archs = None
if with_cuda:
    archs = build.arch_list(torch)
    os.environ["TORCH_CUDA_ARCH_LIST"] = archs  # read by torch.utils.cpp_extension
    ext = CUDAExtension("tinycuda._C", srcs, extra_compile_args={"cxx": cxx, "nvcc": nvcc})
else:
    ext = CppExtension("tinycuda._C", srcs, extra_compile_args={"cxx": cxx})

with open(os.path.join(HERE, "tinycuda", "_build_info.json"), "w") as f:
    json.dump(build.build_info(torch, with_cuda, archs, debug, "prebuilt"), f, indent=2)



class BuildExtAndLib(BuildExtension):
    """Builds _C, then libtinycuda (csrc/Makefile) from the same sources, with
    the same CUDA decision and archs, into tinycuda/lib/."""

    def run(self):
        super().run()
        out = os.path.join(HERE, "build", "capi")
        cmd = ["make", "-C", "csrc", f"OUT={out}", f"USE_CUDA={int(with_cuda)}", f"-j{os.cpu_count() or 2}"]
        if with_cuda:
            cmd.append("CUDA_ARCHS=" + " ".join(build.gencode_flags(archs)))
        if debug:
            cmd.append("OPT=-O0 -g")
        subprocess.check_call(cmd, cwd=HERE)
        for dest in {os.path.join(HERE, "tinycuda", "lib"), os.path.join(self.build_lib, "tinycuda", "lib")}:
            os.makedirs(dest, exist_ok=True)
            shutil.copy2(os.path.join(out, "libtinycuda.so"), dest)


setup(ext_modules=[ext], cmdclass={"build_ext": BuildExtAndLib})
