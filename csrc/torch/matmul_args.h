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

// c = a @ b (+ bias), or c += a @ b with accumulate, on the core's GEMM for
// the bindings that chain products of their own (fused_linear_cross_entropy):
// 2-D a [M, K] and b [K, N] read where they lie (a transposed view is a
// stride swap), c a contiguous [M, N] of a's dtype or, for 16-bit operands,
// float32 (the product unrounded: c_float).
inline void product(const char* op, const at::Tensor& c, const at::Tensor& a, const at::Tensor& b,
                    const at::Tensor& bias, bool accumulate) {
  call_with_workspace(op, a, tc_matmul_cpu, tc_matmul_cuda, tc_matmul_workspace_size,
                      tc_matmul_params{.batch = 1, .M = a.size(0), .N = b.size(1), .K = a.size(1),
                                       .a = a.data_ptr(), .a_stride = {0, a.stride(0), a.stride(1)},
                                       .b = b.data_ptr(), .b_stride = {0, b.stride(0), b.stride(1)},
                                       .bias = bias.defined() ? bias.data_ptr() : nullptr, .c = c.data_ptr(),
                                       .accumulate = accumulate, .c_float = c.scalar_type() != a.scalar_type()});
}

}  // namespace tc_torch
