// One launcher for the elementwise kernels (relu, square, gelu, glu forward):
// out[i] = f(a[i], b[i]) (unary: f(a[i], 0)), computed in the accumulator
// type, with the element functors of shared/*_math.h that the CPU loop
// (cpu/kit/pointwise.h) runs too. The caller checks the arguments.
//
// Memory-bound: each thread moves one 16-byte vector per operand (4 fp32,
// 8 fp16/bf16); n = 8192^2 fp32 is 65536 blocks of 256 threads, ~64 KB in
// flight per SM for a binary op, well past the ~14 KB Little's law asks for
// at 3 TB/s and ~600 ns latency. Misaligned buffers take a scalar instance.
#pragma once
#include "../../shared/elementwise_check.h"
#include "vec.cuh"

template <class T, int VEC, bool BINARY, class F>
__global__ void __launch_bounds__(256)
pointwise_kernel(int64_t n, const T* __restrict__ a, const T* __restrict__ b,
                 T* __restrict__ out, F f) {
  using A = acc_t<T>;
  const int64_t v = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if constexpr (VEC > 1) {
    if (v < n / VEC) {
      Vec<T> va = load_vec(a + v * VEC), vb, vo;
      if constexpr (BINARY) vb = load_vec(b + v * VEC);
#pragma unroll
      for (int j = 0; j < VEC; ++j)
        vo.v[j] = from_acc<T>(f(to_acc(va.v[j]), BINARY ? to_acc(vb.v[j]) : A(0)));
      store_vec(out + v * VEC, vo);
    }
    // the last n % VEC elements, one per thread of the first threads
    const int64_t t = (n / VEC) * VEC + v;
    if (v < n % VEC) out[t] = from_acc<T>(f(to_acc(a[t]), BINARY ? to_acc(b[t]) : A(0)));
  } else {
    if (v < n) out[v] = from_acc<T>(f(to_acc(a[v]), BINARY ? to_acc(b[v]) : A(0)));
  }
}

template <bool BINARY, class F>
tc_status launch_pointwise(const char* op, tc_dtype dtype, int64_t n, const void* a,
                           const void* b, void* out, void* stream, F f) {
  if (n == 0) return TC_OK;
  return dispatch_cuda(dtype, op, [&](auto tag) -> tc_status {
    using T = decltype(tag);
    constexpr int V = Vec<T>::size;
    const T* pa = static_cast<const T*>(a);
    const T* pb = static_cast<const T*>(b);
    T* po = static_cast<T*>(out);
    cudaStream_t s = as_stream(stream);
    if (aligned16(a) && aligned16(out) && (!BINARY || aligned16(b))) {
      const int64_t threads = n / V > n % V ? n / V : n % V;
      pointwise_kernel<T, V, BINARY><<<grid_1d(threads, 256), 256, 0, s>>>(n, pa, pb, po, f);
    } else {
      TC_REQUIRE(n / 256 < INT32_MAX, "%s: too many elements for the unaligned path", op);
      pointwise_kernel<T, 1, BINARY><<<grid_1d(n, 256, INT32_MAX), 256, 0, s>>>(n, pa, pb, po, f);
    }
    return check_launch(op);
  });
}

// ---------------------------------------------------------------------------
// The strided form: out[i] = f(x[off(i)]) for an x that is a view (sliced,
// transposed, expanded: shared/elementwise_check.h's StridedLayout, already
// collapsed to its fewest dims) into a contiguous out. Each thread owns one
// 16-byte vector of out (4 fp32, 8 fp16/bf16): it finds the first element's
// coordinates by division once, then steps along the inner dim (a carry
// re-divides), so the integer divisions cost once per vector, not per
// element; its stores are one STG.128 where out is aligned (a uniform
// branch, not a second kernel: 18 ops x 4 dtypes of kernels already).

struct StridedArg {  // StridedLayout<1> by value: 136 bytes of kernel parameters
  int ndim;
  int64_t sizes[8], strides[8];
};

__device__ __forceinline__ int64_t strided_offset(const StridedArg& l, int64_t i, int64_t* idx) {
  int64_t off = 0;
  for (int d = l.ndim - 1; d >= 0; --d) {
    idx[d] = i % l.sizes[d], i /= l.sizes[d];
    off += idx[d] * l.strides[d];
  }
  return off;
}

template <class T, class F>
__global__ void __launch_bounds__(256)
strided_unary_kernel(int64_t n, StridedArg l, const T* __restrict__ x, T* __restrict__ out, bool vec_store, F f) {
  constexpr int V = Vec<T>::size;
  const int64_t i0 = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) * V;
  if (i0 >= n) return;
  int64_t idx[8];
  int64_t off = strided_offset(l, i0, idx);
  const int inner = l.ndim - 1;
  Vec<T> o;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    if (i0 + j < n) {
      o.v[j] = from_acc<T>(f(to_acc(x[off]), acc_t<T>(0)));
      if (++idx[inner] < l.sizes[inner]) off += l.strides[inner];
      else off = strided_offset(l, i0 + j + 1, idx);
    }
  }
  if (vec_store && i0 + V <= n) {
    store_vec(out + i0, o);
  } else {
    for (int j = 0; j < V && i0 + j < n; ++j) out[i0 + j] = o.v[j];
  }
}

// ndim >= 1 (a 0-dim or fully contiguous x takes launch_pointwise)
template <class F>
tc_status launch_strided_unary(const char* op, tc_dtype dtype, const StridedLayout<1>& layout, const void* x,
                               void* out, void* stream, F f) {
  if (layout.n == 0) return TC_OK;
  StridedArg l{layout.ndim};
  for (int d = 0; d < layout.ndim; ++d) l.sizes[d] = layout.sizes[d], l.strides[d] = layout.strides[0][d];
  return dispatch_cuda(dtype, op, [&](auto tag) -> tc_status {
    using T = decltype(tag);
    const unsigned grid = grid_1d((layout.n + Vec<T>::size - 1) / Vec<T>::size, 256);
    const T* px = static_cast<const T*>(x);
    T* po = static_cast<T*>(out);
    strided_unary_kernel<<<grid, 256, 0, as_stream(stream)>>>(layout.n, l, px, po, aligned16(out), f);
    return check_launch(op);
  });
}
