// Programmatic dependent launch (PDL, sm_90+): a kernel may be launched
// before the kernel ahead of it in the stream has completed, so its blocks'
// launch and prologue (barrier setup, address math) overlap that kernel's
// completion instead of following it.
//
//   device: pdl_start()  the first thing a kernel launched by launch_pdl does
//                        before it touches global memory: waits until the
//                        kernel it depends on has completed and its writes are
//                        visible (griddepcontrol.wait).
//   host:   launch_pdl(op, kernel, grid, block, smem, stream, args...)
//           kernel<<<...>>>(args...) with the stream-serialization attribute
//           relaxed to programmatic, then check_launch; a plain launch where
//           PDL cannot run or TC_PDL=0.
//
// The rule that keeps it correct: a kernel launched this way calls
// pdl_start() unconditionally, in every block, before its first global load
// or store (an early return before it would let the kernel after it start
// while the one before is still writing). Kernels that do not call it are
// launched with <<<>>>, which waits for the previous kernel as always; the
// wait is transitive, because a kernel completes only after its own wait.
//
// No kernel lets its dependents launch early (griddepcontrol.launch_dependents):
// without it the next kernel launches as this one's last block exits, which
// still overlaps this kernel's completion (its memory flush) with the next
// one's launch. GPT-2 124M on the H200, gpt train --preset gpt2 --batch-size
// 16 --master-weights, TC_PDL=0 against 1 in alternating runs: 520,531 against
// 528,021 and 515,265 against 519,126 tokens/s (513,699 against 516,365 under
// CUDA graphs). With the trigger at each kernel's top, the dependents' blocks
// were placed as soon as the last wave was and waited there, and the step ran
// 0.9-1.3% slower than without PDL (BENCHMARKS, GPT step 14; not profiled).
#pragma once
#include <cuda_runtime.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "cuda_utils.cuh"

__device__ __forceinline__ void pdl_start() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// What tells the host whether this build's kernels hold the griddepcontrol
// instructions on the current device: compiled from sm_90+ code (ptxVersion)
// and running as sm_90+ code (binaryVersion). A build for sm_80 alone, JIT-
// compiled on an H100, compiles pdl_start() to nothing, so it must not be
// launched programmatically.
template <int = 0>
__global__ void pdl_probe_kernel() {}

// PDL on for the current device: compute capability 9.0+, code as above, and
// TC_PDL not "0" (read once per process; the switch for A/B timing and for
// ruling PDL out when something misbehaves). Asked once per device.
inline bool pdl_enabled() {
  static const bool allowed = [] {
    const char* e = std::getenv("TC_PDL");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  static std::atomic<int> known[64];  // 0: not asked, 1: off, 2: on
  int dev = 0;
  if (!allowed || cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) {
    cudaGetLastError();
    return false;
  }
  if (const int k = known[dev].load(std::memory_order_relaxed)) return k == 2;
  int major = 0;
  cudaFuncAttributes fa{};
  const bool on = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
                  major >= 9 && cudaFuncGetAttributes(&fa, pdl_probe_kernel<>) == cudaSuccess &&
                  fa.ptxVersion >= 90 && fa.binaryVersion >= 90;
  cudaGetLastError();
  known[dev].store(on ? 2 : 1, std::memory_order_relaxed);
  return on;
}

template <class... P, class... Args>
tc_status launch_pdl(const char* op, void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                     Args&&... args) {
  if (!pdl_enabled()) {
    kernel<<<grid, block, smem, stream>>>(std::forward<Args>(args)...);
    return check_launch(op);
  }
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = stream;
  cfg.attrs = &attr, cfg.numAttrs = 1;
  TC_RETURN_IF_ERROR(cuda_status(op, "kernel launch", cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...)));
  return check_launch(op);
}
