// scan: y = the prefix scan of x along n (tinycuda/scan.h; the problems,
// shared with the CPU, in shared/scan_math.h: cumsum, cumprod and
// logcumsumexp forward, and the scans their gradients run).
//
// x is [outer, n, inner] (the torch layer makes it contiguous); a row is a
// column (o, k): n elements inner apart, walked in scan order (reverse: from
// the end). Each element becomes a state (a sum, a product, a (max, sum e^)
// pair, ...); the output at s is finish(the fold of the states before s, and
// s's own unless exclusive). plan::scan (shared/scan_plan.h) picks one of three
// shapes:
//
// columns    inner > 1: a thread a column, down n serially; adjacent threads
//            read adjacent k, so every step is one coalesced access a warp.
// warp_rows  inner = 1, n <= 2048: a warp a row, 32 elements a step: lane l
//            takes element s0 + l, a shuffle scan (5 levels) folds them, the
//            step's total carries into the next.
// tiles      inner = 1, longer rows: single-pass scan with decoupled look-back
//            (Merrill & Garland). A tile is 256 threads x ITEMS elements (64
//            bytes of states a thread: 16 fp32 sums); a block takes the next tile
//            number from a counter (so every earlier tile is running or done, and
//            waiting on one cannot deadlock) and
//              1. loads its states striped (thread t: t, t + 256, ...: coalesced)
//                 into shared memory and reads them back blocked (thread t:
//                 ITEMS consecutive), folds its ITEMS serially; a shuffle scan
//                 of the thread totals, then of the 8 warp totals, gives each
//                 thread its prefix within the tile and the tile's aggregate;
//              2. publishes the aggregate (flag 1), then warp 0 looks back:
//                 32 predecessors' flags at a time until it meets one that
//                 published its inclusive prefix (flag 2; the row's first tile
//                 publishes one at once); the tile's prefix is that inclusive
//                 prefix folded with the aggregates after it in tile order, and
//                 its own inclusive prefix (flag 2) follows;
//              3. scans its elements from that prefix, writes them back through
//                 shared memory and stores them striped.
//            The tile status (a flag word, an aggregate and an inclusive prefix
//            a tile) lives in the workspace; the launcher clears the counter
//            and the flags on the stream. A state is published as 32-bit
//            words (st.cg), a __threadfence, then the flag; a reader reads the
//            flag (volatile), fences, then the words (ld.cg).
//
// Determinism: a tile's prefix is always the left fold inclusive[p] +
// aggregate[p + 1] + ... + aggregate[g - 1], and inclusive[p] itself is, by
// the same rule, the left fold of every aggregate before it: so whichever p
// the look-back meets (which depends on timing), the prefix is the same
// sequence of combines, bit for bit, as a chained scan's. Every other fold
// (threads, shuffles, warps) has a fixed tree.
//
// Bytes: one read of x (the gradients: x, y, g) and one write of y; the
// tile status is 4 + 2 x sizeof(state) bytes per 256 x ITEMS elements.
#include <cstring>

#include "kit/cuda_utils.cuh"
#include "../shared/scan_math.h"  // after the kit: its element() converts with to_acc
#include "../shared/scan_plan.h"

namespace {

constexpr int kThreads = plan::kScanThreads;
constexpr int kWarps = kThreads / 32;
constexpr unsigned kFull = 0xffffffffu;

// a struct state through a shuffle or global memory, one 32-bit word at a time
template <class S> struct Words {
  static_assert(sizeof(S) % 4 == 0, "a state is whole 32-bit words");
  static constexpr int n = int(sizeof(S) / 4);
  unsigned w[n];
};
template <class S> __device__ __forceinline__ Words<S> words(const S& s) {
  Words<S> r;
  memcpy(r.w, &s, sizeof(S));
  return r;
}
template <class S> __device__ __forceinline__ S state(const Words<S>& r) {
  S s;
  memcpy(&s, r.w, sizeof(S));
  return s;
}
template <class S> __device__ __forceinline__ S shfl_up_state(const S& s, int delta) {
  Words<S> r = words(s);
#pragma unroll
  for (int i = 0; i < Words<S>::n; ++i) r.w[i] = __shfl_up_sync(kFull, r.w[i], delta);
  return state<S>(r);
}
template <class S> __device__ __forceinline__ S shfl_state(const S& s, int lane) {
  Words<S> r = words(s);
#pragma unroll
  for (int i = 0; i < Words<S>::n; ++i) r.w[i] = __shfl_sync(kFull, r.w[i], lane);
  return state<S>(r);
}
template <class S> __device__ __forceinline__ void store_cg(S* p, const S& s) {
  const Words<S> r = words(s);
#pragma unroll
  for (int i = 0; i < Words<S>::n; ++i) __stcg(reinterpret_cast<unsigned*>(p) + i, r.w[i]);
}
template <class S> __device__ __forceinline__ S load_cg(const S* p) {
  Words<S> r;
#pragma unroll
  for (int i = 0; i < Words<S>::n; ++i) r.w[i] = __ldcg(reinterpret_cast<const unsigned*>(p) + i);
  return state<S>(r);
}

// inclusive scan across the warp, a fixed tree (every lane takes part)
template <class P, class S>
__device__ __forceinline__ S warp_scan(S s) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const S other = shfl_up_state(s, d);
    if (lane >= d) s = P::combine(other, s);
  }
  return s;
}

// the exclusive form of a warp's inclusive scan: the previous lane's, identity at lane 0
template <class P, class S>
__device__ __forceinline__ S warp_exclusive(const S& inclusive) {
  const S prev = shfl_up_state(inclusive, 1);
  return (threadIdx.x & 31) == 0 ? P::identity() : prev;
}

template <class S> struct TileStatus {
  unsigned long long* counter;  // the next tile number
  unsigned* flags;              // 0: nothing yet, kAggregate, kInclusive
  S* aggregate;                 // the tile's own fold
  S* inclusive;                 // the fold of its row up to and with the tile
};
enum : unsigned { kAggregate = 1, kInclusive = 2 };

template <class S>
__device__ __forceinline__ void publish(S* slot, unsigned* flag, const S& s, unsigned f) {
  store_cg(slot, s);
  __threadfence();  // the state before the flag, for every reader
  atomicExch(flag, f);
}

// smem index of a tile's element i, padded a word every 32 so that the blocked
// reads (thread t: ITEMS consecutive) do not all hit one bank
__device__ __forceinline__ int pad(int i) { return i + (i >> 5); }

// ---------------------------------------------------------------------------
// kernels

template <class P, class T>
__global__ void __launch_bounds__(kThreads)
scan_columns_kernel(ScanArgs<T> a, int64_t rows, int64_t inner, bool reverse, T* out) {
  using State = typename P::State;
  for (int64_t r = int64_t(blockIdx.x) * kThreads + threadIdx.x; r < rows; r += int64_t(gridDim.x) * kThreads) {
    const ScanRow row = scan_row(r, a.n, inner, reverse);
    State run = P::identity();
    for (int64_t s = 0; s < a.n; ++s) {
      const int64_t e = row.first + s * row.step;
      const State before = run;
      run = P::combine(run, P::element(a, e, s));
      out[e] = from_acc<T>(P::finish(a, e, s, a.exclusive ? before : run));
    }
  }
}

template <class P, class T>
__global__ void __launch_bounds__(kThreads)
scan_warp_rows_kernel(ScanArgs<T> a, int64_t rows, bool reverse, T* out) {
  using State = typename P::State;
  const int lane = threadIdx.x & 31;
  // r is the same for the whole warp, so every lane runs every shuffle
  for (int64_t r = (int64_t(blockIdx.x) * kThreads + threadIdx.x) / 32; r < rows; r += int64_t(gridDim.x) * kWarps) {
    const ScanRow row = scan_row(r, a.n, 1, reverse);
    State carry = P::identity();
    for (int64_t s0 = 0; s0 < a.n; s0 += 32) {
      const int64_t s = s0 + lane, e = row.first + s * row.step;
      const State inc = warp_scan<P>(s < a.n ? P::element(a, e, s) : P::identity());
      const State before = warp_exclusive<P>(inc);
      if (s < a.n) out[e] = from_acc<T>(P::finish(a, e, s, P::combine(carry, a.exclusive ? before : inc)));
      carry = P::combine(carry, shfl_state(inc, 31));
    }
  }
}

// warp 0 of tile g (the row's t-th, t > 0): the tile's exclusive prefix, in
// every lane. Waits until the 32 predecessors of a window have all published
// (they never wait on a later tile), takes the nearest inclusive prefix, else
// the next window back; then folds forward, in tile order, from it.
template <class P, class S>
__device__ S look_back(const TileStatus<S>& st, int64_t g, int64_t t) {
  const int lane = threadIdx.x & 31;
  const int64_t first = g - t;  // the row's first tile publishes its inclusive prefix at once
  int64_t end = g, p = first;
  for (;;) {
    const int64_t q = end - 1 - lane;
    unsigned f;
    do {
      f = q >= first ? *static_cast<volatile unsigned*>(st.flags + q) : kInclusive;
    } while (__any_sync(kFull, f == 0));
    const unsigned inclusive = __ballot_sync(kFull, f == kInclusive);
    if (inclusive) {
      p = end - __ffs(inclusive);  // the lowest lane: the nearest tile
      break;
    }
    end -= 32;
  }
  __threadfence();  // the flags before the states they publish
  S prefix = load_cg(st.inclusive + p);
  for (int64_t b = p + 1; b < g; b += 32) {
    const S v = b + lane < g ? load_cg(st.aggregate + b + lane) : P::identity();
    const int m = int(g - b < 32 ? g - b : 32);
    for (int k = 0; k < m; ++k) prefix = P::combine(prefix, shfl_state(v, k));
  }
  return prefix;
}

template <class P, class T, int ITEMS>
__global__ void __launch_bounds__(kThreads)
scan_tiles_kernel(ScanArgs<T> a, bool reverse, int64_t tiles_per_row, TileStatus<typename P::State> st, T* out) {
  using State = typename P::State;
  constexpr int kTile = kThreads * ITEMS;
  __shared__ State buf[kTile + kTile / 32];
  __shared__ State warp_total[kWarps];
  __shared__ State tile_prefix;
  __shared__ int64_t tile;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  if (tid == 0) tile = int64_t(atomicAdd(st.counter, 1ull));
  __syncthreads();
  const int64_t g = tile, t = g % tiles_per_row, s0 = t * kTile;
  const ScanRow row = scan_row(g / tiles_per_row, a.n, 1, reverse);

  // 1. striped loads, blocked folds
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    const int64_t s = s0 + k * kThreads + tid;
    buf[pad(k * kThreads + tid)] = s < a.n ? P::element(a, row.first + s * row.step, s) : P::identity();
  }
  __syncthreads();
  State v[ITEMS];
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) v[k] = buf[pad(tid * ITEMS + k)];
  State total = v[0];
#pragma unroll
  for (int k = 1; k < ITEMS; ++k) total = P::combine(total, v[k]);
  const State inc = warp_scan<P>(total), before_in_warp = warp_exclusive<P>(inc);
  if (lane == 31) warp_total[warp] = inc;
  __syncthreads();
  State before_warp = P::identity();
  for (int w = 0; w < warp; ++w) before_warp = P::combine(before_warp, warp_total[w]);

  // 2. publish, look back
  if (warp == 0) {
    State aggregate = warp_total[0];
    for (int w = 1; w < kWarps; ++w) aggregate = P::combine(aggregate, warp_total[w]);
    if (t == 0) {
      if (lane == 0) publish(st.inclusive + g, st.flags + g, aggregate, kInclusive);
    } else {
      if (lane == 0) publish(st.aggregate + g, st.flags + g, aggregate, kAggregate);
      const State prefix = look_back<P>(st, g, t);
      if (lane == 0) {
        publish(st.inclusive + g, st.flags + g, P::combine(prefix, aggregate), kInclusive);
        tile_prefix = prefix;
      }
    }
  }
  __syncthreads();

  // 3. scan from the prefix, out through shared memory
  State run = P::combine(before_warp, before_in_warp);
  if (t > 0) run = P::combine(tile_prefix, run);
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    const State before = run;
    run = P::combine(run, v[k]);
    buf[pad(tid * ITEMS + k)] = a.exclusive ? before : run;
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    const int64_t s = s0 + k * kThreads + tid;
    if (s < a.n) {
      const int64_t e = row.first + s * row.step;
      out[e] = from_acc<T>(P::finish(a, e, s, buf[pad(k * kThreads + tid)]));
    }
  }
}

// ---------------------------------------------------------------------------
// launchers

template <class P, class T>
tc_status launch_scan(const char* name, int64_t outer, int64_t n, int64_t inner, bool reverse, ScanArgs<T> a, T* out,
                      void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  using State = typename P::State;
  const plan::Scan pl = plan::scan(outer, n, inner, sizeof(State));
  const int64_t rows = outer * inner;
  a.step = scan_row(0, n, inner, reverse).step;
  if (pl.kind == plan::kScanColumns) {
    scan_columns_kernel<P, T><<<grid_1d(rows, kThreads, 1 << 20), kThreads, 0, stream>>>(a, rows, inner, reverse, out);
  } else if (pl.kind == plan::kScanWarpRows) {
    scan_warp_rows_kernel<P, T><<<grid_1d(rows, kWarps, 1 << 20), kThreads, 0, stream>>>(a, rows, reverse, out);
  } else {
    const plan::ScanWorkspace ws = plan::scan_workspace(pl, sizeof(State));
    TC_REQUIRE(workspace_bytes >= ws.total && workspace, "%s: workspace of %zu bytes needed, %zu given", name,
               ws.total, workspace_bytes);
    TC_REQUIRE(pl.tiles <= INT32_MAX, "%s: %lld tiles, more than a grid holds", name, (long long)pl.tiles);
    char* base = static_cast<char*>(workspace);
    TC_RETURN_IF_ERROR(cuda_status(name, "cudaMemsetAsync", cudaMemsetAsync(base, 0, ws.cleared, stream)));
    const TileStatus<State> st{reinterpret_cast<unsigned long long*>(base),
                               reinterpret_cast<unsigned*>(base + ws.flags),
                               reinterpret_cast<State*>(base + ws.aggregates),
                               reinterpret_cast<State*>(base + ws.inclusive)};
    constexpr int kItems = plan::scan_items(sizeof(State));
    scan_tiles_kernel<P, T, kItems><<<unsigned(pl.tiles), kThreads, 0, stream>>>(a, reverse, pl.tiles_per_row, st, out);
  }
  return check_launch(name);
}

}  // namespace

tc_status tc_scan_cuda(const tc_scan_params* p) {
  TC_RETURN_IF_ERROR(scan_check(p));
  const char* name = scan_name(p->op);
  if (p->outer * p->n * p->inner == 0) return TC_OK;
  return dispatch_cuda(p->dtype, name, [&](auto tag) -> tc_status {
    using T = decltype(tag);
    const ScanArgs<T> a{static_cast<const T*>(p->x), nullptr, nullptr, p->n, 0, p->exclusive != 0};
    return dispatch_scan<acc_t<T>>(p->op, false, [&](auto problem) -> tc_status {
      return launch_scan<decltype(problem)>(name, p->outer, p->n, p->inner, p->reverse != 0, a, static_cast<T*>(p->y),
                                            p->workspace, p->workspace_bytes, as_stream(p->stream));
    });
  });
}

tc_status tc_scan_backward_cuda(const tc_scan_backward_params* p) {
  TC_RETURN_IF_ERROR(scan_check(p));
  const char* name = scan_name(p->op, true);
  if (p->outer * p->n * p->inner == 0) return TC_OK;
  return dispatch_cuda(p->dtype, name, [&](auto tag) -> tc_status {
    using T = decltype(tag);
    const T *x = static_cast<const T*>(p->x), *g = static_cast<const T*>(p->grad_y);
    // cumsum's gradient is cumsum's problem on g; every gradient scans the other way
    const ScanArgs<T> a{p->op == TC_SCAN_CUMSUM ? g : x, g, static_cast<const T*>(p->y), p->n, 0, p->exclusive != 0};
    return dispatch_scan<acc_t<T>>(p->op, true, [&](auto problem) -> tc_status {
      return launch_scan<decltype(problem)>(name, p->outer, p->n, p->inner, p->reverse == 0, a,
                                            static_cast<T*>(p->grad_x), p->workspace, p->workspace_bytes,
                                            as_stream(p->stream));
    });
  });
}
