// The matmul family's entry points with the calling op's name in their
// messages: linear and its backward run their products through them.
#pragma once
#include <algorithm>
#include <utility>

#include "gelu_math.h"
#include "internal.h"
#include "relu_math.h"
#include "tinycuda/matmul.h"

// The epilogue's activation of the fp32 (fp64) accumulator, CPU and CUDA
// alike: the relu and gelu families' own element functions.
template <class A>
TC_HD inline A activate(int act, A x) {
  switch (act) {
    case TC_ACT_RELU: return ReluFn()(x, A(0));
    case TC_ACT_GELU: return GeluErf::value(x);
    case TC_ACT_GELU_TANH: return GeluTanh::value(x);
    default: return x;
  }
}

inline tc_status matmul_check(const char* op, const tc_matmul_params* p) {
  TC_REQUIRE(p, "%s: params is NULL", op);
  TC_REQUIRE(p->batch >= 0 && p->M >= 0 && p->N >= 0 && p->K >= 0, "%s: negative size", op);
  for (int i = 0; i < 3; ++i)
    TC_REQUIRE(p->a_stride[i] >= 0 && p->b_stride[i] >= 0, "%s: negative stride", op);
  TC_REQUIRE(p->batch * p->M * p->N == 0 || (p->c && (p->K == 0 || (p->a && p->b))), "%s: a pointer is NULL", op);
  TC_REQUIRE(p->activation >= TC_ACT_NONE && p->activation <= TC_ACT_GELU_TANH,
             "%s: activation must be 0 (none), 1 (relu), 2 (gelu) or 3 (gelu_tanh), got %d", op, p->activation);
  // without an activation P is C: a pre would only be a second copy
  TC_REQUIRE(!p->pre || p->activation != TC_ACT_NONE, "%s: pre is written only with an activation", op);
  TC_REQUIRE(!p->pre || p->pre != p->c, "%s: pre and c must be different buffers", op);
  TC_REQUIRE(p->accumulate == 0 || p->accumulate == 1, "%s: accumulate must be 0 or 1, got %d", op, p->accumulate);
  TC_REQUIRE(p->c_float == 0 || p->c_float == 1, "%s: c_float must be 0 or 1, got %d", op, p->c_float);
  TC_REQUIRE(!p->c_float || p->dtype == TC_FLOAT16 || p->dtype == TC_BFLOAT16,
             "%s: c_float is for float16 or bfloat16 operands (c has the operands' dtype otherwise)", op);
  TC_REQUIRE(!(p->accumulate || p->c_float) || p->activation == TC_ACT_NONE,
             "%s: accumulate and c_float take no activation", op);
  TC_REQUIRE(p->algo >= TC_GEMM_AUTO && p->algo <= TC_GEMM_WGMMA,
             "%s: algo must be 0 (auto), 1 (naive), 2 (tiled), 3 (regtile), 4 (mma) or 5 (wgmma), got %d", op,
             int(p->algo));
  return TC_OK;
}

// A batch whose B is shared (batch stride 0) and whose A rows continue from
// one batch to the next is one taller product: [batch*M, K] @ [K, N] (the
// output is contiguous either way). Tensor cores then see full tiles, and TMA
// needs no batch stride of 0.
// (Not for the naive and tiled variants, whose grids put M on the 65535-block
// y dimension.)
inline tc_matmul_params fold_batch(tc_matmul_params p) {
  if (p.batch > 1 && p.b_stride[0] == 0 && p.a_stride[0] == p.M * p.a_stride[1] && p.algo != TC_GEMM_NAIVE &&
      p.algo != TC_GEMM_TILED)
    p.M *= p.batch, p.batch = 1;
  return p;
}

// The CUDA launch plans, which need no device, so the workspace query and
// the launch agree.
//
// GEMV: a product with one output row or column (M == 1 or N == 1) is a
// matrix-vector product, bound by reading the matrix once; the tile kernels
// would compute 128 columns to keep one (13% of cuBLAS at 2048 x 1 x 2^20).
// Taken by `auto` when the matrix's rows are k-major: y = A v (N == 1, A's
// rows) or y = u B (M == 1, B's columns). K is cut so that rows * splits
// reaches ~1056 blocks (8 per SM of an H100), in slices of at most 65536
// (one 2^20 slice a row had 8.5x cuBLAS's max error) and at least 4096.
//
// Split-K (the CUDA-core variants, float32/float64): an output of few
// 128 x 128 tiles cannot fill 132 SMs, and one block walking a long K both
// crawls and sums K products into one accumulator (27x cuBLAS's max error at
// K = 2^20). K is cut into slices: ~264 blocks in all (2 per SM), slices of
// at most 8192 (accuracy) and at least 256.
//
// Split-K (float16/bfloat16, auto or wgmma): the wgmma kernel's grid is one
// persistent block per SM, so an output of few 128 x 256 tiles leaves SMs
// idle however long K is. GPT-2's weight gradients (K = 16384 tokens) have
// 18 to 72 tiles for 132 SMs; fused_linear_cross_entropy's grad_hidden
// (1024 x 768, K = 50304) has 24. One launch of the wgmma kernel runs every
// slice, each writing float32 partials (c_float; mma slice by slice where
// wgmma cannot run). The count s minimizes an H100 estimate:
// ceil(tiles s / 132) waves of ceil(K / 64 s) k-steps (~0.6 us each at
// ~90% of a block's wgmma rate) and a tile's fixed cost (kTileUs: its first
// loads and its epilogue), plus the partials' write and read (8 s M N bytes
// at ~3 TB/s) and ~3 us for the sum's launch; s <= 16, slices of at least
// 256.
//
// Either way a slice is a multiple of 256 long, and the partial sums
// (float, double for double) are added in slice order by a second kernel.
//
// Stream-K (float16/bfloat16, auto or wgmma, outputs of at most 132 tiles):
// slices leave waves ragged (GPT-2's MLP weight gradients: 72 tiles x 3
// slices = 1.64 waves of 132). Instead the output's k-tiles, tile after
// tile in groups (stream_k_groups), are cut into up to 132 even runs
// (splits = the runs), one a block: each run is a tile's tail and the next
// tile's head at most, stored as two float32 128 x 256 partial tiles, then a
// second kernel adds each tile's runs in run order. Estimate: a group's
// k-tiles over its runs, two pieces' fixed cost, plus the partials' write
// and read (8 x 2 runs x 128 x 256 bytes) and the sum's launch. Where wgmma
// cannot run, the tiles run over all of K. (H200, scripts/ncu_gpt_gemms.py
// --time: stream-K took GPT-2's fc weight gradient from split-K 3's 548 to
// 586-595 TFLOP/s, cuBLAS 680; the qkv one went from split-K 2's 581 to
// 542-552, so the fixed cost was added, which gives it back to split-K.)
// 132 runs: one a multiprocessor of an H100 SXM or H200. The plan needs no
// device, so on fewer SMs the grid is smaller and its blocks take the runs
// left over as a second wave.
constexpr int64_t kStreamKRuns = 132;
// A tile's fixed cost in us: the k-step sweep's intercept, 2.83 us on the
// H200 (scripts/gemm_ksweep.py, BENCHMARKS GPT step 9; cuBLAS 1.78).
constexpr double kTileUs = 2.8;
// Stream-K only where the operand every tile of a group reads again (B when
// the groups walk m, else A) fits in half of L2 (50 MiB on the H100 SXM and
// H200): the kernel loads it evict_last and the streamed one evict_first.
// fused_linear_cross_entropy's grad_hidden, 512 x 4096 over K = 128256,
// re-reads a 131 MB A; its estimate tied split-K 2's (615 against 619 us),
// yet it ran 0.952 ms against split-K's 0.688 (H200, flce_products.py 512;
// the likely cause, not yet profiled: evict_last lines of an operand larger
// than L2 leave the streamed one no room, so each group reads it again).
constexpr int64_t kStreamKReusedBytes = int64_t(25) << 20;

// Stream-K's runs in groups (CUTLASS's sm90 stream-K scheduler groups its
// units the same way, for L2): group g holds one output column's tiles,
// walked down m, when A is the larger operand (M >= N), else one row's,
// walked along n; its k-tiles, tile after tile, are cut into per_group even
// runs, and run u is group u % groups' run u / groups. Runs with the same
// index in every group then cover the same k range of tiles that share the
// larger operand's rows at the same time, so that operand is read from DRAM
// about once. (Ungrouped runs over the whole output put the three tiles
// sharing A's rows of GPT-2's fc weight gradient ~116 k-steps apart:
// 462.6 TFLOP/s against split-K's 548, H200.) A run covers a tile's tail and
// the next tile's head at most where per_group >= group_tiles.
struct StreamKGroups {
  int64_t groups, per_group, tiles_m, tiles_n;
  bool walk_m;
  TC_HD int64_t group_tiles() const { return walk_m ? tiles_m : tiles_n; }
  TC_HD int64_t runs() const { return groups * per_group; }
};
TC_HD inline StreamKGroups stream_k_groups(int64_t M, int64_t N) {
  const int64_t tm = (M + 127) / 128, tn = (N + 255) / 256;
  const bool walk_m = M >= N;
  const int64_t g = walk_m ? tn : tm;
  return {g, g > 0 ? kStreamKRuns / g : 0, tm, tn, walk_m};
}

struct MatmulPlan {
  enum Kind { kTiles, kGemv, kSplitK, kStreamK } kind;
  int64_t splits, chunk;  // stream-K: runs, K
  int64_t rows;  // GEMV: outputs
};

// stream_k false: the best plan without stream-K, which the CUDA path runs
// where the plan is stream-K but the wgmma kernel cannot run (operands TMA
// cannot read, no sm_90a).
inline MatmulPlan matmul_plan(const tc_matmul_params& p, bool stream_k = true) {
  auto ceil_div = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  auto slices = [&](int64_t splits) {  // (splits, chunk): chunk a multiple of 256, splits a grid dim (65535)
    const int64_t chunk = ceil_div(ceil_div(p.K, std::min<int64_t>(splits, 65535)), 256) * 256;
    return std::pair<int64_t, int64_t>{ceil_div(p.K, chunk), chunk};
  };
  // the GEMV and split-K partial sums are written to C by their own kernels, which neither add nor widen
  if (p.batch != 1 || p.K <= 0 || p.M <= 0 || p.N <= 0 || p.accumulate || p.c_float)
    return {MatmulPlan::kTiles, 1, p.K, 0};
  const bool gemv_a = p.N == 1 && p.a_stride[2] == 1, gemv_b = p.M == 1 && p.b_stride[1] == 1;
  if (p.algo == TC_GEMM_AUTO && (gemv_a || gemv_b)) {
    const int64_t rows = gemv_a ? p.M : p.N;
    const int64_t want = std::max(ceil_div(1056, rows), ceil_div(p.K, 65536));
    const auto [splits, chunk] = slices(std::max<int64_t>(1, std::min(want, p.K / 4096)));
    return {MatmulPlan::kGemv, splits, chunk, rows};
  }
  const int64_t tiles = ceil_div(p.M, 128) * ceil_div(p.N, 128);
  const bool cuda_cores = p.dtype == TC_FLOAT32 || p.dtype == TC_FLOAT64;
  if (cuda_cores && (p.algo == TC_GEMM_AUTO || p.algo == TC_GEMM_REGTILE) && tiles < 132 && p.K >= 1024) {
    const int64_t want = std::max(ceil_div(264, tiles), ceil_div(p.K, 8192));
    const auto [splits, chunk] = slices(std::max<int64_t>(1, std::min(want, p.K / 256)));
    if (splits > 1) return {MatmulPlan::kSplitK, splits, chunk, 0};
  }
  if (!cuda_cores && (p.algo == TC_GEMM_AUTO || p.algo == TC_GEMM_WGMMA)) {
    const int64_t tiles16 = ceil_div(p.M, 128) * ceil_div(p.N, 256);
    auto cost_us = [&](int64_t splits, int64_t chunk) {
      return double(ceil_div(tiles16 * splits, 132)) * (double(ceil_div(chunk, 64)) * 0.6 + kTileUs) +
             (splits > 1 ? double(splits) * double(p.M) * double(p.N) * 8 / 3e6 + 3 : 0.0);
    };
    MatmulPlan best{MatmulPlan::kTiles, 1, p.K, 0};
    double best_cost = cost_us(1, p.K);
    for (int64_t want = 2; want <= 16 && ceil_div(p.K, want) >= 256; ++want) {
      const auto [splits, chunk] = slices(want);
      if (const double c = cost_us(splits, chunk); splits > 1 && c < best_cost)
        best = {MatmulPlan::kSplitK, splits, chunk, 0}, best_cost = c;
    }
    const StreamKGroups sg = stream_k_groups(p.M, p.N);
    const int64_t group_steps = sg.group_tiles() * ceil_div(p.K, 64);
    const int64_t reused = (sg.walk_m ? p.N : p.M) * p.K * 2;  // 16-bit
    if (stream_k && sg.per_group >= sg.group_tiles() && group_steps >= 2 * sg.per_group &&
        reused <= kStreamKReusedBytes) {
      const double c = double(ceil_div(group_steps, sg.per_group)) * 0.6 + 2 * kTileUs +
                       double(2 * sg.runs() * 128 * 256) * 8 / 3e6 + 3;
      if (c < best_cost) best = {MatmulPlan::kStreamK, sg.runs(), p.K, 0}, best_cost = c;
    }
    return best;
  }
  return {MatmulPlan::kTiles, 1, p.K, 0};
}

inline size_t plan_workspace_bytes(const tc_matmul_params& p, const MatmulPlan& plan) {
  if (plan.splits <= 1) return 0;
  if (plan.kind == MatmulPlan::kStreamK) return size_t(2 * plan.splits * 128 * 256) * 4;
  const int64_t outputs = plan.kind == MatmulPlan::kGemv ? plan.rows : p.M * p.N;
  return size_t(plan.splits * outputs) * (p.dtype == TC_FLOAT64 ? 8 : 4);
}

// Stream-K's partial tiles, or its split-K fallback's partials: the larger.
inline size_t matmul_workspace_bytes(const tc_matmul_params& p) {
  const MatmulPlan plan = matmul_plan(p);
  const size_t bytes = plan_workspace_bytes(p, plan);
  if (plan.kind != MatmulPlan::kStreamK) return bytes;
  return std::max(bytes, plan_workspace_bytes(p, matmul_plan(p, /*stream_k=*/false)));
}

__attribute__((visibility("hidden"))) tc_status matmul_cpu(const char* op, const tc_matmul_params* p);
__attribute__((visibility("hidden"))) tc_status matmul_cuda(const char* op, const tc_matmul_params* p);
