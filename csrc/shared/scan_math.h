// The scan family's math, shared by the CPU and CUDA kernels. Every op, and
// every op's gradient, is one scan problem: a struct with
//   State                       what a prefix folds into
//   identity()                  the empty prefix
//   combine(a, b)               a, the earlier part in scan order, then b
//                               (associative; not commutative for ProdGrad)
//   element(a, e, s)            the state of one element: e its offset in the
//                               arrays, s its position in scan order
//   finish(a, e, s, prefix)     the output at e from the prefix there (inclusive,
//                               or exclusive where the flag says so), in A
// Problems read their own arrays (ScanArgs), so a gradient can read x, y and g
// at shifted positions; the kernels only walk rows and fold states.
//
// Include the backend's to_acc (kit/cpu_utils.h, kit/cuda_utils.cuh) first:
// element() converts with it.
#pragma once
#include <cstdint>

#include "internal.h"
#include "reduce_math.h"  // the (max, sum e^(x - max)) state of logsumexp, r_exp, r_log
#include "tinycuda/scan.h"

template <class T> struct ScanArgs {
  const T* x;        // the forward's input (for cumsum's gradient: g)
  const T* g;        // grad_y (gradients)
  const T* y;        // the forward's output (gradients)
  int64_t n;         // the scanned length
  int64_t step;      // offset of the next element in scan order (+-inner)
  bool exclusive;
};

template <class A> struct SumScan {
  using State = A;
  static TC_HD State identity() { return A(0); }
  static TC_HD State combine(State a, State b) { return a + b; }
  template <class T> static TC_HD State element(const ScanArgs<T>& a, int64_t e, int64_t) { return to_acc(a.x[e]); }
  template <class T> static TC_HD A finish(const ScanArgs<T>&, int64_t, int64_t, State p) { return p; }
};

template <class A> struct ProdScan {
  using State = A;
  static TC_HD State identity() { return A(1); }
  static TC_HD State combine(State a, State b) { return a * b; }
  template <class T> static TC_HD State element(const ScanArgs<T>& a, int64_t e, int64_t) { return to_acc(a.x[e]); }
  template <class T> static TC_HD A finish(const ScanArgs<T>&, int64_t, int64_t, State p) { return p; }
};

// the state and its merge are logsumexp's (an +inf element makes +inf, NaN stays)
template <class A> struct LogSumExpScan {
  using M = ReduceMath<TC_REDUCE_LOGSUMEXP, A>;
  using State = typename M::State;
  static TC_HD State identity() { return M::init(ReduceCtx<A>{}, A(0)); }
  static TC_HD State combine(State a, State b) { return M::merge(a, b); }
  static TC_HD State of(A v) {
    State s = identity();
    M::add(s, v, 0, ReduceCtx<A>{});
    return s;
  }
  template <class T> static TC_HD State element(const ScanArgs<T>& a, int64_t e, int64_t) { return of(to_acc(a.x[e])); }
  template <class T> static TC_HD A finish(const ScanArgs<T>&, int64_t, int64_t, State p) {
    return M::finish(p, ReduceCtx<A>{});
  }
};

// cumprod's gradient as a scan in the other direction of affine maps
// t -> T + X t: the prefix at j is (the product of the x it spans, S_j of
// tinycuda/scan.h). Inclusive: element i is (x of the forward's next element,
// g_i), so S_j takes g_i times the x strictly after j up to i; exclusive: (x_i,
// g_i), the x strictly between. P_j, the product before j, is y_(j-1) (y_j
// when exclusive): no division anywhere, so zeros need no special case.
template <class A> struct ProdGradScan {
  struct State { A x, t; };
  static TC_HD State identity() { return {A(1), A(0)}; }
  static TC_HD State combine(State a, State b) { return {a.x * b.x, b.t + b.x * a.t}; }
  template <class T> static TC_HD State element(const ScanArgs<T>& a, int64_t e, int64_t s) {
    // the forward's next element is this scan's previous one (e - step); none at s = 0
    const A x = a.exclusive ? to_acc(a.x[e]) : s == 0 ? A(1) : to_acc(a.x[e - a.step]);
    return {x, to_acc(a.g[e])};
  }
  template <class T> static TC_HD A finish(const ScanArgs<T>& a, int64_t e, int64_t s, State p) {
    // the forward's previous element is this scan's next one (e + step); none at s = n - 1
    const A before = a.exclusive ? to_acc(a.y[e]) : s == a.n - 1 ? A(1) : to_acc(a.y[e + a.step]);
    return before * p.t;
  }
};

// logcumsumexp's gradient (torch's): two log-sum-exp scans in the other
// direction, of log|g_i| - y_i over the positive and the negative g_i
// (a zero or NaN g_i enters neither, as torch's)
template <class A> struct LogSumExpGradScan {
  using L = LogSumExpScan<A>;
  struct State { typename L::State pos, neg; };
  static TC_HD State identity() { return {L::identity(), L::identity()}; }
  static TC_HD State combine(State a, State b) { return {L::combine(a.pos, b.pos), L::combine(a.neg, b.neg)}; }
  template <class T> static TC_HD State element(const ScanArgs<T>& a, int64_t e, int64_t) {
    const A g = to_acc(a.g[e]), v = r_log(r_abs(g)) - to_acc(a.y[e]);
    return {g > A(0) ? L::of(v) : L::identity(), g < A(0) ? L::of(v) : L::identity()};
  }
  template <class T> static TC_HD A finish(const ScanArgs<T>& a, int64_t e, int64_t s, State p) {
    const A x = to_acc(a.x[e]);  // an empty side's log-sum-exp is -inf: e^-inf = 0
    return r_exp(x + L::template finish<T>(a, e, s, p.pos)) - r_exp(x + L::template finish<T>(a, e, s, p.neg));
  }
};

// The problem of a forward op (cumsum's gradient is cumsum's problem on g).
// Calls f(P{}) with P the problem type.
template <class A, class F> tc_status dispatch_scan(int op, bool backward, F&& f) {
  switch (op) {
    case TC_SCAN_CUMSUM: return f(SumScan<A>{});
    case TC_SCAN_CUMPROD: return backward ? f(ProdGradScan<A>{}) : f(ProdScan<A>{});
    case TC_SCAN_LOGCUMSUMEXP: return backward ? f(LogSumExpGradScan<A>{}) : f(LogSumExpScan<A>{});
  }
  return tc_fail(TC_ERR_INTERNAL, "scan: op %d has no kernel", op);
}

// Where row r (of outer * inner) starts in scan order, and its step: the
// rows of [outer, n, inner] are its columns (o, k), n apart by inner.
struct ScanRow {
  int64_t first, step;
};
TC_HD inline ScanRow scan_row(int64_t r, int64_t n, int64_t inner, bool reverse) {
  const int64_t o = r / inner, k = r - o * inner, base = o * n * inner + k;
  return reverse ? ScanRow{base + (n - 1) * inner, -inner} : ScanRow{base, inner};
}

// Names and checks both devices run (csrc/shared/scan.cpp).
const char* scan_name(int op, bool backward = false);
tc_status scan_check(const tc_scan_params* p);
tc_status scan_check(const tc_scan_backward_params* p);
// The state's size in bytes of the problem the op (its gradient) scans with.
size_t scan_state_bytes(tc_dtype dtype, int op, bool backward);
