// layer_norm and rms_norm, forward and backward, on CUDA: the kernels and
// launchers shared by cuda/layer_norm.cu and cuda/rms_norm.cu (RMS: no mean,
// no bias).
//
// Math, per row of x [rows, cols], n = cols, statistics in float (double for
// double):
//   forward   mean = sum(x) / n        (rms: 0)
//             rstd = 1 / sqrt(sum((x - mean)^2) / n + eps)
//             y    = (x - mean) * rstd * w + b
//   backward  xhat = (x - mean) * rstd,  wg = grad_y * w
//             grad_x = rstd * (wg - sum(wg) / n - xhat * sum(wg * xhat) / n)  (rms: no sum(wg))
//             grad_w = sum over rows of grad_y * xhat,  grad_b = sum over rows of grad_y
//
// Launch shape. A row group of `width` threads (a power of 2, 8..512) owns
// a row; each thread holds VPT chunks of VEC elements of it in registers:
// 16-byte vectors (8 fp16/bf16, 4 fp32, 2 fp64), or single elements when cols
// is not a multiple of 16 bytes or a pointer is misaligned. A thread holds 16
// elements of a row (8 of double or single elements), so rows up to 8192
// elements (4096 double, 4096 single elements) are read from DRAM exactly
// once; the statistics are two passes over the registers (a centered
// variance, not E[x^2] - E[x]^2). `width` is the fewest threads that hold the
// row: 256 for 4096 bf16 columns. 16-bit rows of 3 x 2^k vectors (768, 1536,
// 3072 columns) take 2^k threads of 3 vectors, one row a group at a time: at 2
// a thread a quarter of the threads held nothing (GPT-2's add_layer_norm,
// 16384 x 768 bf16 on an H200: forward 39.0 -> 31.5 us, backward 47.1 -> 39.5).
// A 512-thread block holds 512 / width
// groups; a group reduces with shuffles and, across its warps, shared memory
// and a named barrier of its own, so the groups of a block never wait for
// each other. A group works on kRows rows at a time (2 for 16-bit vectors,
// else 1). Weight and bias are read where used, each row (L1 hits), not held.
// Longer rows, on sm_90, span a thread-block cluster of 2..16 such blocks
// (kit/cluster.cuh), one row at a time, 4 vectors a thread: up to 262144
// bf16 or 131072 fp32 elements, still read once; each row sum ends in one
// cluster barrier. Before clusters, 16384 bf16 columns ran at 1.36 TB/s
// (rms_norm fwd+bwd) and 0.38 (layer_norm). Longer rows still, single-element
// loads, and GPUs without clusters take the loop path: one group of 512
// threads a block, a row at a time, re-read for each pass (from L2 while it
// is there).
//
// Forward: one block per (512 / width) x kRows rows. Bytes: read x, write y,
// 8 bytes a row for mean and rstd.
// Backward: at most norms::kMaxPartials blocks or clusters (as many as fit at
// once, up to 2 per H100 SM), each owning a band of consecutive rows (a
// cluster's blocks each own their columns of it). A thread keeps
// grad_w / grad_b of its own columns in registers over the whole band, the
// block adds its groups in shared memory in a fixed order and writes one row
// of fp32 partials per gradient; sum_partials_kernel (kit/reduce.cuh, 16
// threads a column) adds the rows column by column in a fixed order: the
// gradients are bit-identical run to run (no float atomics). Bytes: read x and grad_y, write grad_x, plus 2 x 2 MB of
// partials at 4096 columns (132 blocks on an H100). A band's steps are uniform
// over the block (their row sums end in __syncthreads), so each step first
// asks L2 for the next step's rows (prefetch_l2): without it DRAM idled while
// a step reduced (GPT-2's add_layer_norm backward, 16384 x 768 bf16, H200:
// 51.4 -> 46.4 us, 37% -> 41% of DRAM peak, ncu).
//
// Expected at 32768 x 4096 bf16 (256 MB a tensor) on an H100 (3.0 TB/s copy):
// both kernels bandwidth-bound, near copy speed. ptxas (sm_90a): forward 60-64
// registers (2 blocks = 1024 threads an SM), backward 115-128 (1 block of
// 512). Per SM that keeps 1024 threads x 2 rows x 32 B = 64 KB of x in flight
// forward and 512 x 2 rows x 64 B = 64 KB of x and grad_y backward, against
// the ~25 KB Little's law asks for (22.7 GB/s per SM x ~1 us loaded latency).
// fwd ~0.18 ms + bwd ~0.28 ms for 1.34 GB: ~2.8 TB/s fwd+bwd.
#pragma once
#include <cstdint>

#include "../shared/norm_plan.h"
#include "../shared/reduce_plan.h"
#include "kit/cluster.cuh"
#include "kit/pdl.cuh"
#include "kit/reduce.cuh"
#include "kit/vec.cuh"

namespace {

constexpr int kBlock = 512;  // threads a block (every norm kernel)
constexpr int kWarps = kBlock / 32;

// Elements a thread holds per row: 16 in 16-byte vectors (8 double), 8 when
// loaded one by one. Rows a group works on at a time: 2 for 16-bit vectors,
// else 1 (a float, or a 16-bit element loaded alone, takes a whole register).
template <class T, int VEC>
constexpr int kElems = VEC == 1 || sizeof(T) == 8 ? 8 : 16;
template <class T, int VEC>
constexpr int kRowsOf = sizeof(T) == 2 && VEC > 1 ? 2 : 1;

template <class T>
struct FwdArgs {
  const T* x;
  const T* w;  // NULL: 1
  const T* b;  // NULL: 0
  T* y;
  acc_t<T>* mean;  // NULL: not written
  acc_t<T>* rstd;
  int64_t rows, cols;
  acc_t<T> eps;
  const T* r;  // add_rms_norm: x + r is normalized, and written to s (NULL: x alone)
  T* s;
  acc_t<T> offset;  // rms: the weight is offset + w
  int casting;      // rms: TC_RMS_CAST_* (rms_norm.h)
};

template <class T>
struct BwdArgs {
  const T* g;
  const T* x;
  const acc_t<T>* mean;  // NULL for rms
  const acc_t<T>* rstd;
  const T* w;   // NULL: 1
  T* gx;        // NULL: not computed
  acc_t<T>* part_w;  // [gridDim.x, cols] partials, NULL: not computed
  acc_t<T>* part_b;
  int64_t rows, cols, band;  // block i owns rows [i * band, (i + 1) * band)
  const T* gs;  // add_rms_norm: added to grad_x (NULL: 0)
  acc_t<T> offset;
  int casting;
};

// ---------------------------------------------------------------------------
// the backward's column sums (row reductions: group_sum, kit/reduce.cuh)

// Adds the groups' column sums acc[k][j] (column (k * stride + first + lane)
// * VEC + j, `first` the block's offset in a cluster's row) in group order and
// writes them as row `row` of `part`, coalesced.
template <int VPT, int VEC, class A>
__device__ void write_partials(const A (&acc)[VPT][VEC], A* __restrict__ part, int64_t row, int width,
                               int64_t stride, int64_t first, int64_t cols, A* combine /* [kBlock * VEC] */) {
  const int groups = kBlock / width;
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    __syncthreads();  // the previous chunk's sums have been read
#pragma unroll
    for (int j = 0; j < VEC; ++j) combine[threadIdx.x * VEC + j] = acc[k][j];
    __syncthreads();
    // group g, lane l, element j sits at (g * width + l) * VEC + j: the
    // chunk's columns are contiguous per group
    for (int e = threadIdx.x; e < width * VEC; e += kBlock) {
      const int64_t c = (int64_t(k) * stride + first) * VEC + e;
      if (c >= cols) break;
      A s = 0;
      for (int g = 0; g < groups; ++g) s += combine[g * width * VEC + e];
      part[row * cols + c] = s;
    }
  }
}

// y = (x - mean) * rstd * w + b for one chunk at column `col`. Weight and bias
// are read here, every row (from L1: a block's share of them is at most
// 64 KB), not held in registers across rows, which spilled fp32 rows.
// rms_norm's options (rms_norm.h) and add_rms_norm's residual: compiled in
// only where OPT is set. Their per-element selects in every kernel made
// rms_norm's and layer_norm's backward 6.5% slower at 32768 x 4096 bf16.
// offset + w, and xhat, are rounded to T unless casting is GEMMA.
template <class T>
__device__ __forceinline__ acc_t<T> rounded(acc_t<T> v) {
  return acc_t<T>(to_acc(from_acc<T>(v)));
}
template <bool OPT, class T, class A>
__device__ __forceinline__ A weight_of(T w, A offset, int casting) {
  if constexpr (!OPT) return A(to_acc(w));
  const A v = A(to_acc(w)) + offset;
  return casting == TC_RMS_CAST_GEMMA ? v : rounded<T>(v);
}

template <bool RMS, bool OPT, class T, int VEC, class A>
__device__ __forceinline__ void normalize(const Vec<T, VEC>& x, const T* w, const T* b, int64_t col,
                                          A mean, A rstd, A offset, int casting, Vec<T, VEC>& y) {
  Vec<T, VEC> wv, bv;
  if (w) wv = load_vec<T, VEC>(w + col);
  if (!RMS && b) bv = load_vec<T, VEC>(b + col);
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    A v = (A(to_acc(x.v[j])) - mean) * rstd;
    if (OPT && casting != TC_RMS_CAST_GEMMA) v = rounded<T>(v);
    if (w) v *= weight_of<OPT>(wv.v[j], offset, casting);
    if (!RMS && b) v += A(to_acc(bv.v[j]));
    y.v[j] = from_acc<T>(v);
  }
}

// add_rms_norm: s = x + r, rounded to T (the residual stream the next block
// reads), stored, and returned for the statistics.
template <class T, int VEC>
__device__ __forceinline__ Vec<T, VEC> add_residual(const Vec<T, VEC>& x, const T* r, T* s) {
  const Vec<T, VEC> rv = load_vec<T, VEC>(r);
  Vec<T, VEC> sv;
#pragma unroll
  for (int j = 0; j < VEC; ++j) sv.v[j] = from_acc<T>(acc_t<T>(to_acc(x.v[j])) + acc_t<T>(to_acc(rv.v[j])));
  store_vec(s, sv);
  return sv;
}

// Stores grad_x of one chunk at gx, plus add_rms_norm's grad_s read at gs
// (OPT only; NULL: none). A Vec returned by value here instead took the
// VPT = 4 bf16 layer_norm backward from 24 to 104 bytes of spills.
template <bool OPT, class T, int VEC, class A>
__device__ __forceinline__ void store_grad_x(T* gx, const T* gs, const A (&xhat)[VEC], const A (&wg)[VEC], A rstd,
                                             A mean_wg, A mean_wgx) {
  Vec<T, VEC> o, add;
  if (OPT && gs) add = load_vec<T, VEC>(gs);
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    A v = rstd * (wg[j] - mean_wg - xhat[j] * mean_wgx);
    if (OPT && gs) v += A(to_acc(add.v[j]));
    o.v[j] = from_acc<T>(v);
  }
  store_vec(gx, o);
}

// The backward's per-element terms of one chunk at column `col`: xhat,
// grad_y and wg = grad_y * w (w read here, like normalize's).
template <bool OPT, class T, int VEC, class A>
__device__ __forceinline__ void terms(const Vec<T, VEC>& x, const Vec<T, VEC>& g, const T* w,
                                      int64_t col, A mean, A rstd, A offset, int casting, A (&xhat)[VEC],
                                      A (&gy)[VEC], A (&wg)[VEC]) {
  Vec<T, VEC> wv;
  if (w) wv = load_vec<T, VEC>(w + col);
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    xhat[j] = (A(to_acc(x.v[j])) - mean) * rstd;
    gy[j] = to_acc(g.v[j]);
    wg[j] = w ? gy[j] * weight_of<OPT>(wv.v[j], offset, casting) : gy[j];
    if (OPT && casting != TC_RMS_CAST_GEMMA) wg[j] = rounded<T>(wg[j]);
  }
}

// 1 / sqrt(var + eps), rounded to T for casting NONE
template <class T, bool OPT, class A>
__device__ __forceinline__ A rstd_of(A var_eps, int casting) {
  const A r = A(1) / sqrt(var_eps);
  return OPT && casting == TC_RMS_CAST_NONE ? rounded<T>(r) : r;
}

// grad_weight's term: grad_y times xhat as the forward multiplied it
template <class T, bool OPT, class A>
__device__ __forceinline__ A dw_term(A gy, A xhat, int casting) {
  return gy * (!OPT || casting == TC_RMS_CAST_GEMMA ? xhat : rounded<T>(xhat));
}

// ---------------------------------------------------------------------------
// kernels: row in registers

// CLUSTER > 1: a row spans the cluster's blocks (width = kBlock), block
// `rank` holding every CLUSTER-th run of kBlock chunks; each row sum ends in
// cluster_allreduce (kit/cluster.cuh).
template <class T, bool RMS, int VEC, int VPT, int kRows, int CLUSTER, bool OPT>
__global__ void __launch_bounds__(kBlock, 2)
norm_forward_kernel(FwdArgs<T> a, int width) {
  pdl_start();
  using A = acc_t<T>;
  using P = Vec<T, VEC>;
  using C = ClusterRow<CLUSTER>;
  __shared__ A scratch[2][kWarps][kRows];
  __shared__ A slots[2][CLUSTER][kRows];
  const int lane = C::rank() * width + (threadIdx.x & (width - 1));
  const int64_t groups = kBlock / width, chunks = a.cols / VEC, stride = int64_t(width) * CLUSTER;
  const A inv_n = a.cols ? A(1) / A(a.cols) : A(0);
  int slot = 0;
  ClusterSync<CLUSTER> sync;
  // the loop is uniform over the block (and a cluster's blocks): groups
  // narrower than a warp shuffle together, so a group past the last row
  // still takes part (valid() keeps it from loading or storing)
  for (int64_t base = C::id() * groups * kRows; base < a.rows; base += C::count() * groups * kRows) {
    const int64_t r0 = base + threadIdx.x / width * kRows;
    P xv[kRows][VPT];
#pragma unroll
    for (int u = 0; u < kRows; ++u)
#pragma unroll
      for (int k = 0; k < VPT; ++k) {
        const int64_t c = int64_t(k) * stride + lane;
        if (r0 + u < a.rows && c < chunks) xv[u][k] = load_vec<T, VEC>(a.x + (r0 + u) * a.cols + c * VEC);
      }
    auto valid = [&](int u, int k) {
      return r0 + u < a.rows && int64_t(k) * stride + lane < chunks;
    };
    if (OPT && a.r) {
#pragma unroll
      for (int u = 0; u < kRows; ++u)
#pragma unroll
        for (int k = 0; k < VPT; ++k)
          if (valid(u, k)) {
            const int64_t at = (r0 + u) * a.cols + (int64_t(k) * stride + lane) * VEC;
            xv[u][k] = add_residual(xv[u][k], a.r + at, a.s + at);
          }
    }
    A mean[kRows] = {}, ss[kRows] = {};
    if constexpr (!RMS) {
#pragma unroll
      for (int u = 0; u < kRows; ++u)
#pragma unroll
        for (int k = 0; k < VPT; ++k)
          if (valid(u, k))
#pragma unroll
            for (int j = 0; j < VEC; ++j) mean[u] += to_acc(xv[u][k].v[j]);
      group_sum(mean, width, scratch, slot);
      cluster_allreduce<CLUSTER>(mean, Sum{}, slots, sync);
#pragma unroll
      for (int u = 0; u < kRows; ++u) {
        mean[u] *= inv_n;
        launder(xv[u]);
      }
    }
#pragma unroll
    for (int u = 0; u < kRows; ++u)
#pragma unroll
      for (int k = 0; k < VPT; ++k)
        if (valid(u, k))
#pragma unroll
          for (int j = 0; j < VEC; ++j) {
            const A d = A(to_acc(xv[u][k].v[j])) - mean[u];
            ss[u] += d * d;
          }
    group_sum(ss, width, scratch, slot);
    cluster_allreduce<CLUSTER>(ss, Sum{}, slots, sync);
#pragma unroll
    for (int u = 0; u < kRows; ++u) {
      launder(xv[u]);
      if (r0 + u >= a.rows) break;
      const A rstd = rstd_of<T, OPT>(ss[u] * inv_n + a.eps, a.casting);
      if (lane == 0) {  // block 0 of a cluster
        if (a.mean) a.mean[r0 + u] = mean[u];
        if (a.rstd) a.rstd[r0 + u] = rstd;
      }
#pragma unroll
      for (int k = 0; k < VPT; ++k) {
        if (!valid(u, k)) continue;
        const int64_t c = int64_t(k) * stride + lane;
        P yv;
        normalize<RMS, OPT>(xv[u][k], a.w, a.b, c * VEC, mean[u], rstd, a.offset, a.casting, yv);
        store_vec(a.y + (r0 + u) * a.cols + c * VEC, yv);
      }
    }
  }
}

// The backward's L2 prefetches of one step (three threads, one range each):
// rows [next, next_end) of x and g, and rows [cur, next) of gs (NULL: none).
template <class T>
__device__ __forceinline__ void prefetch_band(int tid, int64_t next, int64_t next_end, int64_t r_end, int64_t cols,
                                              const T* x, const T* g, const T* gs, int64_t cur) {
  const int64_t row_bytes = cols * int64_t(sizeof(T));
  next_end = min(next_end, r_end);
  if (tid == 0 && next < next_end) prefetch_l2(x + next * cols, uint32_t((next_end - next) * row_bytes));
  if (tid == 32 && next < next_end) prefetch_l2(g + next * cols, uint32_t((next_end - next) * row_bytes));
  if (tid == 64 && gs) prefetch_l2(gs + cur * cols, uint32_t((min(next, r_end) - cur) * row_bytes));
}

// Launch bound of 1 block (512 threads, up to 128 registers): the column sums
// (2 x 16 floats) stay live across the row loop, beside x and grad_y of two
// rows (32 registers of bf16) and their float terms.
// CLUSTER > 1 as in the forward: a cluster owns the band, each block its
// columns, and writes them into the cluster's row of partials.
template <class T, bool RMS, int VEC, int VPT, int kRows, int CLUSTER, bool OPT>
__global__ void __launch_bounds__(kBlock, 1)
norm_backward_kernel(BwdArgs<T> a, int width) {
  pdl_start();
  using A = acc_t<T>;
  using P = Vec<T, VEC>;
  using C = ClusterRow<CLUSTER>;
  constexpr int NS = RMS ? 1 : 2;  // row sums: sum(wg * xhat) [, sum(wg)]
  __shared__ A scratch[2][kWarps][NS * kRows];
  __shared__ A slots[2][CLUSTER][NS * kRows];
  __shared__ A combine[kBlock * VEC];
  const int lane = C::rank() * width + (threadIdx.x & (width - 1));
  const int64_t groups = kBlock / width, chunks = a.cols / VEC, stride = int64_t(width) * CLUSTER;
  const A inv_n = a.cols ? A(1) / A(a.cols) : A(0);
  A dw[VPT][VEC] = {}, db[VPT][VEC] = {};
  const int64_t r_begin = C::id() * a.band, r_end = min(a.rows, r_begin + a.band);
  int slot = 0;
  ClusterSync<CLUSTER> sync;
  // The row loop is uniform over the block and the reductions use
  // __syncthreads: with group barriers, groups that ran out of rows waited at
  // write_partials' __syncthreads while others still reduced, and racecheck
  // reported hazards on the shared buffers (fp32 3 x 1024, 8 groups a block).
  for (int64_t base = r_begin; base < r_end; base += groups * kRows) {
    if constexpr (CLUSTER == 1 && sizeof(P) == 16) {
      // L2 fetches the next rows' x and grad_y, and these rows' grad_s, while
      // the block waits on this step's loads and reduces them: the loop is
      // uniform over the block, so without it DRAM idled between steps
      prefetch_band<T>(threadIdx.x, base + groups * kRows, base + 2 * groups * kRows, r_end, a.cols, a.x, a.g,
                       OPT && a.gx ? a.gs : nullptr, base);  // grad_s is read only with grad_x
    }
    const int64_t r0 = base + threadIdx.x / width * kRows;
    P xv[kRows][VPT], gv[kRows][VPT];
    A mean[kRows], rstd[kRows];
#pragma unroll
    for (int u = 0; u < kRows; ++u) {
      const bool row_ok = r0 + u < r_end;
      mean[u] = RMS || !row_ok ? A(0) : a.mean[r0 + u];
      rstd[u] = row_ok ? a.rstd[r0 + u] : A(0);
#pragma unroll
      for (int k = 0; k < VPT; ++k) {
        const int64_t c = int64_t(k) * stride + lane;
        if (!row_ok || c >= chunks) continue;
        xv[u][k] = load_vec<T, VEC>(a.x + (r0 + u) * a.cols + c * VEC);
        gv[u][k] = load_vec<T, VEC>(a.g + (r0 + u) * a.cols + c * VEC);
      }
    }
    auto valid = [&](int u, int k) { return r0 + u < r_end && int64_t(k) * stride + lane < chunks; };
    A s[NS * kRows] = {}, xhat[VEC], gy[VEC], wg[VEC];
#pragma unroll
    for (int u = 0; u < kRows; ++u)
#pragma unroll
      for (int k = 0; k < VPT; ++k) {
        if (!valid(u, k)) continue;
        const int64_t col = (int64_t(k) * stride + lane) * VEC;
        terms<OPT>(xv[u][k], gv[u][k], a.w, col, mean[u], rstd[u], a.offset, a.casting, xhat, gy, wg);
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          s[u * NS] += wg[j] * xhat[j];
          dw[k][j] += dw_term<T, OPT>(gy[j], xhat[j], a.casting);
          if constexpr (!RMS) {
            s[u * NS + 1] += wg[j];
            db[k][j] += gy[j];
          }
        }
      }
    if (!a.gx) continue;  // uniform across the grid
    group_sum(s, width, scratch, slot, /*whole_block=*/true);
    cluster_allreduce<CLUSTER>(s, Sum{}, slots, sync);
#pragma unroll
    for (int u = 0; u < kRows; ++u) {
      launder(xv[u]);
      launder(gv[u]);
      const A mean_wgx = s[u * NS] * inv_n, mean_wg = RMS ? A(0) : s[u * NS + 1] * inv_n;
#pragma unroll
      for (int k = 0; k < VPT; ++k) {
        if (!valid(u, k)) continue;
        const int64_t col = (int64_t(k) * stride + lane) * VEC;
        terms<OPT>(xv[u][k], gv[u][k], a.w, col, mean[u], rstd[u], a.offset, a.casting, xhat, gy, wg);
        const int64_t at = (r0 + u) * a.cols + col;
        store_grad_x<OPT>(a.gx + at, OPT && a.gs ? a.gs + at : nullptr, xhat, wg, rstd[u], mean_wg, mean_wgx);
      }
    }
  }
  const int64_t first = int64_t(C::rank()) * width;
  if (a.part_w) write_partials(dw, a.part_w, C::id(), width, stride, first, a.cols, combine);
  if (!RMS && a.part_b) write_partials(db, a.part_b, C::id(), width, stride, first, a.cols, combine);
}

// ---------------------------------------------------------------------------
// kernels: rows longer than kBlock * VPT chunks, one group (the block) a row

template <class T, bool RMS, int VEC, bool OPT>
__global__ void __launch_bounds__(kBlock, 2)
norm_forward_loop_kernel(FwdArgs<T> a, int) {
  pdl_start();
  using A = acc_t<T>;
  using P = Vec<T, VEC>;
  __shared__ A scratch[2][kWarps][1];
  const int64_t chunks = a.cols / VEC;
  const A inv_n = A(1) / A(a.cols);
  int slot = 0;
  for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const T* x = a.x + r * a.cols;
    if (OPT && a.r) {  // the sum is written first and re-read (by the thread that wrote it) in each pass
      for (int64_t c = threadIdx.x; c < chunks; c += kBlock)
        add_residual(load_vec<T, VEC>(x + c * VEC), a.r + r * a.cols + c * VEC, a.s + r * a.cols + c * VEC);
      x = a.s + r * a.cols;
    }
    A mean[1] = {0}, ss[1] = {0};
    if constexpr (!RMS) {
#pragma unroll 4
      for (int64_t c = threadIdx.x; c < chunks; c += kBlock) {
        const P v = load_vec<T, VEC>(x + c * VEC);
#pragma unroll
        for (int j = 0; j < VEC; ++j) mean[0] += to_acc(v.v[j]);
      }
      group_sum(mean, kBlock, scratch, slot);
      mean[0] *= inv_n;
    }
#pragma unroll 4
    for (int64_t c = threadIdx.x; c < chunks; c += kBlock) {
      const P v = load_vec<T, VEC>(x + c * VEC);
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const A d = A(to_acc(v.v[j])) - mean[0];
        ss[0] += d * d;
      }
    }
    group_sum(ss, kBlock, scratch, slot);
    const A rstd = rstd_of<T, OPT>(ss[0] * inv_n + a.eps, a.casting);
    if (threadIdx.x == 0) {
      if (a.mean) a.mean[r] = mean[0];
      if (a.rstd) a.rstd[r] = rstd;
    }
    for (int64_t c = threadIdx.x; c < chunks; c += kBlock) {
      P yv;
      normalize<RMS, OPT>(load_vec<T, VEC>(x + c * VEC), a.w, a.b, c * VEC, mean[0], rstd, a.offset, a.casting, yv);
      store_vec(a.y + r * a.cols + c * VEC, yv);
    }
  }
}

// The band's column sums cannot stay in registers here: each thread adds
// into its own columns of the block's partial row in the workspace (the same
// thread every row, so no races and a fixed order), which is written on the
// band's first row.
template <class T, bool RMS, int VEC, bool OPT>
__global__ void __launch_bounds__(kBlock, 2)
norm_backward_loop_kernel(BwdArgs<T> a, int) {
  pdl_start();
  using A = acc_t<T>;
  using P = Vec<T, VEC>;
  constexpr int NS = RMS ? 1 : 2;
  __shared__ A scratch[2][kWarps][NS];
  const int64_t chunks = a.cols / VEC;
  const A inv_n = A(1) / A(a.cols);
  const int64_t r_begin = blockIdx.x * a.band, r_end = min(a.rows, r_begin + a.band);
  int slot = 0;
  for (int64_t r = r_begin; r < r_end; ++r) {
    const T* x = a.x + r * a.cols;
    const T* g = a.g + r * a.cols;
    const A mean = RMS ? A(0) : a.mean[r], rstd = a.rstd[r];
    auto load = [&](int64_t c, A (&xhat)[VEC], A (&gy)[VEC], A (&wg)[VEC]) {
      terms<OPT>(load_vec<T, VEC>(x + c * VEC), load_vec<T, VEC>(g + c * VEC), a.w, c * VEC, mean, rstd, a.offset,
            a.casting, xhat, gy, wg);
    };
    A s[NS] = {};
    A xhat[VEC], gy[VEC], wg[VEC];
#pragma unroll 2
    for (int64_t c = threadIdx.x; c < chunks; c += kBlock) {
      load(c, xhat, gy, wg);
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        s[0] += wg[j] * xhat[j];
        if constexpr (!RMS) s[1] += wg[j];
      }
    }
    group_sum(s, kBlock, scratch, slot);
    const A mean_wgx = s[0] * inv_n, mean_wg = RMS ? A(0) : s[NS - 1] * inv_n;
    for (int64_t c = threadIdx.x; c < chunks; c += kBlock) {
      load(c, xhat, gy, wg);
      if (a.gx) {
        const int64_t at = r * a.cols + c * VEC;
        store_grad_x<OPT>(a.gx + at, OPT && a.gs ? a.gs + at : nullptr, xhat, wg, rstd, mean_wg, mean_wgx);
      }
      A* pw = a.part_w ? a.part_w + blockIdx.x * a.cols + c * VEC : nullptr;
      A* pb = !RMS && a.part_b ? a.part_b + blockIdx.x * a.cols + c * VEC : nullptr;
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        if (pw) pw[j] = (r == r_begin ? A(0) : pw[j]) + dw_term<T, OPT>(gy[j], xhat[j], a.casting);
        if (pb) pb[j] = (r == r_begin ? A(0) : pb[j]) + gy[j];
      }
    }
  }
}

// ---------------------------------------------------------------------------
// launchers

// The fewest threads (a power of 2, 8..kBlock) that hold `chunks` in VPT each:
// rows of 256 bf16 take 16 threads, two rows a warp (32 threads, each with
// one of its two vectors empty, left the forward issue-bound: 2.62 TB/s for
// rms_norm against compile's 2.95, BENCHMARKS step 1).
inline int width_for(int64_t chunks, int vpt) {
  int w = 8;
  while (w < kBlock && int64_t(w) * vpt < chunks) w *= 2;
  return w;
}

// Blocks of `kernel` (kBlock threads) resident at once on the current device.
template <class K>
tc_status resident_blocks(const char* op, K kernel, int64_t* blocks) {
  DeviceFit fit;
  TC_RETURN_IF_ERROR(device_fit(op, kernel, kBlock, &fit));
  *blocks = int64_t(fit.sms) * (fit.blocks_per_sm > 0 ? fit.blocks_per_sm : 1);
  return TC_OK;
}

inline int64_t min3(int64_t a, int64_t b, int64_t c) {
  return a < b ? (a < c ? a : c) : (b < c ? b : c);
}

// Rows longer than one block's 16 elements a thread hold take 32 (16 fp32;
// 16-byte vectors only), one row at a time: up to 16384 bf16 or 8192 fp32 in
// one block, in a cluster of 2..16 blocks beyond (kit/cluster.cuh): up to
// 262144 bf16 or 131072 fp32. Longer rows, single-element loads and GPUs
// without clusters take the loop kernels.
template <class T, int VEC>
constexpr int kLongVpt = VEC == 1 || sizeof(T) == 8 ? 0 : 4;

// Rows of 3 x 2^k 16-byte vectors of 16-bit elements (8..512 threads of 3; GPT-2's 768 columns, 1536, 3072)
// fill a group of 2^k threads holding 3 vectors each, one row at a time (two spilled 44 bytes forward and 480
// backward). At 2 a thread they take 2^(k+1) threads, a quarter of them idle: 768 columns ran on 64 threads
// of which 48 held data.
template <class T, int VEC>
constexpr bool kThirds = sizeof(T) == 2 && VEC > 1;
inline bool thirds(int64_t chunks) {
  const int64_t w = chunks / 3;
  return chunks % 3 == 0 && w >= 8 && w <= kBlock && (w & (w - 1)) == 0;
}

template <class T, bool RMS, int VEC, bool BWD, bool OPT, int VPT, int kRows, int CLUSTER>
constexpr auto register_kernel() {
  if constexpr (BWD) return norm_backward_kernel<T, RMS, VEC, VPT, kRows, CLUSTER, OPT>;
  else return norm_forward_kernel<T, RMS, VEC, VPT, kRows, CLUSTER, OPT>;
}

// Calls go(kernel, cluster, rows a group holds at a time, chunks a thread
// holds, clusters resident at once) with the kernel for rows of `chunks`: one
// block's registers (cluster 1), a cluster's, or the loop kernel (cluster 0);
// the last argument only for a cluster (else 0).
template <class T, bool RMS, int VEC, bool BWD, bool OPT, class Go>
tc_status pick_kernel(int64_t chunks, Go go) {
  constexpr int VPT = kElems<T, VEC> / VEC, LV = kLongVpt<T, VEC>;
  if constexpr (kThirds<T, VEC>) {
    if (thirds(chunks)) return go(register_kernel<T, RMS, VEC, BWD, OPT, 3, 1, 1>(), 1, 1, 3, 0);
  }
  if (chunks <= int64_t(kBlock) * VPT)
    return go(register_kernel<T, RMS, VEC, BWD, OPT, VPT, kRowsOf<T, VEC>, 1>(), 1, kRowsOf<T, VEC>, VPT, 0);
  if constexpr (LV > 0) {
    const int64_t per_block = int64_t(kBlock) * LV;
    if (chunks <= per_block) return go(register_kernel<T, RMS, VEC, BWD, OPT, LV, 1, 1>(), 1, 1, LV, 0);
    auto fit = [](auto c) {
      return cluster_capacity<register_kernel<T, RMS, VEC, BWD, OPT, LV, 1, decltype(c)::value>()>(kBlock, c);
    };
    if (const int c = cluster_for((chunks + per_block - 1) / per_block, fit))
      return with_cluster_size(c, [&](auto size) {
        return go(register_kernel<T, RMS, VEC, BWD, OPT, LV, 1, decltype(size)::value>(), c, 1, LV, fit(size));
      });
  }
  if constexpr (BWD) return go(norm_backward_loop_kernel<T, RMS, VEC, OPT>, 0, 1, 0, 0);
  else return go(norm_forward_loop_kernel<T, RMS, VEC, OPT>, 0, 1, 0, 0);
}

// A cluster (or block) for each (512 / width) x kRows rows: the block
// scheduler balances the SMs to within one block (a persistent grid left 3%
// idle at 32768 rows).
template <class T, bool RMS, int VEC, bool OPT>
tc_status launch_forward(const norms::Forward& f) {
  using A = acc_t<T>;
  const FwdArgs<T> a{static_cast<const T*>(f.x), static_cast<const T*>(f.weight),
                     static_cast<const T*>(f.bias), static_cast<T*>(f.y), static_cast<A*>(f.mean),
                     static_cast<A*>(f.rstd), f.rows, f.cols, A(f.eps),
                     static_cast<const T*>(f.residual), static_cast<T*>(f.sum), A(f.offset), f.casting};
  const int64_t chunks = f.cols / VEC;
  return pick_kernel<T, RMS, VEC, false, OPT>(chunks, [&](auto kernel, int cluster, int rows, int vpt, int) -> tc_status {
    const int width = cluster == 1 ? width_for(chunks, vpt) : kBlock;
    const unsigned groups = grid_1d(f.rows, kBlock / width * rows, INT32_MAX / 16);
    if (cluster > 1)
      return launch_clustered(f.op, kernel, groups * cluster, kBlock, cluster, 0, as_stream(f.stream), a, width);
    return launch_pdl(f.op, kernel, groups, kBlock, 0, as_stream(f.stream), a, width);
  });
}

template <class T, bool RMS, int VEC, bool OPT>
tc_status launch_backward(const norms::Backward& b) {
  using A = acc_t<T>;
  const int64_t chunks = b.cols / VEC;
  cudaStream_t stream = as_stream(b.stream);
  int64_t blocks = 0;
  auto launch = [&](auto kernel, int cluster, int rows, int vpt, int clusters_resident) -> tc_status {
    const int width = cluster == 1 ? width_for(chunks, vpt) : kBlock;
    // Resident blocks (clusters), each owning a band of rows of equal length,
    // each at least one row (each writes its partial row), no more than the
    // workspace has partial rows for.
    int64_t resident = clusters_resident;
    if (cluster <= 1) TC_RETURN_IF_ERROR(resident_blocks(b.op, kernel, &resident));
    blocks = min3(norms::kMaxPartials, resident, plan::ceil_div(b.rows, int64_t(kBlock / width) * rows));
    const int64_t band = plan::ceil_div(b.rows, blocks);
    blocks = plan::ceil_div(b.rows, band);
    A* ws = static_cast<A*>(b.workspace);
    A* part_w = b.grad_weight ? ws : nullptr;
    A* part_b = b.grad_bias ? ws + (b.grad_weight ? blocks * b.cols : 0) : nullptr;
    const BwdArgs<T> a{static_cast<const T*>(b.grad_y), static_cast<const T*>(b.x),
                       static_cast<const A*>(b.mean), static_cast<const A*>(b.rstd),
                       static_cast<const T*>(b.weight), static_cast<T*>(b.grad_x), part_w, part_b,
                       b.rows, b.cols, band, static_cast<const T*>(b.grad_sum), A(b.offset), b.casting};
    if (cluster > 1)
      return launch_clustered(b.op, kernel, unsigned(blocks * cluster), kBlock, cluster, 0, stream, a, width);
    return launch_pdl(b.op, kernel, unsigned(blocks), kBlock, 0, stream, a, width);
  };
  TC_RETURN_IF_ERROR((pick_kernel<T, RMS, VEC, true, OPT>(chunks, launch)));
  if (!b.grad_weight && !b.grad_bias) return TC_OK;
  // 16 threads a column: at most 264 partial rows, but thousands of columns
  T* gw = static_cast<T*>(b.grad_weight);
  T* gb = static_cast<T*>(b.grad_bias);
  return launch_sum_partials<T, 16>(b.op, static_cast<A*>(b.workspace), blocks, b.cols, gw ? gw : gb,
                                    gw ? gb : nullptr, stream);
}

// Which kernels a family's file instantiates: layer_norm the plain ones (it
// has no options), add_rms_norm those with options (OPT: they run any call),
// rms_norm both, the plain ones for calls without options.
enum NormKernels { kPlain, kOptions, kBoth };

template <int KERNELS, class Run>
tc_status with_options(bool options, Run run /* (std::bool_constant<OPT>) */) {
  if constexpr (KERNELS == kPlain) return run(std::false_type{});
  else if constexpr (KERNELS == kOptions) return run(std::true_type{});
  else return options ? run(std::true_type{}) : run(std::false_type{});
}

template <bool RMS, int KERNELS>
tc_status norm_forward_cuda(const norms::Forward& f) {
  TC_RETURN_IF_ERROR(norms::check(f));
  if (f.rows == 0) return TC_OK;
  return dispatch_cuda(f.dtype, f.op, [&](auto tag) -> tc_status {
    using T = decltype(tag);
    const bool options = f.add || f.offset != 0 || f.casting != TC_RMS_CAST_GEMMA;
    auto launch = [&](auto vec) -> tc_status {
      constexpr int V = decltype(vec)::value;
      return with_options<KERNELS>(options, [&](auto opt) { return launch_forward<T, RMS, V, opt()>(f); });
    };
    if (rows_vectorizable<T>(f.cols, {f.x, f.y, f.weight, f.bias, f.residual, f.sum}))
      return launch(std::integral_constant<int, Vec<T>::size>{});
    return launch(std::integral_constant<int, 1>{});
  });
}

template <bool RMS, int KERNELS>
tc_status norm_backward_cuda(const norms::Backward& b) {
  TC_RETURN_IF_ERROR(norms::check(b, RMS));
  if (b.cols == 0 || (!b.grad_x && !b.grad_weight && !b.grad_bias)) return TC_OK;
  if (b.rows == 0) {  // the weight and bias gradients of no rows are zero
    for (void* grad : {b.grad_weight, b.grad_bias})
      if (grad && cudaMemsetAsync(grad, 0, b.cols * tc_dtype_size(b.dtype), as_stream(b.stream)) !=
                      cudaSuccess)
        return check_launch(b.op);
    return TC_OK;
  }
  const size_t need = norms::workspace_bytes(b);
  TC_REQUIRE(b.workspace_bytes >= need && (need == 0 || b.workspace),
             "%s: workspace of %zu bytes needed, %zu given", b.op, need, b.workspace_bytes);
  return dispatch_cuda(b.dtype, b.op, [&](auto tag) -> tc_status {
    using T = decltype(tag);
    const bool options = b.grad_sum || b.offset != 0 || b.casting != TC_RMS_CAST_GEMMA;
    auto launch = [&](auto vec) -> tc_status {
      constexpr int V = decltype(vec)::value;
      return with_options<KERNELS>(options, [&](auto opt) { return launch_backward<T, RMS, V, opt()>(b); });
    };
    if (rows_vectorizable<T>(b.cols, {b.grad_y, b.x, b.weight, b.grad_x, b.grad_sum}))
      return launch(std::integral_constant<int, Vec<T>::size>{});
    return launch(std::integral_constant<int, 1>{});
  });
}

}  // namespace
