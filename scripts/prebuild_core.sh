#!/usr/bin/env bash
# Builds libtinycuda (the kernel core: no torch, no GPU needed) for ARCHS here,
# so a GPU machine compiles only the torch door:
#   scripts/prebuild_core.sh [ARCHS]            # default 9.0a (the H100); objects in build/core-ARCHS
#   TINYCUDA_PREBUILT_LIB=build/prebuilt make install    # on the GPU machine (carry build/prebuilt)
# build/prebuilt gets libtinycuda.so, include/ and stamp.json (a hash of the
# core's sources and the archs): setup.py refuses a library whose stamp is not
# this checkout's. CUDA 13.0's nvcc here and on the H100 machines.
set -euo pipefail
cd "$(dirname "$0")/.."
ARCHS=${1:-9.0a}
OBJ=$PWD/build/core-$ARCHS DEST=build/prebuilt
GENCODE=$(python3 -c 'import sys; sys.path.insert(0, "tinycuda"); import _build; print(" ".join(_build.gencode_flags(sys.argv[1])))' "$ARCHS")
STAMP=$(python3 tinycuda/_build.py stamp "$ARCHS")   # before the build: what it is built from
# --compress-mode=size: the device tool carries at most 64 MiB; 96 MB uncompressed, 3.6x smaller
# (a CUDA_ARCHS flag so that it reaches every nvcc call; objects compiled without it are rebuilt by hand: rm $OBJ/obj/cuda)
make -C csrc OUT="$OBJ" USE_CUDA=1 CUDA_ARCHS="$GENCODE --compress-mode=size" -j"$(nproc)"
rm -rf "$DEST" && mkdir -p "$DEST"
cp "$OBJ/libtinycuda.so" "$DEST/" && cp -r "$OBJ/include" "$DEST/"
echo "$STAMP" > "$DEST/stamp.json"
du -sh "$DEST"
