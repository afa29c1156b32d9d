// The losses family's math (tinycuda/losses.h), shared by the CPU and CUDA
// kernels: LossMath<OP> for each op, in the accumulator type A (float;
// double for double), written the way ATen writes them (Loss.cpp,
// PointwiseOpsKernel.cpp, the composite losses' autograd) so they agree with
// torch to rounding:
//   kOperands                 the operands the math reads (the schema's first
//                             kOperands tensors; a later one, mse_loss's
//                             weight, is refused)
//   kGrads                    bit k: operand k has a gradient (tc_loss_grads)
//   kShape                    how the operand shapes agree (tc_loss_shape)
//   kKinds                    its kinds (dispatch_loss_kernel): kl_div's log_target,
//                             bce's pos_weight given or not, compiled into
//                             the kernels (a run-time flag in the element loop
//                             kept the CPU's from vectorizing: both sides of
//                             kl_div's ran, then a select)
//   f<KIND>(v, c)             the loss of one element, v[k] operand k's value
//                             (an optional operand not given reads 1)
//   df<KIND>(g, v, c, d)      d[k] = g d f / d v[k] for every operand
// triplet_margin_loss reduces rows first: its math is TripletMath below.
//
// A clamp (x < 0 ? 0 : x) keeps NaN, and passes the gradient where x >= 0,
// as torch's clamp_min.
#pragma once
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "internal.h"
#include "poly_math.h"
#include "reduce_math.h"  // NormMath, reduce_grad (triplet's norms), sign_of
#include "tinycuda/losses.h"

template <class A> struct LossCtx {
  A beta = 0, delta = 0, margin = 0, eps = 0;
  ReduceCtx<A> norm;  // triplet_margin_loss: p as vector_norm's ord (its kind, its scalar)
};

template <class A> TC_HD inline A clamp_min0(A x) { return x < A(0) ? A(0) : x; }
// log(sigmoid(x)) as ATen's log_sigmoid: min(x, 0) - log1p(e^-|x|)
template <class A> TC_HD inline A log_sigmoid(A x) {
  return (x < A(0) ? x : A(0)) - vmath::log1p_unit(vmath::exp(-std::abs(x)));
}

template <int OP> struct LossMath;
template <int OP> constexpr int kKinds = 1;

template <> struct LossMath<TC_LOSS_MSE_LOSS> {
  static constexpr int kOperands = 2, kGrads = 0b11, kShape = TC_LOSS_SHAPE_BROADCAST;
  template <int KIND, class A> TC_HD static A f(const A* v, const LossCtx<A>&) {
    const A d = v[0] - v[1];
    return d * d;
  }
  template <int KIND, class A> TC_HD static void df(A g, const A* v, const LossCtx<A>&, A* d) {
    d[0] = A(2) * (v[0] - v[1]) * g;
    d[1] = -d[0];
  }
};

template <> struct LossMath<TC_LOSS_L1_LOSS> {  // sign(0) = sign(NaN) = 0, as torch's abs gradient
  static constexpr int kOperands = 2, kGrads = 0b11, kShape = TC_LOSS_SHAPE_BROADCAST;
  template <int KIND, class A> TC_HD static A f(const A* v, const LossCtx<A>&) { return std::abs(v[0] - v[1]); }
  template <int KIND, class A> TC_HD static void df(A g, const A* v, const LossCtx<A>&, A* d) {
    d[0] = sign_of(v[0] - v[1]) * g;
    d[1] = -d[0];
  }
};

// beta = 0 is torch's l1_loss (F.smooth_l1_loss calls it): the same loss, sign(d) g
template <> struct LossMath<TC_LOSS_SMOOTH_L1_LOSS> {
  static constexpr int kOperands = 2, kGrads = 0b11, kShape = TC_LOSS_SHAPE_BROADCAST;
  template <int KIND, class A> TC_HD static A f(const A* v, const LossCtx<A>& c) {
    const A z = std::abs(v[0] - v[1]);
    return z < c.beta ? A(0.5) * z * z / c.beta : z - A(0.5) * c.beta;
  }
  template <int KIND, class A> TC_HD static void df(A g, const A* v, const LossCtx<A>& c, A* d) {
    const A x = v[0] - v[1];
    d[0] = c.beta == A(0) ? sign_of(x) * g : x <= -c.beta ? -g : x >= c.beta ? g : x * g / c.beta;
    d[1] = -d[0];
  }
};

template <> struct LossMath<TC_LOSS_HUBER_LOSS> {
  static constexpr int kOperands = 2, kGrads = 0b11, kShape = TC_LOSS_SHAPE_BROADCAST;
  template <int KIND, class A> TC_HD static A f(const A* v, const LossCtx<A>& c) {
    const A z = std::abs(v[0] - v[1]);
    return z < c.delta ? A(0.5) * z * z : c.delta * (z - A(0.5) * c.delta);
  }
  template <int KIND, class A> TC_HD static void df(A g, const A* v, const LossCtx<A>& c, A* d) {
    const A x = v[0] - v[1];
    d[0] = x <= -c.delta ? -g * c.delta : x >= c.delta ? g * c.delta : x * g;
    d[1] = -d[0];
  }
};

// v: input x, target t, weight w, pos_weight pw (KIND 1: given; torch's gradient formulas differ)
template <> constexpr int kKinds<TC_LOSS_BINARY_CROSS_ENTROPY_WITH_LOGITS> = 2;
template <> struct LossMath<TC_LOSS_BINARY_CROSS_ENTROPY_WITH_LOGITS> {
  static constexpr int kOperands = 4, kGrads = 0b0011, kShape = TC_LOSS_SHAPE_TARGET_AS_INPUT;
  template <int KIND, class A> TC_HD static A f(const A* v, const LossCtx<A>&) {
    const A x = v[0], t = v[1], lw = (v[3] - A(1)) * t + A(1);
    return ((A(1) - t) * x - lw * log_sigmoid(x)) * v[2];
  }
  template <int KIND, class A> TC_HD static void df(A g, const A* v, const LossCtx<A>& c, A* d) {
    const A x = v[0], t = v[1], gw = g * v[2];
    d[2] = d[3] = A(0);  // the weights get none
    if constexpr (KIND == 1) {
      const A pt = v[3] * t;
      d[0] = ((pt + A(1) - t) * vmath::sigmoid(x) - pt) * gw;
      d[1] = (log_sigmoid(-x) - log_sigmoid(x) * v[3]) * gw;
    } else {
      d[0] = (vmath::sigmoid(x) - t) * gw;
      d[1] = -x * gw;
    }
  }
};

// v: input x (log-probabilities), target t (KIND 1: log_target). The target's gradient is torch's xlogy(t, t)'s:
// xlogy(g, t), 0 where t = 0, plus g t / t (NaN at t = 0), then -x g
template <> constexpr int kKinds<TC_LOSS_KL_DIV> = 2;
template <> struct LossMath<TC_LOSS_KL_DIV> {
  static constexpr int kOperands = 2, kGrads = 0b11, kShape = TC_LOSS_SHAPE_BROADCAST;
  template <class A> TC_HD static A xlogy(A x, A y) {
    A r = x * vmath::log(y);
    r = x == A(0) ? A(0) : r;  // one select a statement: a chain in one expression left gcc a branch
    return y != y ? y : r;
  }
  template <int KIND, class A> TC_HD static A f(const A* v, const LossCtx<A>& c) {
    const A x = v[0], t = v[1];
    if constexpr (KIND == 1) return vmath::exp(t) * (t - x);
    else return xlogy(t, t) - t * x;
  }
  template <int KIND, class A> TC_HD static void df(A g, const A* v, const LossCtx<A>& c, A* d) {
    const A x = v[0], t = v[1];
    if constexpr (KIND == 1) {
      const A e = vmath::exp(t);
      d[0] = -e * g;
      d[1] = g * e * (t - x) + g * e;
    } else {
      d[0] = -t * g;
      d[1] = (t == A(0) ? A(0) : xlogy(g, t)) + g * t / t - x * g;
    }
  }
};

// v: input1, input2, target y
template <> struct LossMath<TC_LOSS_MARGIN_RANKING_LOSS> {
  static constexpr int kOperands = 3, kGrads = 0b111, kShape = TC_LOSS_SHAPE_SAME_NDIM;
  template <int KIND, class A> TC_HD static A f(const A* v, const LossCtx<A>& c) {
    return clamp_min0(-v[2] * (v[0] - v[1]) + c.margin);
  }
  template <int KIND, class A> TC_HD static void df(A g, const A* v, const LossCtx<A>& c, A* d) {
    const A diff = v[0] - v[1], a = -v[2] * diff + c.margin >= A(0) ? g : A(0);
    d[0] = -v[2] * a;
    d[1] = v[2] * a;
    d[2] = -diff * a;
  }
};

// v: input x, target y (compared with 1 and -1 only: no gradient)
template <> struct LossMath<TC_LOSS_HINGE_EMBEDDING_LOSS> {
  static constexpr int kOperands = 2, kGrads = 0b01, kShape = TC_LOSS_SHAPE_BROADCAST;
  // one select a statement (no && either): gcc left a branch, and a loop of it scalar, otherwise
  template <int KIND, class A> TC_HD static A f(const A* v, const LossCtx<A>& c) {
    const A h = clamp_min0(c.margin - v[0]);
    const A m = v[1] != A(1) ? h : A(0);
    const A x = v[1] != A(-1) ? v[0] : A(0);
    return m + x;
  }
  template <int KIND, class A> TC_HD static void df(A g, const A* v, const LossCtx<A>& c, A* d) {
    const A h = c.margin - v[0] >= A(0) ? -g : A(0);
    const A m = v[1] != A(1) ? h : A(0);
    const A x = v[1] != A(-1) ? g : A(0);
    d[0] = m + x;
    d[1] = A(0);
  }
};

// triplet_margin_loss: a row's three distances ||u - v + eps||_p over the last dim, as vector_norm's folds
// (NormMath of p's kind: two, one, or any finite p), then its loss and the gradient of each element. The
// distances are (a, p), (a, n), and with swap (p, n).
template <> struct LossMath<TC_LOSS_TRIPLET_MARGIN_LOSS> {
  static constexpr int kOperands = 3, kGrads = 0b111, kShape = TC_LOSS_SHAPE_ROWS;
};

template <int KIND, class A> struct TripletMath {
  using N = NormMath<KIND, A>;
  struct Sums { A ap, an, pn; };  // the three norms' states (sums: every kind here merges by +)

  static TC_HD Sums init() { return {A(0), A(0), A(0)}; }
  static TC_HD void add(Sums& s, A a, A p, A n, const LossCtx<A>& c) {
    typename N::State ap{s.ap}, an{s.an}, pn{s.pn};
    N::add(ap, a - p + c.eps, 0, c.norm);
    N::add(an, a - n + c.eps, 0, c.norm);
    N::add(pn, p - n + c.eps, 0, c.norm);
    s = {ap.s, an.s, pn.s};
  }
  static TC_HD Sums merge(Sums a, Sums b) { return {a.ap + b.ap, a.an + b.an, a.pn + b.pn}; }

  // A row's distances, its loss and the factors its elements' gradients take
  struct Row {
    A dp, dn, ds;     // d(a, p), d(a, n), d(p, n)
    A loss;
    A cn, cs;         // the gradient's share of d(a, n) and d(p, n) in min(d(a, n), d(p, n)) (torch's minimum)
    bool active;      // margin + dp - min(...) >= 0
  };
  static TC_HD Row row(const Sums& s, bool swap, const LossCtx<A>& c) {
    Row r;
    r.dp = N::finish({s.ap}, c.norm), r.dn = N::finish({s.an}, c.norm), r.ds = swap ? N::finish({s.pn}, c.norm) : A(0);
    A neg = r.dn;
    r.cn = A(1), r.cs = A(0);
    if (swap) {
      // torch.minimum: NaN wins; its gradient halves between equal ones, else goes to the smaller (a NaN
      // pair compares neither way: both take it, as torch's masked_fill leaves both)
      neg = r.dn != r.dn || r.ds != r.ds ? r.dn + r.ds : r.dn < r.ds ? r.dn : r.ds;
      r.cn = r.dn == r.ds ? A(0.5) : r.dn > r.ds ? A(0) : A(1);
      r.cs = r.dn == r.ds ? A(0.5) : r.dn < r.ds ? A(0) : A(1);
    }
    const A v = c.margin + r.dp - neg;
    r.loss = clamp_min0(v);
    r.active = v >= A(0);
    return r;
  }
  // the gradients of one element of the row for the row's factor g (zero where the row is not active)
  static TC_HD void df(A g, A a, A p, A n, const Row& r, const LossCtx<A>& c, A* d) {
    using Aux = AuxState<TC_REDUCE_VECTOR_NORM, A>;  // used by +-inf only, which p may not be
    const A wp = reduce_grad<TC_REDUCE_VECTOR_NORM>(g, a - p + c.eps, r.dp, Aux{}, c.norm);
    const A wn = reduce_grad<TC_REDUCE_VECTOR_NORM>(g * r.cn, a - n + c.eps, r.dn, Aux{}, c.norm);
    const A ws = r.cs == A(0) ? A(0) : reduce_grad<TC_REDUCE_VECTOR_NORM>(g * r.cs, p - n + c.eps, r.ds, Aux{}, c.norm);
    d[0] = wp - wn;
    d[1] = -wp - ws;
    d[2] = wn + ws;
  }
};

// Calls f(integral_constant<int, OP>) for the op.
template <class F, int... OPS> tc_status dispatch_loss(int op, F&& f, std::integer_sequence<int, OPS...>) {
  tc_status s = TC_OK;
  const bool hit = ((op == OPS ? (s = f(std::integral_constant<int, OPS>{}), true) : false) || ...);
  return hit ? s : tc_fail(TC_ERR_INTERNAL, "loss: op %d has no kernel", op);
}
template <class F> tc_status dispatch_loss(int op, F&& f) {
  return dispatch_loss(op, f, std::make_integer_sequence<int, TC_LOSS_COUNT>{});
}

// Calls f(integral_constant<int, KIND>) for triplet_margin_loss's p: vector_norm's kinds two, one, any other
// finite p (loss_check refuses +-inf).
template <class F> tc_status dispatch_norm(int kind, F&& f) {
  using std::integral_constant;
  switch (kind) {
    case kNormTwo: return f(integral_constant<int, kNormTwo>{});
    case kNormOne: return f(integral_constant<int, kNormOne>{});
    case kNormZero: return f(integral_constant<int, kNormZero>{});
    case kNormP: return f(integral_constant<int, kNormP>{});
  }
  return tc_fail(TC_ERR_INTERNAL, "triplet_margin_loss: norm kind %d has no kernel", kind);
}

template <class A> LossCtx<A> loss_ctx(const tc_loss_params* p);

// Calls f(OP, KIND) (integral constants): the op and its kind, compiled into its kernels: kl_div's log_target,
// bce's pos_weight given, triplet_margin_loss's norm kind of p (dispatch_norm); 0 for the others
template <class A, class F> tc_status dispatch_loss_kernel(const tc_loss_params* p, F&& f) {
  using std::integral_constant;
  return dispatch_loss(p->op, [&](auto k) -> tc_status {
    constexpr int OP = decltype(k)::value;
    if constexpr (OP == TC_LOSS_TRIPLET_MARGIN_LOSS)
      return dispatch_norm(loss_ctx<A>(p).norm.kind, [&](auto kind) { return f(k, kind); });
    else if constexpr (kKinds<OP> == 2)
      return (OP == TC_LOSS_KL_DIV ? p->log_target != 0 : p->operands[3] != nullptr)
                 ? f(k, integral_constant<int, 1>{})
                 : f(k, integral_constant<int, 0>{});
    else
      return f(k, integral_constant<int, 0>{});
  });
}

template <class A> LossCtx<A> loss_ctx(const tc_loss_params* p) {
  LossCtx<A> c;
  c.beta = A(p->beta), c.delta = A(p->delta), c.margin = A(p->margin), c.eps = A(p->eps);
  c.norm = reduce_ctx<A>(TC_REDUCE_VECTOR_NORM, p->p, 0);
  return c;
}

// The operands' layout, collapsed (an operand not given steps nowhere)
inline StridedLayout<4> loss_layout(const tc_loss_params* p) {
  static const int64_t none[8] = {};
  const int64_t* strides[4];
  for (int k = 0; k < 4; ++k) strides[k] = p->operands[k] ? p->strides[k] : none;
  return coalesce<4>(p->ndim, p->sizes, strides);
}

// triplet_margin_loss's rows: sizes[ndim - 1] elements each (a 0-dim shape: one row of one)
struct LossRows {
  int64_t rows, cols;
};
inline LossRows loss_rows(const tc_loss_params* p) {
  if (p->ndim == 0) return {1, 1};
  int64_t rows = 1;
  for (int d = 0; d < p->ndim - 1; ++d) rows *= p->sizes[d];
  return {rows, p->sizes[p->ndim - 1]};
}

// Names and checks both devices run (csrc/shared/losses.cpp).
const char* loss_name(int op, bool backward = false);
tc_status loss_check(const tc_loss_params* p, bool backward);
// An entry point's start: loss_check, then *name the op's name, or NULL where there is nothing to compute
// (reduction NONE of no element)
tc_status loss_begin(const tc_loss_params* p, bool backward, const char** name);
// elements the loss has: one an element, or a row for triplet_margin_loss
int64_t loss_count(const tc_loss_params* p);
// what the loss's sum (the gradient) is divided by: the count (MEAN), batch (BATCHMEAN), 1 (SUM, NONE)
double loss_divisor(const tc_loss_params* p);
