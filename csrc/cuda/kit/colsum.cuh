// A row-wise backward pass with a bias gradient in the same pass: for
// g, aux, out [rows, cols] row-major,
//   out[r, c] = f(g[r, c], aux[r, c], term)      term: f's second result
//   bias[c]   = sum over r of term
// scale_bias_relu's backward (term = grad_y [y > 0], out = term * scale) and
// linear's activation backward (term = out = grad_y * act'(P)) run it.
//
// Launch shape: blocks of 32 x kRows threads; threadIdx.x walks 16-byte
// column vectors (a warp covers 512 contiguous bytes of a row), threadIdx.y
// and kUnroll rows in flight per thread walk the rows of the block's slice.
// Bytes per element: read g and aux, write out (12 per fp32 element); the
// partials are < 0.1% at 8192^2.
//
// The bias: each block folds its kRows rows of sums in shared memory and
// writes one partial per column; sum_partials_kernel (reduce.cuh) adds the
// slices in order (plan::column_chunks of them: 32 at 8192^2), so the result
// is bit-identical run to run.
#pragma once
#include "../../shared/reduce_plan.h"
#include "pdl.cuh"
#include "reduce.cuh"
#include "vec.cuh"

namespace colsum {
// 2 rows in flight a thread and at least 4 blocks an SM (64 registers): GPT-2's GELU backward, 16384 x 3072
// bf16, took 89.5 us against 118 with 4 rows and no bound (128 registers, 2 blocks an SM), where the plain
// pointwise pass without the sums takes 77 (H200, scripts/colsum_probe.cu; BENCHMARKS, GPT step 13). Tuned
// there only: scale_bias_relu's float32 bench held (0 of 15 slower); float32 and float64 GELU not measured.
constexpr int kUnroll = 2;
constexpr int kMinBlocks = 4;
constexpr int kRows = plan::kBlockRows;
}  // namespace colsum

// Block (bx, by): columns [bx*32*VEC, +32*VEC), rows [by*len, (by+1)*len).
// out NULL: only the bias; partial and gb NULL: no bias (one slice: gb
// directly). kUnroll and kMinBlocks other than colsum's: the probe's sweep.
template <class T, int VEC, class F, int kUnroll = colsum::kUnroll, int kMinBlocks = colsum::kMinBlocks>
__global__ void __launch_bounds__(32 * colsum::kRows, kMinBlocks)
colsum_backward_kernel(const T* __restrict__ g, const T* __restrict__ aux, T* __restrict__ out,
                       acc_t<T>* __restrict__ partial, T* __restrict__ gb, int64_t rows, int64_t cols, F f) {
  pdl_start();
  using A = acc_t<T>;
  using colsum::kRows;
  __shared__ A tile[kRows][32 * VEC + 1];
  const int64_t c = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) * VEC;
  const int64_t len = plan::ceil_div(rows, gridDim.y);
  const int64_t r0 = blockIdx.y * len, r1 = min(rows, r0 + len);
  A acc[VEC] = {};
  if (c < cols) {
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kUnroll * kRows) {
      A gv[kUnroll][VEC], av[kUnroll][VEC];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (r + u * kRows < r1) {
          load_cols<T, VEC>(g + (r + u * kRows) * cols, c, gv[u]);
          load_cols<T, VEC>(aux + (r + u * kRows) * cols, c, av[u]);
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (r + u * kRows >= r1) break;
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          A term;
          gv[u][j] = f(gv[u][j], av[u][j], term);
          acc[j] += term;
        }
        if (out) store_cols<T, VEC>(out + (r + u * kRows) * cols, c, gv[u]);
      }
    }
  }
  if (!partial && !gb) return;  // uniform across the grid
#pragma unroll
  for (int j = 0; j < VEC; ++j) tile[threadIdx.y][threadIdx.x * VEC + j] = acc[j];
  __syncthreads();
  if (threadIdx.y != 0 || c >= cols) return;
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    A s = 0;
#pragma unroll
    for (int k = 0; k < kRows; ++k) s += tile[k][threadIdx.x * VEC + j];
    if (partial) partial[blockIdx.y * cols + c + j] = s;
    else gb[c + j] = from_acc<T>(s);
  }
}

// out (may be NULL) and grad_bias (may be NULL) from g and aux; the partials
// go to workspace, plan::column_partials_bytes(rows, cols, dtype) of it.
template <class T, class F>
tc_status launch_colsum_backward(const char* op, int64_t rows, int64_t cols, const T* g, const T* aux, T* out,
                                 T* grad_bias, void* workspace, cudaStream_t stream, F f) {
  using A = acc_t<T>;
  if (cols == 0 || (!out && !grad_bias)) return TC_OK;
  if (rows == 0) {  // the bias gradient of no rows is zero
    if (grad_bias && cudaMemsetAsync(grad_bias, 0, cols * sizeof(T), stream) != cudaSuccess)
      return tc_fail(TC_ERR_CUDA, "%s: cudaMemsetAsync failed", op);
    return TC_OK;
  }
  const int64_t chunks = grad_bias ? plan::column_chunks(rows, cols) : plan::clamp64(plan::ceil_div(rows, 64), 1, 1024);
  A* partial = grad_bias && chunks > 1 ? static_cast<A*>(workspace) : nullptr;
  T* gb = grad_bias && chunks == 1 ? grad_bias : nullptr;
  auto launch = [&](auto vec) {
    constexpr int V = decltype(vec)::value;
    const dim3 grid(unsigned(plan::ceil_div(cols, 32 * V)), unsigned(chunks));
    return launch_pdl(op, colsum_backward_kernel<T, V, F>, grid, dim3(32, colsum::kRows), 0, stream, g, aux, out,
                      partial, gb, rows, cols, f);
  };
  TC_RETURN_IF_ERROR(rows_vectorizable<T>(cols, {g, aux, out}) ? launch(std::integral_constant<int, Vec<T>::size>{})
                                                               : launch(std::integral_constant<int, 1>{}));
  if (!partial) return TC_OK;
  return launch_sum_partials<T, 1>(op, partial, chunks, cols, grad_bias, nullptr, stream);
}
