// flash_attention: O = softmax(mask(logit(Q K^T))) V without the score matrix
// in memory (FlashAttention-2), forward and backward. The math, the masks and
// the layouts are in include/tinycuda/flash_attention.h; which keys a query
// sees (a band [lo(i), hi(i))) and the logit map (scale, softcap) come from
// shared/flash_attention_check.h, shared with the CPU kernels.
//
// Work, per (batch, query head) with Sq queries seeing on average S' keys:
// 4 Sq S' D FLOPs forward (Q K^T and P V; S' = Sk / 2 when causal and
// Sq = Sk), 10 Sq S' D backward here (Q K^T and dO V^T twice: once for dQ,
// once for dK/dV). Bytes: Q, K, V, O once each from DRAM at best,
// 2 (Sq + 2 Sk) D itemsize, plus lse; the score matrix (Sq Sk) never exists.
//
// Forward, two kernels (tc_attention_algo):
//  NAIVE  one warp per (b, h, query row), 4 warps a block, grid-stride over
//         rows. Each lane holds ceil(D / 32) elements of q and of the output
//         accumulator (templated: 1, 2, 4, 8 or 16; D <= 512); keys j in
//         [lo(i), hi(i)) one at a time: <q, k_j> by warp reduction, then the
//         online softmax (running max m and sum l; acc rescaled by
//         exp(m_old - m_new)). Every K/V row is read once per query row (from
//         L2): bound by load latency, a baseline. Any dtype (double too).
//  MMA    FlashAttention-2 on mma.sync (fp16/bf16, D % 8 == 0, D <= 256,
//         16-byte aligned rows). A block is 4 warps = 64 query rows of one
//         (b, h), 16 rows a warp; blocks walk (b, h, 64-row tile) with the
//         last query tiles first (with a causal mask they see the most keys,
//         so the longest blocks start earliest). Template kHeadDim in
//         {64, 128, 256}: a smaller D rounds up, its extra columns zero-filled
//         by cp.async (they add 0 to Q K^T and are never stored). K and V
//         tiles of kBlockN keys are double-buffered through cp.async (tile t+1
//         lands while tile t is multiplied); per tile and warp:
//           S = Q K^T     ldmatrix of Q (kept in registers for D <= 128,
//                         reloaded from shared memory at D = 256) and of K
//                         (a [key][d] tile is mma's col-major B as it lies)
//           s = logit(S)  fp32; -inf outside each row's [lo, hi) only in the
//                         tiles that cross a band edge (or seqlen_k)
//           online softmax over the row's 4 lanes (quad shuffles); P = exp(s - m)
//           O += P V      P straight from the S accumulators as mma's A
//                         operand (FA2: the D fragments of two adjacent n8
//                         tiles are the A fragment of one k16 step); V by
//                         ldmatrix.trans
//         Key tiles outside the block's band are never loaded, and a warp
//         skips the tiles outside its own 16 rows' band. O goes out through
//         shared memory as 16-byte stores.
//         Shared memory (rows padded by 8 elements: the 8 rows an ldmatrix
//         phase reads start 16 bytes apart mod 128, so no bank conflicts):
//           D    kBlockN   Q 64 x (D+8)   2 stages x (K + V)    total
//           64   64         9,216 B        36,864 B              46,080 B
//           128  64        17,408 B        69,632 B              87,040 B
//           256  32        33,792 B        67,584 B             101,376 B
//         (kBlockN = 64 at D = 256 would need 168,960 B: more than sm_80's
//         163 KB opt-in.) Blocks above 48 KB opt in once per device; AUTO
//         runs NAIVE on a device that allows less than the kernel needs.
//         Registers (sm_90a): D = 64 capped at 128 for 4 blocks an SM (128
//         bytes of spills, still 232 against 213 TFLOP/s uncapped at 166),
//         D = 128 and 256 ~245, no spills.
//         H100, bf16, batch 4 x 16 heads x 4096 queries and keys, TFLOP/s
//         (causal counted as half the FLOPs): D = 64: 232 (causal 210),
//         D = 128: 277 (252), D = 256: 247 (237); NAIVE at D = 128: 3.9.
//         Each ldmatrix.x4 of K or V feeds 2 mma (a warp has 16 rows), so
//         shared-memory bandwidth is the limit; 32 rows a warp (128-row
//         blocks, FA2's shape at D = 128) would feed 4.
//
// Backward (NAIVE, every dtype, D <= 512), from the saved O and lse:
//  delta  D_i = <dO_i, O_i> into the workspace, a warp per (b, h, i).
//  dq     a warp per (b, h, i): walks keys [lo(i), hi(i)); s recomputed,
//         P = exp(s - lse_i), dP = <dO_i, V_j>, dS = P (dP - D_i) dcap(s),
//         dQ_i += scale dS K_j.
//  dkv    a warp per (b, kv head g, key j): walks the group's query heads
//         and, for each, queries [q_lo(j), q_hi(j)) in order: dV_j += P dO_i,
//         dK_j += scale dS Q_i. No atomics: each output row has one owner
//         that adds in a fixed order (bit-identical run to run).
// A query that sees no key (or whose every logit is -inf): O = 0, lse = +inf,
// and P = 0 in the backward.
#include "tinycuda/flash_attention.h"
#include "../shared/flash_attention_check.h"
#include "kit/cuda_utils.cuh"
#include "kit/mma.cuh"
#include "kit/reduce.cuh"

#include <atomic>
#include <cstdint>
#include <type_traits>

namespace {

constexpr int kWarps = 4;  // warps per block of the NAIVE kernels
constexpr int kMaxNaiveDim = 512;

// One forward problem as the kernels see it: typed pointers, strides in
// elements ([batch, row, head]), the mask and the logit map.
template <class T>
struct Fwd {
  using A = acc_t<T>;
  const T* q;
  const T* k;
  const T* v;
  T* o;
  A* lse;
  int64_t qs[3], ks[3], vs[3], os[3];
  int64_t batch, seqlen_q, seqlen_k, heads_q, group, head_dim;  // group = heads_q / heads_kv
  AttentionMask mask;
  Logit<A> logit;

  static Fwd of(const tc_flash_attention_params* p) {
    Fwd a{static_cast<const T*>(p->q), static_cast<const T*>(p->k), static_cast<const T*>(p->v),
          static_cast<T*>(p->o), static_cast<A*>(p->lse)};
    for (int d = 0; d < 3; ++d)
      a.qs[d] = p->q_stride[d], a.ks[d] = p->k_stride[d], a.vs[d] = p->v_stride[d], a.os[d] = p->o_stride[d];
    a.batch = p->batch, a.seqlen_q = p->seqlen_q, a.seqlen_k = p->seqlen_k, a.heads_q = p->heads_q;
    a.group = p->heads_q / p->heads_kv, a.head_dim = p->head_dim;
    a.mask = attention_mask(p);
    a.logit = attention_logit<A>(p);
    return a;
  }
};

template <class T>
struct Bwd {
  using A = acc_t<T>;
  const T* q;
  const T* k;
  const T* v;
  const T* o;
  const T* go;
  T* gq;
  T* gk;
  T* gv;
  const A* lse;
  A* delta;  // the workspace, [batch, heads_q, seqlen_q] like lse
  int64_t qs[3], ks[3], vs[3], os[3], gos[3], gqs[3], gks[3], gvs[3];
  int64_t batch, seqlen_q, seqlen_k, heads_q, heads_kv, group, head_dim;
  AttentionMask mask;
  Logit<A> logit;
  A scale;

  static Bwd of(const tc_flash_attention_backward_params* p) {
    Bwd a{static_cast<const T*>(p->q), static_cast<const T*>(p->k), static_cast<const T*>(p->v),
          static_cast<const T*>(p->o), static_cast<const T*>(p->grad_o), static_cast<T*>(p->grad_q),
          static_cast<T*>(p->grad_k), static_cast<T*>(p->grad_v), static_cast<const A*>(p->lse),
          static_cast<A*>(p->workspace)};
    for (int d = 0; d < 3; ++d) {
      a.qs[d] = p->q_stride[d], a.ks[d] = p->k_stride[d], a.vs[d] = p->v_stride[d], a.os[d] = p->o_stride[d];
      a.gos[d] = p->grad_o_stride[d], a.gqs[d] = p->grad_q_stride[d], a.gks[d] = p->grad_k_stride[d];
      a.gvs[d] = p->grad_v_stride[d];
    }
    a.batch = p->batch, a.seqlen_q = p->seqlen_q, a.seqlen_k = p->seqlen_k, a.heads_q = p->heads_q;
    a.heads_kv = p->heads_kv, a.group = p->heads_q / p->heads_kv, a.head_dim = p->head_dim;
    a.mask = attention_mask(p);
    a.logit = attention_logit<A>(p);
    a.scale = A(p->scale);
    return a;
  }
};

// Element (b, i, h, 0) of a [batch, row, head, :] tensor.
template <class T>
__device__ __forceinline__ T* at(T* base, const int64_t (&s)[3], int64_t b, int64_t i, int64_t h) {
  return base + b * s[0] + i * s[1] + h * s[2];
}

// ---------------------------------------------------------------------------
// NAIVE forward: a warp per (b, h, i); lane l holds elements d = l + 32 k, k < kPer

template <class T, int kPer>
__global__ void __launch_bounds__(kWarps * 32) attention_naive_kernel(const Fwd<T> a) {
  using A = acc_t<T>;
  const int lane = threadIdx.x % 32, D = int(a.head_dim);
  const int64_t rows = a.batch * a.heads_q * a.seqlen_q;
  for (int64_t r = blockIdx.x * int64_t(kWarps) + threadIdx.x / 32; r < rows; r += int64_t(gridDim.x) * kWarps) {
    // r is also the row's lse index: lse is [batch, heads_q, seqlen_q]
    const int64_t i = r % a.seqlen_q, bh = r / a.seqlen_q, h = bh % a.heads_q, b = bh / a.heads_q;
    const int64_t lo = a.mask.lo(i), hi = a.mask.hi(i);
    A acc[kPer], m = -INFINITY, l = 0;
#pragma unroll
    for (int k = 0; k < kPer; ++k) acc[k] = 0;
    if (lo < hi) {  // q, k and v are read only here: with no key they may be NULL
      const T* qi = at(a.q, a.qs, b, i, h);
      A qv[kPer];
#pragma unroll
      for (int k = 0; k < kPer; ++k) qv[k] = lane + 32 * k < D ? A(to_acc(qi[lane + 32 * k])) : A(0);
      const int64_t g = h / a.group;
      const T* kj = at(a.k, a.ks, b, lo, g);
      const T* vj = at(a.v, a.vs, b, lo, g);
      for (int64_t j = lo; j < hi; ++j, kj += a.ks[1], vj += a.vs[1]) {
        A dot = 0, vv[kPer];  // V's row is loaded with K's, so its latency hides behind the reduction
#pragma unroll
        for (int k = 0; k < kPer; ++k) {
          const int d = lane + 32 * k;
          dot += d < D ? qv[k] * A(to_acc(kj[d])) : A(0);
          vv[k] = d < D ? A(to_acc(vj[d])) : A(0);
        }
        // every lane ends with the same bits, so the branches below are uniform
        const A s = a.logit(warp_reduce(dot, Sum{}));
        if (s == -INFINITY) continue;  // weight 0 (a NaN goes on and poisons l: NaN out, as in torch)
        const A mn = fmax(m, s);
        const A corr = ::exp(m - mn), p = ::exp(s - mn);  // m = -inf: corr = 0 (acc and l are 0 still)
        l = l * corr + p;
#pragma unroll
        for (int k = 0; k < kPer; ++k) acc[k] = acc[k] * corr + p * vv[k];
        m = mn;
      }
    }
    const A inv = l == A(0) ? A(0) : A(1) / l;  // no key (or every logit -inf): O = 0
    T* oi = at(a.o, a.os, b, i, h);
#pragma unroll
    for (int k = 0; k < kPer; ++k)
      if (lane + 32 * k < D) oi[lane + 32 * k] = from_acc<T>(acc[k] * inv);
    if (lane == 0) a.lse[r] = l == A(0) ? A(INFINITY) : m + ::log(l);
  }
}

// ---------------------------------------------------------------------------
// MMA forward (FlashAttention-2 on mma.sync)

namespace fa2 {

constexpr int kBlockM = 64, kThreads = 128;  // 4 warps x 16 query rows
template <int D> constexpr int kBlockN = D <= 128 ? 64 : 32;
template <int D> constexpr int kPitch = D + 8;  // elements a shared row: 16 bytes of padding
template <int D> constexpr size_t kSmemBytes = size_t(kBlockM + 4 * kBlockN<D>) * kPitch<D> * 2;
// D = 64: 4 blocks an SM (128 registers; H100's shared memory holds 4 such
// blocks, A100's 3). Larger D: shared memory allows 2 blocks an SM at most,
// so registers are not capped.
template <int D> constexpr int kMinBlocks = D == 64 ? 4 : 1;
constexpr float kLog2e = 1.4426950408889634f;

// 2^x in one MUFU.EX2 (2^-22 relative); -inf gives +0.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Over the 4 lanes 4g..4g+3 that hold one row of an mma fragment.
template <class V, class Op>
__device__ __forceinline__ V quad_reduce(V v, Op op) {
  v = op(v, shfl_xor(v, 1));
  return op(v, shfl_xor(v, 2));
}

// Two floats as one register of two T, the lower column in the low half (the
// order of mma's operand fragments).
template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __half>) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  } else {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
}

template <class T, int D>
__global__ void __launch_bounds__(kThreads, kMinBlocks<D>) attention_mma_kernel(const Fwd<T> a, int64_t q_tiles) {
  constexpr int BN = kBlockN<D>, P = kPitch<D>;
  constexpr int kChunks = D / 8;                 // 16-byte chunks a row
  constexpr int kRowStep = kThreads / kChunks;   // rows a tile load advances per pass
  constexpr bool kQInRegs = D <= 128;            // 64 more registers at D = 256 would spill
  static_assert(kThreads % kChunks == 0 && kBlockM % kRowStep == 0 && BN % kRowStep == 0, "tile loads");
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sq = reinterpret_cast<T*>(smem_raw);  // [kBlockM][P]; at the end each warp's 16 rows of O
  T* skv = sq + kBlockM * P;               // stage s: K at skv + 2s BN P, V right after

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, qd = lane % 4;
  const int64_t id = blockIdx.x, bh = id / q_tiles, m0 = (q_tiles - 1 - id % q_tiles) * kBlockM;
  const int64_t h = bh % a.heads_q, b = bh / a.heads_q, hk = h / a.group;
  const int64_t last = min(m0 + kBlockM, a.seqlen_q) - 1;  // the block's last query row
  const AttentionMask& mask = a.mask;
  float* lse = a.lse + bh * a.seqlen_q;
  // The bands are monotone in i, so the block's keys are [lo(m0), hi(last)).
  const int64_t kv_lo = mask.lo(m0), kv_hi = mask.hi(last);
  const int ch = tid % kChunks, r0 = tid / kChunks;  // this thread's chunk column, first row
  const bool col_in = ch * 8 < a.head_dim;

  if (kv_lo >= kv_hi) {  // no row sees a key: O = 0, lse = +inf, and nothing is read
    for (int r = r0; r < kBlockM; r += kRowStep)
      if (col_in && m0 + r <= last) *reinterpret_cast<uint4*>(at(a.o, a.os, b, m0 + r, h) + ch * 8) = uint4{};
    if (tid < kBlockM && m0 + tid <= last) lse[m0 + tid] = INFINITY;
    return;
  }

  // Q (rows past seqlen_q and columns past head_dim zero-filled) and the first
  // K/V tile: one cp.async group. Out-of-range chunks read nothing.
  {
    const T* src = at(a.q, a.qs, b, 0, h) + ch * 8;
#pragma unroll
    for (int r = r0; r < kBlockM; r += kRowStep) {
      const bool in = col_in && m0 + r < a.seqlen_q;
      cp_async16(sq + r * P + ch * 8, in ? src + (m0 + r) * a.qs[1] : a.q, in);
    }
  }
  const T* kp = at(a.k, a.ks, b, 0, hk) + ch * 8;
  const T* vp = at(a.v, a.vs, b, 0, hk) + ch * 8;
  auto load_kv = [&](int64_t n0, int stage) {  // keys [n0, n0 + BN), past seqlen_k zero-filled
    T* dk = skv + 2 * stage * BN * P;
    T* dv = dk + BN * P;
#pragma unroll
    for (int r = r0; r < BN; r += kRowStep) {
      const int64_t j = n0 + r;
      const bool in = col_in && j < a.seqlen_k;
      cp_async16(dk + r * P + ch * 8, in ? kp + j * a.ks[1] : a.k, in);
      cp_async16(dv + r * P + ch * 8, in ? vp + j * a.vs[1] : a.v, in);
    }
  };
  load_kv(kv_lo, 0);
  cp_async_commit();

  // This warp's rows [wrow, wrow + 16) and their band: tiles outside
  // [w_lo, w_hi) are skipped, tiles inside [w_max_lo, w_min_hi) need no mask.
  const int64_t wrow = m0 + warp * 16, wlast = min(wrow + 15, last);
  const bool live = wrow <= last;  // the warp has a row to store
  const int64_t w_lo = mask.lo(wrow), w_hi = mask.hi(wlast), w_max_lo = mask.lo(wlast), w_min_hi = mask.hi(wrow);
  // this thread's two rows, g and g + 8 of the warp's 16 (d0,d1 and d2,d3 of each fragment)
  const int64_t row_lo[2] = {mask.lo(wrow + g), mask.lo(wrow + g + 8)};
  const int64_t row_hi[2] = {mask.hi(wrow + g), mask.hi(wrow + g + 8)};

  // ldmatrix row addresses (bytes), lane l serving row l % 8 of matrix l / 8:
  //  Q (A order: rows 0-7/k 0-7, rows 8-15/k 0-7, rows 0-7/k 8-15, rows 8-15/k 8-15 = a0..a3)
  //  K (B order: keys 0-7/d 0-7, keys 0-7/d 8-15 = b0,b1 of key tile 0; keys 8-15 = tile 1)
  //  V (.trans, B order: keys 0-7/d 0-7, keys 8-15/d 0-7 = b0,b1 of d tile 0; d 8-15 = tile 1)
  const int lr = lane & 7, l8 = (lane >> 3 & 1) * 8, l16 = (lane >> 4) * 8;
  const uint32_t q_addr = smem_addr(sq + (warp * 16 + lr + l8) * P + l16);
  const uint32_t k_off = ((lr + l16) * P + l8) * 2, v_off = ((lr + l8) * P + l16) * 2;

  float acc[D / 8][4] = {};                      // O: d tile nt, rows g / g + 8, columns 2qd, 2qd + 1
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};  // l: this lane's part of the row sum
  uint32_t qf[kQInRegs ? D / 16 : 1][4];
  const int64_t tiles = (kv_hi - kv_lo + BN - 1) / BN;
  for (int64_t t = 0; t < tiles; ++t) {
    cp_async_wait<0>();
    // tile t (and at t = 0, Q) has landed for every thread, and every warp is
    // done with tile t - 1, whose stage the next load overwrites
    __syncthreads();
    if (t + 1 < tiles) {
      load_kv(kv_lo + (t + 1) * BN, int((t + 1) & 1));
      cp_async_commit();
    }
    if constexpr (kQInRegs) {
      if (t == 0)
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) ldsm_x4<false>(qf[kk], q_addr + kk * 32);
    }
    const int64_t n0 = kv_lo + t * BN;
    if (!live || n0 >= w_hi || n0 + BN <= w_lo) continue;  // warp-uniform: none of its rows sees the tile
    const uint32_t k_tile = smem_addr(skv + 2 * int(t & 1) * BN * P), v_tile = k_tile + BN * P * 2;

    // S = Q K^T: s[nt] is key tile nt (8 keys), rows g / g + 8, keys 2qd, 2qd + 1
    float s[BN / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t qa[4];
      if constexpr (kQInRegs) {
#pragma unroll
        for (int e = 0; e < 4; ++e) qa[e] = qf[kk][e];
      } else {
        ldsm_x4<false>(qa, q_addr + kk * 32);
      }
#pragma unroll
      for (int nt = 0; nt < BN / 16; ++nt) {
        uint32_t kb[4];
        ldsm_x4<false>(kb, k_tile + k_off + (nt * 16 * P + kk * 16) * 2);
        mma_16816<T>(s[2 * nt], qa, kb[0], kb[1]);
        mma_16816<T>(s[2 * nt + 1], qa, kb[2], kb[3]);
      }
    }

    // logits, then -inf outside the row's band, only where the tile crosses
    // an edge of it (keys >= seqlen_k are past every hi). Both tests are
    // uniform and taken once a tile, so the element loops are straight-line
    // code: the logit loop is written twice so that in the second one the
    // compiler knows there is no softcap and drops the tanh and its branch.
    auto logits = [&] {
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[nt][e] = a.logit(s[nt][e]);
    };
    if (a.logit.inv_cap != 0.f)
      logits();
    else
      logits();
    if (!(n0 >= w_max_lo && n0 + BN <= w_min_hi)) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        // the row's visible columns of this tile: [rlo, rhi)
        const int rlo = int(max(int64_t(0), min(int64_t(BN), row_lo[r] - n0)));
        const int rhi = int(max(int64_t(0), min(int64_t(BN), row_hi[r] - n0)));
#pragma unroll
        for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int c = nt * 8 + 2 * qd + e;
            if (c < rlo || c >= rhi) s[nt][2 * r + e] = -INFINITY;
          }
      }
    }

    // online softmax, row by row: the max over the quad, acc and l rescaled by
    // exp(m_old - m_new), P = exp(s - m_new). A row with every logit -inf so
    // far has m = -inf; it exponentiates against 0 instead (FA2), so P =
    // exp(-inf) = 0 and the rescale exp(-inf - 0) = 0, never exp(-inf + inf).
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = m[r];
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt) mx = fmaxf(mx, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
      mx = quad_reduce(mx, Max{});
      const float base = mx == -INFINITY ? 0.f : mx * kLog2e;
      const float corr = exp2_approx(m[r] * kLog2e - base);
      m[r] = mx;
      l[r] *= corr;
#pragma unroll
      for (int nt = 0; nt < D / 8; ++nt) acc[nt][2 * r] *= corr, acc[nt][2 * r + 1] *= corr;
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
        for (int e = 2 * r; e < 2 * r + 2; ++e) {
          s[nt][e] = exp2_approx(s[nt][e] * kLog2e - base);
          l[r] += s[nt][e];
        }
    }

    // O += P V. The A fragment of k16 step kk (keys 16kk..16kk+15) is the D
    // fragments of key tiles 2kk and 2kk+1: a0 = (g, 2qd..) = s[2kk][0..1],
    // a1 = (g+8, 2qd..) = s[2kk][2..3], a2 = (g, 2qd+8..) = s[2kk+1][0..1],
    // a3 = (g+8, 2qd+8..) = s[2kk+1][2..3].
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      const uint32_t pa[4] = {pack2<T>(s[2 * kk][0], s[2 * kk][1]), pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                              pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                              pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int dt = 0; dt < D / 16; ++dt) {
        uint32_t vb[4];
        ldsm_x4<true>(vb, v_tile + v_off + (kk * 16 * P + dt * 16) * 2);
        mma_16816<T>(acc[2 * dt], pa, vb[0], vb[1]);
        mma_16816<T>(acc[2 * dt + 1], pa, vb[2], vb[3]);
      }
    }
  }
  cp_async_wait<0>();  // (nothing is in flight after the last tile; kept so no copy can outlive the block)

  // O = acc / l. Each warp writes its 16 rows into its own rows of the Q
  // tile (which no other warp reads), then stores them 16 bytes a lane.
  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] = quad_reduce(l[r], Sum{});
    inv[r] = l[r] == 0.f ? 0.f : 1.f / l[r];  // a row that saw nothing: O = 0
  }
  T* so = sq + warp * 16 * P;
  __syncwarp();  // this warp's last ldmatrix of its Q rows is behind every lane
#pragma unroll
  for (int nt = 0; nt < D / 8; ++nt)
#pragma unroll
    for (int r = 0; r < 2; ++r)
      *reinterpret_cast<uint32_t*>(so + (g + 8 * r) * P + nt * 8 + 2 * qd) =
          pack2<T>(acc[nt][2 * r] * inv[r], acc[nt][2 * r + 1] * inv[r]);
  __syncwarp();
#pragma unroll
  for (int c = lane; c < 16 * kChunks; c += 32) {
    const int r = c / kChunks, col = c % kChunks * 8;
    if (wrow + r <= last && col < a.head_dim)
      *reinterpret_cast<uint4*>(at(a.o, a.os, b, wrow + r, h) + col) =
          *reinterpret_cast<const uint4*>(so + r * P + col);
  }
  if (qd == 0)
#pragma unroll
    for (int r = 0; r < 2; ++r)
      if (wrow + g + 8 * r <= last) lse[wrow + g + 8 * r] = l[r] == 0.f ? INFINITY : m[r] + logf(l[r]);
}

// The largest dynamic shared memory a block may opt into on the current
// device (asked once per device); 0 when it cannot be asked.
inline int smem_optin() {
  static std::atomic<int> known[64];
  int dev = 0, v = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  if (dev >= 0 && dev < 64 && (v = known[dev].load(std::memory_order_relaxed)) != 0) return v;
  if (cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  if (dev >= 0 && dev < 64) known[dev].store(v, std::memory_order_relaxed);
  return v;
}

// Why the MMA kernel cannot run this problem, or nullptr when it can.
template <class T>
const char* blocker(const tc_flash_attention_params* p) {
  if constexpr (!std::is_same_v<T, __half> && !std::is_same_v<T, __nv_bfloat16>) {
    return "fp16 or bf16";
  } else {
    if (p->head_dim % 8 != 0 || p->head_dim > 256) return "head_dim a multiple of 8 and at most 256";
    if (!aligned16(p->q) || !aligned16(p->k) || !aligned16(p->v) || !aligned16(p->o))
      return "16-byte aligned q, k, v and o";
    for (int d = 0; d < 3; ++d)
      if (p->q_stride[d] % 8 || p->k_stride[d] % 8 || p->v_stride[d] % 8 || p->o_stride[d] % 8)
        return "q, k, v and o strides that are multiples of 8 elements";
    const size_t smem = p->head_dim <= 64 ? kSmemBytes<64> : p->head_dim <= 128 ? kSmemBytes<128> : kSmemBytes<256>;
    if (size_t(smem_optin()) < smem) return "more shared memory per block than this device allows";
    return nullptr;
  }
}

template <class T, int D>
tc_status launch(const char* op, const Fwd<T>& a, cudaStream_t stream) {
  auto kernel = attention_mma_kernel<T, D>;
  constexpr size_t smem = kSmemBytes<D>;
  int dev = 0;
  TC_RETURN_IF_ERROR(cuda_status(op, "cudaGetDevice", cudaGetDevice(&dev)));
  static std::atomic<uint64_t> smem_set{0};  // bit d: the attribute is set on device d
  if (dev < 0 || dev >= 64 || !(smem_set.load(std::memory_order_relaxed) >> dev & 1)) {
    TC_RETURN_IF_ERROR(cuda_status(
        op, "setting shared memory",
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem))));
    if (dev >= 0 && dev < 64) smem_set.fetch_or(uint64_t(1) << dev, std::memory_order_relaxed);
  }
  const int64_t q_tiles = (a.seqlen_q + kBlockM - 1) / kBlockM, blocks = a.batch * a.heads_q * q_tiles;
  TC_REQUIRE(blocks <= INT32_MAX, "%s: %lld blocks of %d query rows are too many for one launch", op,
             (long long)blocks, kBlockM);
  kernel<<<unsigned(blocks), kThreads, smem, stream>>>(a, q_tiles);
  return check_launch(op);
}

}  // namespace fa2

// ---------------------------------------------------------------------------
// NAIVE backward

// D_i = <dO_i, O_i>, a warp per (b, h, i), into the workspace.
template <class T>
__global__ void __launch_bounds__(kWarps * 32) attention_delta_kernel(const Bwd<T> a) {
  using A = acc_t<T>;
  const int lane = threadIdx.x % 32, D = int(a.head_dim);
  const int64_t rows = a.batch * a.heads_q * a.seqlen_q;
  for (int64_t r = blockIdx.x * int64_t(kWarps) + threadIdx.x / 32; r < rows; r += int64_t(gridDim.x) * kWarps) {
    const int64_t i = r % a.seqlen_q, bh = r / a.seqlen_q, h = bh % a.heads_q, b = bh / a.heads_q;
    const T* oi = at(a.o, a.os, b, i, h);
    const T* gi = at(a.go, a.gos, b, i, h);
    A s = 0;
    for (int d = lane; d < D; d += 32) s += A(to_acc(gi[d])) * A(to_acc(oi[d]));
    s = warp_reduce(s, Sum{});
    if (lane == 0) a.delta[r] = s;
  }
}

// dQ_i = scale sum_j dS'_ij K_j, a warp per (b, h, i) walking its keys in order.
template <class T, int kPer>
__global__ void __launch_bounds__(kWarps * 32) attention_dq_kernel(const Bwd<T> a) {
  using A = acc_t<T>;
  const int lane = threadIdx.x % 32, D = int(a.head_dim);
  const int64_t rows = a.batch * a.heads_q * a.seqlen_q;
  for (int64_t r = blockIdx.x * int64_t(kWarps) + threadIdx.x / 32; r < rows; r += int64_t(gridDim.x) * kWarps) {
    const int64_t i = r % a.seqlen_q, bh = r / a.seqlen_q, h = bh % a.heads_q, b = bh / a.heads_q;
    const int64_t lo = a.mask.lo(i), hi = a.mask.hi(i);
    A dq[kPer];
#pragma unroll
    for (int k = 0; k < kPer; ++k) dq[k] = 0;
    const A lse_i = lo < hi ? a.lse[r] : A(INFINITY);
    if (lse_i != A(INFINITY)) {  // lse = +inf: the forward saw nothing, P = 0 everywhere
      const T* qi = at(a.q, a.qs, b, i, h);
      const T* gi = at(a.go, a.gos, b, i, h);
      A qv[kPer], gv[kPer];
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        const int d = lane + 32 * k;
        qv[k] = d < D ? A(to_acc(qi[d])) : A(0);
        gv[k] = d < D ? A(to_acc(gi[d])) : A(0);
      }
      const A di = a.delta[r];
      const int64_t g = h / a.group;
      const T* kj = at(a.k, a.ks, b, lo, g);
      const T* vj = at(a.v, a.vs, b, lo, g);
      for (int64_t j = lo; j < hi; ++j, kj += a.ks[1], vj += a.vs[1]) {
        A qk = 0, dp = 0, kv[kPer];
#pragma unroll
        for (int k = 0; k < kPer; ++k) {
          const int d = lane + 32 * k;
          kv[k] = d < D ? A(to_acc(kj[d])) : A(0);
          qk += qv[k] * kv[k];
          dp += d < D ? gv[k] * A(to_acc(vj[d])) : A(0);
        }
        qk = warp_reduce(qk, Sum{});
        dp = warp_reduce(dp, Sum{});
        const A s = a.logit(qk), p = ::exp(s - lse_i);
        const A ds = p * (dp - di) * a.logit.dcap(s) * a.scale;
#pragma unroll
        for (int k = 0; k < kPer; ++k) dq[k] += ds * kv[k];
      }
    }
    T* dqi = at(a.gq, a.gqs, b, i, h);
#pragma unroll
    for (int k = 0; k < kPer; ++k)
      if (lane + 32 * k < D) dqi[lane + 32 * k] = from_acc<T>(dq[k]);
  }
}

// dK_j, dV_j, a warp per (b, kv head g, key j): the group's query heads in
// order, and for each the queries that see j in order.
template <class T, int kPer>
__global__ void __launch_bounds__(kWarps * 32) attention_dkv_kernel(const Bwd<T> a) {
  using A = acc_t<T>;
  const int lane = threadIdx.x % 32, D = int(a.head_dim);
  const int64_t rows = a.batch * a.heads_kv * a.seqlen_k;
  for (int64_t r = blockIdx.x * int64_t(kWarps) + threadIdx.x / 32; r < rows; r += int64_t(gridDim.x) * kWarps) {
    const int64_t j = r % a.seqlen_k, bg = r / a.seqlen_k, g = bg % a.heads_kv, b = bg / a.heads_kv;
    const int64_t qlo = a.mask.q_lo(j), qhi = a.mask.q_hi(j);
    A dk[kPer], dv[kPer];
#pragma unroll
    for (int k = 0; k < kPer; ++k) dk[k] = 0, dv[k] = 0;
    if (qlo < qhi) {  // q, grad_o, lse are read only here: with no query they may be NULL
      const T* kj = at(a.k, a.ks, b, j, g);
      const T* vj = at(a.v, a.vs, b, j, g);
      A kv[kPer], vv[kPer];
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        const int d = lane + 32 * k;
        kv[k] = d < D ? A(to_acc(kj[d])) : A(0);
        vv[k] = d < D ? A(to_acc(vj[d])) : A(0);
      }
      for (int64_t h = g * a.group; h < (g + 1) * a.group; ++h) {
        const int64_t row0 = (b * a.heads_q + h) * a.seqlen_q;  // lse / delta index of query 0
        const T* qi = at(a.q, a.qs, b, qlo, h);
        const T* gi = at(a.go, a.gos, b, qlo, h);
        for (int64_t i = qlo; i < qhi; ++i, qi += a.qs[1], gi += a.gos[1]) {
          const A lse_i = a.lse[row0 + i];
          if (lse_i == A(INFINITY)) continue;  // uniform: the forward saw nothing, P = 0
          A qk = 0, dp = 0, qv[kPer], gv[kPer];
#pragma unroll
          for (int k = 0; k < kPer; ++k) {
            const int d = lane + 32 * k;
            qv[k] = d < D ? A(to_acc(qi[d])) : A(0);
            gv[k] = d < D ? A(to_acc(gi[d])) : A(0);
            qk += qv[k] * kv[k];
            dp += gv[k] * vv[k];
          }
          qk = warp_reduce(qk, Sum{});
          dp = warp_reduce(dp, Sum{});
          const A s = a.logit(qk), p = ::exp(s - lse_i);
          const A ds = p * (dp - a.delta[row0 + i]) * a.logit.dcap(s) * a.scale;
#pragma unroll
          for (int k = 0; k < kPer; ++k) dv[k] += p * gv[k], dk[k] += ds * qv[k];
        }
      }
    }
    T* dkj = at(a.gk, a.gks, b, j, g);
    T* dvj = at(a.gv, a.gvs, b, j, g);
#pragma unroll
    for (int k = 0; k < kPer; ++k)
      if (lane + 32 * k < D) dkj[lane + 32 * k] = from_acc<T>(dk[k]), dvj[lane + 32 * k] = from_acc<T>(dv[k]);
  }
}

// Calls f(integral_constant<kPer>) with the fewest elements a lane (1, 2, 4,
// 8, 16) that cover head_dim <= 512 with 32 lanes.
template <class F>
void by_lanes(int64_t head_dim, F&& f) {
  if (head_dim <= 32) f(std::integral_constant<int, 1>{});
  else if (head_dim <= 64) f(std::integral_constant<int, 2>{});
  else if (head_dim <= 128) f(std::integral_constant<int, 4>{});
  else if (head_dim <= 256) f(std::integral_constant<int, 8>{});
  else f(std::integral_constant<int, 16>{});
}

}  // namespace

// ---------------------------------------------------------------------------
// launchers

tc_status tc_flash_attention_cuda(const tc_flash_attention_params* p) {
  const char* op = "flash_attention";
  TC_RETURN_IF_ERROR(flash_attention_check(p));
  TC_REQUIRE(p->algo >= TC_ATTENTION_AUTO && p->algo <= TC_ATTENTION_MMA,
             "%s: algo must be 0 (auto), 1 (naive) or 2 (mma), got %d", op, int(p->algo));
  const int64_t rows = p->batch * p->heads_q * p->seqlen_q;
  if (rows == 0) return TC_OK;
  return dispatch_cuda(p->dtype, op, [&](auto tag) -> tc_status {
    using T = decltype(tag);
    const Fwd<T> a = Fwd<T>::of(p);
    cudaStream_t stream = as_stream(p->stream);
    // head_dim 0 has no product to multiply, only lse (= log of the visible
    // key count): the naive kernel writes it without touching q, k or v.
    const char* why = p->head_dim == 0 ? nullptr : fa2::blocker<T>(p);
    TC_REQUIRE(!why || p->algo != TC_ATTENTION_MMA, "%s: algo 2 (mma) needs %s (dtype %d, head_dim %lld)", op, why,
               int(p->dtype), (long long)p->head_dim);
    if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) {
      if (!why && p->head_dim > 0 && p->algo != TC_ATTENTION_NAIVE) {
        if (p->head_dim <= 64) return fa2::launch<T, 64>(op, a, stream);
        if (p->head_dim <= 128) return fa2::launch<T, 128>(op, a, stream);
        return fa2::launch<T, 256>(op, a, stream);
      }
    }
    TC_REQUIRE(p->head_dim <= kMaxNaiveDim, "%s: head_dim must be <= %d on CUDA, got %lld", op, kMaxNaiveDim,
               (long long)p->head_dim);
    const unsigned grid = grid_1d(rows, kWarps);
    by_lanes(p->head_dim, [&](auto per) {
      attention_naive_kernel<T, decltype(per)::value><<<grid, kWarps * 32, 0, stream>>>(a);
    });
    return check_launch(op);
  });
}

tc_status tc_flash_attention_backward_cuda(const tc_flash_attention_backward_params* p) {
  const char* op = "flash_attention_backward";
  TC_RETURN_IF_ERROR(flash_attention_check(p));
  const size_t need = tc_flash_attention_backward_workspace_size(p);
  TC_REQUIRE(p->workspace_bytes >= need && (need == 0 || p->workspace),
             "%s: workspace of %zu bytes needed, %zu given", op, need, p->workspace_bytes);
  // no head or head_dim 0: dQ, dK and dV have no elements
  if (p->batch * p->heads_kv * p->head_dim == 0) return TC_OK;
  TC_REQUIRE(p->head_dim <= kMaxNaiveDim, "%s: head_dim must be <= %d on CUDA, got %lld", op, kMaxNaiveDim,
             (long long)p->head_dim);
  return dispatch_cuda(p->dtype, op, [&](auto tag) -> tc_status {
    using T = decltype(tag);
    const Bwd<T> a = Bwd<T>::of(p);
    cudaStream_t stream = as_stream(p->stream);
    const int64_t rows_q = p->batch * p->heads_q * p->seqlen_q, rows_k = p->batch * p->heads_kv * p->seqlen_k;
    // seqlen_q == 0: only dK, dV (zeros); seqlen_k == 0: only dQ (zeros, no delta needed)
    if (rows_q > 0 && rows_k > 0) {
      attention_delta_kernel<T><<<grid_1d(rows_q, kWarps), kWarps * 32, 0, stream>>>(a);
      TC_RETURN_IF_ERROR(check_launch(op));
    }
    by_lanes(p->head_dim, [&](auto per) {
      constexpr int kPer = decltype(per)::value;
      if (rows_q > 0) attention_dq_kernel<T, kPer><<<grid_1d(rows_q, kWarps), kWarps * 32, 0, stream>>>(a);
    });
    TC_RETURN_IF_ERROR(check_launch(op));
    by_lanes(p->head_dim, [&](auto per) {
      constexpr int kPer = decltype(per)::value;
      if (rows_k > 0) attention_dkv_kernel<T, kPer><<<grid_1d(rows_k, kWarps), kWarps * 32, 0, stream>>>(a);
    });
    return check_launch(op);
  });
}
