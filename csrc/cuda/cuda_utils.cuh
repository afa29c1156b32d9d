// CUDA side of the core: element conversions, 16-byte vectors, error checks.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "../internal.h"

__device__ __forceinline__ float to_acc(float x) { return x; }
__device__ __forceinline__ double to_acc(double x) { return x; }
__device__ __forceinline__ float to_acc(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_acc(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class T> __device__ __forceinline__ T from_acc(acc_t<T> v);
template <> __device__ __forceinline__ float from_acc<float>(float v) { return v; }
template <> __device__ __forceinline__ double from_acc<double>(double v) { return v; }
template <> __device__ __forceinline__ __half from_acc<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_acc<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// 16 bytes of T: one LDG.128 / STG.128, the widest access a thread can make.
template <class T>
struct alignas(16) Vec {
  static constexpr int size = 16 / sizeof(T);
  T v[size];
};

template <class T>
__device__ __forceinline__ Vec<T> load_vec(const T* p) {
  return *reinterpret_cast<const Vec<T>*>(p);
}
template <class T>
__device__ __forceinline__ void store_vec(T* p, const Vec<T>& v) {
  *reinterpret_cast<Vec<T>*>(p) = v;
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

template <class F>
tc_status dispatch_cuda(tc_dtype dtype, const char* op, F&& f) {
  return dispatch_dtype<__half, __nv_bfloat16>(dtype, op, static_cast<F&&>(f));
}

inline cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

// Every launch is followed by this: a bad configuration surfaces here, named.
// No device or driver is TC_ERR_NO_CUDA, so callers can tell "no GPU here"
// from a kernel that failed.
inline tc_status check_launch(const char* op) {
  cudaError_t err = cudaGetLastError();
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver)
    return tc_fail(TC_ERR_NO_CUDA, "%s: no CUDA device: %s", op, cudaGetErrorString(err));
  if (err != cudaSuccess)
    return tc_fail(TC_ERR_CUDA, "%s: kernel launch failed: %s", op, cudaGetErrorString(err));
  return TC_OK;
}

// Blocks for `items` work items, capped (kernels that can be capped loop).
inline unsigned grid_1d(int64_t items, int per_block, int64_t cap = INT32_MAX) {
  int64_t g = (items + per_block - 1) / per_block;
  return unsigned(g < 1 ? 1 : (g > cap ? cap : g));
}
