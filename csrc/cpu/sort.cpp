// sort family, CPU: the first k of each row's stable sort (tinycuda/sort.h;
// the keys, shared with CUDA, in shared/sort_math.h), and the gradient scatter.
//
// A row's elements become (key, index) pairs; the index is uint32 for rows of
// up to 2^32 - 1 elements, else uint64. Threads split the rows.
//   sort (or topk with 4k > n)  an LSD radix sort of the pairs, a pass a key
//       byte (8-bit digits: one read counts every byte's digits, a pass skips a
//       byte all keys share: int8 keys of one sign, small integers), stable;
//       rows of up to kInsertionMax elements by insertion. 2^22 fp32 in one
//       row: four passes of 8 bytes moved an element.
//   topk with 4k <= n  a selection: the k least pairs in (key, index) order, a
//       strict order since indices differ, so ties go to the lower index as
//       in the stable sort: for k <= n / 64 a max-heap of the k least so far
//       (most elements cost one compare with its top), else std::nth_element,
//       then std::sort of those k. Rows too few to keep the threads busy are
//       cut into one piece a thread: each piece's k least, then the k least of
//       those.
// values[r, j] = x[r, indices[r, j]], the element's bits (a -0.0 or a NaN's
// payload kept).
//
// sort_backward: each row of grad_x zeroed, then grad_values scattered to the
// indices; an index out of [0, n) is reported (the first, in row-major order).
#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "kit/parallel.h"
#include "../shared/sort_math.h"

namespace {

constexpr int64_t kInsertionMax = 32;
// topk selects when k * kSelectRatio <= n (else the radix sort's first k); it keeps a heap of its k least when
// k * kHeapRatio <= n, else runs nth_element over every pair
constexpr int64_t kSelectRatio = 4, kHeapRatio = 64;

template <class B, class I> struct Pair {
  B key;
  I idx;
  bool operator<(const Pair& o) const { return key < o.key || (key == o.key && idx < o.idx); }
};

// Sorts (keys, idx) of length n stably by key; tk, ti: scratch of n. Returns whether the result is in the
// scratch (true) or in place.
template <class B, class I>
bool radix_sort(B* keys, I* idx, B* tk, I* ti, int64_t n) {
  if (n <= kInsertionMax) {
    for (int64_t i = 1; i < n; ++i) {
      const B k = keys[i];
      const I v = idx[i];
      int64_t j = i;
      for (; j > 0 && keys[j - 1] > k; --j) keys[j] = keys[j - 1], idx[j] = idx[j - 1];
      keys[j] = k, idx[j] = v;
    }
    return false;
  }
  constexpr int kBytes = int(sizeof(B));
  int64_t count[kBytes][256] = {};
  for (int64_t i = 0; i < n; ++i) {
    const B k = keys[i];
    for (int b = 0; b < kBytes; ++b) ++count[b][(k >> (8 * b)) & 0xff];
  }
  bool swapped = false;
  for (int b = 0; b < kBytes; ++b) {
    int64_t* c = count[b];
    if (std::find(c, c + 256, n) != c + 256) continue;  // every key has one digit here: the pass moves nothing
    int64_t run = 0;
    for (int d = 0; d < 256; ++d) {
      const int64_t m = c[d];
      c[d] = run;
      run += m;
    }
    for (int64_t i = 0; i < n; ++i) {
      const int64_t to = c[(keys[i] >> (8 * b)) & 0xff]++;
      tk[to] = keys[i], ti[to] = idx[i];
    }
    std::swap(keys, tk), std::swap(idx, ti);
    swapped = !swapped;
  }
  return swapped;
}

// The first k of a sorted row's indices, and its values (vr NULL: none) from x's row.
template <class B, class I>
void write_row(const I* pi, int64_t k, const B* xr, B* vr, int64_t* ir) {
  for (int64_t j = 0; j < k; ++j) ir[j] = int64_t(pi[j]);
  if (vr)
    for (int64_t j = 0; j < k; ++j) vr[j] = xr[pi[j]];
}

template <class B, class I>
tc_status sort_rows(const tc_sort_params* p, KeyMap<B> m) {
  const int64_t rows = p->rows, n = p->n, k = p->k;
  const B* x = static_cast<const B*>(p->x);
  B* values = static_cast<B*>(p->values);
  const bool select = k * kSelectRatio <= n;
  // a few long rows: selection pieces across the threads; else whole rows a thread
  const int64_t cores = threads_for(rows * n / 4096, rows * n * 8), threads = std::min(cores, rows);
  const bool pieces = select && rows < cores;
  auto failed = [] { return tc_fail(TC_ERR_INTERNAL, "sort: a CPU worker failed (out of memory?)"); };

  if (!select) {
    const bool ok = run_threads(threads, [&](int64_t t) {
      const size_t len = static_cast<size_t>(n);
      std::vector<B> keys(len), tk(len);
      std::vector<I> idx(len), ti(len);
      for (int64_t r = rows * t / threads; r < rows * (t + 1) / threads; ++r) {
        const B* xr = x + r * n;
        for (int64_t i = 0; i < n; ++i) keys[size_t(i)] = m.key(xr[i]), idx[size_t(i)] = I(i);
        const bool in_scratch = radix_sort(keys.data(), idx.data(), tk.data(), ti.data(), n);
        write_row(in_scratch ? ti.data() : idx.data(), k, xr, values ? values + r * k : nullptr, p->indices + r * k);
      }
    });
    return ok ? TC_OK : failed();
  }

  using P = Pair<B, I>;
  // the k least pairs of x's row r, positions [lo, hi), into out, in order
  auto least = [&](int64_t r, int64_t lo, int64_t hi, std::vector<P>& buf, P* out) {
    const B* xr = x + r * n;
    const int64_t kk = std::min(k, hi - lo);
    if (kk * kHeapRatio <= hi - lo) {
      // few: a max-heap of the kk least so far; a later element enters only if its key is below the top's (an
      // equal key has the larger index), one compare for most elements
      buf.clear();
      for (int64_t i = lo; i < lo + kk; ++i) buf.push_back(P{m.key(xr[i]), I(i)});
      std::make_heap(buf.begin(), buf.end());
      for (int64_t i = lo + kk; i < hi; ++i) {
        const B key = m.key(xr[i]);
        if (key < buf.front().key) {
          std::pop_heap(buf.begin(), buf.end());
          buf.back() = P{key, I(i)};
          std::push_heap(buf.begin(), buf.end());
        }
      }
      std::sort_heap(buf.begin(), buf.end());
    } else {
      buf.resize(size_t(hi - lo));
      for (int64_t i = lo; i < hi; ++i) buf[size_t(i - lo)] = P{m.key(xr[i]), I(i)};
      std::nth_element(buf.begin(), buf.begin() + kk, buf.end());
      std::sort(buf.begin(), buf.begin() + kk);
    }
    std::copy(buf.begin(), buf.begin() + kk, out);
    return kk;
  };
  auto finish = [&](int64_t r, const P* sorted) {
    const B* xr = x + r * n;
    for (int64_t j = 0; j < k; ++j) p->indices[r * k + j] = int64_t(sorted[j].idx);
    if (values)
      for (int64_t j = 0; j < k; ++j) values[r * k + j] = xr[sorted[j].idx];
  };
  if (!pieces) {
    const bool ok = run_threads(threads, [&](int64_t t) {
      std::vector<P> buf, best(static_cast<size_t>(k));
      for (int64_t r = rows * t / threads; r < rows * (t + 1) / threads; ++r) {
        least(r, 0, n, buf, best.data());
        finish(r, best.data());
      }
    });
    return ok ? TC_OK : failed();
  }
  // each row cut into `threads` pieces: every piece's k least, then the k least of those (the same k pairs:
  // the order is strict)
  std::vector<P> cand;
  std::vector<int64_t> got(static_cast<size_t>(cores));
  for (int64_t r = 0; r < rows; ++r) {
    cand.assign(size_t(cores * k), P{});
    const bool ok = run_threads(cores, [&](int64_t t) {
      std::vector<P> buf;
      got[size_t(t)] = least(r, n * t / cores, n * (t + 1) / cores, buf, &cand[size_t(t * k)]);
    });
    if (!ok) return failed();
    std::vector<P> all;
    for (int64_t t = 0; t < cores; ++t)
      all.insert(all.end(), cand.begin() + t * k, cand.begin() + t * k + got[size_t(t)]);
    std::nth_element(all.begin(), all.begin() + k, all.end());
    std::sort(all.begin(), all.begin() + k);
    finish(r, all.data());
  }
  return TC_OK;
}

}  // namespace

tc_status tc_sort_cpu(const tc_sort_params* p) {
  TC_RETURN_IF_ERROR(sort_check(p));
  if (p->rows * p->k == 0) return TC_OK;
  return dispatch_sort(p->dtype, p->descending != 0, "sort", [&](auto m) -> tc_status {
    using B = typename decltype(m)::Bits;
    if (p->n <= int64_t(std::numeric_limits<uint32_t>::max())) return sort_rows<B, uint32_t>(p, m);
    return sort_rows<B, uint64_t>(p, m);
  });
}

tc_status tc_sort_backward_cpu(const tc_sort_backward_params* p) {
  TC_RETURN_IF_ERROR(sort_check(p));
  if (p->rows * p->n == 0) return TC_OK;
  return dispatch_float_bits(p->dtype, "sort_backward", [&](auto tag) -> tc_status {
    using B = decltype(tag);
    const int64_t rows = p->rows, n = p->n, k = p->k;
    const B* g = static_cast<const B*>(p->grad_values);
    B* gx = static_cast<B*>(p->grad_x);
    const int64_t threads = threads_for(rows, rows * n);
    std::vector<int64_t> bad(static_cast<size_t>(threads), -1);  // each thread's first out-of-range element
    const bool ok = run_threads(threads, [&](int64_t t) {
      for (int64_t r = rows * t / threads; r < rows * (t + 1) / threads; ++r) {
        std::memset(gx + r * n, 0, size_t(n) * sizeof(B));
        for (int64_t j = 0; j < k; ++j) {
          const int64_t i = p->indices[r * k + j];
          if (i < 0 || i >= n) {
            if (bad[size_t(t)] < 0) bad[size_t(t)] = r * k + j;
            continue;
          }
          gx[r * n + i] = g[r * k + j];
        }
      }
    });
    if (!ok) return tc_fail(TC_ERR_INTERNAL, "sort_backward: a CPU worker failed (out of memory?)");
    for (int64_t e : bad)
      if (e >= 0)
        return tc_fail(TC_ERR_INVALID_ARGUMENT, "sort_backward: indices[%lld] = %lld is out of range [0, %lld)",
                       (long long)e, (long long)p->indices[e], (long long)n);
    return TC_OK;
  });
}
