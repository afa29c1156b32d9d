// Prefix sums across a warp, for kernels that place elements by counting
// those before them (the sort family's ranks, its scans of counts):
//   warp_exclusive_sum  the sum of v over the lanes below, and the warp's total
//                       (5 shuffle-up steps, then one broadcast)
//   lanemask_lt         the bits of the lanes below this one: popc(ballot or
//                       match mask & lanemask_lt()) is the rank among the lanes
//                       whose flag (or value) is this lane's
// Every lane of the warp takes part.
#pragma once
#include "cuda_utils.cuh"

__device__ __forceinline__ unsigned lanemask_lt() {
  unsigned m;
  asm("mov.u32 %0, %%lanemask_lt;" : "=r"(m));
  return m;
}

__device__ __forceinline__ unsigned warp_exclusive_sum(unsigned v, int lane, unsigned* total) {
  unsigned inc = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const unsigned u = __shfl_up_sync(0xffffffffu, inc, o);
    if (lane >= o) inc += u;
  }
  *total = __shfl_sync(0xffffffffu, inc, 31);
  return inc - v;
}
