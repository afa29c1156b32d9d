// The matmul family's entry points with the calling op's name in their
// messages: linear and its backward run their products through them.
#pragma once
#include <algorithm>

#include "internal.h"
#include "tinycuda/matmul.h"

inline tc_status matmul_check(const char* op, const tc_matmul_params* p) {
  TC_REQUIRE(p, "%s: params is NULL", op);
  TC_REQUIRE(p->batch >= 0 && p->M >= 0 && p->N >= 0 && p->K >= 0, "%s: negative size", op);
  for (int i = 0; i < 3; ++i)
    TC_REQUIRE(p->a_stride[i] >= 0 && p->b_stride[i] >= 0, "%s: negative stride", op);
  TC_REQUIRE(p->batch * p->M * p->N == 0 || (p->c && (p->K == 0 || (p->a && p->b))), "%s: a pointer is NULL", op);
  TC_REQUIRE(p->algo >= TC_GEMM_AUTO && p->algo <= TC_GEMM_WGMMA,
             "%s: algo must be 0 (auto), 1 (naive), 2 (tiled), 3 (regtile), 4 (mma) or 5 (wgmma), got %d", op,
             int(p->algo));
  return TC_OK;
}

// A batch whose B is shared (batch stride 0) and whose A rows continue from
// one batch to the next is one taller product: [batch*M, K] @ [K, N] (the
// output is contiguous either way). Tensor cores then see full tiles, and TMA
// needs no batch stride of 0.
inline tc_matmul_params fold_batch(tc_matmul_params p) {
  if (p.batch > 1 && p.b_stride[0] == 0 && p.a_stride[0] == p.M * p.a_stride[1])
    p.M *= p.batch, p.batch = 1;
  return p;
}

// Split-K (CUDA, the CUDA-core variants): an output of few 128 x 128 tiles
// cannot fill an H100's 132 SMs, and one block walking a long K is slow and
// sums K products into one accumulator. K is cut into `splits` slices of
// `chunk` (a multiple of 128): ~264 blocks in all (2 per SM), no slice under
// 1024. Needs no device, so the workspace query and the launch agree.
struct SplitK {
  int64_t splits, chunk;
};
inline SplitK split_k(const tc_matmul_params& p) {
  const bool cuda_cores = p.dtype == TC_FLOAT32 || p.dtype == TC_FLOAT64;
  const int64_t tiles = ((p.M + 127) / 128) * ((p.N + 127) / 128);
  if (!cuda_cores || (p.algo != TC_GEMM_AUTO && p.algo != TC_GEMM_REGTILE) || p.batch != 1 || tiles <= 0 ||
      tiles >= 132 || p.K < 4096)
    return {1, p.K};
  int64_t splits = std::min((264 + tiles - 1) / tiles, p.K / 1024);
  const int64_t chunk = ((p.K + splits - 1) / splits + 127) / 128 * 128;
  return {(p.K + chunk - 1) / chunk, chunk};
}
inline size_t split_k_bytes(const tc_matmul_params& p) {
  const SplitK s = split_k(p);
  return s.splits > 1 ? size_t(s.splits * p.M * p.N) * (p.dtype == TC_FLOAT64 ? 8 : 4) : 0;
}

__attribute__((visibility("hidden"))) tc_status matmul_cpu(const char* op, const tc_matmul_params* p);
__attribute__((visibility("hidden"))) tc_status matmul_cuda(const char* op, const tc_matmul_params* p);
