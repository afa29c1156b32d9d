// The GEMM variants' algo argument, shared by the matmul and linear bindings.
#pragma once
#include "tinycuda/matmul.h"
#include "torch_utils.h"

namespace tc_torch {

inline tc_gemm_algo gemm_algo_of(const char* op, int64_t algo) {
  TC_CHECK(algo >= TC_GEMM_AUTO && algo <= TC_GEMM_WGMMA, op,
           "algo must be 0 (auto), 1 (naive), 2 (tiled), 3 (regtile), 4 (mma) or 5 (wgmma), got %lld",
           (long long)algo);
  return tc_gemm_algo(algo);
}

}  // namespace tc_torch
