// losses family, CPU: torch.nn.functional's losses with their reductions
// (tinycuda/losses.h; the math, shared with CUDA, in shared/losses_math.h).
//
// The elementwise losses walk the operands' broadcast shape in tiles of
// kTile elements: each operand's values are unpacked into an A array first
// (a contiguous run converted in one loop, or read in place where it is
// float32 or float64 already; a broadcast value repeated, a strided view
// stepped like an odometer, an optional operand not given as 1), then the
// loss, or its gradients into A arrays, run over the tile with no layout and
// no store in the loop, which vectorizes where the math does (exp and log1p
// are shared/poly_math.h's polynomials for it: bce's forward 2^22 fp32 280 ms
// with libm's, 107 ms with them, 2 loaded cores). A reduction sums chunks of kChunk elements, each in kLanes
// interleaved partial sums (one float sum waits ~4 cycles an add on the
// previous one), the chunks' sums then added left to right: the order is
// fixed by the shape, not the thread count, so results are the same on any
// machine. Threads split the chunks.
//
// triplet_margin_loss walks rows (its operands are contiguous): the three
// distances' folds in kRowLanes interleaved states, the row's loss, then (the
// backward) each element's gradients from the row's distances; rows are
// summed in chunks of about kChunk elements, as above.
#include <algorithm>
#include <type_traits>
#include <utility>
#include <vector>

#include "kit/cpu_utils.h"
#include "kit/parallel.h"
#include "../shared/losses_math.h"

namespace {

constexpr int64_t kTile = 256;
constexpr int64_t kChunk = 4096;
constexpr int kLanes = 32;
constexpr int kRowLanes = 8;

tc_status failed(const char* name) { return tc_fail(TC_ERR_INTERNAL, "%s: a CPU worker failed (out of memory?)", name); }

// v[k]: operand k's elements [i0, i0 + m) of the layout as A, for the N operands the math reads: the operand
// itself where it is contiguous A (float32, float64), else unpacked into buf[k].
template <int N, class T>
void unpack(const StridedLayout<4>& l, const T* const* p, int64_t i0, int64_t m, acc_t<T> (*buf)[kTile],
            const acc_t<T>** v) {
  using A = acc_t<T>;
  for (int k = 0; k < N; ++k) v[k] = buf[k];
  if (l.ndim <= 1) {
    for (int k = 0; k < N; ++k) {
      const int64_t s = l.ndim ? l.strides[k][0] : 0;
      A* out = buf[k];
      if (!p[k]) std::fill(out, out + m, A(1));
      else if (s == 1 && std::is_same_v<T, A>) v[k] = reinterpret_cast<const A*>(p[k]) + i0;
      else if (s == 1) for (int64_t j = 0; j < m; ++j) out[j] = to_acc(p[k][i0 + j]);
      else if (s == 0) std::fill(out, out + m, A(to_acc(p[k][0])));
      else for (int64_t j = 0; j < m; ++j) out[j] = to_acc(p[k][(i0 + j) * s]);
    }
    return;
  }
  int64_t idx[8], off[N] = {}, rest = i0;
  for (int d = l.ndim - 1; d >= 0; --d) {
    idx[d] = rest % l.sizes[d], rest /= l.sizes[d];
    for (int k = 0; k < N; ++k) off[k] += idx[d] * l.strides[k][d];
  }
  const int inner = l.ndim - 1;
  for (int64_t j = 0; j < m; ++j) {
    for (int k = 0; k < N; ++k) buf[k][j] = p[k] ? A(to_acc(p[k][off[k]])) : A(1);
    int d = inner;
    ++idx[d];
    for (int k = 0; k < N; ++k) off[k] += l.strides[k][d];
    while (d > 0 && idx[d] == l.sizes[d]) {  // carry into the next-outer dim
      for (int k = 0; k < N; ++k) off[k] -= idx[d] * l.strides[k][d];
      idx[d] = 0;
      --d;
      ++idx[d];
      for (int k = 0; k < N; ++k) off[k] += l.strides[k][d];
    }
  }
}

// f(chunk) for each of `chunks` items on the threads `work` elements ask for
template <class F> bool each_chunk(int64_t chunks, int64_t work, F&& f) {
  const int64_t threads = threads_for(chunks, work);
  return run_threads(threads, [&](int64_t t) {
    for (int64_t c = chunks * t / threads; c < chunks * (t + 1) / threads; ++c) f(c);
  });
}

// the chunks' sums, left to right, divided by the divisor, as the loss
template <class T> void store_sum(const std::vector<acc_t<T>>& sums, double divisor, T* out) {
  acc_t<T> s = 0;
  for (acc_t<T> v : sums) s += v;
  out[0] = from_acc<T>(s / acc_t<T>(divisor));
}

// ---------------------------------------------------------------------------
// the elementwise losses

// The operands of an elementwise loss and the walk over them, chunk by chunk, tile by tile
template <int OP, class T> struct Tiles {
  using A = acc_t<T>;
  static constexpr int N = LossMath<OP>::kOperands;
  StridedLayout<4> l;
  LossCtx<A> c;
  const T* ops[4];
  int64_t n, chunks;

  explicit Tiles(const tc_loss_params* p) : l(loss_layout(p)), c(loss_ctx<A>(p)), n(l.n) {
    for (int k = 0; k < 4; ++k) ops[k] = static_cast<const T*>(p->operands[k]);
    chunks = (n + kChunk - 1) / kChunk;
  }
  // f(i0, m, v) for each tile of chunk ch: its m elements from i0, v[k] operand k's values
  template <class F> void each(int64_t ch, F&& f) const {
    A buf[N][kTile];
    const A* v[N];
    for (int64_t i0 = ch * kChunk, end = std::min(n, i0 + kChunk); i0 < end; i0 += kTile) {
      const int64_t m = std::min(kTile, end - i0);
      unpack<N>(l, ops, i0, m, buf, v);
      f(i0, m, v);
    }
  }
};

// The loss of each of a tile's m elements (v[k]: operand k's values): into out (reduction 'none'), else element j
// added to lane[j % kLanes]. Compiled for AVX2 and AVX-512F too (TC_CPU_CLONES): no layout and no branch in the
// loop, so it vectorizes where the math does.
template <int OP, int KIND, class T>
TC_CPU_CLONES void tile_loss(int64_t m, const acc_t<T>* const* v, const LossCtx<acc_t<T>>& c, T* out,
                             acc_t<T>* lane) {
  using A = acc_t<T>;
  constexpr int N = LossMath<OP>::kOperands;
  auto loss = [&](int64_t j) {
    A e[N];
    for (int k = 0; k < N; ++k) e[k] = v[k][j];
    return LossMath<OP>::template f<KIND>(e, c);
  };
  if (out) {
    for (int64_t j = 0; j < m; ++j) out[j] = from_acc<T>(loss(j));
    return;
  }
  int64_t j = 0;
  for (; j + kLanes <= m; j += kLanes)
    for (int u = 0; u < kLanes; ++u) lane[u] += loss(j + u);
  for (int u = 0; j < m; ++j, ++u) lane[u] += loss(j);
}

template <int OP, int KIND, class T> tc_status loss_cpu(const char* name, const tc_loss_params* p) {
  using A = acc_t<T>;
  const Tiles<OP, T> t(p);
  T* out = static_cast<T*>(p->out);
  const bool none = p->reduction == TC_LOSS_REDUCTION_NONE;
  std::vector<A> sums(none ? 0 : size_t(t.chunks));
  const bool ok = each_chunk(t.chunks, t.n * 8, [&](int64_t ch) {
    A lane[kLanes] = {};
    t.each(ch, [&](int64_t i0, int64_t m, const A* const* v) {
      tile_loss<OP, KIND>(m, v, t.c, none ? out + i0 : nullptr, lane);
    });
    if (!none) {
      A s = lane[0];
      for (int u = 1; u < kLanes; ++u) s += lane[u];
      sums[size_t(ch)] = s;
    }
  });
  if (!ok) return failed(name);
  if (!none) store_sum(sums, loss_divisor(p), out);
  return TC_OK;
}

// d[k][j] = the gradient of operand k (those WANT asks for) at element j of a tile of m, gv[j] its incoming
// gradient: no layout, no store, compiled for AVX2 and AVX-512F too, as tile_loss
template <int OP, int KIND, int WANT, class A>
TC_CPU_CLONES void tile_grads(int64_t m, const A* const* v, const A* gv, const LossCtx<A>& c,
                              A (*d)[kTile]) {
  constexpr int N = LossMath<OP>::kOperands;
  for (int64_t j = 0; j < m; ++j) {
    A e[N], dx[N];
    for (int k = 0; k < N; ++k) e[k] = v[k][j];
    LossMath<OP>::template df<KIND>(gv[j], e, c, dx);
    for (int k = 0; k < N; ++k)
      if (WANT >> k & 1) d[k][j] = dx[k];
  }
}

// WANT: bit k, operand k's gradient is asked for; the others' math is dead code, dropped (kl_div's target
// gradient, a log and a divide an element, is not computed for the input's alone)
template <int OP, int KIND, int WANT, class T> tc_status loss_backward_cpu(const char* name, const tc_loss_params* p) {
  using A = acc_t<T>;
  using M = LossMath<OP>;
  constexpr int N = M::kOperands;
  const Tiles<OP, T> t(p);
  T* grads[4];
  for (int k = 0; k < 4; ++k) grads[k] = static_cast<T*>(p->grads[k]);
  const T* g = static_cast<const T*>(p->grad_out);
  const bool none = p->reduction == TC_LOSS_REDUCTION_NONE;
  const A g0 = none ? A(0) : to_acc(g[0]) / A(loss_divisor(p));
  const bool ok = each_chunk(t.chunks, t.n * 8, [&](int64_t ch) {
    A gv[kTile], d[N][kTile];
    t.each(ch, [&](int64_t i0, int64_t m, const A* const* v) {
      if (none) for (int64_t j = 0; j < m; ++j) gv[j] = to_acc(g[i0 + j]);
      else std::fill(gv, gv + m, g0);
      tile_grads<OP, KIND, WANT>(m, v, gv, t.c, d);
      for (int k = 0; k < N; ++k)
        if (WANT >> k & 1)
          for (int64_t j = 0; j < m; ++j) grads[k][i0 + j] = from_acc<T>(d[k][j]);
    });
  });
  return ok ? TC_OK : failed(name);
}

// ---------------------------------------------------------------------------
// triplet_margin_loss: rows

// The operands of triplet_margin_loss (contiguous rows of cols) and the walk over them, chunk by chunk: a chunk is
// about kChunk elements (at least one row), fixed by the shape
template <int KIND, class T> struct Rows {
  using A = acc_t<T>;
  using TM = TripletMath<KIND, A>;
  LossRows rc;
  LossCtx<A> c;
  const T* ops[3];
  bool swap;
  int64_t per, chunks;

  explicit Rows(const tc_loss_params* p) : rc(loss_rows(p)), c(loss_ctx<A>(p)), swap(p->swap != 0) {
    for (int k = 0; k < 3; ++k) ops[k] = static_cast<const T*>(p->operands[k]);
    per = std::max<int64_t>(1, kChunk / std::max<int64_t>(rc.cols, 1));
    chunks = (rc.rows + per - 1) / per;
  }
  // f(r, row) for each row of chunk ch: its distances folded in kRowLanes interleaved states, then its loss
  template <class F> void each(int64_t ch, F&& f) const {
    for (int64_t r = ch * per; r < std::min(rc.rows, (ch + 1) * per); ++r) {
      const T *a = ops[0] + r * rc.cols, *pp = ops[1] + r * rc.cols, *nn = ops[2] + r * rc.cols;
      typename TM::Sums lane[kRowLanes];
      for (auto& s : lane) s = TM::init();
      int64_t j = 0;
      for (; j + kRowLanes <= rc.cols; j += kRowLanes)
        for (int u = 0; u < kRowLanes; ++u) TM::add(lane[u], to_acc(a[j + u]), to_acc(pp[j + u]), to_acc(nn[j + u]), c);
      for (int u = 0; j < rc.cols; ++j, ++u) TM::add(lane[u], to_acc(a[j]), to_acc(pp[j]), to_acc(nn[j]), c);
      typename TM::Sums s = lane[0];
      for (int u = 1; u < kRowLanes; ++u) s = TM::merge(s, lane[u]);
      f(r, TM::row(s, swap, c));
    }
  }
};

template <int KIND, class T> tc_status triplet_cpu(const char* name, const tc_loss_params* p) {
  using A = acc_t<T>;
  const Rows<KIND, T> t(p);
  T* out = static_cast<T*>(p->out);
  const bool none = p->reduction == TC_LOSS_REDUCTION_NONE;
  std::vector<A> sums(none ? 0 : size_t(t.chunks));
  const bool ok = each_chunk(t.chunks, t.rc.rows * t.rc.cols * 8, [&](int64_t ch) {
    A s = 0;
    t.each(ch, [&](int64_t r, const auto& row) {
      if (none) out[r] = from_acc<T>(row.loss);
      else s += row.loss;
    });
    if (!none) sums[size_t(ch)] = s;
  });
  if (!ok) return failed(name);
  if (!none) store_sum(sums, loss_divisor(p), out);
  return TC_OK;
}

template <int KIND, class T> tc_status triplet_backward_cpu(const char* name, const tc_loss_params* p) {
  using A = acc_t<T>;
  const Rows<KIND, T> t(p);
  T* grads[3] = {static_cast<T*>(p->grads[0]), static_cast<T*>(p->grads[1]), static_cast<T*>(p->grads[2])};
  const T* g = static_cast<const T*>(p->grad_out);
  const bool none = p->reduction == TC_LOSS_REDUCTION_NONE;
  const A g0 = none ? A(0) : to_acc(g[0]) / A(loss_divisor(p));
  const int64_t cols = t.rc.cols;
  const bool ok = each_chunk(t.chunks, t.rc.rows * cols * 16, [&](int64_t ch) {
    t.each(ch, [&](int64_t r, const auto& row) {
      const A gr = row.active ? (none ? A(to_acc(g[r])) : g0) : A(0);
      for (int64_t j = r * cols; j < (r + 1) * cols; ++j) {
        A d[3];
        TripletMath<KIND, A>::df(gr, to_acc(t.ops[0][j]), to_acc(t.ops[1][j]), to_acc(t.ops[2][j]), row, t.c, d);
        for (int k = 0; k < 3; ++k)
          if (grads[k]) grads[k][j] = from_acc<T>(d[k]);
      }
    });
  });
  return ok ? TC_OK : failed(name);
}

// Calls f(integral_constant<int, W>), W the gradients p asks for (bit k: grads[k] given), a subset of GRADS
// (loss_check refuses the others)
template <int GRADS, class F, int... W>
tc_status dispatch_wanted(const tc_loss_params* p, F&& f, std::integer_sequence<int, W...>) {
  int mask = 0;
  for (int k = 0; k < 4; ++k) mask |= p->grads[k] ? 1 << k : 0;
  tc_status s = TC_OK;
  const bool hit = ((mask == W && (W & ~GRADS) == 0 ? (s = f(std::integral_constant<int, W & GRADS>{}), true) : false) ||
                    ...);
  return hit ? s : tc_fail(TC_ERR_INTERNAL, "loss_backward: gradients 0x%x have no kernel", mask);
}
template <int GRADS, class F> tc_status dispatch_wanted(const tc_loss_params* p, F&& f) {
  return dispatch_wanted<GRADS>(p, f, std::make_integer_sequence<int, 16>{});
}

template <bool BACKWARD> tc_status run(const tc_loss_params* p) {
  const char* name = nullptr;
  if (const tc_status s = loss_begin(p, BACKWARD, &name); s != TC_OK || !name) return s;
  return dispatch_cpu(p->dtype, name, [&](auto tag) -> tc_status {
    using T = decltype(tag);
    return dispatch_loss_kernel<acc_t<T>>(p, [&](auto k, auto kind) -> tc_status {
      constexpr int OP = decltype(k)::value, KIND = decltype(kind)::value;
      if constexpr (OP == TC_LOSS_TRIPLET_MARGIN_LOSS)
        return BACKWARD ? triplet_backward_cpu<KIND, T>(name, p) : triplet_cpu<KIND, T>(name, p);
      else
        return BACKWARD ? dispatch_wanted<LossMath<OP>::kGrads>(p, [&](auto want) {
                            return loss_backward_cpu<OP, KIND, decltype(want)::value, T>(name, p);
                          })
                        : loss_cpu<OP, KIND, T>(name, p);
    });
  });
}

}  // namespace

tc_status tc_loss_cpu(const tc_loss_params* p) { return run<false>(p); }
tc_status tc_loss_backward_cpu(const tc_loss_params* p) { return run<true>(p); }
