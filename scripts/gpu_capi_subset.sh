#!/usr/bin/env bash
# The GPT's new kernel families as a C-ABI library of just those (a minute to
# build, not the torch extension's nine), then scripts/capi_gpt_kernels.py:
# check under memcheck and racecheck, then bench. Logs in $OUT or ./out.
set -uo pipefail
OUT=${OUT:-out}; mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
fi
export PYTHONPATH=/tmp/site:. TINYCUDA_LIB=/tmp/lib/libtinycuda.so
mkdir -p /tmp/lib/include && cp -r csrc/include/* /tmp/lib/include/
FAMS="adamw embedding sort"
SRCS="csrc/shared/common.cpp csrc/capi/library.cpp $(for f in $FAMS; do
  echo csrc/cuda/$f.cu csrc/cpu/$f.cpp; [ -f csrc/shared/$f.cpp ] && echo csrc/shared/$f.cpp; done)"
( time nvcc -shared -std=c++20 -O3 -DTC_BUILD_SHARED -DTC_WITH_CUDA -Icsrc/include --expt-relaxed-constexpr \
    -lineinfo -gencode arch=compute_90a,code=sm_90a -cudart static -Xcompiler -fPIC,-fvisibility=hidden \
    --threads 0 $SRCS -o /tmp/lib/libtinycuda.so ) > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
tail -3 "$OUT/build.log"
SAN="compute-sanitizer --error-exitcode 1"
$SAN --tool memcheck python3 scripts/capi_gpt_kernels.py check 2>&1 | tail -3 | tee "$OUT/memcheck.log"
$SAN --tool racecheck python3 scripts/capi_gpt_kernels.py check 2>&1 | tail -3 | tee "$OUT/racecheck.log"
[ "${BENCH:-1}" = 1 ] && python3 scripts/capi_gpt_kernels.py bench 2>&1 | tee "$OUT/bench.log"
