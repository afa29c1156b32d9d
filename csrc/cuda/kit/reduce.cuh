// The reductions of every kernel, from one warp's butterfly up:
//   warp_reduce     32 lanes, xor butterfly: every lane ends with the same bits
//   row_reduce      a row of WIDTH threads (8..256, compile-time): warp
//                   partials through shared memory, each thread folds them in
//                   order (softmax)
//   block_reduce    a block of up to 32 warps: warp 0 butterflies the warp
//                   partials (sum, cross_entropy's loss and count);
//                   block_allreduce hands its result to every thread
//   group_sum       a row group of runtime width inside a block, with a named
//                   barrier of its own and double-buffered scratch (norms)
//   MaxSum          the online (max, sum exp(x - max)) state and its merge
//                   (softmax, cross_entropy); the element update is in
//                   shared/softmax_math.h, shared with the CPU
//   sum_partials    the second, fixed-order stage that adds per-slice partial
//                   rows (sum, bias and norm weight gradients)
// A reduction takes a state V and an Op (Sum, Max, OnlineMerge, or the
// caller's); a struct V shuffles through its own shfl_xor overload. Every
// reduction adds in a fixed order, so results are bit-identical run to run
// (no float atomics).
#pragma once
#include <type_traits>

#include "../../shared/softmax_math.h"
#include "cuda_utils.cuh"
#include "pdl.cuh"

struct Sum {
  template <class V> __device__ __forceinline__ V operator()(V a, V b) const { return a + b; }
};
struct Max {  // fmax skips NaN: callers that must see it check separately
  template <class V> __device__ __forceinline__ V operator()(V a, V b) const { return fmax(a, b); }
};

// `members`: the lanes taking part (all of them must make this call).
template <class V>
__device__ __forceinline__ std::enable_if_t<std::is_arithmetic_v<V>, V> shfl_xor(V v, int lane_mask,
                                                                                  unsigned members = 0xffffffffu) {
  return __shfl_xor_sync(members, v, lane_mask);
}

// The lanes of this thread's aligned group of WIDTH (a power of two up to 32).
template <int WIDTH>
__device__ __forceinline__ unsigned group_lanes() {
  if constexpr (WIDTH == 32) {
    return 0xffffffffu;
  } else {
    return ((1u << WIDTH) - 1) << (threadIdx.x % 32 / WIDTH * WIDTH);
  }
}

// WIDTH < 32: each aligned group of WIDTH lanes reduces on its own (rows
// packed several to a warp), its shuffles naming its lanes alone, so groups
// of one warp may take different branches (cross_entropy's ignored rows).
template <int WIDTH = 32, class V, class Op>
__device__ __forceinline__ V warp_reduce(V v, Op op) {
  static_assert(WIDTH >= 1 && WIDTH <= 32 && (WIDTH & (WIDTH - 1)) == 0, "WIDTH: a power of two up to 32");
  const unsigned members = group_lanes<WIDTH>();
#pragma unroll
  for (int o = WIDTH / 2; o > 0; o >>= 1) v = op(v, shfl_xor(v, o, members));
  return v;
}

// All WIDTH threads of this thread's row (a block holds 1 or more rows) get
// the result. The caller's row loop must be uniform over the block (two
// __syncthreads); `scratch` holds 32 values. BLOCK, where the caller knows
// it, is the block's size: BLOCK == WIDTH (one row a block) saves finding
// the row's first warp.
template <int WIDTH, int BLOCK = 0, class V, class Op>
__device__ __forceinline__ V row_reduce(V v, Op op, V* scratch) {
  v = warp_reduce<WIDTH < 32 ? WIDTH : 32>(v, op);
  if constexpr (WIDTH > 32) {
    constexpr int kWarps = WIDTH / 32;
    const int warp = threadIdx.x / 32, first = BLOCK == WIDTH ? 0 : warp / kWarps * kWarps;
    __syncthreads();  // scratch may still be read by the previous reduction
    if (threadIdx.x % 32 == 0) scratch[warp] = v;
    __syncthreads();
    v = scratch[first];
    // A struct state's merge (OnlineMerge: two exps) folds in a loop:
    // unrolled, fp64 softmax_online_kernel took 42 registers, not 40 (sm_90a).
#pragma unroll(std::is_arithmetic_v<V> ? kWarps : 1)
    for (int w = 1; w < kWarps; ++w) v = op(v, scratch[first + w]);
  }
  return v;
}

// Over a block of `warps` warps (up to 32; all threads reach it); the result
// is valid in warp 0. `scratch` holds 32 values.
template <class V, class Op>
__device__ __forceinline__ V block_reduce(V v, Op op, V identity, V* scratch, int warps) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_reduce(v, op);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = threadIdx.x < warps ? scratch[threadIdx.x] : identity;
  return warp == 0 ? warp_reduce(v, op) : v;
}

// block_reduce's result in every thread, through scratch[0] (a third barrier).
template <class V, class Op>
__device__ __forceinline__ V block_allreduce(V v, Op op, V identity, V* scratch, int warps) {
  v = block_reduce(v, op, identity, scratch, warps);
  if (threadIdx.x == 0) scratch[0] = v;  // only warp 0 read scratch, before its shuffles
  __syncthreads();
  return scratch[0];
}

__device__ __forceinline__ void named_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Sums each of v[N] over the `width` threads (8..32 * W, a power of 2) of
// this thread's row group (every thread of a warp calls it: groups narrower
// than a warp reduce side by side); all of them get the totals (the same bits: every
// thread adds in the same order). Across warps: one partial per warp in
// shared memory, then a barrier for this group alone (id 1 + group; 0 is
// __syncthreads), or __syncthreads when the caller's loop is uniform over the
// block (whole_block). The two scratch slots alternate, so one barrier a call
// suffices: a warp rewrites a slot only after the next call's barrier, which
// every warp reaches after reading it.
template <int N, int W, class A>
__device__ __forceinline__ void group_sum(A (&v)[N], int width, A (&scratch)[2][W][N], int& slot,
                                          bool whole_block = false) {
  // A group narrower than a warp adds only the partners inside it: the same five
  // shuffles, each add predicated (a separate loop for narrow groups took the
  // cluster kernels, where width is the block, from 24 to 48 bytes of spills)
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const A t = shfl_xor(v[i], o);
      if (o < width) v[i] += t;
    }
  if (width <= 32) return;
  const int warp = threadIdx.x / 32, first = warp & ~(width / 32 - 1);
  if (threadIdx.x % 32 == 0)
#pragma unroll
    for (int i = 0; i < N; ++i) scratch[slot][warp][i] = v[i];
  if (whole_block)
    __syncthreads();
  else
    named_barrier(1 + threadIdx.x / width, width);
#pragma unroll
  for (int i = 0; i < N; ++i) {
    A s = 0;
    for (int w = first; w < first + width / 32; ++w) s += scratch[slot][w][i];
    v[i] = s;
  }
  slot ^= 1;
}

// ---------------------------------------------------------------------------
// online softmax state: m = max(x), s = sum(exp(x - m)) over a thread's
// elements (online_add), then merged across threads (online_merge)

template <class A>
struct MaxSum {
  A m, s;
};

template <class A>
__device__ __forceinline__ MaxSum<A> shfl_xor(MaxSum<A> v, int lane_mask, unsigned members = 0xffffffffu) {
  return {shfl_xor(v.m, lane_mask, members), shfl_xor(v.s, lane_mask, members)};
}

struct OnlineMerge {
  template <class A>
  __device__ __forceinline__ MaxSum<A> operator()(MaxSum<A> a, MaxSum<A> b) const {
    online_merge(a.m, a.s, b.m, b.s);
    return a;
  }
};

// ---------------------------------------------------------------------------
// the second stage of a column reduction

// out[c] = sum over p < parts of partial[p * cols + c], in a fixed order:
// threadIdx.y (SPLIT of them) strides over the parts, then thread y = 0 adds
// the SPLIT strides in order. Blocks of (256, 1) (a thread a column, enough
// blocks when there are many columns: sum, bias gradients) or (32, 16) (few
// parts over many threads: the norms' weight gradients); blockIdx.y picks
// out0 or out1, each with its own `parts` rows of partials.
template <class T, class A, int SPLIT>
__global__ void __launch_bounds__(SPLIT == 1 ? 256 : 512)
sum_partials_kernel(const A* __restrict__ partial, int64_t parts, int64_t cols, T* out0, T* out1) {
  pdl_start();
  constexpr int kCols = SPLIT == 1 ? 256 : 32;
  const int64_t c = blockIdx.x * int64_t(kCols) + threadIdx.x;
  const A* p = partial + blockIdx.y * parts * cols;
  A s = 0;
  if (c < cols)
#pragma unroll(SPLIT == 1 ? 8 : 4)
    for (int64_t k = SPLIT == 1 ? 0 : threadIdx.y; k < parts; k += SPLIT) s += p[k * cols + c];
  if constexpr (SPLIT > 1) {
    __shared__ A tile[SPLIT][kCols + 1];
    tile[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y != 0) return;
    s = 0;
#pragma unroll
    for (int i = 0; i < SPLIT; ++i) s += tile[i][threadIdx.x];
  }
  if (c < cols) (blockIdx.y == 0 ? out0 : out1)[c] = from_acc<T>(s);
}

// Adds `parts` partial rows into out0 and, with out1, a second set into out1.
template <class T, int SPLIT>
tc_status launch_sum_partials(const char* op, const acc_t<T>* partial, int64_t parts, int64_t cols,
                              T* out0, T* out1, cudaStream_t stream) {
  constexpr int kCols = SPLIT == 1 ? 256 : 32;
  const dim3 grid(grid_1d(cols, kCols), out1 ? 2 : 1), block(kCols, SPLIT);
  return launch_pdl(op, sum_partials_kernel<T, acc_t<T>, SPLIT>, grid, block, 0, stream, partial, parts, cols, out0,
                    out1);
}
