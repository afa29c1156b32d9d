// The loops of the CPU elementwise ops: out[i] = f(a[i], b[i]) (unary: f(a[i],
// 0)), in the accumulator type, threaded over ranges of i past ~256K elements, with the same element functors
// (shared/*_math.h) that CUDA's pointwise_kernel (cuda/kit/pointwise.cuh)
// runs. The caller checks the arguments (shared/act_check.h).
#pragma once
#include <algorithm>

#include "../../shared/elementwise_check.h"
#include "cpu_utils.h"
#include "parallel.h"

template <bool BINARY, class F>
tc_status pointwise_cpu(const char* op, tc_dtype dtype, int64_t n, const void* a, const void* b,
                        void* out, F f) {
  return dispatch_cpu(dtype, op, [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* pa = static_cast<const T*>(a);
    const T* pb = static_cast<const T*>(b);
    T* po = static_cast<T*>(out);
    const int64_t threads = threads_for(n / 4096, n * 16), chunk = (n + threads - 1) / threads;
    const bool ok = run_threads(threads, [&](int64_t t) {
      for (int64_t i = t * chunk, end = std::min(n, i + chunk); i < end; ++i)
        po[i] = from_acc<T>(f(A(to_acc(pa[i])), BINARY ? A(to_acc(pb[i])) : A(0)));
    });
    return ok ? TC_OK : tc_fail(TC_ERR_INTERNAL, "%s: a worker thread failed", op);
  });
}

// out[i] = f(x[off(i)]) for a strided x (shared/elementwise_check.h's
// StridedLayout) into a contiguous out, threaded over ranges of i on large
// inputs. Each range finds its first coordinates by division, then steps them
// like an odometer: one add per element, a carry per row.
template <class T, class F>
[[nodiscard]] bool strided_unary_cpu(const StridedLayout<1>& l, const T* x, T* out, F f) {
  using A = acc_t<T>;
  const int64_t threads = threads_for(l.n / 4096, l.n * 16);
  const int64_t chunk = (l.n + threads - 1) / threads;
  return run_threads(threads, [&](int64_t t) {
    const int64_t begin = t * chunk, end = std::min(l.n, begin + chunk);
    if (begin >= end) return;
    int64_t idx[8] = {}, off = 0, rest = begin;
    for (int d = l.ndim - 1; d >= 0; --d) {
      idx[d] = rest % l.sizes[d], rest /= l.sizes[d];
      off += idx[d] * l.strides[0][d];
    }
    if (l.contiguous()) {
      for (int64_t i = begin; i < end; ++i) out[i] = from_acc<T>(f(A(to_acc(x[i])), A(0)));
      return;
    }
    const int inner = l.ndim - 1;
    for (int64_t i = begin; i < end; ++i) {
      out[i] = from_acc<T>(f(A(to_acc(x[off])), A(0)));
      if (inner < 0) continue;  // one element
      int d = inner;
      ++idx[d], off += l.strides[0][d];
      while (d > 0 && idx[d] == l.sizes[d]) {  // carry into the next-outer dim
        off -= idx[d] * l.strides[0][d], idx[d] = 0;
        --d;
        ++idx[d], off += l.strides[0][d];
      }
    }
  });
}
