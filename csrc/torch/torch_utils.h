// The torch layer's shared helpers: the one argument check every op uses,
// dtype mapping, workspace allocation, and the call into the core on the
// tensor's device and current stream.
#pragma once
#include <torch/library.h>
// The tensor class and the few at:: functions the door calls, not <ATen/ATen.h>
// (every at:: function): 11 s less per file to parse, ~6 CPU-minutes a build.
#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/zeros.h>
#ifdef TC_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <cstdarg>
#include <cstdio>
#include <initializer_list>
#include <string>

#include "tinycuda/common.h"

namespace tc_torch {

// Errors are formatted with snprintf and thrown as c10::Error (a RuntimeError
// in Python). No iostreams here: on the GPU machine, TORCH_CHECK's
// c10::str(..., long) instantiated inside this extension crashed (a num_put
// facet looked up in the wrong locale table), taking the interpreter down.
inline std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
inline std::string fmt(const char* f, ...) {
  char buf[1024];
  va_list args;
  va_start(args, f);
  std::vsnprintf(buf, sizeof(buf), f, args);
  va_end(args);
  return buf;
}

[[noreturn]] inline void fail(const char* op, const std::string& what) {
  C10_THROW_ERROR(Error, std::string("tinycuda::") + op + ": " + what);
}

#define TC_CHECK(cond, op, ...) \
  do {                          \
    if (!(cond)) ::tc_torch::fail(op, ::tc_torch::fmt(__VA_ARGS__)); \
  } while (0)

inline std::string shape_str(at::IntArrayRef sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

inline const char* dtype_str(const at::Tensor& t) { return c10::toString(t.scalar_type()); }

struct Arg {
  const char* name;
  const at::Tensor& t;
};

// tc_dtype's code for t's dtype, or -1 where tc_dtype has none (complex, uint16, ...)
inline int dtype_code(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return TC_FLOAT32;
    case at::kHalf: return TC_FLOAT16;
    case at::kBFloat16: return TC_BFLOAT16;
    case at::kDouble: return TC_FLOAT64;
    case at::kChar: return TC_INT8;
    case at::kShort: return TC_INT16;
    case at::kInt: return TC_INT32;
    case at::kLong: return TC_INT64;
    case at::kByte: return TC_UINT8;
    case at::kBool: return TC_BOOL;
    default: return -1;
  }
}

// Every tensor argument goes through here: defined, a floating dtype the core
// has, the same dtype and device as the first one, and no more than `dims`.
inline void check_args(const char* op, std::initializer_list<Arg> args) {
  const Arg& first = *args.begin();
  for (const Arg& a : args) {
    TC_CHECK(a.t.defined(), op, "%s is undefined", a.name);
    auto st = a.t.scalar_type();
    TC_CHECK(st == at::kFloat || st == at::kHalf || st == at::kBFloat16 || st == at::kDouble, op,
             "%s must be float32, float16, bfloat16 or float64, got %s", a.name, dtype_str(a.t));
    TC_CHECK(a.t.device() == first.t.device(), op, "%s is on %s but %s is on %s", a.name,
             a.t.device().str().c_str(), first.name, first.t.device().str().c_str());
    TC_CHECK(st == first.t.scalar_type(), op, "%s has dtype %s but %s has dtype %s", a.name,
             dtype_str(a.t), first.name, dtype_str(first.t));
  }
}

inline void check_same_shape(const char* op, Arg a, Arg b) {
  TC_CHECK(a.t.sizes() == b.t.sizes(), op, "%s has shape %s but %s has shape %s", a.name,
           shape_str(a.t.sizes()).c_str(), b.name, shape_str(b.t.sizes()).c_str());
}

// A fresh contiguous tensor of `like`'s sizes, dtype and device.
inline at::Tensor empty_contiguous(at::IntArrayRef sizes, const at::Tensor& like) {
  return at::empty(sizes, like.options().memory_format(at::MemoryFormat::Contiguous));
}

// The params' dtype, `on`'s: where the params have one and tc_dtype names
// `on`'s (the sort family's integers and bool too; bincount's int64 x without
// weights fills one it ignores; triu's params move any dtype by its size, and
// have no dtype).
template <class P>
void fill_dtype(P& params, const at::Tensor& on) {
  if constexpr (requires { params.dtype; })
    if (const int code = dtype_code(on); code >= 0) params.dtype = tc_dtype(code);
}

// Runs the core's CPU or CUDA entry point for `on`'s device; CUDA work goes
// on the current stream of that device. The params' dtype (fill_dtype) and
// their stream (and workspace, below) are filled here, so the bindings name
// only the fields that carry the op's data.
template <class P>
void call(const char* op, const at::Tensor& on, tc_status (*cpu)(const P*),
          tc_status (*cuda)(const P*), P params) {
  fill_dtype(params, on);
  tc_status s;
  if (on.is_cuda()) {
#ifdef TC_WITH_CUDA
    const c10::cuda::CUDAGuard guard(on.device());
    params.stream = c10::cuda::getCurrentCUDAStream(on.device().index()).stream();
#endif
    s = cuda(&params);
  } else {
    TC_CHECK(on.is_cpu(), op, "unsupported device %s", on.device().str().c_str());
    s = cpu(&params);
  }
  if (s != TC_OK) {
    // the core names its op already ("flash_attention: ..."): keep one name
    std::string what = tc_last_error();
    const std::string own = std::string(op) + ": ";
    fail(op, what.rfind(own, 0) == 0 ? what.substr(own.size()) : what);
  }
}

// call() for ops whose CUDA path needs scratch: sizes it with the core's
// query and allocates it from torch's caching allocator. Freed when this
// returns, which is safe: the allocator reuses a block only for work queued
// after this launch on the same stream.
template <class P>
void call_with_workspace(const char* op, const at::Tensor& on, tc_status (*cpu)(const P*),
                         tc_status (*cuda)(const P*), size_t (*workspace_size)(const P*), P params) {
  at::Tensor ws;
  if (on.is_cuda()) {
    fill_dtype(params, on);  // the size depends on it (fp64 partials are twice as wide)
    params.workspace_bytes = workspace_size(&params);
    ws = at::empty({int64_t(params.workspace_bytes)}, on.options().dtype(at::kByte));
    params.workspace = ws.data_ptr();
  }
  call(op, on, cpu, cuda, params);
}

// The elementwise bindings (relu, square, gelu, ...): y = f(x) and
// grad_x = f'(x) * grad_y over contiguous copies, into fresh tensors of x's
// shape. `p` carries the op's own fields (gelu's approximate); the element
// count and pointers are filled here.
template <class P>
at::Tensor unary(const char* op, const at::Tensor& x, tc_status (*cpu)(const P*),
                 tc_status (*cuda)(const P*), P p = {}) {
  check_args(op, {{"x", x}});
  const at::Tensor xc = x.contiguous();
  at::Tensor y = empty_contiguous(xc.sizes(), xc);
  p.n = xc.numel(), p.x = xc.data_ptr(), p.y = y.data_ptr();
  call(op, xc, cpu, cuda, p);
  return y;
}

template <class P>
at::Tensor unary_backward(const char* op, const at::Tensor& grad_out, const at::Tensor& x,
                          tc_status (*cpu)(const P*), tc_status (*cuda)(const P*), P p = {}) {
  check_args(op, {{"grad_out", grad_out}, {"x", x}});
  check_same_shape(op, {"grad_out", grad_out}, {"x", x});
  const at::Tensor gc = grad_out.contiguous(), xc = x.contiguous();
  at::Tensor gx = empty_contiguous(xc.sizes(), xc);
  p.n = xc.numel(), p.grad_y = gc.data_ptr(), p.x = xc.data_ptr(), p.grad_x = gx.data_ptr();
  call(op, xc, cpu, cuda, p);
  return gx;
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
