// One loop for the CPU elementwise ops: out[i] = f(a[i], b[i]) (unary: f(a[i],
// 0)), in the accumulator type, with the same element functors
// (shared/*_math.h) that CUDA's pointwise_kernel (cuda/kit/pointwise.cuh)
// runs. The caller checks the arguments (shared/act_check.h).
#pragma once
#include "cpu_utils.h"

template <bool BINARY, class F>
tc_status pointwise_cpu(const char* op, tc_dtype dtype, int64_t n, const void* a, const void* b,
                        void* out, F f) {
  return dispatch_cpu(dtype, op, [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* pa = static_cast<const T*>(a);
    const T* pb = static_cast<const T*>(b);
    T* po = static_cast<T*>(out);
    for (int64_t i = 0; i < n; ++i)
      po[i] = from_acc<T>(f(A(to_acc(pa[i])), BINARY ? A(to_acc(pb[i])) : A(0)));
    return TC_OK;
  });
}
