// histogram family, CPU: histc, bincount and the range pass (tinycuda/histogram.h;
// the bins, shared with CUDA, in shared/histogram_math.h).
//
// x is cut into `parts` contiguous slices, as many as the shape says (never the
// thread count: n / max(64K, 4 bins) of them, at most 16): each is folded in
// element order into a histogram of its own (int64 counts, or weighted sums in
// the weights' type), then the histograms are added bin by bin in part order.
// Threads take whole parts, so the result is the same, bit for bit, for any
// number of them. The range pass folds the parts' (min, max) the same way.
#include <algorithm>
#include <exception>
#include <vector>

#include "kit/cpu_utils.h"
#include "kit/parallel.h"
#include "../shared/histogram_math.h"  // after the kit: HistcBin converts with to_acc

namespace {

constexpr int64_t kMaxParts = 16;
constexpr int64_t kMinPart = int64_t(1) << 16;

int64_t parts_for(int64_t n, int64_t bins) {
  return std::clamp<int64_t>(n / std::max(kMinPart, 4 * bins), 1, kMaxParts);
}

tc_status worker_failed(const char* name) {
  return tc_fail(TC_ERR_INTERNAL, "%s: a CPU worker failed (out of memory?)", name);
}

// Part p's slice of n elements
struct Slice {
  int64_t begin, end;
};
Slice slice(int64_t p, int64_t parts, int64_t n) { return {n * p / parts, n * (p + 1) / parts}; }

// Folds x into per-part histograms of S: add(h, i) adds element i into histogram h, or returns false at a bad
// element, which ends its part; *bad is then the first bad element of x, else -1, and finish(b, total) runs for
// each bin, total its parts' sum in part order.
template <class S, class Add, class Finish>
tc_status fold_parts(const char* name, int64_t n, int64_t bins, int64_t* bad, Add add, Finish finish) {
  // ~4 multiply-adds' work an element (a bin's divide, a load and an add)
  const int64_t parts = parts_for(n, bins), threads = threads_for(parts, 4 * n);
  std::vector<S> hist;
  std::vector<int64_t> first_bad(size_t(parts), -1);
  try {
    hist.assign(size_t(parts * bins), S(0));
  } catch (const std::exception&) {
    return worker_failed(name);
  }
  bool ok = run_threads(threads, [&](int64_t t) {
    for (int64_t p = parts * t / threads; p < parts * (t + 1) / threads; ++p) {
      S* h = hist.data() + p * bins;
      const Slice s = slice(p, parts, n);
      for (int64_t i = s.begin; i < s.end; ++i) {
        if (!add(h, i)) {
          first_bad[size_t(p)] = i;
          break;
        }
      }
    }
  });
  if (!ok) return worker_failed(name);
  *bad = -1;
  for (int64_t p = 0; p < parts && *bad < 0; ++p) *bad = first_bad[size_t(p)];
  if (*bad >= 0) return TC_OK;
  const int64_t bin_threads = threads_for(bins, parts * bins);
  ok = run_threads(bin_threads, [&](int64_t t) {
    for (int64_t b = bins * t / bin_threads; b < bins * (t + 1) / bin_threads; ++b) {
      S total = hist[size_t(b)];
      for (int64_t p = 1; p < parts; ++p) total += hist[size_t(p * bins + b)];
      finish(b, total);
    }
  });
  return ok ? TC_OK : worker_failed(name);
}

// (min, max) of x with NaN propagated: a NaN anywhere makes both NaN (v != v never compares below or above)
template <class V> struct MinMax {
  V lo, hi;
  void add(V v) {
    lo = (v < lo || v != v) ? v : lo;
    hi = (v > hi || v != v) ? v : hi;
  }
};

template <class V, class Load>
tc_status range_cpu(const char* name, int64_t n, V* out, Load load) {
  const int64_t parts = parts_for(n, 1), threads = threads_for(parts, n);
  const V first = load(0);
  std::vector<MinMax<V>> part(size_t(parts), MinMax<V>{first, first});
  const bool ok = run_threads(threads, [&](int64_t t) {
    for (int64_t p = parts * t / threads; p < parts * (t + 1) / threads; ++p) {
      const Slice s = slice(p, parts, n);
      MinMax<V> m = part[size_t(p)];
      for (int64_t i = s.begin; i < s.end; ++i) m.add(load(i));
      part[size_t(p)] = m;
    }
  });
  if (!ok) return worker_failed(name);
  MinMax<V> m = part[0];
  for (int64_t p = 1; p < parts; ++p) {
    m.add(part[size_t(p)].lo);
    m.add(part[size_t(p)].hi);
  }
  out[0] = m.lo;
  out[1] = m.hi;
  return TC_OK;
}

}  // namespace

tc_status tc_histc_cpu(const tc_histc_params* p) {
  TC_RETURN_IF_ERROR(histc_check(p));
  return dispatch_cpu(p->dtype, "histc", [&](auto tag) -> tc_status {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* x = static_cast<const T*>(p->x);
    T* out = static_cast<T*>(p->out);
    const HistcBin<T> bin{to_acc(from_acc<T>(A(p->min))), to_acc(from_acc<T>(A(p->max))), A(p->bins), p->bins};
    int64_t bad;
    return fold_parts<int64_t>(
        "histc", p->n, p->bins, &bad,
        [&](int64_t* h, int64_t i) {
          const int64_t b = bin(x[i]);
          if (b >= 0) ++h[b];
          return true;
        },
        [&](int64_t b, int64_t count) { out[b] = from_acc<T>(A(count)); });
  });
}

tc_status tc_bincount_cpu(const tc_bincount_params* p) {
  TC_RETURN_IF_ERROR(bincount_check(p));
  const int64_t* x = p->x;
  const BincountBin bin{p->bins};
  int64_t bad = -1;
  auto fold = [&](auto zero, auto weight) -> tc_status {
    using S = decltype(zero);
    S* out = static_cast<S*>(p->out);
    return fold_parts<S>(
        "bincount", p->n, p->bins, &bad,
        [&](S* h, int64_t i) {
          const int64_t b = bin(x[i]);
          if (b < 0) return false;
          h[b] += weight(i);
          return true;
        },
        [&](int64_t b, S total) { out[b] = total; });
  };
  tc_status s;
  if (!p->weights) s = fold(int64_t(0), [](int64_t) { return int64_t(1); });
  else if (p->dtype == TC_FLOAT64) s = fold(0.0, [w = static_cast<const double*>(p->weights)](int64_t i) { return w[i]; });
  else s = fold(0.0f, [w = static_cast<const float*>(p->weights)](int64_t i) { return w[i]; });
  TC_RETURN_IF_ERROR(s);
  if (bad >= 0) {
    const long long v = x[bad];
    if (v < 0) return tc_fail(TC_ERR_INVALID_ARGUMENT, "bincount: x[%lld] = %lld is negative", (long long)bad, v);
    return tc_fail(TC_ERR_INVALID_ARGUMENT, "bincount: x[%lld] = %lld is not below bins (%lld)", (long long)bad, v,
                   (long long)p->bins);
  }
  return TC_OK;
}

tc_status tc_histogram_range_cpu(const tc_histogram_range_params* p) {
  TC_RETURN_IF_ERROR(histogram_range_check(p));
  if (p->x_int64) {
    const int64_t* x = static_cast<const int64_t*>(p->x);
    return range_cpu<int64_t>("histogram_range", p->n, static_cast<int64_t*>(p->out), [x](int64_t i) { return x[i]; });
  }
  return dispatch_cpu(p->dtype, "histogram_range", [&](auto tag) -> tc_status {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(p->x);
    return range_cpu<double>("histogram_range", p->n, static_cast<double*>(p->out),
                             [x](int64_t i) { return double(to_acc(x[i])); });
  });
}
