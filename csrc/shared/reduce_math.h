// The reduce family's math, shared by the CPU and CUDA kernels: one struct
// per op (tinycuda/reduce.h) with
//   State                    what a slice folds into
//   init(c, target)          the empty state (target: the output's value, for
//                            the backward's tie counts; ignored by the others)
//   add(s, x, r, c)          x, the slice's element number r, enters
//   merge(a, b)              a and b of disjoint parts of a slice; equal
//                            candidates keep the lower index, so the result
//                            does not depend on how the slice was cut
//   finish(s, c)             the output (an index for argmax / argmin)
// and the layout both devices walk: x's dims split into the kept ones (the
// output's, contiguous) and the reduced ones, each collapsed to the fewest dims.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <type_traits>
#include <utility>

#include "elementwise_check.h"
#include "internal.h"
#include "tinycuda/reduce.h"

// Internal ops of the backward: how many x (|x|) of a slice equal its output.
constexpr int kReduceCountEq = TC_REDUCE_COUNT;
constexpr int kReduceCountAbsEq = TC_REDUCE_COUNT + 1;
// prod's: a slice's zeros, NaNs, and the product of its other x
constexpr int kReduceProdNonzero = TC_REDUCE_COUNT + 2;

// vector_norm's ord, sorted once on the host (reduce_ctx): the forward folds
// with one struct a kind (NormMath), the gradient switches on it.
enum NormKind : int { kNormTwo, kNormOne, kNormInf, kNormNegInf, kNormZero, kNormP };

template <class A> struct ReduceCtx {
  int64_t n = 0;     // elements a slice holds
  A scalar = 0;      // correction (var, std) or ord (vector_norm)
  int kind = kNormTwo;
};

// Math in A's own precision on both sides: on the host, unqualified exp(float)
// is C's exp(double).
#ifdef __CUDA_ARCH__
#define TC_MATH(f) ::f
#else
#define TC_MATH(f) std::f
#endif
template <class A> TC_HD inline A r_exp(A v) { return TC_MATH(exp)(v); }
template <class A> TC_HD inline A r_log(A v) { return TC_MATH(log)(v); }
template <class A> TC_HD inline A r_sqrt(A v) { return TC_MATH(sqrt)(v); }
template <class A> TC_HD inline A r_abs(A v) { return TC_MATH(fabs)(v); }
template <class A> TC_HD inline A r_pow(A v, A p) { return TC_MATH(pow)(v, p); }
#undef TC_MATH

template <class A> TC_HD inline bool is_nan(A v) { return v != v; }
// x beats v as a maximum: larger, or the first NaN (NaN is the largest, as in torch)
template <class A> TC_HD inline bool beats_max(A x, A v) { return x > v || (is_nan(x) && !is_nan(v)); }
template <class A> TC_HD inline bool beats_min(A x, A v) { return x < v || (is_nan(x) && !is_nan(v)); }

template <int OP, class A, class = void> struct ReduceMath;

template <class A> struct SumMath {
  struct State { A s; };
  static TC_HD State init(const ReduceCtx<A>&, A) { return {A(0)}; }
  static TC_HD State merge(State a, State b) { return {a.s + b.s}; }
};

template <class A> struct ReduceMath<TC_REDUCE_SUM, A> : SumMath<A> {
  using State = typename SumMath<A>::State;
  static TC_HD void add(State& s, A x, int64_t, const ReduceCtx<A>&) { s.s += x; }
  static TC_HD A finish(State s, const ReduceCtx<A>&) { return s.s; }
};

template <class A> struct ReduceMath<TC_REDUCE_MEAN, A> : SumMath<A> {
  using State = typename SumMath<A>::State;
  static TC_HD void add(State& s, A x, int64_t, const ReduceCtx<A>&) { s.s += x; }
  static TC_HD A finish(State s, const ReduceCtx<A>& c) { return s.s / A(c.n); }  // n = 0: NaN, as torch
};

template <class A> struct ReduceMath<TC_REDUCE_PROD, A> {
  struct State { A p; };
  static TC_HD State init(const ReduceCtx<A>&, A) { return {A(1)}; }
  static TC_HD void add(State& s, A x, int64_t, const ReduceCtx<A>&) { s.p *= x; }
  static TC_HD State merge(State a, State b) { return {a.p * b.p}; }
  static TC_HD A finish(State s, const ReduceCtx<A>&) { return s.p; }
};

// prod's gradient needs each element's product of the others: the slice's
// zeros and NaNs counted apart from the product of the rest
template <class A> struct ReduceMath<kReduceProdNonzero, A> {
  struct State { A p, zeros, nans; };
  static TC_HD State init(const ReduceCtx<A>&, A) { return {A(1), A(0), A(0)}; }
  static TC_HD void add(State& s, A x, int64_t, const ReduceCtx<A>&) {
    if (x == A(0)) s.zeros += A(1);
    else if (is_nan(x)) s.nans += A(1);
    else s.p *= x;
  }
  static TC_HD State merge(State a, State b) { return {a.p * b.p, a.zeros + b.zeros, a.nans + b.nans}; }
  static TC_HD A finish(State s, const ReduceCtx<A>&) { return s.p; }  // unused: the backward reads the state
};

template <bool MAX, class A> struct ExtremumMath {
  struct State { A v; };
  static TC_HD State init(const ReduceCtx<A>&, A) { return {MAX ? A(-INFINITY) : A(INFINITY)}; }
  static TC_HD bool beats(A x, A v) { return MAX ? beats_max(x, v) : beats_min(x, v); }
  static TC_HD void add(State& s, A x, int64_t, const ReduceCtx<A>&) { s.v = beats(x, s.v) ? x : s.v; }
  static TC_HD State merge(State a, State b) { return beats(b.v, a.v) ? b : a; }
  static TC_HD A finish(State s, const ReduceCtx<A>&) { return s.v; }
};
template <class A> struct ReduceMath<TC_REDUCE_AMAX, A> : ExtremumMath<true, A> {};
template <class A> struct ReduceMath<TC_REDUCE_AMIN, A> : ExtremumMath<false, A> {};

// (m, s) with s = sum e^(x - m); m = +-inf or NaN are kept as torch's
// logsumexp gives them: an +inf element makes +inf, all -inf (or none) -inf.
template <class A> struct ReduceMath<TC_REDUCE_LOGSUMEXP, A> {
  struct State { A m, s; };
  static TC_HD State init(const ReduceCtx<A>&, A) { return {A(-INFINITY), A(0)}; }
  static TC_HD void add(State& st, A x, int64_t, const ReduceCtx<A>&) {
    if (x == st.m) {  // also +inf after +inf, which x - m would make NaN
      st.s += A(1);
    } else if (x > st.m || is_nan(x)) {
      st.s = st.s * r_exp(st.m - x) + A(1);  // m = -inf: e^-inf = 0; x NaN: NaN from here on
      st.m = x;
    } else if (!is_nan(st.m)) {
      st.s += r_exp(x - st.m);
    }
  }
  static TC_HD State merge(State a, State b) {
    if (is_nan(a.m) || b.m == A(-INFINITY)) return a;
    if (is_nan(b.m) || a.m == A(-INFINITY)) return b;
    if (a.m == b.m) return {a.m, a.s + b.s};
    return a.m > b.m ? State{a.m, a.s + b.s * r_exp(b.m - a.m)} : State{b.m, b.s + a.s * r_exp(a.m - b.m)};
  }
  static TC_HD A finish(State st, const ReduceCtx<A>&) {
    return st.m == A(INFINITY) || st.m == A(-INFINITY) || is_nan(st.m) ? st.m : st.m + r_log(st.s);
  }
};

// Welford's running (count, mean, M2); Chan's formula merges two.
template <class A> struct WelfordMath {
  struct State { int64_t n; A mean, m2; };
  static TC_HD State init(const ReduceCtx<A>&, A) { return {0, A(0), A(0)}; }
  static TC_HD void add(State& s, A x, int64_t, const ReduceCtx<A>&) {
    ++s.n;
    const A d = x - s.mean;
    s.mean += d / A(s.n);
    s.m2 += d * (x - s.mean);
  }
  static TC_HD State merge(State a, State b) {
    if (b.n == 0) return a;
    if (a.n == 0) return b;
    const int64_t n = a.n + b.n;
    const A d = b.mean - a.mean, wb = A(b.n) / A(n);
    return {n, a.mean + d * wb, a.m2 + b.m2 + d * d * A(a.n) * wb};
  }
  static TC_HD A variance(State s, const ReduceCtx<A>& c) {
    const A dof = A(s.n) - c.scalar;
    return s.m2 / (dof > A(0) ? dof : A(0));
  }
};
template <class A> struct ReduceMath<TC_REDUCE_VAR, A> : WelfordMath<A> {
  static TC_HD A finish(typename WelfordMath<A>::State s, const ReduceCtx<A>& c) {
    return WelfordMath<A>::variance(s, c);
  }
};
template <class A> struct ReduceMath<TC_REDUCE_STD, A> : WelfordMath<A> {
  static TC_HD A finish(typename WelfordMath<A>::State s, const ReduceCtx<A>& c) {
    return r_sqrt(WelfordMath<A>::variance(s, c));
  }
};

// vector_norm: sum |x|^p, or the max (min) |x| for p = inf (-inf). Its forward
// runs one struct an ord kind (reduce_ctx sorts ord into one), so the element
// update holds no branch on ord: with the kind a run-time switch, the CPU loop
// did not vectorize (11x torch's time over rows of 2048 fp32).
template <int KIND, class A> struct NormMath {
  struct State { A s; };
  static TC_HD State init(const ReduceCtx<A>&, A) { return {KIND == kNormNegInf ? A(INFINITY) : A(0)}; }
  static TC_HD void add(State& s, A x, int64_t, const ReduceCtx<A>& c) {
    const A a = r_abs(x);
    if constexpr (KIND == kNormTwo) s.s += x * x;
    else if constexpr (KIND == kNormOne) s.s += a;
    else if constexpr (KIND == kNormInf) s.s = beats_max(a, s.s) ? a : s.s;
    else if constexpr (KIND == kNormNegInf) s.s = beats_min(a, s.s) ? a : s.s;
    else if constexpr (KIND == kNormZero) s.s += a != A(0) ? A(1) : A(0);  // NaN != 0 counts, as torch's
    else s.s += r_pow(a, c.scalar);
  }
  static TC_HD State merge(State a, State b) {
    if constexpr (KIND == kNormInf) return beats_max(b.s, a.s) ? b : a;
    else if constexpr (KIND == kNormNegInf) return beats_min(b.s, a.s) ? b : a;
    else return {a.s + b.s};
  }
  static TC_HD A finish(State s, const ReduceCtx<A>& c) {
    if constexpr (KIND == kNormTwo) return r_sqrt(s.s);
    else if constexpr (KIND == kNormP) return r_pow(s.s, A(1) / c.scalar);
    else return s.s;
  }
};
// the forward of vector_norm with ord kind K is op kReduceNormFirst + K
constexpr int kReduceNormFirst = TC_REDUCE_COUNT + 3;
template <int OP, class A>
struct ReduceMath<OP, A, std::enable_if_t<(OP >= kReduceNormFirst && OP <= kReduceNormFirst + kNormP)>>
    : NormMath<OP - kReduceNormFirst, A> {};
// vector_norm's own entry: its state's size (the workspace) and its gradient (reduce_grad)
template <class A> struct ReduceMath<TC_REDUCE_VECTOR_NORM, A> { using State = typename NormMath<kNormTwo, A>::State; };

template <bool MAX, class A> struct ArgMath {
  struct State { A v; int64_t i; };  // i < 0: empty
  static TC_HD State init(const ReduceCtx<A>&, A) { return {A(0), -1}; }
  static TC_HD bool beats(A x, A v) { return MAX ? beats_max(x, v) : beats_min(x, v); }
  static TC_HD void add(State& s, A x, int64_t r, const ReduceCtx<A>&) {
    if (s.i < 0 || beats(x, s.v)) s = {x, r};
  }
  static TC_HD State merge(State a, State b) {
    if (a.i < 0) return b;
    if (b.i < 0 || beats(a.v, b.v)) return a;
    if (beats(b.v, a.v)) return b;
    return b.i < a.i ? b : a;  // equal (or both NaN): the first
  }
  static TC_HD int64_t finish(State s, const ReduceCtx<A>&) { return s.i; }
};
template <class A> struct ReduceMath<TC_REDUCE_ARGMAX, A> : ArgMath<true, A> {};
template <class A> struct ReduceMath<TC_REDUCE_ARGMIN, A> : ArgMath<false, A> {};
// max, min: argmax's (argmin's) fold; the output is the element's value, and the
// kernels write its index (the state's i) to the params' indices beside it
template <bool MAX, class A> struct ValueIndexMath : ArgMath<MAX, A> {
  using State = typename ArgMath<MAX, A>::State;
  static TC_HD A finish(State s, const ReduceCtx<A>&) { return s.v; }
};
template <class A> struct ReduceMath<TC_REDUCE_MAX, A> : ValueIndexMath<true, A> {};
template <class A> struct ReduceMath<TC_REDUCE_MIN, A> : ValueIndexMath<false, A> {};

// The backward's tie counts: how many x (|x|) of a slice equal `target`, its output.
template <class A> struct CountState { A n, target; };
template <bool ABS, class A> struct CountEqMath {
  using State = CountState<A>;
  static TC_HD State init(const ReduceCtx<A>&, A target) { return {A(0), target}; }
  static TC_HD void add(State& s, A x, int64_t, const ReduceCtx<A>&) {
    if ((ABS ? r_abs(x) : x) == s.target) s.n += A(1);
  }
  static TC_HD State merge(State a, State b) { return {a.n + b.n, a.target}; }
  static TC_HD A finish(State s, const ReduceCtx<A>&) { return s.n; }
};
template <class A> struct ReduceMath<kReduceCountEq, A> : CountEqMath<false, A> {};
template <class A> struct ReduceMath<kReduceCountAbsEq, A> : CountEqMath<true, A> {};

template <int OP> constexpr bool kArgOp = OP == TC_REDUCE_ARGMAX || OP == TC_REDUCE_ARGMIN;
// max, min: a value and its index (the params' indices)
constexpr bool reduce_value_index(int op) { return op == TC_REDUCE_MAX || op == TC_REDUCE_MIN; }
template <int OP> constexpr bool kValueIndex = reduce_value_index(OP);
// the slice's element number r is the row-major index over the reduced dims, an output
constexpr bool reduce_indexes(int op) {
  return op == TC_REDUCE_ARGMAX || op == TC_REDUCE_ARGMIN || reduce_value_index(op);
}
template <int OP> constexpr bool kNeedsTarget = OP == kReduceCountEq || OP == kReduceCountAbsEq;

// Calls f(integral_constant<int, OP>) for a public op (OP in [0, TC_REDUCE_COUNT)).
template <class F, int... OPS>
tc_status dispatch_reduce(int op, F&& f, std::integer_sequence<int, OPS...>) {
  tc_status s = TC_OK;
  const bool hit = ((op == OPS ? (s = f(std::integral_constant<int, OPS>{}), true) : false) || ...);
  return hit ? s : tc_fail(TC_ERR_INTERNAL, "reduce: op %d has no kernel", op);
}
template <class F> tc_status dispatch_reduce(int op, F&& f) {
  return dispatch_reduce(op, f, std::make_integer_sequence<int, TC_REDUCE_COUNT>{});
}

// The forward's dispatch: the public op, but vector_norm's fold by its ord kind.
template <class F> tc_status dispatch_forward(int op, int kind, F&& f) {
  return dispatch_reduce(op, [&](auto k) -> tc_status {
    if constexpr (decltype(k)::value != TC_REDUCE_VECTOR_NORM) {
      return f(k);
    } else {
      return dispatch_reduce(kind, [&](auto n) -> tc_status {
        constexpr int K = decltype(n)::value;
        if constexpr (K <= kNormP) return f(std::integral_constant<int, kReduceNormFirst + K>{});
        else return tc_fail(TC_ERR_INTERNAL, "vector_norm: ord kind %d has no kernel", K);
      });
    }
  });
}

// Calls f(integral_constant<int, OP>) for an aux op of the backward (reduce_aux_op).
template <class F> tc_status dispatch_aux(int op, F&& f) {
  using std::integral_constant;
  switch (op) {
    case TC_REDUCE_MEAN: return f(integral_constant<int, TC_REDUCE_MEAN>{});
    case kReduceCountEq: return f(integral_constant<int, kReduceCountEq>{});
    case kReduceCountAbsEq: return f(integral_constant<int, kReduceCountAbsEq>{});
    case kReduceProdNonzero: return f(integral_constant<int, kReduceProdNonzero>{});
  }
  return tc_fail(TC_ERR_INTERNAL, "reduce: aux op %d has no kernel", op);
}

// ---------------------------------------------------------------------------
// layout

// x's dims split in two, each collapsed: `kept` walks the outputs (contiguous
// in y, in order; strides[0] are x's), `red` one slice. For argmax, argmin, max
// and min the slice's element number r is the row-major index over the reduced dims,
// their answer; every other op may fold a slice in any order, so its reduced
// dims are sorted by falling |stride| first (stable): a transposed or
// channels-last x then reads its slices in memory order (a full mean of a
// transposed matrix: stride-1 runs, not 32 KB steps a lane).
struct ReduceLayout {
  StridedLayout<1> kept, red;
  int64_t outputs() const { return kept.n; }
  int64_t slice() const { return red.n; }
  // the columns layout: the kept dims end in a stride-1 dim and the reduced ones
  // do not (mean over dim 0), so adjacent outputs are adjacent in x
  bool columns() const {
    auto unit_inner = [](const StridedLayout<1>& l) { return l.ndim && l.strides[0][l.ndim - 1] == 1; };
    return unit_inner(kept) && !unit_inner(red) && outputs() > 1;
  }
};

inline ReduceLayout reduce_layout(int ndim, const int64_t* sizes, const int64_t* x_strides, unsigned mask,
                                  bool memory_order) {
  int64_t ks[8], kt[8], rs[8], rt[8];
  int nk = 0, nr = 0;
  for (int d = 0; d < ndim; ++d) {
    if (mask >> d & 1u) rs[nr] = sizes[d], rt[nr++] = x_strides[d];
    else ks[nk] = sizes[d], kt[nk++] = x_strides[d];
  }
  for (int i = 1; memory_order && i < nr; ++i)  // insertion sort: stable, at most 8 dims
    for (int j = i; j > 0 && std::abs(rt[j - 1]) < std::abs(rt[j]); --j)
      std::swap(rs[j - 1], rs[j]), std::swap(rt[j - 1], rt[j]);
  const int64_t* k[1] = {kt};
  const int64_t* r[1] = {rt};
  return {coalesce<1>(nk, ks, k), coalesce<1>(nr, rs, r)};
}

// the forward's layout
inline ReduceLayout reduce_layout(const tc_reduce_params* p) {
  return reduce_layout(p->ndim, p->sizes, p->x_strides, p->reduce_mask, !reduce_indexes(p->op));
}

// The x offset of element `i` of a collapsed layout (one division a dim).
TC_HD inline int64_t layout_offset(const StridedLayout<1>& l, int64_t i) {
  int64_t off = 0;
  for (int d = l.ndim - 1; d > 0; --d) {
    const int64_t q = i / l.sizes[d];
    off += (i - q * l.sizes[d]) * l.strides[0][d];
    i = q;
  }
  return l.ndim ? off + i * l.strides[0][0] : 0;
}

template <class A> ReduceCtx<A> reduce_ctx(int op, double scalar, int64_t n) {
  ReduceCtx<A> c;
  c.n = n, c.scalar = A(scalar);
  if (op == TC_REDUCE_VECTOR_NORM) {
    c.kind = scalar == 2 ? kNormTwo : scalar == 1 ? kNormOne : scalar == INFINITY ? kNormInf
           : scalar == -INFINITY ? kNormNegInf : scalar == 0 ? kNormZero : kNormP;
  }
  return c;
}

// Names and checks both devices run (csrc/shared/reduce.cpp).
const char* reduce_name(int op, bool backward = false);
tc_status reduce_check(const tc_reduce_params* p);
tc_status reduce_check(const tc_reduce_backward_params* p);
// the backward's layout: x contiguous in sizes
ReduceLayout reduce_backward_layout(const tc_reduce_backward_params* p);
// the backward's walk over x (contiguous), each element's output through y's
// strides broadcast over x's shape (0 along a reduced dim), collapsed
StridedLayout<1> reduce_grad_layout(const tc_reduce_backward_params* p);
// The reduction the backward runs first (var's mean, amax's tie counts, prod's
// zeros) into the start of its workspace: one unfinished state an output,
// reduce_aux_bytes long; -1 for none. reduce_grad reads the state.
int reduce_aux_op(int op, double scalar);
size_t reduce_aux_bytes(tc_dtype dtype, int op, int64_t outputs);
// the state type of the aux op of OP (a placeholder where it has none)
template <int OP, class A> struct AuxOf { struct State { A unused; }; };
template <class A> struct AuxOf<TC_REDUCE_VAR, A> { using State = typename ReduceMath<TC_REDUCE_MEAN, A>::State; };
template <class A> struct AuxOf<TC_REDUCE_STD, A> { using State = typename ReduceMath<TC_REDUCE_MEAN, A>::State; };
template <class A> struct AuxOf<TC_REDUCE_AMAX, A> { using State = typename ReduceMath<kReduceCountEq, A>::State; };
template <class A> struct AuxOf<TC_REDUCE_AMIN, A> { using State = typename ReduceMath<kReduceCountEq, A>::State; };
template <class A> struct AuxOf<TC_REDUCE_VECTOR_NORM, A> { using State = typename ReduceMath<kReduceCountEq, A>::State; };
template <class A> struct AuxOf<TC_REDUCE_PROD, A> { using State = typename ReduceMath<kReduceProdNonzero, A>::State; };
template <int OP, class A> using AuxState = typename AuxOf<OP, A>::State;

// ---------------------------------------------------------------------------
// gradients (tinycuda/reduce.h): one element's, from its output's g and y and
// the aux value (mean, tie count)
template <class A> TC_HD inline A sign_of(A x) { return x > A(0) ? A(1) : x < A(0) ? A(-1) : A(0); }  // NaN: 0, as torch.sign

template <int OP, class A>
TC_HD inline A reduce_grad(A g, A x, A y, const AuxState<OP, A>& aux, const ReduceCtx<A>& c) {
  if constexpr (OP == TC_REDUCE_SUM) {
    return g;
  } else if constexpr (OP == TC_REDUCE_MEAN) {
    return g / A(c.n);
  } else if constexpr (OP == TC_REDUCE_PROD) {
    if (aux.zeros == A(0)) return g * y / x;  // torch's, where the slice holds no zero
    // else g times the product of the others: 0 for a zero among them, NaN for a NaN
    const A zeros = aux.zeros - (x == A(0) ? A(1) : A(0)), nans = aux.nans - (is_nan(x) ? A(1) : A(0));
    if (nans > A(0)) return A(NAN);
    const A others = x == A(0) || is_nan(x) ? aux.p : aux.p / x;  // aux.p holds x where x is neither
    return zeros > A(0) ? g * others * A(0) : g * others;
  } else if constexpr (OP == TC_REDUCE_AMAX || OP == TC_REDUCE_AMIN) {
    return (x == y ? A(1) : A(0)) * (g / aux.n);  // torch's mask * (g / k): NaN where k = 0 (y NaN)
  } else if constexpr (OP == TC_REDUCE_LOGSUMEXP) {
    return g * r_exp(x - y);
  } else if constexpr (OP == TC_REDUCE_VAR) {
    return A(2) * g * (x - aux.s / A(c.n)) / (A(c.n) - c.scalar);  // torch's: dof not clamped here
  } else if constexpr (OP == TC_REDUCE_STD) {
    return y == A(0) ? A(0) : g * (x - aux.s / A(c.n)) / ((A(c.n) - c.scalar) * y);
  } else {
    static_assert(OP == TC_REDUCE_VECTOR_NORM, "argmax, argmin have no gradient");
    switch (c.kind) {
      case kNormZero: return A(0);
      case kNormOne: return g * sign_of(x);
      case kNormInf: case kNormNegInf: return r_abs(x) == y ? sign_of(x) * g / aux.n : A(0);
      case kNormTwo: return y == A(0) ? A(0) : g * x / y;
      default:  // sign(x) |x|^(p-1): 0 at x = 0 (|x|^(p-2) x there is 0 inf), as torch's
        return y == A(0) || x == A(0) ? A(0) : sign_of(x) * r_pow(r_abs(x), c.scalar - A(1)) * g / r_pow(y, c.scalar - A(1));
    }
  }
}
