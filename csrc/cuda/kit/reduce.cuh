// Reduction building blocks shared by the sum, linear (bias gradient) and
// scale_bias_relu (bias gradient) kernels: warp/block sums and the second,
// fixed-order stage that adds per-slice partials.
#pragma once
#include "cuda_utils.cuh"

template <class A>
__device__ __forceinline__ A warp_sum(A v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over a 1-D block (blockDim.x a multiple of 32, at most 1024); the
// result is valid in thread 0. `scratch` holds 32 values.
template <class A>
__device__ __forceinline__ A block_sum(A v, A* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int nwarps = blockDim.x >> 5;
  v = threadIdx.x < nwarps ? scratch[threadIdx.x] : A(0);
  return warp == 0 ? warp_sum(v) : v;
}

// y[c] = sum over s < slices of partial[s * cols + c], in order of s.
template <class T, class A>
__global__ void sum_partials_kernel(const A* __restrict__ partial, int64_t slices,
                                    int64_t cols, T* __restrict__ y) {
  int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= cols) return;
  A s = 0;
#pragma unroll 8
  for (int64_t k = 0; k < slices; ++k) s += partial[k * cols + c];
  y[c] = from_acc<T>(s);
}

template <class T>
tc_status launch_sum_partials(const char* op, const acc_t<T>* partial, int64_t slices,
                              int64_t cols, T* y, cudaStream_t stream) {
  sum_partials_kernel<T, acc_t<T>><<<grid_1d(cols, 256), 256, 0, stream>>>(partial, slices, cols, y);
  return check_launch(op);
}
