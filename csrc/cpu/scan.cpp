// scan family, CPU: y = the prefix scan of x along n (tinycuda/scan.h; the
// problems, shared with CUDA, in shared/scan_math.h).
//
// x is [outer, n, inner]; a row is a column (o, k), n elements inner apart.
// Work items are blocks of up to kBlock adjacent columns of one o, walked n
// outer and the block inner, so every step reads a contiguous run (inner = 1:
// a block is one row, read in order). Threads split the items.
//
// A row is scanned in chunks of kChunk: each chunk from the identity, its
// outputs then combined with the carry, the fold of the chunks before it,
// left to right. A float32 running sum of n terms loses ~n eps / 2 of its
// magnitude; chunked, ~(kChunk + n / kChunk) eps / 2 (150001 fp32 normals:
// 30x less). Fewer than kFewRows rows would leave cores idle: their chunks
// are split across threads too (pass 1 folds each chunk, a serial pass folds
// the totals into each chunk's carry, pass 2 scans each chunk from it), which
// runs the same combines in the same order, so results do not depend on the
// split or the thread count.
//
// Backward: the same walk, its problem scanning the other way.
#include <type_traits>
#include <vector>

#include "kit/cpu_utils.h"
#include "kit/parallel.h"
#include "../shared/scan_math.h"  // after the kit: its element() converts with to_acc

namespace {

constexpr int64_t kBlock = 64;
constexpr int64_t kChunk = 4096;
constexpr int64_t kFewRows = 64;

template <class P, class T>
tc_status scan_cpu(const char* name, int64_t outer, int64_t n, int64_t inner, bool reverse, ScanArgs<T> a, T* out) {
  using State = typename P::State;
  const int64_t rows = outer * inner, blocks = outer * ((inner + kBlock - 1) / kBlock);
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  a.step = reverse ? -inner : inner;
  // f(j, e, s) for each element of block b's chunk c in scan order: column j of the block, offset e, position s
  auto walk = [&](int64_t b, int64_t c, auto&& f) {
    const int64_t per_o = (inner + kBlock - 1) / kBlock, o = b / per_o, k0 = b % per_o * kBlock;
    const int64_t m = std::min(kBlock, inner - k0), first = scan_row(o * inner + k0, n, inner, reverse).first;
    const int64_t s0 = c * kChunk, s1 = std::min(n, s0 + kChunk);
    if (m == 1) {  // a row (inner = 1, or a last narrow block): no column loop around each element
      for (int64_t s = s0, e = first + s0 * a.step; s < s1; ++s, e += a.step) f(0, e, s);
      return;
    }
    for (int64_t s = s0; s < s1; ++s)
      for (int64_t j = 0; j < m; ++j) f(j, first + s * a.step + j, s);
  };
  // scans block b's chunk c from carry (none for the first chunk); tot: the chunk's own folds. The flags are
  // template arguments, so the element loop holds no branch on them
  auto scan_chunk = [&](int64_t b, int64_t c, const State* carry, State* tot) {
    for (int64_t j = 0; j < kBlock; ++j) tot[j] = P::identity();
    auto run = [&](auto exclusive, auto carried) {
      walk(b, c, [&](int64_t j, int64_t e, int64_t s) {
        const State before = tot[j];
        tot[j] = P::combine(tot[j], P::element(a, e, s));
        const State p = decltype(exclusive)::value ? before : tot[j];
        out[e] = from_acc<T>(P::finish(a, e, s, decltype(carried)::value ? P::combine(carry[j], p) : p));
      });
    };
    using yes = std::true_type;
    using no = std::false_type;
    if (a.exclusive) carry ? run(yes{}, yes{}) : run(yes{}, no{});
    else carry ? run(no{}, yes{}) : run(no{}, no{});
  };
  const bool split = rows < kFewRows && chunks > 1;
  const int64_t items = split ? blocks * chunks : blocks;
  const int64_t threads = threads_for(items, rows * n * (split ? 2 : 1));
  auto failed = [&] { return tc_fail(TC_ERR_INTERNAL, "%s: a CPU worker failed (out of memory?)", name); };
  if (!split) {
    const bool ok = run_threads(threads, [&](int64_t t) {
      State carry[kBlock], tot[kBlock];
      for (int64_t b = items * t / threads; b < items * (t + 1) / threads; ++b) {
        for (int64_t c = 0; c < chunks; ++c) {
          scan_chunk(b, c, c ? carry : nullptr, tot);
          for (int64_t j = 0; j < kBlock; ++j) carry[j] = c ? P::combine(carry[j], tot[j]) : tot[j];
        }
      }
    });
    return ok ? TC_OK : failed();
  }
  // pass 1: each chunk's fold, as scan_chunk folds it
  std::vector<State> carry(size_t(items * kBlock));
  bool ok = run_threads(threads, [&](int64_t t) {
    for (int64_t it = items * t / threads; it < items * (t + 1) / threads; ++it) {
      State* tot = &carry[size_t(it * kBlock)];
      for (int64_t j = 0; j < kBlock; ++j) tot[j] = P::identity();
      walk(it / chunks, it % chunks, [&](int64_t j, int64_t e, int64_t s) {
        tot[j] = P::combine(tot[j], P::element(a, e, s));
      });
    }
  });
  if (!ok) return failed();
  // the totals, left to right, into each chunk's carry (chunk c's slot: the fold of chunks 0 .. c - 1)
  for (int64_t b = 0; b < blocks; ++b) {
    State run[kBlock];
    for (int64_t j = 0; j < kBlock; ++j) run[j] = P::identity();
    for (int64_t c = 0; c < chunks; ++c) {
      State* slot = &carry[size_t((b * chunks + c) * kBlock)];
      for (int64_t j = 0; j < kBlock; ++j) {
        const State tot = slot[j];
        slot[j] = run[j];  // chunk 0's is never read
        run[j] = c ? P::combine(run[j], tot) : tot;
      }
    }
  }
  ok = run_threads(threads, [&](int64_t t) {
    State tot[kBlock];
    for (int64_t it = items * t / threads; it < items * (t + 1) / threads; ++it)
      scan_chunk(it / chunks, it % chunks, it % chunks ? &carry[size_t(it * kBlock)] : nullptr, tot);
  });
  return ok ? TC_OK : failed();
}

}  // namespace

tc_status tc_scan_cpu(const tc_scan_params* p) {
  TC_RETURN_IF_ERROR(scan_check(p));
  const char* name = scan_name(p->op);
  if (p->outer * p->n * p->inner == 0) return TC_OK;
  return dispatch_cpu(p->dtype, name, [&](auto tag) -> tc_status {
    using T = decltype(tag);
    const ScanArgs<T> a{static_cast<const T*>(p->x), nullptr, nullptr, p->n, 0, p->exclusive != 0};
    return dispatch_scan<acc_t<T>>(p->op, false, [&](auto problem) -> tc_status {
      return scan_cpu<decltype(problem)>(name, p->outer, p->n, p->inner, p->reverse != 0, a, static_cast<T*>(p->y));
    });
  });
}

tc_status tc_scan_backward_cpu(const tc_scan_backward_params* p) {
  TC_RETURN_IF_ERROR(scan_check(p));
  const char* name = scan_name(p->op, true);
  if (p->outer * p->n * p->inner == 0) return TC_OK;
  return dispatch_cpu(p->dtype, name, [&](auto tag) -> tc_status {
    using T = decltype(tag);
    const T *x = static_cast<const T*>(p->x), *g = static_cast<const T*>(p->grad_y);
    // cumsum's gradient is cumsum's problem on g
    const ScanArgs<T> a{p->op == TC_SCAN_CUMSUM ? g : x, g, static_cast<const T*>(p->y), p->n, 0, p->exclusive != 0};
    return dispatch_scan<acc_t<T>>(p->op, true, [&](auto problem) -> tc_status {
      return scan_cpu<decltype(problem)>(name, p->outer, p->n, p->inner, p->reverse == 0, a,
                                         static_cast<T*>(p->grad_x));
    });
  });
}
