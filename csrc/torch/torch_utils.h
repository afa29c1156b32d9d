// The torch layer's shared helpers: the one argument check every op uses,
// dtype mapping, workspace allocation, and the call into the core on the
// tensor's device and current stream.
#pragma once
#include <torch/library.h>
#include <ATen/ATen.h>
#ifdef TC_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <initializer_list>

#include "../common.h"

namespace tc_torch {

struct Arg {
  const char* name;
  const at::Tensor& t;
};

inline tc_dtype dtype_of(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return TC_FLOAT32;
    case at::kHalf: return TC_FLOAT16;
    case at::kBFloat16: return TC_BFLOAT16;
    case at::kDouble: return TC_FLOAT64;
    default: TORCH_CHECK(false, "unreachable: dtype checked by check_args");
  }
}

// Every tensor argument goes through here: defined, a floating dtype the core
// has, the same dtype and device as the first one, and no more than `dims`.
inline void check_args(const char* op, std::initializer_list<Arg> args) {
  const Arg& first = *args.begin();
  for (const Arg& a : args) {
    TORCH_CHECK(a.t.defined(), "tinycuda::", op, ": ", a.name, " is undefined");
    auto st = a.t.scalar_type();
    TORCH_CHECK(st == at::kFloat || st == at::kHalf || st == at::kBFloat16 || st == at::kDouble,
                "tinycuda::", op, ": ", a.name,
                " must be float32, float16, bfloat16 or float64, got ", st);
    TORCH_CHECK(a.t.device() == first.t.device(), "tinycuda::", op, ": ", a.name, " is on ",
                a.t.device(), " but ", first.name, " is on ", first.t.device());
    TORCH_CHECK(st == first.t.scalar_type(), "tinycuda::", op, ": ", a.name, " has dtype ", st,
                " but ", first.name, " has dtype ", first.t.scalar_type());
  }
}

inline void check_same_shape(const char* op, Arg a, Arg b) {
  TORCH_CHECK(a.t.sizes() == b.t.sizes(), "tinycuda::", op, ": ", a.name, " has shape ",
              a.t.sizes(), " but ", b.name, " has shape ", b.t.sizes());
}

// A fresh contiguous tensor of `like`'s sizes, dtype and device.
inline at::Tensor empty_contiguous(at::IntArrayRef sizes, const at::Tensor& like) {
  return at::empty(sizes, like.options().memory_format(at::MemoryFormat::Contiguous));
}

inline at::Tensor workspace(const at::Tensor& like, size_t bytes) {
  return at::empty({int64_t(bytes)}, like.options().dtype(at::kByte));
}

// Runs the core's CPU or CUDA entry point for `on`'s device; CUDA work goes
// on the current stream of that device.
template <class P>
void call(const char* op, const at::Tensor& on, tc_status (*cpu)(const P*),
          tc_status (*cuda)(const P*), P params) {
  tc_status s;
  if (on.is_cuda()) {
#ifdef TC_WITH_CUDA
    const c10::cuda::CUDAGuard guard(on.device());
    params.stream = c10::cuda::getCurrentCUDAStream(on.device().index()).stream();
#endif
    s = cuda(&params);
  } else {
    TORCH_CHECK(on.is_cpu(), "tinycuda::", op, ": unsupported device ", on.device());
    s = cpu(&params);
  }
  TORCH_CHECK(s == TC_OK, "tinycuda::", op, ": ", tc_last_error());
}

}  // namespace tc_torch

// Registers `fn(m)`'s kernels for CPU and, when built with CUDA, for CUDA:
// the same functions serve both; tc_torch::call picks the core entry point.
#ifdef TC_WITH_CUDA
#define TC_REGISTER_IMPLS(fn)                           \
  TORCH_LIBRARY_IMPL(tinycuda, CPU, m) { fn(m); }       \
  TORCH_LIBRARY_IMPL(tinycuda, CUDA, m) { fn(m); }
#else
#define TC_REGISTER_IMPLS(fn) \
  TORCH_LIBRARY_IMPL(tinycuda, CPU, m) { fn(m); }
#endif
