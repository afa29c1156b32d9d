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
