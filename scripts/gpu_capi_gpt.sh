#!/usr/bin/env bash
# The GPT's kernel families through the C door alone (scripts/capi_gpt_kernels.py:
# check under memcheck and racecheck, then bench), no torch extension built:
# on the core prebuilt here (build/prebuilt, scripts/prebuild_core.sh), whose
# stamp must be this checkout's, else on csrc/Makefile's build for sm_90a.
# Logs in $OUT or ./out.
source "$(dirname "$0")/gpu_env.sh"
if [ -n "${TINYCUDA_PREBUILT_LIB:-}" ]; then
  LIB=$TINYCUDA_PREBUILT_LIB
  [ "$(python3 tinycuda/_build.py stamp 9.0a)" = "$(cat "$LIB/stamp.json")" ] ||
    { echo "$LIB/stamp.json is not this checkout's: rerun scripts/prebuild_core.sh"; exit 1; }
else
  LIB=$PWD/build/capi
  make -C csrc OUT="$LIB" USE_CUDA=1 CUDA_ARCHS="-gencode=arch=compute_90a,code=sm_90a" -j"$MAX_JOBS" \
    > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
fi
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} TINYCUDA_LIB=$LIB/libtinycuda.so
SAN="env TC_SANITIZER=1 compute-sanitizer --error-exitcode 1"
$SAN --tool memcheck python3 scripts/capi_gpt_kernels.py check 2>&1 | tail -3 | tee "$OUT/memcheck.log"
$SAN --tool racecheck python3 scripts/capi_gpt_kernels.py check 2>&1 | tail -3 | tee "$OUT/racecheck.log"
[ "${BENCH:-1}" = 1 ] && python3 scripts/capi_gpt_kernels.py bench 2>&1 | tee "$OUT/bench.log"
