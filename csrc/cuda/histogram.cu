// histogram: histc, bincount and the range pass (tinycuda/histogram.h; the
// bins, shared with the CPU, in shared/histogram_math.h; the plan, shared with
// the workspace queries, in shared/histogram_plan.h).
//
// out[b] = the count (or the weight) of the elements whose bin is b. Two folds:
//   counts   histc, and bincount without weights. A block of 256 threads takes a
//            grid-strided share of x, 4 16-byte vectors a thread in flight (64 B;
//            fp32: 40 registers, so 6 blocks an SM, 96 KB of reads in flight,
//            past the ~25 KB Little's law asks at 4.8 TB/s x 700 ns / 132 SMs), and adds 1 per
//            element into one of `replicas` sub-histograms in shared memory, warp
//            w into w % replicas (256 bins: 8 of them, 8 KB, so only one warp's
//            lanes contend on a bin), with integer atomics. The block then sums
//            its sub-histograms bin by bin into its row of the workspace's
//            partials [grid, bins] (uint32: a block counts fewer than 2^32).
//            More bins than 48 KB holds (12288): uint64 atomics into the
//            workspace's [bins] (one row).
//   weights  bincount with weights. A block of 4 warps, a histogram each in
//            shared memory (float for float32 weights, double for float64); a
//            warp takes 32 vectors a step, and for each element of a vector the
//            lanes of one bin find each other (__match_any_sync), sum their
//            weights in lane order and the lowest of them adds the sum: no
//            atomics, no float add in an order timing could change. The block
//            sums its 4 histograms in warp order into its row of partials. More
//            bins than a block holds (3072 float, 1536 double): ranges of that
//            many, blockIdx.y a range, x read once a range.
// then finish: 32 bins a block of 1024 threads; warp g sums rows g, g + 32, ...
// of its bins' columns, and the 32 warp sums are added in warp order (fp32
// histc on 132 SMs: 792 rows, 25 loads a thread, not 792), converted to out's
// type (histc: x's dtype; bincount: int64, or the weights' type).
//
// The grid along x is the device's resident blocks (every SM the same number),
// capped by the plan's rows. Counts are integers: any order gives the same;
// weighted sums depend on the grid (so on the device) but never on timing.
// Bytes: x read once (histc 2^28 fp32: 1 GiB), the partials (2 MB) noise.
//
// The range pass: each block folds (min, max) of a grid-strided share (NaN
// propagates, as torch's min and max), one warp folds the blocks'.
#include <cmath>

#include "kit/reduce.cuh"
#include "kit/vec.cuh"
#include "../shared/histogram_math.h"  // after the kit: HistcBin converts with to_acc
#include "../shared/histogram_plan.h"

namespace {

constexpr int kCountThreads = plan::kHistCountThreads;
constexpr int kWeightThreads = plan::kHistWeightThreads;
constexpr int kWeightWarps = kWeightThreads / 32;
constexpr int kUnroll = 4;           // vectors in flight a thread
constexpr int kFinishBins = 32;      // a finish block: 32 bins x 32 warps of rows
constexpr int kRangeThreads = 256;
constexpr unsigned kFull = 0xffffffffu;

// f(element) for this thread's share of x[0, n): V-element vectors grid-
// strided, kUnroll of them loaded before any is used, then the last n % V
// elements one a thread
template <int V, class T, class F>
__device__ __forceinline__ void grid_walk(const T* __restrict__ x, int64_t n, F&& f) {
  const int64_t nv = n / V, stride = int64_t(gridDim.x) * blockDim.x;
  int64_t v = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; v + (kUnroll - 1) * stride < nv; v += kUnroll * stride) {
    Vec<T, V> a[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) a[u] = load_vec<T, V>(x + (v + u * stride) * V);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int j = 0; j < V; ++j) f(a[u].v[j]);
  }
  for (; v < nv; v += stride) {
    const Vec<T, V> a = load_vec<T, V>(x + v * V);
#pragma unroll
    for (int j = 0; j < V; ++j) f(a.v[j]);
  }
  for (int64_t i = nv * V + int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) f(x[i]);
}

// The bin functions, made in the kernel (histc rounds its range to T with the device's conversions)
template <class T> struct HistcSpec {
  double min, max;
  int64_t bins;
  __device__ HistcBin<T> make() const {
    using A = acc_t<T>;
    return {to_acc(from_acc<T>(A(min))), to_acc(from_acc<T>(A(max))), A(bins), bins};
  }
};

struct CheckedBincountBin {
  BincountBin bin;
  __device__ int64_t operator()(int64_t v) const {
    const int64_t b = bin(v);
    TC_DEVICE_REQUIRE(b >= 0, "tinycuda::bincount: x holds a value outside [0, bins)");
    return b;
  }
};
struct BincountSpec {
  int64_t bins;
  __device__ CheckedBincountBin make() const { return {{bins}}; }
};

// finish's conversions
template <class T> struct CountAs {
  __device__ T operator()(unsigned long long c) const { return from_acc<T>(acc_t<T>(c)); }
};
struct CountAsInt64 {
  __device__ int64_t operator()(unsigned long long c) const { return int64_t(c); }
};
template <class A> struct SumAs {
  __device__ A operator()(A s) const { return s; }
};

// (min, max) with NaN propagated: a NaN never compares, so it is kept once met
struct MinOp {
  template <class V> __device__ __forceinline__ V operator()(V a, V b) const { return (b < a || b != b) ? b : a; }
};
struct MaxOp {
  template <class V> __device__ __forceinline__ V operator()(V a, V b) const { return (b > a || b != b) ? b : a; }
};
template <class R> struct RangeOf;
template <> struct RangeOf<double> {  // the identities
  static constexpr double lo = INFINITY, hi = -INFINITY;
};
template <> struct RangeOf<int64_t> {
  static constexpr int64_t lo = INT64_MAX, hi = INT64_MIN;
};
template <class T> __device__ __forceinline__ double range_value(T v) { return double(to_acc(v)); }
__device__ __forceinline__ int64_t range_value(int64_t v) { return v; }

// a warp's lanes add w into hist[b] (b < 0: nothing): the lanes of a bin sum
// their weights in lane order and the lowest adds the sum, so every bin's adds
// run in the order of the steps, then the lanes (the same every run)
template <class A>
__device__ __forceinline__ void warp_add(A* hist, int b, A w) {
  const unsigned peers = __match_any_sync(kFull, b);
  if (b >= 0) {
    A s = A(0);
    for (unsigned m = peers; m; m &= m - 1) s += __shfl_sync(peers, w, __ffs(m) - 1);
    if (int(threadIdx.x % 32) == __ffs(peers) - 1) hist[b] += s;
  }
  __syncwarp();  // this step's adds before the next step's reads
}

// ---------------------------------------------------------------------------
// kernels

template <class T, int V, bool GLOBAL, class Spec>
__global__ void __launch_bounds__(kCountThreads)
hist_count_kernel(const T* __restrict__ x, int64_t n, Spec spec, int replicas, void* partials) {
  extern __shared__ unsigned sub[];  // [replicas][bins]
  const int64_t bins = spec.bins;
  if constexpr (!GLOBAL) {
    for (int64_t b = threadIdx.x; b < replicas * bins; b += kCountThreads) sub[b] = 0;
    __syncthreads();
  }
  const auto bin = spec.make();
  unsigned* mine = sub + int64_t(threadIdx.x / 32 % replicas) * bins;
  grid_walk<V>(x, n, [&](const T& e) {
    const int64_t b = bin(e);
    if (b < 0) return;
    if constexpr (GLOBAL) atomicAdd(static_cast<unsigned long long*>(partials) + b, 1ull);
    else atomicAdd(mine + b, 1u);
  });
  if constexpr (!GLOBAL) {
    __syncthreads();
    unsigned* row = static_cast<unsigned*>(partials) + int64_t(blockIdx.x) * bins;
    for (int64_t b = threadIdx.x; b < bins; b += kCountThreads) {
      unsigned s = 0;
      for (int r = 0; r < replicas; ++r) s += sub[r * bins + b];
      row[b] = s;
    }
  }
}

template <class W, class A, int V>
__global__ void __launch_bounds__(kWeightThreads)
hist_weight_kernel(const int64_t* __restrict__ x, const W* __restrict__ w, int64_t n, BincountSpec spec,
                   int64_t range, int64_t ranges, A* __restrict__ partials) {
  extern __shared__ __align__(16) unsigned char raw[];
  A* hist = reinterpret_cast<A*>(raw);  // [kWeightWarps][range]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  A* mine = hist + warp * range;
  const auto bin = spec.make();
  const int64_t bins = spec.bins, nv = n / V, warps = int64_t(gridDim.x) * kWeightWarps;
  const int64_t gw = int64_t(blockIdx.x) * kWeightWarps + warp;
  for (int64_t r = blockIdx.y; r < ranges; r += gridDim.y) {
    const int64_t first = r * range, held = bins - first < range ? bins - first : range;
    auto local = [&](int64_t v) {
      const int64_t b = bin(v) - first;
      return b >= 0 && b < held ? int(b) : -1;
    };
    for (int64_t b = threadIdx.x; b < kWeightWarps * range; b += kWeightThreads) hist[b] = A(0);
    __syncthreads();
    // a step: lane l takes vector base + l; base is the warp's, so every lane runs every step's match
    for (int64_t base = gw * 32; base < nv; base += warps * 32) {
      const int64_t v = base + lane;
      Vec<int64_t, V> xv{};
      Vec<W, V> wv{};
      if (v < nv) {
        xv = load_vec<int64_t, V>(x + v * V);
        wv = load_vec<W, V>(w + v * V);
      }
#pragma unroll
      for (int j = 0; j < V; ++j) warp_add(mine, v < nv ? local(xv.v[j]) : -1, A(to_acc(wv.v[j])));
    }
    if (gw == 0 && nv * V < n) {  // the last n % V elements, a lane each
      const int64_t i = nv * V + lane;
      warp_add(mine, i < n ? local(x[i]) : -1, i < n ? A(to_acc(w[i])) : A(0));
    }
    __syncthreads();
    for (int64_t b = threadIdx.x; b < held; b += kWeightThreads) {
      A s = hist[b];
      for (int k = 1; k < kWeightWarps; ++k) s += hist[k * range + b];
      partials[int64_t(blockIdx.x) * bins + first + b] = s;
    }
    __syncthreads();  // the sums read before the next range clears
  }
}

// out[b] = cvt(the sum of partials[r][b] over r < rows): lane l of warp g adds rows g, g + 32, ... of bin
// 32 blockIdx.x + l, then warp 0 adds the 32 warps' sums in warp order
template <class P, class S, class O, class Cvt>
__global__ void __launch_bounds__(kFinishBins * 32)
hist_finish_kernel(const P* __restrict__ partials, int64_t rows, int64_t bins, O* __restrict__ out, Cvt cvt) {
  __shared__ S sums[32][kFinishBins];
  const int lane = threadIdx.x % 32, g = threadIdx.x / 32;
  const int64_t b = int64_t(blockIdx.x) * kFinishBins + lane;
  S s = S(0);
  if (b < bins)
    for (int64_t r = g; r < rows; r += 32) s += S(partials[r * bins + b]);
  sums[g][lane] = s;
  __syncthreads();
  if (g == 0 && b < bins) {
    S t = sums[0][lane];
    for (int k = 1; k < 32; ++k) t += sums[k][lane];
    out[b] = cvt(t);
  }
}

template <class T, int V, class R>
__global__ void __launch_bounds__(kRangeThreads) range_kernel(const T* __restrict__ x, int64_t n, R* partials) {
  __shared__ R scratch[32];
  R lo = RangeOf<R>::lo, hi = RangeOf<R>::hi;
  grid_walk<V>(x, n, [&](const T& e) {
    const R v = range_value(e);
    lo = MinOp{}(lo, v);
    hi = MaxOp{}(hi, v);
  });
  lo = block_reduce(lo, MinOp{}, RangeOf<R>::lo, scratch, kRangeThreads / 32);
  hi = block_reduce(hi, MaxOp{}, RangeOf<R>::hi, scratch, kRangeThreads / 32);
  if (threadIdx.x == 0) {
    partials[2 * blockIdx.x] = lo;
    partials[2 * blockIdx.x + 1] = hi;
  }
}

template <class R>
__global__ void __launch_bounds__(32) range_finish_kernel(const R* __restrict__ partials, int rows, R* out) {
  R lo = RangeOf<R>::lo, hi = RangeOf<R>::hi;
  for (int r = threadIdx.x; r < rows; r += 32) {
    lo = MinOp{}(lo, partials[2 * r]);
    hi = MaxOp{}(hi, partials[2 * r + 1]);
  }
  lo = warp_reduce(lo, MinOp{});
  hi = warp_reduce(hi, MaxOp{});
  if (threadIdx.x == 0) {
    out[0] = lo;
    out[1] = hi;
  }
}

// ---------------------------------------------------------------------------
// launchers

tc_status workspace_check(const char* name, size_t need, const void* ws, size_t given) {
  TC_REQUIRE(given >= need && (need == 0 || ws), "%s: workspace of %zu bytes needed, %zu given", name, need, given);
  return TC_OK;
}

// blocks along x: the device's resident blocks of `kernel`, at most `cap`
template <class K>
tc_status resident_grid(const char* name, K kernel, int threads, size_t smem, int64_t cap, unsigned* grid) {
  DeviceFit fit;
  TC_RETURN_IF_ERROR(device_fit(name, kernel, threads, &fit, smem));
  const int64_t resident = int64_t(fit.sms) * (fit.blocks_per_sm > 0 ? fit.blocks_per_sm : 1);
  *grid = unsigned(resident < cap ? resident : cap);
  return TC_OK;
}

template <class P, class S, class O, class Cvt>
tc_status launch_finish(const char* name, const P* partials, int64_t rows, int64_t bins, O* out, Cvt cvt,
                        cudaStream_t stream) {
  hist_finish_kernel<P, S><<<grid_1d(bins, kFinishBins), kFinishBins * 32, 0, stream>>>(partials, rows, bins, out,
                                                                                       cvt);
  return check_launch(name);
}

// the counts fold of x (T, contiguous) into out through cvt
template <class T, class Spec, class O, class Cvt>
tc_status launch_counts(const char* name, const T* x, int64_t n, Spec spec, void* ws, size_t ws_bytes, O* out,
                        Cvt cvt, cudaStream_t stream) {
  const int64_t bins = spec.bins;
  if (n == 0)  // zeros: no partial row to add
    return launch_finish<unsigned, unsigned long long>(name, static_cast<unsigned*>(nullptr), 0, bins, out, cvt,
                                                       stream);
  const plan::Hist h = plan::histogram(n, bins, 0);
  TC_RETURN_IF_ERROR(workspace_check(name, plan::hist_workspace(h, bins, 0), ws, ws_bytes));
  constexpr int V = Vec<T>::size;
  const bool vec = aligned16(x);
  if (h.global) {
    auto kernel = vec ? hist_count_kernel<T, V, true, Spec> : hist_count_kernel<T, 1, true, Spec>;
    unsigned grid;
    TC_RETURN_IF_ERROR(resident_grid(name, kernel, kCountThreads, 0, grid_1d(n, kCountThreads * V), &grid));
    TC_RETURN_IF_ERROR(cuda_status(name, "cudaMemsetAsync", cudaMemsetAsync(ws, 0, size_t(bins) * 8, stream)));
    kernel<<<grid, kCountThreads, 0, stream>>>(x, n, spec, 1, ws);
    TC_RETURN_IF_ERROR(check_launch(name));
    return launch_finish<unsigned long long, unsigned long long>(name, static_cast<unsigned long long*>(ws), 1, bins,
                                                                 out, cvt, stream);
  }
  auto kernel = vec ? hist_count_kernel<T, V, false, Spec> : hist_count_kernel<T, 1, false, Spec>;
  unsigned grid;
  TC_RETURN_IF_ERROR(resident_grid(name, kernel, kCountThreads, h.smem, h.rows, &grid));
  kernel<<<grid, kCountThreads, h.smem, stream>>>(x, n, spec, h.replicas, ws);
  TC_RETURN_IF_ERROR(check_launch(name));
  return launch_finish<unsigned, unsigned long long>(name, static_cast<unsigned*>(ws), grid, bins, out, cvt, stream);
}

template <class W>
tc_status launch_weights(const tc_bincount_params* p, cudaStream_t stream) {
  const char* name = "bincount";
  using A = W;  // float32 weights sum in float, float64 in double
  const plan::Hist h = plan::histogram(p->n, p->bins, sizeof(A));
  TC_RETURN_IF_ERROR(workspace_check(name, plan::hist_workspace(h, p->bins, sizeof(A)), p->workspace,
                                     p->workspace_bytes));
  const W* w = static_cast<const W*>(p->weights);
  A* partials = static_cast<A*>(p->workspace);
  constexpr int V = 16 / sizeof(int64_t);
  const bool vec = aligned16(p->x) && reinterpret_cast<uintptr_t>(w) % (V * sizeof(W)) == 0;
  auto kernel = vec ? hist_weight_kernel<W, A, V> : hist_weight_kernel<W, A, 1>;
  unsigned grid;
  TC_RETURN_IF_ERROR(resident_grid(name, kernel, kWeightThreads, h.smem, h.rows, &grid));
  const dim3 blocks(grid, unsigned(h.ranges < 65535 ? h.ranges : 65535));
  kernel<<<blocks, kWeightThreads, h.smem, stream>>>(p->x, w, p->n, BincountSpec{p->bins}, h.range, h.ranges,
                                                     partials);
  TC_RETURN_IF_ERROR(check_launch(name));
  return launch_finish<A, A>(name, partials, grid, p->bins, static_cast<A*>(p->out), SumAs<A>{}, stream);
}

template <class T, class R>
tc_status launch_range(const tc_histogram_range_params* p, cudaStream_t stream) {
  const char* name = "histogram_range";
  const int64_t rows = plan::range_rows(p->n);
  TC_RETURN_IF_ERROR(workspace_check(name, size_t(rows) * 2 * sizeof(R), p->workspace, p->workspace_bytes));
  const T* x = static_cast<const T*>(p->x);
  R* partials = static_cast<R*>(p->workspace);
  constexpr int V = Vec<T>::size;
  if (aligned16(x)) range_kernel<T, V, R><<<unsigned(rows), kRangeThreads, 0, stream>>>(x, p->n, partials);
  else range_kernel<T, 1, R><<<unsigned(rows), kRangeThreads, 0, stream>>>(x, p->n, partials);
  TC_RETURN_IF_ERROR(check_launch(name));
  range_finish_kernel<R><<<1, 32, 0, stream>>>(partials, int(rows), static_cast<R*>(p->out));
  return check_launch(name);
}

}  // namespace

tc_status tc_histc_cuda(const tc_histc_params* p) {
  TC_RETURN_IF_ERROR(histc_check(p));
  return dispatch_cuda(p->dtype, "histc", [&](auto tag) -> tc_status {
    using T = decltype(tag);
    return launch_counts("histc", static_cast<const T*>(p->x), p->n, HistcSpec<T>{p->min, p->max, p->bins},
                         p->workspace, p->workspace_bytes, static_cast<T*>(p->out), CountAs<T>{}, as_stream(p->stream));
  });
}

tc_status tc_bincount_cuda(const tc_bincount_params* p) {
  TC_RETURN_IF_ERROR(bincount_check(p));
  if (p->bins == 0) return TC_OK;
  cudaStream_t stream = as_stream(p->stream);
  if (!p->weights)
    return launch_counts("bincount", p->x, p->n, BincountSpec{p->bins}, p->workspace, p->workspace_bytes,
                         static_cast<int64_t*>(p->out), CountAsInt64{}, stream);
  if (p->n == 0) {  // zeros: no partial row to add
    const size_t bytes = size_t(p->bins) * (p->dtype == TC_FLOAT64 ? 8 : 4);
    return cuda_status("bincount", "cudaMemsetAsync", cudaMemsetAsync(p->out, 0, bytes, stream));
  }
  return p->dtype == TC_FLOAT64 ? launch_weights<double>(p, stream) : launch_weights<float>(p, stream);
}

tc_status tc_histogram_range_cuda(const tc_histogram_range_params* p) {
  TC_RETURN_IF_ERROR(histogram_range_check(p));
  cudaStream_t stream = as_stream(p->stream);
  if (p->x_int64) return launch_range<int64_t, int64_t>(p, stream);
  return dispatch_cuda(p->dtype, "histogram_range", [&](auto tag) -> tc_status {
    return launch_range<decltype(tag), double>(p, stream);
  });
}
