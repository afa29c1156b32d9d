"""The build and load path: a stale build must fail with both torch versions
and the rebuild command; every CUDA file must compile for sm_80 and sm_90a
whenever nvcc is present, GPU or not."""
import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

import tinycuda
from tinycuda import _build, _loader


def test_stale_build_names_both_versions(tmp_path, monkeypatch):
    stale = tmp_path / "_build_info.json"
    stale.write_text(json.dumps({"torch": "1.0.0+old"}))
    monkeypatch.setattr(_loader, "_INFO_FILE", str(stale))
    with pytest.raises(ImportError) as e:
        _loader.load()
    msg = str(e.value)
    assert "1.0.0+old" in msg and torch.__version__ in msg and _loader.REBUILD in msg


def test_build_info_and_registered_ops():
    """Every schema has a CPU kernel; every public function runs a tinycuda op:
    its own name's, or the one it names in `runs` (a function with torch's
    signature over another op, as scaled_dot_product_attention)."""
    info = tinycuda.build_info
    assert info["torch"] == torch.__version__ and "cpu" in info["backends"]
    schemas = [n for n in torch._C._dispatch_get_all_op_names() if n.startswith("tinycuda::")]
    assert len(schemas) >= len(tinycuda.ops.__all__)
    for op in schemas:
        assert torch._C._dispatch_has_kernel_for_dispatch_key(op, "CPU"), op
    for name in tinycuda.ops.__all__:
        assert f"tinycuda::{getattr(getattr(tinycuda.ops, name), 'runs', name)}" in schemas, name


def test_cuda_stubs_cover_every_cuda_entry_point():
    """The CPU-only build's stubs are generated from the headers: one per
    tc_*_cuda declaration, each returning TC_ERR_NO_CUDA."""
    entries = _build.cuda_entry_points()
    assert len(entries) >= 24 and all(fn.endswith("_cuda") for fn, _ in entries)
    src = _build.stubs_source(_build.GENERATED)
    for fn, params in entries:
        assert f"tc_status {fn}(const {params}*)" in src


def test_core_has_no_torch_headers():
    for dirpath, _, files in os.walk(_build.CSRC):
        if os.path.basename(dirpath) == "torch":
            continue
        for f in files:
            text = open(os.path.join(dirpath, f)).read()
            assert "#include <torch" not in text and "#include <ATen" not in text, f


def test_torch_door_links_the_one_core():
    """tinycuda._C holds the torch door only: it needs libtinycuda (found beside
    it through $ORIGIN/lib) and defines none of the core's entry points, so
    both doors run the same compiled kernels."""
    import tinycuda._C as door
    dyn = subprocess.run(["readelf", "-d", door.__file__], capture_output=True, text=True, check=True).stdout
    assert "[libtinycuda.so]" in dyn and "$ORIGIN/lib" in dyn
    defined = subprocess.run(["nm", "-D", "--defined-only", door.__file__],
                             capture_output=True, text=True, check=True).stdout.split()
    assert not [s for s in defined if s.startswith("tc_")]
    assert os.path.exists(os.path.join(os.path.dirname(door.__file__), "lib", "libtinycuda.so"))


def test_core_stamp_names_the_core_sources_and_archs(tmp_path):
    """A prebuilt libtinycuda (TINYCUDA_PREBUILT_LIB) is used only when its stamp
    is this checkout's: the stamp follows every core file and the archs, not the torch door."""
    root = tmp_path / "csrc"
    shutil.copytree(_build.CSRC, root)
    base = _build.core_stamp(True, "9.0a", str(root))
    assert base == _build.core_stamp(True, "9.0a", str(root))
    assert base != _build.core_stamp(True, "8.0;9.0a", str(root)) != _build.core_stamp(False, None, str(root))
    (root / "torch" / "library.cpp").write_text("// the door changed")
    assert _build.core_stamp(True, "9.0a", str(root)) == base
    (root / "cuda" / "softmax.cu").write_text("// a kernel changed")
    assert _build.core_stamp(True, "9.0a", str(root)) != base


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_cuda_library_builds_for_sm80_and_sm90a():
    """libtinycuda with every CUDA file, for sm_80 and sm_90a, whenever nvcc is
    present (GPU or not), through csrc/Makefile. Its objects persist in
    build/nvcc-check, so a rerun recompiles only what changed.
    What it checks is that everything compiles, in CI without a GPU, so it stops
    short of machine code: PTX for compute_80 and compute_90a (each arch's
    device code through the compiler's front end, its optimizer off), without
    ptxas, and host code at -O0. ptxas took ~60% of the time (matmul.cu: 25 s to
    PTX, 59 s to SASS, one arch), the -O3 host code of the .cpp files (the CPU
    kernels again) most of the rest (cpu/reduce.cpp: 98 s at -O3, 16 s at -O0).
    Then the device optimizer made this the longest test by far (1,311 s in a
    local run on 2 busy cores, when CI took 29.5 minutes; matmul.cu to PTX 45.6 s
    with it, 10.5 s with -Xcicc -O0): without it the whole check takes 2.4
    minutes on 2 idle cores. The GPU machine's `make install` builds the same
    library for both archs down to SASS."""
    out = os.path.join(os.path.dirname(_build.CSRC), "build", "nvcc-check")
    archs = "CUDA_ARCHS=-gencode arch=compute_80,code=compute_80 -gencode arch=compute_90a,code=compute_90a"
    r = subprocess.run(["make", "-C", _build.CSRC, "USE_CUDA=1", "OPT=-O0", "NVCC_EXTRA=-Xcicc -O0", archs,
                        f"OUT={out}", f"-j{os.cpu_count() or 2}"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
    assert os.path.exists(os.path.join(out, "libtinycuda.so"))


def test_cli_info_runs():
    r = subprocess.run([sys.executable, "-m", "tinycuda", "info"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "tinycuda::linear" in r.stdout and "torch" in r.stdout


def test_jit_build_from_a_source_checkout(tmp_path):
    """TINYCUDA_JIT=1 in a checkout with no built module compiles one, says so,
    and the ops work."""
    root = os.path.dirname(_build.CSRC)
    src = tmp_path / "checkout"
    shutil.copytree(os.path.join(root, "csrc"), src / "csrc")
    shutil.copytree(os.path.join(root, "tinycuda"), src / "tinycuda",
                    ignore=shutil.ignore_patterns("_C*.so", "_build_info.json", "lib", "__pycache__"))
    code = ("import sys\n"
            # an editable install of the main checkout must not answer for this copy
            "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower()]\n"
            "import torch, tinycuda\n"
            "assert tinycuda.__file__.startswith(sys.argv[1]), tinycuda.__file__\n"
            "assert torch.equal(tinycuda.relu(torch.tensor([-1.0, 2.0])), torch.tensor([0.0, 2.0]))\n"
            "print(tinycuda.build_info['mode'])\n")
    # DEBUG=1: the JIT's -O0 build, a sixth of -O3's compile time (this tests the JIT path, not the kernels' speed)
    env = dict(os.environ, TINYCUDA_JIT="1", TINYCUDA_CACHE=str(tmp_path / "cache"), DEBUG="1")
    r = subprocess.run([sys.executable, "-c", code, str(src)], cwd=src, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "jit"
    assert "tinycuda: JIT-compiling" in r.stderr
