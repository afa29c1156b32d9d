// reduce family, CPU: y[o] = fold of x's slice o (tinycuda/reduce.h).
//
// A slice is folded in chunks of kChunk elements, each in kLanes interleaved
// states (element r into state r % kLanes) where the slice is one strided run,
// else in element order; the states merge left to right (argmax, argmin, max
// and min there: amax's lanes, then the first element equal to the extreme).
// The chunking is fixed by the shape, not by the thread count, so results are
// the same on any machine. Threads split
// the (output, chunk) items; a state per item (kChunk = 4096: at most
// 1/4096 of x's elements) holds what a later pass merges. The chunks also
// bound the float32 error of long sums to ~sqrt(n/4096) roundings, not n.
//
// Backward: every element's gradient from its output's (g, y, aux), x walked
// in its own order with y's broadcast strides; aux (var's mean, amax's tie
// counts) is a forward reduction of its own first. max's and min's: zeros,
// then each output's g written at the element its index names.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "../shared/reduce_math.h"
#include "kit/cpu_utils.h"
#include "kit/parallel.h"

namespace {

constexpr int64_t kChunk = 4096;
// 32 lanes: eight 4-wide vector accumulators, enough chains to cover an add's
// 4-cycle latency at two adds a cycle (8 lanes, two chains, left mean 3x slower)
constexpr int kLanes = 32;

// f(offset, r) for the elements r in [r0, r1) of a collapsed layout, an
// odometer over its dims (no division per element)
template <class F>
void walk(const StridedLayout<1>& l, int64_t r0, int64_t r1, F&& f) {
  if (r0 >= r1) return;
  if (l.ndim <= 1) {
    const int64_t s = l.ndim ? l.strides[0][0] : 0;
    for (int64_t r = r0; r < r1; ++r) f(r * s, r);
    return;
  }
  int64_t idx[8];
  int64_t rem = r0, off = 0;
  for (int d = l.ndim - 1; d >= 0; --d) {
    idx[d] = rem % l.sizes[d], rem /= l.sizes[d];
    off += idx[d] * l.strides[0][d];
  }
  const int last = l.ndim - 1;
  for (int64_t r = r0; r < r1;) {
    // the innermost dim in one run
    const int64_t run = std::min(r1 - r, l.sizes[last] - idx[last]);
    const int64_t s = l.strides[0][last];
    for (int64_t k = 0; k < run; ++k) f(off + k * s, r + k);
    r += run;
    off += run * s;
    idx[last] += run;
    for (int d = last; d > 0 && idx[d] == l.sizes[d]; --d) {
      off -= idx[d] * l.strides[0][d];
      idx[d] = 0;
      ++idx[d - 1];
      off += l.strides[0][d - 1];
    }
  }
}

// y[o] = the output of state s: an element of y (T), an index, or the state
// itself (the backward's aux, which reduce_grad reads unfinished); max's and
// min's index goes to indices[o] beside the value
template <class M, class T, class Out, class S, class C>
void store(Out* y, int64_t* indices, int64_t o, const S& s, const C& c) {
  if constexpr (std::is_same_v<Out, S>) y[o] = s;
  else if constexpr (std::is_same_v<Out, T> && !std::is_same_v<T, acc_t<T>>) y[o] = from_acc<T>(M::finish(s, c));
  else y[o] = Out(M::finish(s, c));
  if constexpr (requires { s.i; })
    if (indices) indices[o] = s.i;
}

// Elements [r0, r1) of a strided run xo[r * step] folded in kLanes states, element r into
// lane r % kLanes, the lanes merged in order: independent chains the compiler can keep in
// vector registers (a single float sum waits ~4 cycles an element on the previous add)
template <class M, class T, class C>
typename M::State fold_lanes(const T* xo, int64_t step, int64_t r0, int64_t r1, const C& c, acc_t<T> tgt) {
  typename M::State lane[kLanes];
  for (int j = 0; j < kLanes; ++j) lane[j] = M::init(c, tgt);
  int64_t r = r0;
  if (step == 1) {  // its own loop: a runtime stride keeps the compiler from vector loads
    for (; r + kLanes <= r1; r += kLanes)
      for (int j = 0; j < kLanes; ++j) M::add(lane[j], to_acc(xo[r + j]), r + j, c);
  } else {
    for (; r + kLanes <= r1; r += kLanes)
      for (int j = 0; j < kLanes; ++j) M::add(lane[j], to_acc(xo[(r + j) * step]), r + j, c);
  }
  for (int j = 0; r < r1; ++r, ++j) M::add(lane[j], to_acc(xo[r * step]), r, c);
  for (int j = 1; j < kLanes; ++j) lane[0] = M::merge(lane[0], lane[j]);
  return lane[0];
}

// argmax's, argmin's, max's and min's state of elements [r0, r1) of a strided run: the
// extreme by amax's (amin's) lanes, which vectorize, then the first element equal to it
// (the first NaN where it is NaN), its value and index, in a second pass over the chunk
// (16 KB of fp32, still in L1). A fold of (value, index) states does not vectorize: 1
// thread, 2^21 fp32 in rows of 2047, it took 7.3 ms, amax 0.85 ms, torch.max 2.4-3.8 ms;
// the two passes take 1.6 ms.
template <int OP, class T, class C>
typename ReduceMath<OP, acc_t<T>>::State first_extreme(const T* xo, int64_t step, int64_t r0, int64_t r1,
                                                       const C& c) {
  using A = acc_t<T>;
  constexpr bool kLargest = OP == TC_REDUCE_ARGMAX || OP == TC_REDUCE_MAX;
  const A m = fold_lanes<ExtremumMath<kLargest, A>>(xo, step, r0, r1, c, A(0)).v;
  for (int64_t r = r0; r < r1; ++r) {
    const A v = to_acc(xo[r * step]);
    if (is_nan(m) ? is_nan(v) : v == m) return {v, r};
  }
  return {m, r0};  // not reached: the extreme is one of the elements
}

// The columns layout (the kept dims end in a stride-1 run, the slice is
// strided: mean over dim 0): a row of x in the outer loop, a block of kBlock
// adjacent outputs in the inner one, so loads are contiguous; each output
// still folds its elements in slice order, chunk by chunk. One output at a
// time instead would walk a column, a cache line a element (11x slower than
// torch over dim 0 of 2048 x 2048 fp32).
template <int OP, class T, class Out>
tc_status reduce_columns_cpu(const char* name, const ReduceLayout& l, const ReduceCtx<acc_t<T>>& c, const T* x,
                             Out* y, int64_t* indices, const T* target) {
  using A = acc_t<T>;
  using M = ReduceMath<OP, A>;
  using State = typename M::State;
  constexpr int64_t kBlock = 64;
  const int64_t outputs = l.outputs(), n = l.slice(), run = l.kept.sizes[l.kept.ndim - 1];
  const int64_t per_run = (run + kBlock - 1) / kBlock, items = outputs / run * per_run;
  const int64_t threads = threads_for(items, outputs * n);
  const bool ok = run_threads(threads, [&](int64_t t) {
    State s[kBlock], part[kBlock];
    for (int64_t it = items * t / threads; it < items * (t + 1) / threads; ++it) {
      const int64_t o0 = it / per_run * run + it % per_run * kBlock, m = std::min(kBlock, run - it % per_run * kBlock);
      const T* xo = x + layout_offset(l.kept, o0);  // output o0 + j reads xo[j + ...]
      for (int64_t r0 = 0; r0 < n; r0 += kChunk) {
        for (int64_t j = 0; j < m; ++j) part[j] = M::init(c, kNeedsTarget<OP> ? to_acc(target[o0 + j]) : A(0));
        walk(l.red, r0, std::min(n, r0 + kChunk), [&](int64_t off, int64_t r) {
          for (int64_t j = 0; j < m; ++j) M::add(part[j], to_acc(xo[off + j]), r, c);
        });
        for (int64_t j = 0; j < m; ++j) s[j] = r0 ? M::merge(s[j], part[j]) : part[j];
      }
      for (int64_t j = 0; j < m; ++j) store<M, T>(y, indices, o0 + j, s[j], c);
    }
  });
  return ok ? TC_OK : tc_fail(TC_ERR_INTERNAL, "%s: a CPU worker failed (out of memory?)", name);
}

// y[o] (Out: T, int64 indices, or the state for the backward's aux) for every
// output, and max's and min's indices[o]; target, where the op counts ties, is
// the forward's y.
template <int OP, class T, class Out>
tc_status reduce_cpu(const char* name, const ReduceLayout& l, const ReduceCtx<acc_t<T>>& c, const T* x, Out* y,
                     int64_t* indices, const T* target) {
  using A = acc_t<T>;
  using M = ReduceMath<OP, A>;
  using State = typename M::State;
  const int64_t outputs = l.outputs(), n = l.slice();
  if (l.columns() && n > 1) return reduce_columns_cpu<OP, T>(name, l, c, x, y, indices, target);
  const int64_t chunks = std::max<int64_t>(1, (n + kChunk - 1) / kChunk), items = outputs * chunks;
  std::vector<State> states(chunks > 1 ? size_t(items) : 0);
  const int64_t threads = threads_for(items, outputs * n);
  const bool ok = run_threads(threads, [&](int64_t t) {
    for (int64_t it = items * t / threads; it < items * (t + 1) / threads; ++it) {
      const int64_t o = it / chunks, k = it % chunks;
      const T* xo = x + layout_offset(l.kept, o);
      const A tgt = kNeedsTarget<OP> ? to_acc(target[o]) : A(0);
      const int64_t r0 = k * kChunk, r1 = std::min(n, (k + 1) * kChunk);
      State s = M::init(c, tgt);
      if (l.red.ndim <= 1) {
        const int64_t step = l.red.ndim ? l.red.strides[0][0] : 0;
        if constexpr (kArgOp<OP> || kValueIndex<OP>) s = first_extreme<OP>(xo, step, r0, r1, c);
        else s = fold_lanes<M>(xo, step, r0, r1, c, tgt);
      } else {
        walk(l.red, r0, r1, [&](int64_t off, int64_t r) { M::add(s, to_acc(xo[off]), r, c); });
      }
      if (chunks == 1) store<M, T>(y, indices, o, s, c);
      else states[size_t(it)] = s;
    }
  });
  if (!ok) return tc_fail(TC_ERR_INTERNAL, "%s: a CPU worker failed (out of memory?)", name);
  if (chunks > 1) {
    for (int64_t o = 0; o < outputs; ++o) {
      State s = states[size_t(o * chunks)];
      for (int64_t k = 1; k < chunks; ++k) s = M::merge(s, states[size_t(o * chunks + k)]);
      store<M, T>(y, indices, o, s, c);
    }
  }
  return TC_OK;
}

// max's and min's gradient: zeros, then g[o] at the element indices[o] of
// slice o (x contiguous: the slice's row-major index is its offset in the
// reduced dims). An index out of the slice is refused, named, before a write.
template <class T>
tc_status value_index_backward_cpu(const char* name, const ReduceLayout& l, const T* g, const int64_t* indices,
                                   T* gx) {
  const int64_t outputs = l.outputs(), n = l.slice(), total = outputs * n;
  for (int64_t o = 0; o < outputs; ++o)
    TC_REQUIRE(indices[o] >= 0 && indices[o] < n, "%s: indices[%lld] is %lld, outside the slice of %lld elements",
               name, (long long)o, (long long)indices[o], (long long)n);
  const T zero = from_acc<T>(acc_t<T>(0));
  int64_t threads = threads_for(total, total);
  bool ok = run_threads(threads, [&](int64_t t) {
    std::fill(gx + total * t / threads, gx + total * (t + 1) / threads, zero);
  });
  threads = threads_for(outputs, outputs * 8);
  ok = ok && run_threads(threads, [&](int64_t t) {
    for (int64_t o = outputs * t / threads; o < outputs * (t + 1) / threads; ++o)
      gx[layout_offset(l.kept, o) + layout_offset(l.red, indices[o])] = g[o];
  });
  return ok ? TC_OK : tc_fail(TC_ERR_INTERNAL, "%s: a CPU worker failed (out of memory?)", name);
}

}  // namespace

tc_status tc_reduce_cpu(const tc_reduce_params* p) {
  TC_RETURN_IF_ERROR(reduce_check(p));
  const char* name = reduce_name(p->op);
  const ReduceLayout l = reduce_layout(p);
  if (l.outputs() == 0) return TC_OK;
  return dispatch_cpu(p->dtype, name, [&](auto tag) -> tc_status {
    using T = decltype(tag);
    const auto c = reduce_ctx<acc_t<T>>(p->op, p->scalar, l.slice());
    const T* x = static_cast<const T*>(p->x);
    return dispatch_forward(p->op, c.kind, [&](auto k) -> tc_status {
      constexpr int OP = decltype(k)::value;
      int64_t* indices = kValueIndex<OP> ? static_cast<int64_t*>(p->indices) : nullptr;  // unused by the others
      if constexpr (kArgOp<OP>) return reduce_cpu<OP, T>(name, l, c, x, static_cast<int64_t*>(p->y), nullptr, x);
      else return reduce_cpu<OP, T>(name, l, c, x, static_cast<T*>(p->y), indices, x);
    });
  });
}

tc_status tc_reduce_backward_cpu(const tc_reduce_backward_params* p) {
  TC_RETURN_IF_ERROR(reduce_check(p));
  const char* name = reduce_name(p->op, true);
  const ReduceLayout l = reduce_backward_layout(p);
  if (l.outputs() * l.slice() == 0) return TC_OK;
  return dispatch_cpu(p->dtype, name, [&](auto tag) -> tc_status {
    using T = decltype(tag);
    using A = acc_t<T>;
    const auto c = reduce_ctx<A>(p->op, p->scalar, l.slice());
    const T *x = static_cast<const T*>(p->x), *y = static_cast<const T*>(p->y),
            *g = static_cast<const T*>(p->grad_y);
    T* gx = static_cast<T*>(p->grad_x);
    return dispatch_reduce(p->op, [&](auto k) -> tc_status {
      constexpr int OP = decltype(k)::value;
      if constexpr (kArgOp<OP>) {
        return TC_OK;  // refused by reduce_check
      } else if constexpr (kValueIndex<OP>) {
        return value_index_backward_cpu(name, l, g, static_cast<const int64_t*>(p->indices), gx);
      } else {
        using Aux = AuxState<OP, A>;
        std::vector<Aux> aux;
        if (const int aux_op = reduce_aux_op(p->op, p->scalar); aux_op >= 0) {
          aux.resize(size_t(l.outputs()));
          TC_RETURN_IF_ERROR(dispatch_aux(aux_op, [&](auto a) -> tc_status {
            constexpr int AUX = decltype(a)::value;
            if constexpr (std::is_same_v<typename ReduceMath<AUX, A>::State, Aux>)
              return reduce_cpu<AUX, T>(name, l, c, x, aux.data(), nullptr, y);
            else return tc_fail(TC_ERR_INTERNAL, "%s: aux op %d does not fit", name, AUX);
          }));
        }
        // x in its own order, each element's output through y's broadcast strides
        const StridedLayout<1> yl = reduce_grad_layout(p);
        const int64_t total = yl.n, threads = threads_for(total, total);
        const bool ok = run_threads(threads, [&](int64_t t) {
          walk(yl, total * t / threads, total * (t + 1) / threads, [&](int64_t o, int64_t i) {
            gx[i] = from_acc<T>(reduce_grad<OP>(to_acc(g[o]), to_acc(x[i]), to_acc(y[o]),
                                                aux.empty() ? Aux{} : aux[size_t(o)], c));
          });
        });
        return ok ? TC_OK : tc_fail(TC_ERR_INTERNAL, "%s: a CPU worker failed (out of memory?)", name);
      }
    });
  });
}
