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

// out[j] = f(w_0, ...) over a run of n elements, operand k's value w_k = p_k[j] (p0 of C0), or c[k] where bit k of
// CONST is set (a scalar, or a broadcast along the run): no layout and no operand test in the loop, so it
// vectorizes
template <int NARGS, int CONST, class T, class C0, class F>
TC_CPU_CLONES void map_run(int64_t n, const C0* p0, const T* p1, const T* p2, const acc_t<T>* c, T* out,
                           const F& f) {
  using A = acc_t<T>;
  for (int64_t j = 0; j < n; ++j) {
    A w[NARGS];
    w[0] = CONST & 1 ? c[0] : load_as<C0, A>(p0, j);
    if constexpr (NARGS > 1) w[1] = CONST & 2 ? c[1] : A(to_acc(p1[j]));
    if constexpr (NARGS > 2) w[2] = CONST & 4 ? c[2] : A(to_acc(p2[j]));
    out[j] = from_acc<T>(apply<NARGS>(f, w));
  }
}

// out[i] = f(a[i], b[i]) over n contiguous elements (unary: f(a[i], 0))
template <bool BINARY, class F>
tc_status pointwise_cpu(const char* op, tc_dtype dtype, int64_t n, const void* a, const void* b,
                        void* out, F f) {
  return dispatch_cpu(dtype, op, [&](auto tag) {
    using T = decltype(tag);
    const T* pa = static_cast<const T*>(a);
    const T* pb = static_cast<const T*>(b);
    T* po = static_cast<T*>(out);
    const int64_t threads = threads_for(n / 4096, n * 16), chunk = (n + threads - 1) / threads;
    const bool ok = run_threads(threads, [&](int64_t t) {
      const int64_t i = std::min(n, t * chunk), m = std::min(n, i + chunk) - i;
      map_run<BINARY ? 2 : 1, 0>(m, pa + i, BINARY ? pb + i : nullptr, static_cast<const T*>(nullptr), nullptr, po + i, f);
    });
    return ok ? TC_OK : tc_fail(TC_ERR_INTERNAL, "%s: a worker thread failed", op);
  });
}

// out[j] = f(...) over a run of n elements from offsets off[k] that step by step[k]: map_run where each operand
// steps by 1 or is constant (0, or a scalar), in the combinations it is compiled for (every operand an array; one
// of a binary op's two constant: x + bias over rows or columns, x + scalar; one of a backward's or where's values
// constant); any other stride or combination one element at a time
template <int NARGS, class T, class C0, class F>
void run_at(int64_t n, const Operand<acc_t<T>> (&in)[NARGS], const int64_t* off, const int64_t* step, T* out,
            const F& f) {
  using A = acc_t<T>;
  int mask = 0;
  bool unit = true;
  A c[NARGS] = {};
  for (int k = 0; k < NARGS; ++k) {
    if (!in[k].p || step[k] == 0) mask |= 1 << k, c[k] = operand_at<T, C0>(in[k], k, off[k]);
    else unit = unit && step[k] == 1;
  }
  auto at = [&](int k) { return in[k].p ? static_cast<const T*>(in[k].p) + off[k] : nullptr; };
  const C0* p0 = in[0].p ? static_cast<const C0*>(in[0].p) + off[0] : nullptr;
  const T *p1 = nullptr, *p2 = nullptr;
  if constexpr (NARGS > 1) p1 = at(1);
  if constexpr (NARGS > 2) p2 = at(2);
  if (unit) {
    switch (mask) {
      case 0: return map_run<NARGS, 0>(n, p0, p1, p2, c, out, f);
      case 1:
        if constexpr (NARGS == 2) return map_run<NARGS, 1>(n, p0, p1, p2, c, out, f);
        break;
      case 2:
        if constexpr (NARGS > 1) return map_run<NARGS, 2>(n, p0, p1, p2, c, out, f);
        break;
      case 4:
        if constexpr (NARGS == 3) return map_run<NARGS, 4>(n, p0, p1, p2, c, out, f);
        break;
    }
  }
  int64_t o[NARGS];
  for (int k = 0; k < NARGS; ++k) o[k] = off[k];
  for (int64_t j = 0; j < n; ++j) {
    A v[NARGS];
    for (int k = 0; k < NARGS; ++k) v[k] = operand_at<T, C0>(in[k], k, o[k]), o[k] += step[k];
    out[j] = from_acc<T>(apply<NARGS>(f, v));
  }
}

// out[i] = f(in_0[off_0(i)], ...) for strided operands (shared/elementwise_check.h's
// StridedLayout) into a contiguous out, threaded over ranges of i on large
// inputs. Each range finds its first coordinates by division, then walks
// runs along the inner dim (run_at: a vectorized loop where each operand is
// contiguous or constant along it: x + bias over rows 3.4x torch's time as an
// element at a time), stepping the outer coordinates like an odometer.
template <int NARGS, class T, class C0 = T, class F>
[[nodiscard]] bool strided_cpu(const StridedLayout<NARGS>& l, const Operand<acc_t<T>> (&in)[NARGS], T* out, F f) {
  const int64_t threads = threads_for(l.n / 4096, l.n * 16);
  const int64_t chunk = (l.n + threads - 1) / threads;
  return run_threads(threads, [&](int64_t t) {
    const int64_t begin = t * chunk, end = std::min(l.n, begin + chunk);
    if (begin >= end) return;
    if (l.contiguous()) {  // one dim (or one element), every operand stepping by 1
      int64_t off[NARGS], step[NARGS];
      for (int k = 0; k < NARGS; ++k) off[k] = begin, step[k] = 1;
      run_at<NARGS, T, C0>(end - begin, in, off, step, out + begin, f);
      return;
    }
    int64_t idx[8] = {}, off[NARGS] = {}, rest = begin;
    for (int d = l.ndim - 1; d >= 0; --d) {
      idx[d] = rest % l.sizes[d], rest /= l.sizes[d];
      for (int k = 0; k < NARGS; ++k) off[k] += idx[d] * l.strides[k][d];
    }
    const int inner = l.ndim - 1;
    int64_t step[NARGS];
    for (int k = 0; k < NARGS; ++k) step[k] = l.strides[k][inner];
    for (int64_t i = begin; i < end;) {
      const int64_t n = std::min(end - i, l.sizes[inner] - idx[inner]);
      run_at<NARGS, T, C0>(n, in, off, step, out + i, f);
      i += n;
      int d = inner;
      idx[d] += n;
      for (int k = 0; k < NARGS; ++k) off[k] += n * l.strides[k][d];
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
