// sum: y[o, i] = sum_r x[o, r, i] over a contiguous [outer, reduce, inner] view.
//
// Row path (inner == 1; a full sum is outer = 1): block (s, o) sums segment s
// of row o with 16-byte loads, 4 in flight per thread, then a warp-shuffle
// block reduction. With several segments a row (plan::row_splits: ~1024
// blocks in all) the partials [o][s] are added by one block per row.
// 2^28 fp32: 1024 blocks x 256 threads, 256 float4 per thread.
//
// Column path (inner > 1): block (32 x 8 threads) owns 32 adjacent columns of
// one outer index and one slice of the reduced axis; coalesced 32-wide row
// reads, a shared-memory reduction over the 8 rows, one partial per column;
// sum_partials_kernel (kit/reduce.cuh) adds the slices in order.
//
// Backward broadcasts grad_y over the reduced axis.
#include "../shared/reduce_plan.h"
#include "../shared/sum_check.h"
#include "kit/reduce.cuh"
#include "kit/vec.cuh"

// ---------------------------------------------------------------------------
// kernels

template <class T, int VEC>
__global__ void __launch_bounds__(256)
row_sum_kernel(const T* __restrict__ x, int64_t rows, int64_t reduce, int64_t splits,
               acc_t<T>* __restrict__ partial, T* __restrict__ y) {
  using A = acc_t<T>;
  __shared__ A scratch[32];
  const int64_t seg = plan::ceil_div(plan::ceil_div(reduce, splits), VEC) * VEC;
  const int64_t begin = blockIdx.x * seg;
  const int64_t end = min(reduce, begin + seg);
  for (int64_t o = blockIdx.y; o < rows; o += gridDim.y) {
    const T* row = x + o * reduce;
    A acc = 0;
    if constexpr (VEC > 1) {
      // begin and end are multiples of VEC and rows are 16-byte aligned.
      constexpr int U = 4;
      const int64_t step = int64_t(blockDim.x) * VEC;
      int64_t k = begin + int64_t(threadIdx.x) * VEC;
      for (; k + (U - 1) * step < end; k += U * step) {
        Vec<T> v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) v[u] = load_vec(row + k + u * step);
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
          for (int j = 0; j < VEC; ++j) acc += to_acc(v[u].v[j]);
      }
      for (; k < end; k += step) {
        Vec<T> v = load_vec(row + k);
#pragma unroll
        for (int j = 0; j < VEC; ++j) acc += to_acc(v.v[j]);
      }
    } else {
      for (int64_t k = begin + threadIdx.x; k < end; k += blockDim.x) acc += to_acc(row[k]);
    }
    acc = block_reduce(acc, Sum{}, A(0), scratch, blockDim.x / 32);
    if (threadIdx.x == 0) {
      if (splits == 1) y[o] = from_acc<T>(acc);
      else partial[o * splits + blockIdx.x] = acc;
    }
  }
}

// One block per row adds that row's `splits` partials in a fixed tree.
template <class T>
__global__ void __launch_bounds__(256)
row_partials_kernel(const acc_t<T>* __restrict__ partial, int64_t rows, int64_t splits,
                    T* __restrict__ y) {
  using A = acc_t<T>;
  __shared__ A scratch[32];
  for (int64_t o = blockIdx.x; o < rows; o += gridDim.x) {
    A acc = 0;
    for (int64_t s = threadIdx.x; s < splits; s += blockDim.x) acc += partial[o * splits + s];
    acc = block_reduce(acc, Sum{}, A(0), scratch, blockDim.x / 32);
    if (threadIdx.x == 0) y[o] = from_acc<T>(acc);
  }
}

template <class T>
__global__ void __launch_bounds__(256)
column_sum_kernel(const T* __restrict__ x, int64_t outer, int64_t reduce, int64_t inner,
                  int64_t chunks, acc_t<T>* __restrict__ partial, T* __restrict__ y) {
  using A = acc_t<T>;
  __shared__ A tile[plan::kBlockRows][plan::kColTile + 1];
  const int64_t col_blocks = plan::ceil_div(inner, plan::kColTile);
  const int64_t o = blockIdx.x / col_blocks;
  const int64_t i = (blockIdx.x % col_blocks) * plan::kColTile + threadIdx.x;
  const int64_t len = plan::ceil_div(reduce, chunks);
  const int64_t r0 = blockIdx.y * len, r1 = min(reduce, r0 + len);
  A acc = 0;
  if (i < inner) {
    const T* xo = x + o * reduce * inner + i;
    for (int64_t r = r0 + threadIdx.y; r < r1; r += plan::kBlockRows) acc += to_acc(xo[r * inner]);
  }
  tile[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && i < inner) {
#pragma unroll
    for (int k = 1; k < plan::kBlockRows; ++k) acc += tile[k][threadIdx.x];
    if (chunks == 1) y[o * inner + i] = from_acc<T>(acc);
    else partial[blockIdx.y * outer * inner + o * inner + i] = acc;
  }
}

template <class T>
__global__ void sum_backward_kernel(const T* __restrict__ g, int64_t reduce, int64_t inner,
                                    int64_t n, T* __restrict__ gx) {
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n;
       k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = k / (reduce * inner), i = k % inner;
    gx[k] = g[o * inner + i];
  }
}

// ---------------------------------------------------------------------------
// launchers

tc_status tc_sum_cuda(const tc_sum_params* p) {
  TC_RETURN_IF_ERROR(sum_check(p));
  const int64_t out_n = p->outer * p->inner;
  if (out_n == 0) return TC_OK;
  const size_t need = plan::sum_workspace(p->dtype, p->outer, p->reduce, p->inner);
  TC_REQUIRE(p->workspace_bytes >= need && (need == 0 || p->workspace),
             "sum: workspace of %zu bytes needed, %zu given", need, p->workspace_bytes);
  cudaStream_t stream = as_stream(p->stream);
  return dispatch_cuda(p->dtype, "sum", [&](auto tag) -> tc_status {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* x = static_cast<const T*>(p->x);
    T* y = static_cast<T*>(p->y);
    A* partial = static_cast<A*>(p->workspace);
    if (p->reduce == 0) {  // empty sum: zeros
      if (cudaMemsetAsync(y, 0, out_n * sizeof(T), stream) != cudaSuccess)
        return tc_fail(TC_ERR_CUDA, "sum: cudaMemsetAsync failed");
      return TC_OK;
    }
    if (p->inner == 1) {
      const int64_t splits = plan::row_splits(p->outer, p->reduce);
      dim3 grid(unsigned(splits), unsigned(plan::clamp64(p->outer, 1, 65535)));
      constexpr int V = Vec<T>::size;
      if (aligned16(x) && (p->reduce * sizeof(T)) % 16 == 0)
        row_sum_kernel<T, V><<<grid, 256, 0, stream>>>(x, p->outer, p->reduce, splits, partial, y);
      else
        row_sum_kernel<T, 1><<<grid, 256, 0, stream>>>(x, p->outer, p->reduce, splits, partial, y);
      TC_RETURN_IF_ERROR(check_launch("sum"));
      if (splits == 1) return TC_OK;
      row_partials_kernel<T><<<unsigned(plan::clamp64(p->outer, 1, 1 << 20)), 256, 0, stream>>>(
          partial, p->outer, splits, y);
      return check_launch("sum");
    }
    const int64_t chunks = plan::column_chunks(p->reduce, out_n);
    const int64_t col_blocks = plan::ceil_div(p->inner, plan::kColTile);
    TC_REQUIRE(p->outer * col_blocks < (int64_t(1) << 31), "sum: too many columns");
    dim3 grid(unsigned(p->outer * col_blocks), unsigned(chunks));
    column_sum_kernel<T><<<grid, dim3(plan::kColTile, plan::kBlockRows), 0, stream>>>(
        x, p->outer, p->reduce, p->inner, chunks, partial, y);
    TC_RETURN_IF_ERROR(check_launch("sum"));
    if (chunks == 1) return TC_OK;
    return launch_sum_partials<T, 1>("sum", partial, chunks, out_n, y, nullptr, stream);
  });
}

tc_status tc_sum_backward_cuda(const tc_sum_backward_params* p) {
  TC_RETURN_IF_ERROR(sum_check(p));
  const int64_t n = p->outer * p->reduce * p->inner;
  if (n == 0) return TC_OK;
  return dispatch_cuda(p->dtype, "sum_backward", [&](auto tag) -> tc_status {
    using T = decltype(tag);
    sum_backward_kernel<T><<<grid_1d(n, 256, 65536), 256, 0, as_stream(p->stream)>>>(
        static_cast<const T*>(p->grad_y), p->reduce, p->inner, n, static_cast<T*>(p->grad_x));
    return check_launch("sum_backward");
  });
}
