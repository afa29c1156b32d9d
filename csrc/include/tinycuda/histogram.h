/* histogram family: torch's histc and bincount.
 *
 *   histc     out[b] = #{i : lo <= x_i <= hi and bin(x_i) = b}, b in [0, bins), in x's dtype, where
 *               bin(v) = (int64) ((v - lo) * bins / (hi - lo)),  bin(hi) = bins - 1 (the last bin is closed)
 *             computed in x's accumulator type (float; double for float64), in that order, with lo and hi
 *             the range rounded to x's dtype: torch's formula and bin edges, so that a value on an edge
 *             lands where torch puts it. Values outside [lo, hi], and NaN, count nowhere.
 *   bincount  out[b] = #{i : x_i = b} (int64), or the sum of weights_i over those i (float32 or float64).
 *
 * The sizes torch takes from the data (histc's range when min == max; bincount's length max(x) + 1 and its
 * check that x >= 0) come from the range pass, tc_histogram_range_*: out = [min(x), max(x)]. The caller reads
 * them (on CUDA a device sync, as torch's), checks them and fills the op's params.
 *
 * Counts are exact integers (uint32 a block, summed in uint64, converted once at the end), so they do not
 * depend on the order of the adds; weighted sums are folded in an order fixed by the shape and the device (no
 * float atomics): every result is bit-identical run to run.
 *
 * x (and weights) contiguous. On CUDA histc, bincount and the range pass take a workspace of
 * tc_<name>_workspace_size() bytes (a pure function of the params).
 */
#ifndef TINYCUDA_HISTOGRAM_H
#define TINYCUDA_HISTOGRAM_H
#include "common.h"

typedef struct {
  tc_dtype dtype;       /* x's and out's */
  int64_t n;            /* x's elements */
  int64_t bins;         /* >= 1 */
  double min, max;      /* the range, finite, min < max (torch's min == max is the caller's to resolve: the
                           data's range, widened by 1 each way where it is one value) */
  const void* x;
  void* out;            /* [bins] */
  void* workspace;
  size_t workspace_bytes;
  void* stream;         /* cudaStream_t; ignored on the CPU */
} tc_histc_params;

typedef struct {
  tc_dtype dtype;       /* with weights: theirs and out's, TC_FLOAT32 or TC_FLOAT64; ignored without */
  int64_t n;            /* x's elements */
  int64_t bins;         /* out's length; every x_i must lie in [0, bins): the CPU names the first that does
                           not, CUDA stops with a device-side assert */
  const int64_t* x;
  const void* weights;  /* [n], or NULL: counts */
  void* out;            /* [bins]: int64 counts, or dtype sums */
  void* workspace;
  size_t workspace_bytes;
  void* stream;
} tc_bincount_params;

typedef struct {
  tc_dtype dtype;       /* a float x's */
  int x_int64;          /* 1: x holds int64 (bincount's x); dtype is ignored */
  int64_t n;            /* >= 1 */
  const void* x;
  void* out;            /* [2] = min(x), max(x): double for a float x (NaN where x holds one), int64 for an
                           int64 x; on CUDA in device memory */
  void* workspace;
  size_t workspace_bytes;
  void* stream;
} tc_histogram_range_params;

TC_API size_t tc_histc_workspace_size(const tc_histc_params* p);
TC_API size_t tc_bincount_workspace_size(const tc_bincount_params* p);
TC_API size_t tc_histogram_range_workspace_size(const tc_histogram_range_params* p);
TC_API tc_status tc_histc_cpu(const tc_histc_params* p);
TC_API tc_status tc_histc_cuda(const tc_histc_params* p);
TC_API tc_status tc_bincount_cpu(const tc_bincount_params* p);
TC_API tc_status tc_bincount_cuda(const tc_bincount_params* p);
TC_API tc_status tc_histogram_range_cpu(const tc_histogram_range_params* p);
TC_API tc_status tc_histogram_range_cuda(const tc_histogram_range_params* p);

#endif
