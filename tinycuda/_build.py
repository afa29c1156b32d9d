"""What goes into tinycuda._C: sources, compiler flags and the CUDA arch list.

Shared by setup.py (which loads this file by path, before tinycuda is
importable) and the JIT path in tinycuda/_loader.py. Imports nothing but the
standard library.
"""
import glob
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CSRC = os.path.join(ROOT, "csrc")

# Portable default when no GPU is visible at build time. CUDA 13 supports
# Turing (7.5) and newer; +PTX keeps future GPUs working through the driver JIT.
PORTABLE_ARCHS = "7.5;8.0;8.6;8.9;9.0;10.0;12.0+PTX"


def sources(with_cuda, root=CSRC):
    """Core + torch layer sources; CUDA kernels, or the no-CUDA stubs."""
    files = [os.path.join(root, "common.cpp")]
    files += sorted(glob.glob(os.path.join(root, "cpu", "*.cpp")))
    files += sorted(glob.glob(os.path.join(root, "torch", "*.cpp")))
    if with_cuda:
        files += sorted(glob.glob(os.path.join(root, "cuda", "*.cu")))
    else:
        files.append(os.path.join(root, "cuda_stubs.cpp"))
    return files


def flags(with_cuda, debug):
    """(cxx flags, nvcc flags)."""
    opt = ["-O0", "-g"] if debug else ["-O3"]
    cxx = opt + ["-std=c++17"]
    # -lineinfo always: compute-sanitizer and ncu then name source lines; no effect on the code
    nvcc = opt + ["-std=c++17", "--expt-relaxed-constexpr", "-lineinfo"]
    if with_cuda:
        cxx.append("-DTC_WITH_CUDA")
        nvcc.append("-DTC_WITH_CUDA")
    return cxx, nvcc


def arch_list(torch):
    """TORCH_CUDA_ARCH_LIST if set; else the visible GPUs (Hopper as 9.0a, so
    wgmma and setmaxnreg are available); else PORTABLE_ARCHS."""
    if os.environ.get("TORCH_CUDA_ARCH_LIST"):
        return os.environ["TORCH_CUDA_ARCH_LIST"]
    if torch.cuda.is_available():
        caps = sorted({torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())})
        return ";".join(f"{a}.{b}" + ("a" if (a, b) == (9, 0) else "") for a, b in caps)
    return PORTABLE_ARCHS


def gencode_flags(archs):
    """nvcc -gencode flags for a TORCH_CUDA_ARCH_LIST string ("8.0;9.0a;12.0+PTX")."""
    flags = []
    for a in archs.replace(",", ";").replace(" ", ";").split(";"):
        if not a:
            continue
        ptx = a.endswith("+PTX")
        num = a.replace("+PTX", "").replace(".", "")
        flags.append(f"-gencode=arch=compute_{num},code=sm_{num}")
        if ptx:
            flags.append(f"-gencode=arch=compute_{num},code=compute_{num}")
    return flags


def want_cuda(torch, cuda_home):
    """USE_CUDA=0/1 forces; default: a CUDA build of torch and a CUDA toolkit."""
    env = os.environ.get("USE_CUDA")
    if env is not None:
        return env.strip().lower() not in ("0", "false", "no", "off", "")
    return torch.version.cuda is not None and cuda_home is not None


def build_info(torch, with_cuda, archs, debug, mode):
    """Recorded next to the module: the loader compares it with the running torch."""
    return {
        "torch": torch.__version__,
        "cuda": torch.version.cuda if with_cuda else None,
        "backends": ["cpu", "cuda"] if with_cuda else ["cpu"],
        "arch_list": archs if with_cuda else None,
        "debug": bool(debug),
        "mode": mode,
    }
