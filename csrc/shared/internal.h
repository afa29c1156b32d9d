// Internal C++ helpers for the kernel core (not part of the C ABI).
//   - tc_fail(): record a formatted message and return a status;
//   - dispatch_dtype(): turn a runtime tc_dtype into a compile-time element
//     type, the same way for CPU code (Half16/BFloat16 below) and CUDA code
//     (__half/__nv_bfloat16), so each family writes its dtype switch once.
#pragma once
#include <cstdarg>
#include <cstdint>
#include <cstring>

#include "tinycuda/common.h"

// Small helpers used on both sides of a launch.
#ifdef __CUDACC__
#define TC_HD __host__ __device__
#else
#define TC_HD
#endif

// Records the message for tc_last_error() and returns `status`.
__attribute__((visibility("hidden"))) tc_status tc_fail(tc_status status, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define TC_REQUIRE(cond, ...) \
  do {                        \
    if (!(cond)) return tc_fail(TC_ERR_INVALID_ARGUMENT, __VA_ARGS__); \
  } while (0)

#define TC_RETURN_IF_ERROR(expr)            \
  do {                                      \
    tc_status tc_status_ = (expr);          \
    if (tc_status_ != TC_OK) return tc_status_; \
  } while (0)

// Accumulator type: float for every type but double.
template <class T> struct AccOf { using type = float; };
template <> struct AccOf<double> { using type = double; };
template <class T> using acc_t = typename AccOf<T>::type;

// Calls f(T{}) with T the element type of `dtype`; Half/BF16 are the
// backend's 16-bit types. Returns TC_ERR_UNSUPPORTED_DTYPE for anything else
// (the integer dtypes included).
template <class Half, class BF16, class F>
tc_status dispatch_dtype(tc_dtype dtype, const char* op, F&& f) {
  switch (dtype) {
    case TC_FLOAT32: return f(float{});
    case TC_FLOAT64: return f(double{});
    case TC_FLOAT16: return f(Half{});
    case TC_BFLOAT16: return f(BF16{});
    default: break;  // the integer dtypes: only the families that take them dispatch on them
  }
  return tc_fail(TC_ERR_UNSUPPORTED_DTYPE, "%s: unsupported dtype code %d", op,
                 static_cast<int>(dtype));
}
