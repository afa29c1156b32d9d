#!/usr/bin/env bash
# One batched GPU-machine run: build, full test suite, sanitizer over the CUDA
# tests. Logs land in $OUT (the device tool's return folder) or ./out.
source "$(dirname "$0")/gpu_env.sh"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
( time make install ) > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
python3 -m tinycuda info | tee "$OUT/info.txt"
python3 -m pytest -q -n auto ${PYTEST_ARGS:-} 2>&1 | tee "$OUT/test.log" | tail -6
if [ "${SANITIZE:-1}" = 1 ]; then
  timeout ${SANITIZE_TIMEOUT:-300} make sanitize > "$OUT/sanitize.log" 2>&1; echo "sanitize rc=$?"
  grep -E "ERROR SUMMARY|passed|failed|error" "$OUT/sanitize.log" | tail -8
fi
if [ "${BENCH:-1}" = 1 ]; then
  # against the figures in docs/: every tinycuda case more than 5% slower is listed (small shapes are noisy)
  python3 -m tinycuda bench ${BENCH_ARGS:---shapes all} --baseline docs/bench/h100.json --json "$OUT/bench.json" \
    --plot "$OUT/plots" 2>&1 | tee "$OUT/bench.txt" | tail -${BENCH_TAIL:-80}
fi
