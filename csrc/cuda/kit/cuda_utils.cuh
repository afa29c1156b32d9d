// CUDA side of the core: element conversions, error checks, launch sizing
// (the vector type is in vec.cuh, the reductions in reduce.cuh).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "../../shared/internal.h"

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

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

template <class F>
tc_status dispatch_cuda(tc_dtype dtype, const char* op, F&& f) {
  return dispatch_dtype<__half, __nv_bfloat16>(dtype, op, static_cast<F&&>(f));
}

inline cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

// A CUDA runtime error as a status, named: no device or driver is
// TC_ERR_NO_CUDA, so callers can tell "no GPU here" from a call that failed.
// The runtime's last error is cleared, so the next launch check starts clean.
inline tc_status cuda_status(const char* op, const char* what, cudaError_t err) {
  if (err == cudaSuccess) return TC_OK;
  cudaGetLastError();
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver)
    return tc_fail(TC_ERR_NO_CUDA, "%s: no CUDA device: %s", op, cudaGetErrorString(err));
  return tc_fail(TC_ERR_CUDA, "%s: %s failed: %s", op, what, cudaGetErrorString(err));
}

// A value only the device reads (a class index, a position id) out of
// range: the kernel stops with a device-side assert, as torch's kernels do.
// The stream then reports cudaErrorAssert ("device-side assert triggered") at
// the next synchronization, the assert's line in the log names the op, and
// the context is unusable from then on (CUDA's rule). `msg` is a literal
// starting "tinycuda::<op>: ". Unlike assert(), kept under NDEBUG; glibc's
// declaration is not, so it is declared here.
extern "C" __host__ __device__ void __assert_fail(const char*, const char*, unsigned int, const char*) noexcept;
#define TC_DEVICE_REQUIRE(cond, msg)                               \
  do {                                                             \
    if (!(cond)) __assert_fail(msg, __FILE__, __LINE__, __func__); \
  } while (0)

// Every launch is followed by this: a bad configuration surfaces here, named.
inline tc_status check_launch(const char* op) {
  return cuda_status(op, "kernel launch", cudaGetLastError());
}

// What a launcher sizes a resident (persistent) grid by: the current device's
// SMs and L2, and how many blocks of `kernel` (with `smem` bytes of dynamic
// shared memory) fit on one SM at once.
struct DeviceFit {
  int sms = 0, l2_bytes = 0, blocks_per_sm = 0;
};

template <class Kernel>
tc_status device_fit(const char* op, Kernel kernel, int threads, DeviceFit* fit, size_t smem = 0) {
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&fit->sms, cudaDevAttrMultiProcessorCount, dev);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&fit->l2_bytes, cudaDevAttrL2CacheSize, dev);
  if (err == cudaSuccess)
    err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit->blocks_per_sm, kernel, threads, smem);
  return cuda_status(op, "querying the device", err);
}

// The largest dynamic shared memory a block may opt into on the current
// device (asked once per device); 0 when it cannot be asked.
inline int smem_optin() {
  static std::atomic<int> known[64];
  int dev = 0, v = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  if (dev >= 0 && dev < 64 && (v = known[dev].load(std::memory_order_relaxed)) != 0) return v;
  if (cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  if (dev >= 0 && dev < 64) known[dev].store(v, std::memory_order_relaxed);
  return v;
}

// Lets `kernel` use `smem` bytes of dynamic shared memory (above the 48 KB
// default), set once per device: bit d of `set`, the caller's flags for
// this kernel.
template <class K>
tc_status smem_opt_in(const char* op, K kernel, size_t smem, std::atomic<uint64_t>& set) {
  int dev = 0;
  TC_RETURN_IF_ERROR(cuda_status(op, "cudaGetDevice", cudaGetDevice(&dev)));
  if (dev < 0 || dev >= 64 || !(set.load(std::memory_order_relaxed) >> dev & 1)) {
    TC_RETURN_IF_ERROR(cuda_status(op, "setting shared memory",
                                   cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                        int(smem))));
    if (dev >= 0 && dev < 64) set.fetch_or(uint64_t(1) << dev, std::memory_order_relaxed);
  }
  return TC_OK;
}

// Makes the compiler forget what it knows of p's bits, so that float values
// derived from packed 16-bit elements are converted again after a row's
// reductions instead of held across them (every element twice, packed and as
// a float): without it the softmax and norm kernels spilled in bf16.
template <class P>
__device__ __forceinline__ void launder(P& p) {
  if constexpr (sizeof(P) % 4 == 0) {
    uint32_t* w = reinterpret_cast<uint32_t*>(&p);
#pragma unroll
    for (int i = 0; i < int(sizeof(P) / 4); ++i) asm volatile("" : "+r"(w[i]));
  } else {
    static_assert(sizeof(P) == 2, "launder takes 2 bytes or a multiple of 4");
    asm volatile("" : "+h"(*reinterpret_cast<uint16_t*>(&p)));
  }
}

template <class P, int K>
__device__ __forceinline__ void launder(P (&p)[K]) {
#pragma unroll
  for (int k = 0; k < K; ++k) launder(p[k]);
}

// Blocks for `items` work items, capped (kernels that can be capped loop).
inline unsigned grid_1d(int64_t items, int per_block, int64_t cap = INT32_MAX) {
  int64_t g = (items + per_block - 1) / per_block;
  return unsigned(g < 1 ? 1 : (g > cap ? cap : g));
}
