#!/usr/bin/env bash
# Runs each test file in its own pytest process (a sticky CUDA error then
# spoils one file only), in parallel, and prints each file's summary and
# first failure. Logs: $OUT/t_<file>.log.
OUT=${OUT:-out}; mkdir -p "$OUT"
export CUDA_LAUNCH_BLOCKING=${CUDA_LAUNCH_BLOCKING:-0}
for f in ${FILES:-tests/test_*.py}; do
  n=$(basename "$f" .py)
  ( python3 -m pytest -q -x -p no:cacheprovider -n ${WORKERS:-2} "$f" > "$OUT/t_$n.log" 2>&1 ) &
done
wait
for f in ${FILES:-tests/test_*.py}; do
  n=$(basename "$f" .py)
  echo "== $n: $(tail -1 "$OUT/t_$n.log")"
  grep -m1 -A25 -E "^_{3,} .*test" "$OUT/t_$n.log" | grep -E "^(E |tests/|csrc|_{3,})" | head -12
done
