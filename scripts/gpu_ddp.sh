#!/usr/bin/env bash
# Data-parallel scaling of `tinycuda gpt train` (GPT-2 124M, bf16) on a
# several-GPU machine (the device tool's nvidia-h200-x2): the extension build
# (with build/prebuilt carried, only the torch door), then torchrun on 1 and on
# N GPUs, every backend, the same per-GPU batch. Logs and JSON in $OUT or ./out.
source "$(dirname "$0")/gpu_env.sh"
( time make install ) > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
tail -3 "$OUT/build.log"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/gpu.txt"
N=$(nvidia-smi -L | wc -l)
for n in 1 "$N"; do
  torchrun --standalone --nproc-per-node "$n" -m tinycuda gpt train --preset gpt2 --backend ${BACKEND:-all} \
    --steps ${STEPS:-30} --batch-size 16 --eval-every 1000 --eval-batches 1 --json "$OUT/gpt2_${n}gpu.json" \
    > "$OUT/gpt2_${n}gpu.log" 2>&1
  echo "== $n GPU(s), rc $?"; grep -E "tokens/s|replica|Error" "$OUT/gpt2_${n}gpu.log" | tail -6
done
