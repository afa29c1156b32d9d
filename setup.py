"""Builds libtinycuda (the kernel core: csrc/Makefile) and tinycuda._C (the torch door, csrc/torch, linked to it).

    make install                                # what the README's commands run (incremental)
    python setup.py build_ext --inplace         # the same build step by hand
    USE_CUDA=0 ...                              # CPU only
    DEBUG=1 ...                                 # -O0 -g, nvcc -lineinfo
    TORCH_CUDA_ARCH_LIST="8.0;9.0a" ...         # choose GPU archs
    TINYCUDA_PREBUILT_LIB=DIR ...               # link DIR's libtinycuda (scripts/prebuild_core.sh), don't build it
    TINYCUDA_EXT=0 pip install -e .             # install the package without building (make does that)

The kernels are compiled once, into libtinycuda, which both doors use: _C
finds it beside itself (rpath $ORIGIN/lib), tinycuda.capi loads it by path.
The core includes no torch header, so it can be built on a machine with nvcc
and no GPU or torch and carried to the GPU machine: only the torch door is
compiled there.

The build is incremental: csrc/Makefile keeps libtinycuda's objects in
build/capi, ninja keeps the door's in build/ext (the Makefile passes --build-temp).
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
cxx, nvcc = cxx + ["-DTC_BUILD_SHARED"], nvcc + ["-DTC_BUILD_SHARED"]  # the core's entry points come from libtinycuda
archs = None
if with_cuda:
    archs = build.arch_list(torch)
    os.environ["TORCH_CUDA_ARCH_LIST"] = archs  # read by torch.utils.cpp_extension
LIB_DIR = os.path.join(HERE, "tinycuda", "lib")  # libtinycuda and its headers, beside the package
srcs = [os.path.relpath(s, HERE) for s in build.door_sources()]
kw = dict(include_dirs=[build.INCLUDE], depends=build.depends(), library_dirs=[LIB_DIR], libraries=["tinycuda"],
          extra_link_args=["-Wl,-rpath,$ORIGIN/lib"])
if with_cuda:
    ext = CUDAExtension("tinycuda._C", srcs, extra_compile_args={"cxx": cxx, "nvcc": nvcc}, **kw)
else:
    ext = CppExtension("tinycuda._C", srcs, extra_compile_args={"cxx": cxx}, **kw)

with open(os.path.join(HERE, "tinycuda", "_build_info.json"), "w") as f:
    json.dump(build.build_info(torch, with_cuda, archs, debug, "prebuilt"), f, indent=2)


def core_library():
    """The directory holding libtinycuda.so and include/: TINYCUDA_PREBUILT_LIB's, if its
    stamp says it was built from these sources for these archs, else csrc/Makefile's build."""
    prebuilt = os.environ.get("TINYCUDA_PREBUILT_LIB")
    if prebuilt:
        want = build.core_stamp(with_cuda, archs)
        try:
            with open(os.path.join(prebuilt, "stamp.json")) as f:
                have = json.load(f)
        except (OSError, ValueError) as e:
            raise SystemExit(f"setup.py: TINYCUDA_PREBUILT_LIB={prebuilt} has no readable stamp.json ({e}); "
                             "build it with scripts/prebuild_core.sh") from e
        if have != want:
            raise SystemExit(f"setup.py: TINYCUDA_PREBUILT_LIB={prebuilt} is stale or for other archs: "
                             f"built for {have}, this checkout needs {want}; rerun scripts/prebuild_core.sh")
        return prebuilt
    out = os.path.join(HERE, "build", "capi")
    cmd = ["make", "-C", "csrc", f"OUT={out}", f"USE_CUDA={int(with_cuda)}", f"-j{jobs}"]
    if with_cuda:
        cmd.append("CUDA_ARCHS=" + " ".join(build.gencode_flags(archs)))
    if debug:
        cmd.append("OPT=-O0 -g")
    subprocess.check_call(cmd, cwd=HERE)
    return out


class BuildLibAndExt(BuildExtension):
    """Builds libtinycuda (or takes a prebuilt one) into tinycuda/lib/ with its
    headers, then _C, which links it."""

    def run(self):
        lib = core_library()
        for dest in {LIB_DIR, os.path.join(self.build_lib, "tinycuda", "lib")}:
            os.makedirs(dest, exist_ok=True)
            shutil.copy2(os.path.join(lib, "libtinycuda.so"), dest)
            shutil.copytree(os.path.join(lib, "include"), os.path.join(dest, "include"), dirs_exist_ok=True)
        super().run()


want_ext = os.environ.get("TINYCUDA_EXT", "1") not in ("0", "")
setup(ext_modules=[ext] if want_ext else [], cmdclass={"build_ext": BuildLibAndExt})
