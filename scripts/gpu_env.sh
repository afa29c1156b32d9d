# Sourced by the scripts/gpu_*.sh runs on a GPU machine (no network there):
# - the wheels carried in .whl (git-ignored; name .whl in the device run's carry):
#   cffi (tinycuda.capi's one dependency), pycparser, Liger-Kernel. Fetched with
#     python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl cffi==2.0.0 pycparser
# - the kernel core prebuilt here by scripts/prebuild_core.sh (carry build/prebuilt): only the torch door
#   compiles there (setup.py refuses a stale one)
# - $OUT (the device tool's return folder, or ./out) for logs
set -uo pipefail
OUT=${OUT:-out}; mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then python3 -m pip install -q --no-index --no-deps .whl/*.whl 2>/dev/null; fi
[ -f build/prebuilt/stamp.json ] && export TINYCUDA_PREBUILT_LIB=$PWD/build/prebuilt
export PYTHONUNBUFFERED=1 MAX_JOBS=${MAX_JOBS:-16} TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0a}
