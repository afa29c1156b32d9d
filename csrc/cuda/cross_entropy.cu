// cross_entropy: the loss of logits [rows, cols] against int64 class targets
// and, in the same pass, its gradient times grad_loss (1 when not given; with
// grad_in_place only the rows whose grad_loss is not 1, over a gradient made
// for 1); and tc_cross_entropy_backward, an in-place scale of a gradient made
// for grad_loss = 1 (chunked callers). The math is in cross_entropy.h.
//
// Forward, WIDTH threads per row (8 or 16 threads for rows that fit their
// loads in flight, 256 bf16 or 128 fp32 in 8; a warp up to 1024 classes, 8
// rows a block; 256 threads up to 65536; 1024 threads above. At GPT-2's
// 50,304 classes, 1024-row chunks (H200): 256 threads, 2 rows an SM, 73.0 us;
// 1024 threads, one row an SM (64 registers), 90.9 us: a row costs ~11 us of
// latency whatever its length, so rows in flight count, not threads a row):
//   pass 1  reads the row once with 16-byte loads, 4 in flight per thread
//           (8 in 16-bit rows 256 threads wide: kWide below),
//           into a per-thread online (max, sum exp(x - max), sum x); the
//           threads merge through shuffles and shared memory;
//   pass 2  (only when the gradient is asked for) reads the row again, back
//           to front, and writes (softmax - (1-eps) onehot - eps/V) * scale
//           * grad_loss (the row's, read once a row), rounded once.
// softcap caps each value as it is unpacked (pass 1) and again in pass 2,
// whose gradient it multiplies by 1 - tanh^2; z-loss scales pass 2's softmax
// term by 1 + 2 zs lse. Ignored rows skip pass 1 and write zeros. Each row's loss goes to the
// workspace in fp32; for MEAN/SUM one block adds them in a fixed order
// (bit-identical run to run). MEAN's n_valid is counted by a one-block
// pre-pass on the device (no host sync, CUDA-graph safe) unless given.
//
// Bytes, bf16, N = 8192, V = 128256, N V s = 2.1 GB. With the gradient the
// logits are read once from DRAM and the gradient written once: 2 N V s =
// 4.2 GB, ~1.5 ms at 2.8 TB/s; without it (no_grad) N V s, one pass. The
// autograd backward (grad_in_place) reads grad_loss, and where it is exactly
// 1 (loss.backward() of a mean or sum) skips every row: 2 N V s for forward
// and backward; another grad_loss reruns both passes over the rows: 4 N V s,
// rounded once (cross_entropy.h). The second read of a row must come
// from L2, so the grid is persistent with as many rows in flight as fit in
// 3/4 of the L2, and at least one per SM (132 x 256.5 KB = 34 MB of H100's
// 50 MB); pass 2 walks the row back to front, so the most recently loaded
// lines are read first, with streaming (evict-first) loads and stores that do
// not push out the rows other SMs are still in pass 1 of. Expected: 2.6-2.8
// TB/s, 87-93% of the 3.0 TB/s copy (torch.compile 1.46, Liger 1.73); every
// L2 miss in pass 2 costs a DRAM read, down to ~2.0 TB/s if all missed.
//
// Class weights are a template flag (WEIGHTED), so the unweighted kernels are
// the code above unchanged. The weighted kernels read w[t] once per row and,
// with label smoothing, w[c] beside each logit (scalar loads: the weights are
// small and stay in L1/L2): pass 1 sums w_c x_c in place of x_c, pass 2 takes
// eps/V w_c scale off each element. W (MEAN's divisor) and Wsum = sum_c w_c
// come from a one-block pre-pass (with n_valid), in a fixed order.
//
// Token accuracy is a template flag too (ACC): those kernels also fold each
// thread's raw logits into an (argmax value, index) candidate in pass 1 and
// merge the row's after merge_row (a butterfly, or block_reduce into thread
// 0), and write the row's 1 / 0; SUM/MEAN add those up in ce_reduce_kernel.
// They are compiled with CAP = true only (ce::capped checks cap > 0 at run
// time, so they serve softcap 0 too): half the extra instantiations, and
// compile time, of a full set, for a per-element select in an opt-in path.
//
// A target outside [0, V) other than ignore_index stops the kernel with a
// device-side assert (TC_DEVICE_REQUIRE), as torch's kernel does, before it is
// dereferenced: no silent NaN loss. The CPU path raises, naming the row.
#include "tinycuda/cross_entropy.h"
#include "../shared/cross_entropy_math.h"
#include "../shared/softmax_math.h"
#include "kit/pdl.cuh"
#include "kit/reduce.cuh"
#include "kit/vec.cuh"

namespace {

// 16-byte loads in flight per thread: 4 in pass 1 (DRAM: 64 KB per SM with
// 1024 threads), 2 in pass 2 (mostly L2 hits; 4 there took the bf16 kernel
// past 64 registers and into spills). 16-bit rows 256 threads wide keep
// twice that in flight (8 and 4: 110 registers, 2 rows an SM): at 1024 x
// 50,304 bf16 on the H200, 73.0 us against 78.7 with 4 and 2 (80 registers,
// 3 rows an SM). (double rows spill 104-136 bytes with 8 and 4.)
constexpr int kUnroll = 4, kUnroll2 = 2;
template <class T, int WIDTH> constexpr int kWide = WIDTH == 256 && sizeof(T) == 2 ? 2 : 1;

// ---------------------------------------------------------------------------
// per-thread statistics

// exp(d) for d = x - max <= 0: one MUFU.EX2 (2^-22 relative; d * log2(e)
// rounds at 2^-24 of |d|, so the large terms are the exact ones). Flushing
// results below 2^-126 to zero changes no probability that survives in the
// sum; -inf gives +0. Exact exp in double.
__device__ __forceinline__ float exp_shift(float d) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(d * 1.4426950408889634f));
  return y;
}
__device__ __forceinline__ double exp_shift(double d) { return ::exp(d); }

// Adds n values to (m, s, sum_x), rescaling s once per group, not per value
// (~7 instructions a value). m stays -inf only while every value so far was
// -inf: those add 0. A NaN anywhere makes sum_x NaN, which the caller turns
// into a NaN row (as torch); +inf makes s NaN through exp(inf - inf).
template <int N, class A>
__device__ __forceinline__ void accumulate(const A (&v)[N], A& m, A& s, A& sum_x) {
  A vmax = v[0];
#pragma unroll
  for (int j = 0; j < N; ++j) {
    vmax = fmax(vmax, v[j]);
    sum_x += v[j];
  }
  if (vmax > m) {
    s *= exp_shift(m - vmax);  // m = -inf: s = 0 * 0
    m = vmax;
  }
  if (m != A(-INFINITY)) {
#pragma unroll
    for (int j = 0; j < N; ++j) s += exp_shift(v[j] - m);
  }
}

// The same, summing sv (w_c x_c with class weights) in place of v.
template <int N, class A>
__device__ __forceinline__ void accumulate(const A (&v)[N], const A (&sv)[N], A& m, A& s, A& sum_x) {
  A vmax = v[0];
#pragma unroll
  for (int j = 0; j < N; ++j) {
    vmax = fmax(vmax, v[j]);
    sum_x += sv[j];
  }
  if (vmax > m) {
    s *= exp_shift(m - vmax);
    m = vmax;
  }
  if (m != A(-INFINITY)) {
#pragma unroll
    for (int j = 0; j < N; ++j) s += exp_shift(v[j] - m);
  }
}

// A row's statistics: the online (max, sum exp) pair and sum(x), merged
// together (OnlineMerge, and a plain sum for sum_x).
template <class A>
struct RowStats {
  MaxSum<A> ms;
  A sum_x;
};

template <class A>
__device__ __forceinline__ RowStats<A> shfl_xor(RowStats<A> v, int lane_mask, unsigned members = 0xffffffffu) {
  return {::shfl_xor(v.ms, lane_mask, members), ::shfl_xor(v.sum_x, lane_mask, members)};  // the kit's overloads
}

struct MergeStats {
  template <class A>
  __device__ __forceinline__ RowStats<A> operator()(RowStats<A> a, RowStats<A> b) const {
    a.sum_x += b.sum_x;
    a.ms = OnlineMerge{}(a.ms, b.ms);
    return a;
  }
};

// token accuracy's argmax candidate (cross_entropy_math.h); ce:: for the kit's ADL lookup
}  // namespace
namespace ce {
template <class A>
__device__ __forceinline__ Argmax<A, int> shfl_xor(Argmax<A, int> v, int lane_mask, unsigned members = 0xffffffffu) {
  return {::shfl_xor(v.v, lane_mask, members), ::shfl_xor(v.i, lane_mask, members)};
}
}  // namespace ce
namespace {

struct MergeArgmax {
  template <class A>
  __device__ __forceinline__ ce::Argmax<A, int> operator()(ce::Argmax<A, int> a, ce::Argmax<A, int> b) const {
    return ce::argmax_merge(a, b);
  }
};

// The row's argmax in its first thread (lane 0): a butterfly, and across warps
// block_reduce (WIDTH > 32 is the whole block; its loop is uniform).
template <int WIDTH, class A>
__device__ __forceinline__ int row_argmax(ce::Argmax<A, int> best) {
  if constexpr (WIDTH > 32) {
    __shared__ ce::Argmax<A, int> scratch[32];
    best = block_reduce(best, MergeArgmax{}, ce::Argmax<A, int>{A(-INFINITY), INT_MAX}, scratch, WIDTH / 32);
  } else {
    best = warp_reduce<WIDTH>(best, MergeArgmax{});
  }
  return best.i;
}

// All WIDTH threads of the row end with the row's (m, s, sum_x): a warp's
// butterfly (every op is commutative, so all lanes end bit-identical), and
// across warps block_allreduce (WIDTH > 32 is the whole block). Also the
// barrier that orders pass 1's reads before pass 2's writes (in place).
// WIDTH < 32: rows packed several to a warp, each group's shuffles and
// barrier naming its own lanes (its rows may be ignored while a neighbour's
// are not, and its row loop may end first).
template <int WIDTH, class A>
__device__ __forceinline__ void merge_row(A& m, A& s, A& sum_x, RowStats<A>* scratch /* [32] */) {
  RowStats<A> st{{m, s}, sum_x};
  if constexpr (WIDTH > 32) {
    st = block_allreduce(st, MergeStats{}, RowStats<A>{{A(-INFINITY), A(0)}, A(0)}, scratch, WIDTH / 32);
  } else {
    st = warp_reduce<WIDTH>(st, MergeStats{});
    __syncwarp(group_lanes<WIDTH>());
  }
  m = st.ms.m, s = st.ms.s, sum_x = st.sum_x;
}

// ---------------------------------------------------------------------------
// VEC elements as raw bits. Sixteen bytes are held as four 32-bit words, one
// register each, and unpacked one vector at a time: a Vec<__nv_bfloat16>
// lives in a register per element, and 4 of them in flight took the 1024-
// thread kernel past its 64 registers into spills. Pass 2's accesses are
// streaming (ld/st.global.cs, evict-first): its rows are not read again.

__device__ __forceinline__ void unpack_words(const uint32_t (&w)[4], float (&a)[4], float) {
#pragma unroll
  for (int k = 0; k < 4; ++k) a[k] = __uint_as_float(w[k]);
}
__device__ __forceinline__ void unpack_words(const uint32_t (&w)[4], double (&a)[2], double) {
#pragma unroll
  for (int k = 0; k < 2; ++k) a[k] = __hiloint2double(int(w[2 * k + 1]), int(w[2 * k]));
}
__device__ __forceinline__ void unpack_words(const uint32_t (&w)[4], float (&a)[8], __nv_bfloat16) {
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    a[2 * k] = __uint_as_float(w[k] << 16);
    a[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
  }
}
__device__ __forceinline__ void unpack_words(const uint32_t (&w)[4], float (&a)[8], __half) {
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    a[2 * k] = __half2float(__ushort_as_half(static_cast<unsigned short>(w[k] & 0xffffu)));
    a[2 * k + 1] = __half2float(__ushort_as_half(static_cast<unsigned short>(w[k] >> 16)));
  }
}

__device__ __forceinline__ void pack_words(uint32_t (&w)[4], const float (&a)[4], float) {
#pragma unroll
  for (int k = 0; k < 4; ++k) w[k] = __float_as_uint(a[k]);
}
__device__ __forceinline__ void pack_words(uint32_t (&w)[4], const double (&a)[2], double) {
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    w[2 * k] = uint32_t(__double2loint(a[k]));
    w[2 * k + 1] = uint32_t(__double2hiint(a[k]));
  }
}
__device__ __forceinline__ void pack_words(uint32_t (&w)[4], const float (&a)[8], __nv_bfloat16) {
#pragma unroll
  for (int k = 0; k < 4; ++k) {  // both round to nearest even, as from_acc
    const __nv_bfloat162 h = __floats2bfloat162_rn(a[2 * k], a[2 * k + 1]);
    w[k] = uint32_t(__bfloat16_as_ushort(h.x)) | uint32_t(__bfloat16_as_ushort(h.y)) << 16;
  }
}
__device__ __forceinline__ void pack_words(uint32_t (&w)[4], const float (&a)[8], __half) {
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const __half2 h = __floats2half2_rn(a[2 * k], a[2 * k + 1]);
    w[k] = uint32_t(__half_as_ushort(h.x)) | uint32_t(__half_as_ushort(h.y)) << 16;
  }
}

template <class T, int VEC, bool FULL = VEC * sizeof(T) == 16>
struct Chunk {  // VEC == 1: one element
  T v;
  __device__ __forceinline__ void load(const T* p) { v = *p; }
  __device__ __forceinline__ void load_cs(const T* p) { v = *p; }
  __device__ __forceinline__ void store_cs(T* p) const { *p = v; }
  __device__ __forceinline__ void unpack(acc_t<T> (&a)[1]) const { a[0] = to_acc(v); }
  __device__ __forceinline__ void pack(const acc_t<T> (&a)[1]) { v = from_acc<T>(a[0]); }
};

template <class T, int VEC>
struct Chunk<T, VEC, true> {  // 16 bytes: the pointers are 16-byte aligned
  uint32_t w[4];
  __device__ __forceinline__ void set(uint4 u) { w[0] = u.x, w[1] = u.y, w[2] = u.z, w[3] = u.w; }
  __device__ __forceinline__ uint4 get() const { return make_uint4(w[0], w[1], w[2], w[3]); }
  __device__ __forceinline__ void load(const T* p) { set(*reinterpret_cast<const uint4*>(p)); }
  __device__ __forceinline__ void load_cs(const T* p) { set(::load_cs(p)); }
  __device__ __forceinline__ void store_cs(T* p) const { ::store_cs(p, get()); }
  __device__ __forceinline__ void unpack(acc_t<T> (&a)[VEC]) const { unpack_words(w, a, T{}); }
  __device__ __forceinline__ void pack(const acc_t<T> (&a)[VEC]) { pack_words(w, a, T{}); }
};

// ---------------------------------------------------------------------------
// kernels

// softcap's cap and slope (cross_entropy_math.h), compiled out of the kernels
// without it: in them the 1024-thread bf16 kernel spilled 48 bytes, not 24.
template <bool CAP, class A>
__device__ __forceinline__ A capped(A x, A cap) {
  return CAP ? ce::capped(x, cap) : x;
}
template <bool CAP, class A>
__device__ __forceinline__ A cap_slope(A xc, A cap) {
  return CAP ? ce::cap_slope(xc, cap) : A(1);
}

// A row is [head scalars][nvec aligned VEC-vectors][tail scalars]: head takes
// the row to a 16-byte boundary (rows of odd length, e.g. V = 50257, start
// anywhere), so every row gets vector loads. grad and logits share the
// alignment (checked by the launcher; VEC = 1 otherwise).
// WEIGHTED: class weights (weight [cols]; w_div: MEAN's W, NULL: scale 1;
// wsum: sum_c w_c), n_valid then only divides the z terms.
// ACC: token accuracy, each row's 1 / 0 into row_correct and correct_rows
// (either may be NULL; the plain kernels never touch them).
template <class T, int WIDTH, int VEC, bool CAP, bool WEIGHTED, bool ACC>
__global__ void __launch_bounds__(WIDTH < 256 ? 256 : WIDTH)
ce_forward_kernel(const T* logits, const int64_t* __restrict__ target, T* grad, int64_t rows,
                  int cols, int64_t ignore_index, acc_t<T> eps, acc_t<T> cap, acc_t<T> zs,
                  const int64_t* __restrict__ n_valid, acc_t<T>* __restrict__ row_loss,
                  T* __restrict__ loss_rows, acc_t<T>* __restrict__ row_z, T* __restrict__ z_rows,
                  const T* __restrict__ weight, const acc_t<T>* __restrict__ w_div,
                  const acc_t<T>* __restrict__ wsum_p, float* __restrict__ row_correct,
                  float* __restrict__ correct_rows, const T* __restrict__ grad_loss, int grad_loss_per_row,
                  int grad_in_place) {
  pdl_start();
  using A = acc_t<T>;
  constexpr int kRowsPerBlock = (WIDTH < 256 ? 256 : WIDTH) / WIDTH;
  constexpr int kU = kUnroll * kWide<T, WIDTH>, kU2 = kUnroll2 * kWide<T, WIDTH>;
  __shared__ RowStats<A> scratch[32];
  const int lane = threadIdx.x % WIDTH;
  A scale, scale_z = A(1), wsum = A(0);
  if constexpr (WEIGHTED) {
    scale = w_div ? A(1) / *w_div : A(1);
    scale_z = n_valid ? A(1) / A(*n_valid) : A(1);
    wsum = *wsum_p;
  } else {
    scale = n_valid ? A(1) / A(*n_valid) : A(1);
  }
  const A one_minus_eps = A(1) - eps, smooth = eps / A(cols);
  auto w_at = [&](int c) { return WEIGHTED ? A(to_acc(weight[c])) : A(1); };
  const bool wx = WEIGHTED && eps > A(0);  // pass 1 sums w_c x_c
  // Uniform across the block when WIDTH >= 256 (merge_row has barriers).
  for (int64_t r = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / WIDTH; r < rows;
       r += int64_t(gridDim.x) * kRowsPerBlock) {
    // grad_in_place: the row holds the gradient for grad_loss = 1, this row's exactly when its
    // grad_loss is 1 (scale * 1 is scale): skipped whole, uniformly for its threads (a block's
    // one row when WIDTH >= 256), as an ignored row's pass 1 is
    if (grad_in_place && to_acc(grad_loss[grad_loss_per_row ? r : 0]) == A(1)) continue;
    const int64_t t64 = target[r];
    const T* x = logits + r * cols;
    T* g = grad ? grad + r * cols : nullptr;
    // Row offsets fit in int: the launcher checks cols < 2^31.
    const int head = VEC > 1 ? min(cols, int(((16 - (reinterpret_cast<uintptr_t>(x) & 15)) & 15) / sizeof(T))) : 0;
    const int nvec = (cols - head) / VEC, tail = head + nvec * VEC;
    const T* xv = x + head;
    T* gv = g ? g + head : nullptr;
    A loss, z = 0;
    [[maybe_unused]] bool correct = false;
    TC_DEVICE_REQUIRE(t64 == ignore_index || (t64 >= 0 && t64 < cols),
                      "tinycuda::cross_entropy: a target is out of range [0, classes) and not ignore_index");
    if (t64 == ignore_index) {
      const A fill = A(0);
      loss = fill;
      if (g) {
        A a[VEC];
#pragma unroll
        for (int j = 0; j < VEC; ++j) a[j] = fill;
        Chunk<T, VEC> f;
        f.pack(a);
        for (int i = lane; i < nvec; i += WIDTH) f.store_cs(gv + i * VEC);
        if (lane < head) g[lane] = from_acc<T>(fill);
        if (lane < cols - tail) g[tail + lane] = from_acc<T>(fill);
      }
    } else {
      const int t = int(t64);
      // pass 1: statistics
      A m = -INFINITY, s = 0, sum_x = 0;
      const A xt = capped<CAP>(A(to_acc(x[t])), cap);  // before merge_row's barrier: g may be x
      // ACC: the raw logits' argmax (cross_entropy.h). A thread sees its elements in increasing
      // order (head, vectors, then tail, after the loop), so a strictly larger value (beats_max) is
      // the whole test, from (-inf, the index of its first element): the first of equals stays, -inf
      // ones included. A thread with no element starts (and stays) at INT_MAX, which any loses to.
      [[maybe_unused]] ce::Argmax<A, int> best{A(-INFINITY), lane < head          ? lane
                                                             : lane < nvec        ? head + lane * VEC
                                                             : lane < cols - tail ? tail + lane
                                                                                  : INT_MAX};
      [[maybe_unused]] auto see = [&](A v, int c) {
        if (beats_max(v, best.v)) best = {v, c};
      };
      if constexpr (ACC) {
        if (lane < head) see(A(to_acc(x[lane])), lane);
      }
      if constexpr (WEIGHTED) {
        if (lane < head) {
          const A v = capped<CAP>(A(to_acc(x[lane])), cap);
          accumulate<1>({v}, {wx ? w_at(lane) * v : v}, m, s, sum_x);
        }
        if (lane < cols - tail) {
          const A v = capped<CAP>(A(to_acc(x[tail + lane])), cap);
          accumulate<1>({v}, {wx ? w_at(tail + lane) * v : v}, m, s, sum_x);
        }
      } else {
        if (lane < head) accumulate<1>({capped<CAP>(A(to_acc(x[lane])), cap)}, m, s, sum_x);
        if (lane < cols - tail) accumulate<1>({capped<CAP>(A(to_acc(x[tail + lane])), cap)}, m, s, sum_x);
      }
      for (int i = lane; i < nvec; i += WIDTH * kU) {
        Chunk<T, VEC> v[kU];
#pragma unroll
        for (int u = 0; u < kU; ++u)
          if (i + u * WIDTH < nvec) v[u].load(xv + (i + u * WIDTH) * VEC);
#pragma unroll
        for (int u = 0; u < kU; ++u) {
          if (i + u * WIDTH >= nvec) break;
          A a[VEC];
          v[u].unpack(a);
          if constexpr (ACC) {
            const int c0 = head + (i + u * WIDTH) * VEC;
#pragma unroll
            for (int j = 0; j < VEC; ++j) see(a[j], c0 + j);
          }
          if constexpr (CAP) {
#pragma unroll
            for (int j = 0; j < VEC; ++j) a[j] = capped<CAP>(a[j], cap);
          }
          if constexpr (WEIGHTED) {
            const int c0 = head + (i + u * WIDTH) * VEC;
            A wa[VEC];
#pragma unroll
            for (int j = 0; j < VEC; ++j) wa[j] = wx ? w_at(c0 + j) * a[j] : a[j];
            accumulate<VEC>(a, wa, m, s, sum_x);
          } else {
            accumulate<VEC>(a, m, s, sum_x);
          }
        }
      }
      if constexpr (ACC) {
        if (lane < cols - tail) see(A(to_acc(x[tail + lane])), tail + lane);
      }
      merge_row<WIDTH>(m, s, sum_x, scratch);
      if constexpr (ACC) correct = row_argmax<WIDTH>(best) == t;  // (valid in lane 0, the writer)
      online_finish(m, s);
      // A NaN logit (which fmax skips) makes the row NaN. Weighted with smoothing sum_x is
      // sum w_c x_c, so a -inf logit of weight 0 trips this too: the loss is NaN as torch's,
      // but the row's gradient is NaN where torch's (and the CPU's) is finite.
      if (sum_x != sum_x) s = A(NAN);
      const A wt = w_at(t);
      if constexpr (WEIGHTED)
        loss = ce::row_loss_weighted(m, A(::log(s)), xt, sum_x, wt, wsum, eps, cols);
      else
        loss = ce::row_loss(m, A(::log(s)), xt, sum_x, eps, cols);
      const A lse = m + A(::log(s));
      if (zs > A(0)) z = zs * lse * lse;  // (0 * inf would be NaN)
      loss += z;

      // pass 2: the gradient, groups of WIDTH * kU2 vectors, last first:
      // g = p * (scale / s) - scale * eps / V, and - scale * (1 - eps) at t
      // (z-loss: p times 1 + 2 zs lse; softcap: all times 1 - tanh^2).
      // Weighted: p (((1-eps) w_t + eps/V Wsum) scale + 2 zs lse scale_z) - (1-eps) w_t scale at t
      // - eps/V scale w_c (cross_entropy.h). grad_loss multiplies scale and scale_z here, once a
      // row, so each element is rounded once.
      if (g) {
        const A gl = grad_loss ? A(to_acc(grad_loss[grad_loss_per_row ? r : 0])) : A(1);
        const A sg = scale * gl;
        A p_scale, bias, at_target;
        if constexpr (WEIGHTED) {
          p_scale =
              ((one_minus_eps * wt + smooth * wsum) * sg + (zs > A(0) ? A(2) * zs * lse * scale_z * gl : A(0))) / s;
          bias = -smooth * sg;
          at_target = one_minus_eps * wt * sg;
        } else {
          p_scale = (zs > A(0) ? A(1) + A(2) * zs * lse : A(1)) * sg / s;
          bias = -smooth * sg;
          at_target = one_minus_eps * sg;
        }
        auto grad_of = [&](A x0, int c) {
          const A xc = capped<CAP>(x0, cap);
          if constexpr (WEIGHTED) {
            A gc = exp_shift(xc - m) * p_scale - (c == t ? at_target : A(0));
            if (wx) gc += bias * w_at(c);
            return gc * cap_slope<CAP>(xc, cap);
          } else {
            return (exp_shift(xc - m) * p_scale + bias - (c == t ? at_target : A(0))) * cap_slope<CAP>(xc, cap);
          }
        };
        constexpr int kStep = WIDTH * kU2;
        for (int base = (nvec + kStep - 1) / kStep * kStep - kStep; base >= 0; base -= kStep) {
          const int i = base + lane;
          Chunk<T, VEC> v[kU2];
#pragma unroll
          for (int u = 0; u < kU2; ++u)
            if (i + u * WIDTH < nvec) v[u].load_cs(xv + (i + u * WIDTH) * VEC);
#pragma unroll
          for (int u = 0; u < kU2; ++u) {
            if (i + u * WIDTH >= nvec) break;
            const int c0 = head + (i + u * WIDTH) * VEC;
            A a[VEC];
            v[u].unpack(a);
            if constexpr (CAP || WEIGHTED) {
#pragma unroll
              for (int j = 0; j < VEC; ++j) a[j] = grad_of(a[j], c0 + j);
            } else {
#pragma unroll
              for (int j = 0; j < VEC; ++j) a[j] = exp_shift(a[j] - m) * p_scale + bias;
              if (unsigned(t - c0) < unsigned(VEC)) {  // one vector of the row holds t
#pragma unroll
                for (int j = 0; j < VEC; ++j)
                  if (c0 + j == t) a[j] -= at_target;
              }
            }
            v[u].pack(a);
            v[u].store_cs(gv + (i + u * WIDTH) * VEC);
          }
        }
        if (lane < head) g[lane] = from_acc<T>(grad_of(to_acc(x[lane]), lane));
        if (lane < cols - tail) g[tail + lane] = from_acc<T>(grad_of(to_acc(x[tail + lane]), tail + lane));
      }
    }
    if (lane == 0) {
      if (row_loss) row_loss[r] = loss;
      if (loss_rows) loss_rows[r] = from_acc<T>(loss);
      if (row_z) row_z[r] = z;
      if (z_rows) z_rows[r] = from_acc<T>(z);
      if constexpr (ACC) {
        if (row_correct) row_correct[r] = correct ? 1.0f : 0.0f;
        if (correct_rows) correct_rows[r] = correct ? 1.0f : 0.0f;
      }
    }
  }
}

// n_valid: many blocks, each adding its count into *n_valid (cleared first):
// integer atomics, exact in any order. One block of 1024 threads over 524288
// targets (rows of 256 classes) took ~200 us, a third of the forward (H100).
__global__ void __launch_bounds__(256)
ce_count_kernel(const int64_t* __restrict__ target, int64_t rows, int64_t ignore_index,
                unsigned long long* __restrict__ n_valid) {
  __shared__ long long scratch[32];
  long long n = 0;
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < rows; r += int64_t(gridDim.x) * blockDim.x)
    n += target[r] != ignore_index;
  n = block_reduce(n, Sum{}, 0ll, scratch, blockDim.x / 32);
  if (threadIdx.x == 0 && n) atomicAdd(n_valid, static_cast<unsigned long long>(n));
}

// Stage 1 of a fixed-order sum of n values: block b adds the b-th slice of
// `per` values (thread-strided, then a fixed tree) into part[b]. Stage 2 is
// ce_reduce_kernel (or the weighted one) over the parts.
template <class V>
__global__ void __launch_bounds__(256)
ce_partials_kernel(const V* __restrict__ v, int64_t n, int64_t per, V* __restrict__ part) {
  __shared__ V scratch[32];
  const int64_t begin = blockIdx.x * per, end = begin + per < n ? begin + per : n;
  V acc = 0;
  for (int64_t r = begin + threadIdx.x; r < end; r += blockDim.x) acc += v[r];
  acc = block_reduce(acc, Sum{}, V(0), scratch, blockDim.x / 32);
  if (threadIdx.x == 0) part[blockIdx.x] = acc;
}

// With class weights: n_valid (when asked), W = sum of w[t] over the rows not
// ignored (when asked) and Wsum = sum_c w_c, one block in a fixed order. A
// target out of range stops here first (the forward kernel would too).
template <class T>
__global__ void __launch_bounds__(1024)
ce_weighted_stats_kernel(const int64_t* __restrict__ target, int64_t rows, int64_t ignore_index,
                         const T* __restrict__ weight, int64_t cols, int64_t* __restrict__ n_valid,
                         acc_t<T>* __restrict__ w_valid, acc_t<T>* __restrict__ wsum) {
  using A = acc_t<T>;
  __shared__ long long scratch_n[32];
  __shared__ A scratch_w[32], scratch_s[32];
  long long n = 0;
  A wv = 0, ws = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    const int64_t t = target[r];
    if (t == ignore_index) continue;
    TC_DEVICE_REQUIRE(t >= 0 && t < cols,
                      "tinycuda::cross_entropy: a target is out of range [0, classes) and not ignore_index");
    ++n;
    wv += to_acc(weight[t]);
  }
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) ws += to_acc(weight[c]);
  n = block_reduce(n, Sum{}, 0ll, scratch_n, blockDim.x / 32);
  wv = block_reduce(wv, Sum{}, A(0), scratch_w, blockDim.x / 32);
  ws = block_reduce(ws, Sum{}, A(0), scratch_s, blockDim.x / 32);
  if (threadIdx.x == 0) {
    if (n_valid) *n_valid = n;
    if (w_valid) *w_valid = wv;
    *wsum = ws;
  }
}

// MEAN with class weights: sum (loss - z) / W + sum z / n_valid (row_z NULL:
// no z terms, sum loss / W), one block in a fixed order as ce_reduce_kernel.
template <class T>
__global__ void __launch_bounds__(1024)
ce_reduce_weighted_kernel(const acc_t<T>* __restrict__ row_loss, const acc_t<T>* __restrict__ row_z,
                          int64_t rows, const acc_t<T>* __restrict__ w_div, const int64_t* __restrict__ n_valid,
                          T* __restrict__ loss) {
  using A = acc_t<T>;
  __shared__ A scratch[32], scratch_z[32];
  A acc = 0, acc_z = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    const A z = row_z ? row_z[r] : A(0);
    acc += row_loss[r] - z;
    acc_z += z;
  }
  acc = block_reduce(acc, Sum{}, A(0), scratch, blockDim.x / 32);
  acc_z = block_reduce(acc_z, Sum{}, A(0), scratch_z, blockDim.x / 32);
  if (threadIdx.x == 0) *loss = from_acc<T>(acc / *w_div + (row_z ? acc_z / A(*n_valid) : A(0)));
}

// One block, fixed order: thread k adds rows k, k + 1024, ..., then a fixed tree
// (past ce::kReduceParts rows, over the parts of ce_partials_kernel).
template <class T>
__global__ void __launch_bounds__(1024)
ce_reduce_kernel(const acc_t<T>* __restrict__ row_loss, int64_t rows,
                 const int64_t* __restrict__ n_valid, T* __restrict__ loss) {
  using A = acc_t<T>;
  __shared__ A scratch[32];
  A acc = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) acc += row_loss[r];
  acc = block_reduce(acc, Sum{}, A(0), scratch, blockDim.x / 32);
  if (threadIdx.x == 0) *loss = from_acc<T>(n_valid ? acc / A(*n_valid) : acc);
}

// grad[r, :] *= scale[per_row ? r : 0], skipped (no read of grad) where the
// scale is exactly 1. Block (x, y): rows y, y + gridDim.y, ...; x strides the
// row's 16-byte vectors. VEC > 1 needs 16-byte aligned rows (or one row).
template <class T, int VEC>
__global__ void __launch_bounds__(256)
ce_backward_kernel(T* __restrict__ grad, const T* __restrict__ scale, int64_t rows, int64_t cols,
                   int per_row) {
  pdl_start();
  using A = acc_t<T>;
  const int64_t nvec = cols / VEC;
  const int64_t start = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const A s = to_acc(scale[per_row ? r : 0]);
    if (s == A(1)) continue;
    T* g = grad + r * cols;
    for (int64_t i = start; i < nvec; i += stride) {
      if constexpr (VEC == 1) {
        g[i] = from_acc<T>(A(to_acc(g[i])) * s);
      } else {
        Vec<T> v = load_vec(g + i * VEC);
#pragma unroll
        for (int j = 0; j < VEC; ++j) v.v[j] = from_acc<T>(A(to_acc(v.v[j])) * s);
        store_vec(g + i * VEC, v);
      }
    }
    if (start < cols - nvec * VEC) {
      T& e = g[nvec * VEC + start];
      e = from_acc<T>(A(to_acc(e)) * s);
    }
  }
}

// ---------------------------------------------------------------------------
// launch helpers

// A persistent grid: per SM as many blocks as can be resident, but no more
// rows in flight than fit in 3/4 of the L2 (pass 2 re-reads them), never fewer
// than one block per SM.
template <class Kernel>
tc_status persistent_grid(const char* op, Kernel kernel, int threads, int64_t blocks,
                          int64_t bytes_per_block, unsigned* grid) {
  DeviceFit dev;
  TC_RETURN_IF_ERROR(device_fit(op, kernel, threads, &dev));
  const int64_t fit = int64_t(dev.l2_bytes) * 3 / 4 / (int64_t(dev.sms) * bytes_per_block);
  const int64_t per_sm = fit < 1 ? 1 : (fit < dev.blocks_per_sm ? fit : dev.blocks_per_sm);
  const int64_t g = blocks < dev.sms * per_sm ? blocks : dev.sms * per_sm;
  *grid = unsigned(g < 1 ? 1 : g);
  return TC_OK;
}

}  // namespace

// ---------------------------------------------------------------------------
// launchers

tc_status tc_cross_entropy_cuda(const tc_cross_entropy_params* p) {
  const char* op = "cross_entropy";
  TC_RETURN_IF_ERROR(ce::check(p, op));
  const size_t need = ce::workspace_bytes(*p);
  TC_REQUIRE(p->workspace_bytes >= need && (need == 0 || p->workspace),
             "%s: workspace of %zu bytes needed, %zu given", op, need, p->workspace_bytes);
  TC_REQUIRE(p->cols < INT32_MAX - 16, "%s: cols must be < 2^31, got %lld", op, (long long)p->cols);
  cudaStream_t stream = as_stream(p->stream);
  const int64_t rows = p->rows;
  const int cols = int(p->cols);
  const bool mean = p->reduction == TC_REDUCTION_MEAN;
  char* ws = static_cast<char*>(p->workspace);
  const bool weighted = p->weight != nullptr;
  int64_t* counted =
      ce::counts_n_valid(*p) || ce::counts_n_valid_for_accuracy(*p) ? reinterpret_cast<int64_t*>(ws) : nullptr;
  const int64_t* n_valid = mean ? (p->n_valid ? p->n_valid : counted) : nullptr;
  if (counted && !weighted) {
    TC_RETURN_IF_ERROR(cuda_status(op, "clearing the count", cudaMemsetAsync(counted, 0, sizeof(int64_t), stream)));
    ce_count_kernel<<<grid_1d(rows, 256 * 8, 1024), 256, 0, stream>>>(
        p->target, rows, p->ignore_index, reinterpret_cast<unsigned long long*>(counted));
    TC_RETURN_IF_ERROR(check_launch(op));
  }
  const size_t stats = ce::stats_bytes(*p);
  return dispatch_cuda(p->dtype, op, [&](auto tag) -> tc_status {
    using T = decltype(tag);
    using A = acc_t<T>;
    // with weights, the statistics block is [n_valid][W][Wsum], 8 bytes each
    A* w_valid = weighted && mean && !p->target_weight_sum ? reinterpret_cast<A*>(ws + 8) : nullptr;
    A* wsum = weighted ? reinterpret_cast<A*>(ws + 16) : nullptr;
    const A* w_div = weighted && mean ? (p->target_weight_sum ? static_cast<const A*>(p->target_weight_sum) : w_valid)
                                      : nullptr;
    if (weighted) {
      ce_weighted_stats_kernel<T><<<1, 1024, 0, stream>>>(p->target, rows, p->ignore_index,
                                                          static_cast<const T*>(p->weight), p->cols, counted,
                                                          w_valid, wsum);
      TC_RETURN_IF_ERROR(check_launch(op));
    }
    A* row_loss = static_cast<A*>(p->row_loss);
    const size_t row_bytes = size_t(rows) * sizeof(A);
    if (ce::row_losses_in_workspace(*p)) row_loss = reinterpret_cast<A*>(ws + stats);
    A* row_z = p->row_z ? static_cast<A*>(p->row_z)
               : ce::row_z_in_workspace(*p)
                   ? reinterpret_cast<A*>(ws + stats + (ce::row_losses_in_workspace(*p) ? row_bytes : 0))
                   : nullptr;
    const bool none = p->reduction == TC_REDUCTION_NONE;
    T* loss_rows = none ? static_cast<T*>(p->loss) : nullptr;
    T* z_rows = none ? static_cast<T*>(p->z_loss) : nullptr;
    // token accuracy: per row into row_correct (the caller's, or the workspace's
    // after the row z terms for SUM/MEAN) and, for NONE, token_accuracy itself
    const bool accuracy = ce::wants_accuracy(*p);
    float* row_correct = p->row_correct;
    if (ce::row_correct_in_workspace(*p))
      row_correct = reinterpret_cast<float*>(ws + stats + (ce::row_losses_in_workspace(*p) ? row_bytes : 0) +
                                             (ce::row_z_in_workspace(*p) ? row_bytes : 0));
    float* correct_rows = none ? p->token_accuracy : nullptr;
    const T* x = static_cast<const T*>(p->logits);
    T* g = static_cast<T*>(p->grad_logits);
    auto launch = [&](auto width, auto vec) -> tc_status {
      constexpr int W = decltype(width)::value, V = decltype(vec)::value;
      constexpr int threads = W < 256 ? 256 : W, rows_per_block = threads / W;
      auto kernel = accuracy ? (weighted ? ce_forward_kernel<T, W, V, true, true, true>
                                         : ce_forward_kernel<T, W, V, true, false, true>)
                    : weighted ? (p->softcap > 0 ? ce_forward_kernel<T, W, V, true, true, false>
                                                 : ce_forward_kernel<T, W, V, false, true, false>)
                               : (p->softcap > 0 ? ce_forward_kernel<T, W, V, true, false, false>
                                                 : ce_forward_kernel<T, W, V, false, false, false>);
      unsigned grid = 1;
      TC_RETURN_IF_ERROR(persistent_grid(op, kernel, threads, (rows + rows_per_block - 1) / rows_per_block,
                                         rows_per_block * int64_t(cols) * int64_t(sizeof(T)), &grid));
      return launch_pdl(op, kernel, grid, threads, 0, stream, x, p->target, g, rows, cols, p->ignore_index,
                        A(p->label_smoothing), A(p->softcap), A(p->lse_square_scale), g ? n_valid : nullptr, row_loss,
                        loss_rows, row_z, z_rows, static_cast<const T*>(p->weight), g ? w_div : nullptr, wsum,
                        row_correct, correct_rows, static_cast<const T*>(p->grad_loss), p->grad_loss_per_row,
                        p->grad_in_place);
    };
    // Rows start 16-byte aligned or not (odd V); vectors need grad and logits
    // to be misaligned alike (always so in place or for fresh buffers).
    const bool same_alignment = !g || (reinterpret_cast<uintptr_t>(g) - reinterpret_cast<uintptr_t>(x)) % 16 == 0;
    auto by_width = [&](auto vec) -> tc_status {
      // short rows: the fewest threads (8, 16) whose kUnroll loads in flight hold the
      // whole row, several rows a warp (a warp a row of 256 bf16 ran at 0.34 TB/s)
      constexpr int kRowInFlight = kUnroll * decltype(vec)::value;
      if (cols <= 8 * kRowInFlight) return launch(std::integral_constant<int, 8>{}, vec);
      if (cols <= 16 * kRowInFlight) return launch(std::integral_constant<int, 16>{}, vec);
      if (cols <= 1024) return launch(std::integral_constant<int, 32>{}, vec);
      if (cols <= 65536) return launch(std::integral_constant<int, 256>{}, vec);
      return launch(std::integral_constant<int, 1024>{}, vec);
    };
    if (rows > 0) {
      TC_RETURN_IF_ERROR(same_alignment ? by_width(std::integral_constant<int, Vec<T>::size>{})
                                        : by_width(std::integral_constant<int, 1>{}));
    }
    if (none) return TC_OK;
    // SUM, MEAN: each sum in a fixed order; past ce::kReduceParts rows first in
    // contiguous slices, a block each (one block over 524288 row losses took
    // ~190 us, H100), then one block over the slices' sums
    char* parts = ws + ce::workspace_bytes(*p) - ce::partials_bytes(*p);
    auto sums = [&](auto* v, int half, int64_t* n) -> decltype(v) {
      using V = std::remove_cv_t<std::remove_pointer_t<decltype(v)>>;
      if (rows <= ce::kReduceParts) return *n = rows, v;
      const int64_t per = (rows + ce::kReduceParts - 1) / ce::kReduceParts;
      V* part = reinterpret_cast<V*>(parts + half * ce::kReduceParts * 8);
      *n = (rows + per - 1) / per;
      ce_partials_kernel<V><<<unsigned(*n), 256, 0, stream>>>(v, rows, per, part);
      return part;
    };
    int64_t n = 0, nz = 0;
    if (ce::reduces_accuracy(*p)) {  // SUM, MEAN alike: the fraction right (0 / 1 sums: exact below 2^24 rows)
      const float* right = sums(row_correct, 0, &n);
      ce_reduce_kernel<float><<<1, 1024, 0, stream>>>(right, n, p->n_valid ? p->n_valid : counted,
                                                      p->token_accuracy);
      TC_RETURN_IF_ERROR(check_launch(op));
    }
    if (p->loss && weighted && mean) {
      const A* losses = sums(row_loss, 0, &n);
      const A* zs = ce::splits_z(*p) ? sums(row_z, 1, &nz) : nullptr;
      // the parts of loss and z, n of each: sum (loss - z) over parts is sum loss - sum z
      ce_reduce_weighted_kernel<T><<<1, 1024, 0, stream>>>(losses, zs, n, w_div, n_valid, static_cast<T*>(p->loss));
      TC_RETURN_IF_ERROR(check_launch(op));
    } else if (p->loss) {
      const A* losses = sums(row_loss, 0, &n);
      ce_reduce_kernel<T><<<1, 1024, 0, stream>>>(losses, n, n_valid, static_cast<T*>(p->loss));
      TC_RETURN_IF_ERROR(check_launch(op));
    }
    if (!p->z_loss) return TC_OK;
    const A* zs = sums(row_z, 1, &nz);
    ce_reduce_kernel<T><<<1, 1024, 0, stream>>>(zs, nz, n_valid, static_cast<T*>(p->z_loss));
    return check_launch(op);
  });
}

tc_status tc_cross_entropy_backward_cuda(const tc_cross_entropy_backward_params* p) {
  const char* op = "cross_entropy_backward";
  TC_RETURN_IF_ERROR(ce::check(p, op));
  if (p->rows * p->cols == 0) return TC_OK;
  return dispatch_cuda(p->dtype, op, [&](auto tag) -> tc_status {
    using T = decltype(tag);
    auto launch = [&](auto vec) {
      constexpr int V = decltype(vec)::value;
      // ~2048 blocks in all: a row each when there are many rows, a row
      // spread over up to 2048 blocks when there is one.
      const int64_t gy = p->rows < 65535 ? p->rows : 65535;
      const int64_t col_blocks = (p->cols / V + 255) / 256;
      int64_t gx = (2048 + gy - 1) / gy;
      gx = gx < col_blocks ? gx : col_blocks;
      return launch_pdl(op, ce_backward_kernel<T, V>, dim3(unsigned(gx < 1 ? 1 : gx), unsigned(gy)), 256, 0,
                        as_stream(p->stream), static_cast<T*>(p->grad_logits), static_cast<const T*>(p->grad_loss),
                        p->rows, p->cols, p->per_row);
    };
    const bool rows_aligned = p->rows == 1 || (p->cols * int64_t(sizeof(T))) % 16 == 0;
    return aligned16(p->grad_logits) && rows_aligned ? launch(std::integral_constant<int, Vec<T>::size>{})
                                                     : launch(std::integral_constant<int, 1>{});
  });
}
