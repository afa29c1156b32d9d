// The loops of the CPU elementwise ops: out[i] = f(a[i], b[i]) (unary: f(a[i],
// 0)), in the accumulator type, threaded over ranges of i past ~256K elements, with the same element functors
// (shared/*_math.h) that CUDA's pointwise_kernel (cuda/kit/pointwise.cuh)
// runs. The caller checks the arguments (shared/act_check.h).
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>

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

// One operand of the strided loops: a strided array, or (p NULL) a scalar.
// Every operand holds T but the first, which may hold C0 (where's bool
// condition, read as 0 or 1).
template <class A> struct Operand {
  const void* p;
  A scalar;
};

template <class S, class A> inline A load_as(const void* p, int64_t off) {
  const S v = static_cast<const S*>(p)[off];
  if constexpr (std::is_same_v<S, uint8_t>) return A(v != 0);
  else return A(to_acc(v));
}

template <class T, class C0, class A> inline A operand_at(const Operand<A>& o, int k, int64_t off) {
  if (!o.p) return o.scalar;
  return k == 0 ? load_as<C0, A>(o.p, off) : load_as<T, A>(o.p, off);
}

// The operands' values at one element into f: f(x, 0) for one, as the
// pointwise functors take (a, b); f(a, b) or f(g, a, b) for more.
template <int NARGS, class A, class F> inline A apply(const F& f, const A* v) {
  if constexpr (NARGS == 1) return f(v[0], A(0));
  else if constexpr (NARGS == 2) return f(v[0], v[1]);
  else return f(v[0], v[1], v[2]);
}

// out[i] = f(in_0[off_0(i)], ...) for strided operands (shared/elementwise_check.h's
// StridedLayout) into a contiguous out, threaded over ranges of i on large
// inputs. Each range finds its first coordinates by division, then steps them
// like an odometer: one add per operand and element, a carry per row.
template <int NARGS, class T, class C0 = T, class F>
[[nodiscard]] bool strided_cpu(const StridedLayout<NARGS>& l, const Operand<acc_t<T>> (&in)[NARGS], T* out, F f) {
  using A = acc_t<T>;
  const int64_t threads = threads_for(l.n / 4096, l.n * 16);
  const int64_t chunk = (l.n + threads - 1) / threads;
  return run_threads(threads, [&](int64_t t) {
    const int64_t begin = t * chunk, end = std::min(l.n, begin + chunk);
    if (begin >= end) return;
    A v[NARGS];
    if (l.contiguous()) {
      bool arrays = true;
      for (int k = 0; k < NARGS; ++k) arrays = arrays && in[k].p;
      if (arrays) {  // typed pointers, no per-element operand test: the loop vectorizes
        const C0* p0 = static_cast<const C0*>(in[0].p);
        const T* p1 = static_cast<const T*>(in[NARGS > 1 ? 1 : 0].p);
        const T* p2 = static_cast<const T*>(in[NARGS > 2 ? 2 : 0].p);
        for (int64_t i = begin; i < end; ++i) {
          A w[NARGS];
          w[0] = load_as<C0, A>(p0, i);
          if constexpr (NARGS > 1) w[1] = A(to_acc(p1[i]));
          if constexpr (NARGS > 2) w[2] = A(to_acc(p2[i]));
          out[i] = from_acc<T>(apply<NARGS>(f, w));
        }
        return;
      }
      for (int64_t i = begin; i < end; ++i) {
        for (int k = 0; k < NARGS; ++k) v[k] = operand_at<T, C0>(in[k], k, i);
        out[i] = from_acc<T>(apply<NARGS>(f, v));
      }
      return;
    }
    int64_t idx[8] = {}, off[NARGS] = {}, rest = begin;
    for (int d = l.ndim - 1; d >= 0; --d) {
      idx[d] = rest % l.sizes[d], rest /= l.sizes[d];
      for (int k = 0; k < NARGS; ++k) off[k] += idx[d] * l.strides[k][d];
    }
    const int inner = l.ndim - 1;
    for (int64_t i = begin; i < end; ++i) {
      for (int k = 0; k < NARGS; ++k) v[k] = operand_at<T, C0>(in[k], k, off[k]);
      out[i] = from_acc<T>(apply<NARGS>(f, v));
      if (inner < 0) continue;  // one element
      int d = inner;
      ++idx[d];
      for (int k = 0; k < NARGS; ++k) off[k] += l.strides[k][d];
      while (d > 0 && idx[d] == l.sizes[d]) {  // carry into the next-outer dim
        for (int k = 0; k < NARGS; ++k) off[k] -= idx[d] * l.strides[k][d];
        idx[d] = 0;
        --d;
        ++idx[d];
        for (int k = 0; k < NARGS; ++k) off[k] += l.strides[k][d];
      }
    }
  });
}
