// The histogram family's element math, shared by the CPU and CUDA kernels:
// which bin an element falls in (tinycuda/histogram.h), and the checks both
// devices run (csrc/shared/histogram.cpp).
//
// Include the backend's to_acc (kit/cpu_utils.h, kit/cuda_utils.cuh) first:
// HistcBin converts with it. Each backend rounds lo and hi to T (CUDA in the
// kernel: its conversions are device functions).
#pragma once
#include <cstdint>

#include "internal.h"
#include "tinycuda/histogram.h"

// histc's bin of v, or -1 where v lies outside [lo, hi] (or is NaN). torch's
// formula in torch's order, in the accumulator type: (v - lo) * bins / (hi - lo)
// truncated, with lo and hi rounded to x's dtype as its bin edges are; a value
// at hi lands in the last bin. The quotient is below bins for every v < hi
// (each step rounds monotonically); where lo == hi after the rounding (a range
// narrower than one step of x's dtype) 0 / 0 is NaN, and the value, lo itself,
// counts in the last bin instead of torch's undefined index.
template <class T> struct HistcBin {
  using A = acc_t<T>;
  A lo, hi, scale;  // lo and hi rounded to T, then in A; scale: bins, as torch multiplies by it
  int64_t bins;
  TC_HD int64_t operator()(T x) const {
    const A v = to_acc(x);
    if (!(v >= lo && v <= hi)) return -1;
    const A q = (v - lo) * scale / (hi - lo);
    return q < scale ? int64_t(q) : bins - 1;
  }
};

// bincount's bin of v: v itself where it lies in [0, bins), else -1 (an error:
// the CPU names the element, CUDA stops with a device-side assert)
struct BincountBin {
  int64_t bins;
  TC_HD int64_t operator()(int64_t v) const { return uint64_t(v) < uint64_t(bins) ? v : -1; }
};

// the bytes of a weighted sum (float32 weights sum in float, float64 in double); 0: counts
inline size_t bincount_acc_bytes(const tc_bincount_params* p) { return p->weights ? (p->dtype == TC_FLOAT64 ? 8 : 4) : 0; }

tc_status histc_check(const tc_histc_params* p);
tc_status bincount_check(const tc_bincount_params* p);
tc_status histogram_range_check(const tc_histogram_range_params* p);
