// flash_attention: O = softmax(mask(logit(Q K^T))) V without the score matrix
// in memory (FlashAttention-2), forward and backward. The math, the masks and
// the layouts are in include/tinycuda/flash_attention.h; which keys a query
// sees (a band [lo(i), hi(i))) and the logit map (scale, softcap) come from
// shared/flash_attention_check.h, shared with the CPU kernels.
//
// Work, per (batch, query head) with Sq queries seeing on average S' keys:
// 4 Sq S' D FLOPs forward (Q K^T and P V; S' = Sk / 2 when causal and
// Sq = Sk); backward 10 Sq S' D in NAIVE (Q K^T and dO V^T twice: once for
// dQ, once for dK/dV), 14 in MMA (below). Bytes: Q, K, V, O once each from DRAM at best,
// 2 (Sq + 2 Sk) D itemsize, plus lse; the score matrix (Sq Sk) never exists.
//
// Forward, three kernels (tc_attention_algo); AUTO takes the first that runs of WGMMA, MMA, NAIVE:
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
//  WGMMA  Hopper (sm_90a; the MMA rules plus TMA's): 128 query rows a block,
//         a TMA producer warpgroup and two wgmma consumers (the fa3 section
//         below). Same shape as above, before the intra-warpgroup overlap:
//         D = 64: 333 (causal 292), D = 128: 548 at 4 x 32 heads (causal 500),
//         D = 256: 609 TFLOP/s; cuDNN measured the same way 462 / 669 (599) /
//         724. Without the consumers' ping-pong: 318 (256), 549 (441), 597.
//         With the overlap (H200): the fa3 section.
//
//  SPLIT  flash-decoding, AUTO only (not a kept variant): seqlen_q <= 8 and
//         too few (b, kv head) pairs to fill the GPU (plan::attention_split,
//         shared/flash_attention_plan.h: the rule and its numbers). Keys cut
//         into splits, a warp per (b, kv head, up to 8 of the group's query
//         rows, split) writes partial O and lse to the workspace, a combine
//         kernel merges them in split order (the split section below). fp16,
//         bf16, fp32; D = 64 or 128; fixed lengths (varlen runs the above).
//
// Backward (NAIVE, every dtype, D <= 512), from the saved O and lse:
//  delta  D_i = <dO_i, O_i> into the workspace, 8-32 lanes per (b, h, i) (every path runs it).
//  dq     a warp per (b, h, i): walks keys [lo(i), hi(i)); s recomputed,
//         P = exp(s - lse_i), dP = <dO_i, V_j>, dS = P (dP - D_i) dcap(s),
//         dQ_i += scale dS K_j.
//  dkv    a warp per (b, kv head g, key j): walks the group's query heads
//         and, for each, queries [q_lo(j), q_hi(j)) in order: dV_j += P dO_i,
//         dK_j += scale dS Q_i. No atomics: each output row has one owner
//         that adds in a fixed order (bit-identical run to run).
//
// Backward (MMA, what AUTO runs where the forward's MMA rules hold for q, k,
// v, grad_o, grad_q, grad_k, grad_v: fp16/bf16, D % 8 == 0, D <= 256,
// 16-byte aligned rows; delta stays the kernel above). FlashAttention-2's
// backward without atomics: dK/dV and dQ are two kernels, each output row
// owned by one warp that adds in a fixed order, so dQ recomputes S and dP.
//  dkv    a block per (b, kv head g, 64 keys), 4 warps x 16 key rows (at
//         D = 256, 8 warps: warps w and w + 4 share key rows 16 (w % 4).. and
//         own dK/dV columns [0, 128) and [128, 256), each recomputing the full
//         S^T, dP^T: 128 accumulator registers instead of 256). K and V are
//         loaded once; the loop walks the group's query heads h and, in each,
//         query tiles of BM (64, or 32 at D >= 128) over [q_lo(first key),
//         q_hi(last key)), Q/dO tiles double-buffered through cp.async (lse
//         and delta by plain loads into the same stage). Per tile and warp:
//           S^T = K Q^T, dP^T = V dO^T   A = K/V rows (ldmatrix), B = Q/dO
//                                        [query][d] as it lies (col-major B)
//           P^T = exp(logit(S^T) - lse_i) (0 outside the band, tested per
//                 element only in tiles crossing its edge; lse = +inf: 0)
//           dS^T = P^T (dP^T - D_i) dcap(s)
//           dV += P^T dO, dK += dS^T Q   A = P^T / dS^T straight from the
//                                        accumulators (as the forward's P),
//                                        B = dO / Q via ldmatrix.trans
//         dK *= scale; stored through shared memory (K, V tiles reused).
//  dq     a block per (b, h, 64 queries) as the forward (last tiles first),
//         K/V tiles double-buffered; S = Q K^T, dP = dO V^T (A = Q/dO rows,
//         B = K/V as they lie), dS as above, dQ += dS K (K via .trans).
//  FLOPs: 2 Sq S' D per matmul; dkv does 4 (S, dP, dV, dK), dq 3 (S, dP,
//  dQ): 7 against FA2's 5 (its dQ by atomics reuses dkv's dS), 14 Sq S' D;
//  at D = 256 the split dkv recomputes S^T and dP^T: 9, 18 Sq S' D.
//  Shared memory (pitch D + 8):
//           D    dkv: K+V 64 rows, 2 x (Q+dO) BM rows, lse/delta    dq: Q+dO 64, 2 x (K+V) BN
//           64        56,320 B (BM 64)                               55,296 B (BN 64)
//           128       70,144 B (BM 32)                              104,448 B (BN 64)
//           256      135,680 B (BM 32, 256 threads)                 135,168 B (BN 32)
//  Registers: dkv holds dK, dV (D/2 + D/2 floats a thread at D <= 128) and
//  S^T, dP^T (BM/8 x 4 each); dq holds dQ (D/2) and S, dP (BN/8 x 4 each).
//
// Backward (WGMMA: what AUTO and WGMMA run on an sm_90 device with an sm_90a
// build where the MMA rules hold, head_dim <= 128 and both sides have rows;
// head_dim in (128, 256], or no query or no key row, runs MMA under WGMMA too,
// and WGMMA is refused where the wgmma kernels cannot run). The MMA backward's
// math and split (dq, dkv; delta as above) on the wgmma forward's block: a TMA
// producer warpgroup and two consumer warpgroups of 64 output rows, D = 64 or
// 128 (the fa3 backward section below):
//  dq     a block per (b, h, 128 queries), last tiles first; Q and dO once,
//         K/V tiles of 64 keys through a 2-stage ring; per tile S = Q K^T and
//         dP = dO V^T (wgmma m64n64, k-major operands), dS in registers
//         (dq_grads, the MMA kernel's), dQ += dS K (dS as wgmma's register A,
//         K n-major through the transpose bit).
//  dkv    a block per (b, kv head, 128 keys); K and V once, Q/dO tiles of 64
//         queries (and their lse, delta) through the ring over the group's
//         heads; S^T = K Q^T, dP^T = V dO^T (m64n64), P^T, dS^T (dkv_grads),
//         dV += P^T dO, dK += dS^T Q (register A, dO / Q n-major, n = D).
//  FLOPs as MMA's (14 Sq S' D). Shared memory: dq 65 / 129 KiB, dkv 66 / 130
//  KiB at D = 64 / 128. Registers: consumers 240 (setmaxnreg; dkv at D = 128
//  holds dK, dV, S^T, dP^T: 192 floats), producers 24; no spills (ptxas).
//  H200, GPT-2 124M's step (12 layers, B 16, 12 heads, S 1024, D 64, causal;
//  gpt_profile.py): dkv 3.20 ms, dq 2.56 (MMA: 4.03, 3.25), 1.27x faster, but
//  134 TFLOP/s (0.77 TFLOP, counted as 2.5x the forward's) against the
//  forward's 196 (1.58 ms) at this shape: each tile runs S/dP, wait, dS,
//  then dQ or dK/dV, wait. The consumers issue S/dP in turns (Turns, the
//  forward's ping-pong; dkv at D = 64 only, see Turns): dkv 3.29 -> 3.20 ms,
//  dq 2.62 -> 2.56; nothing overlaps across one consumer's tiles yet.
//  dS path (head_dim <= 64, fixed lengths, the workspace's dS^T within
//  plan::attention_dq's 512 MiB): dkv also stores its dS^T tiles (rounded to
//  T, stmatrix into a swizzled box, a TMA store a tile), and dq becomes one
//  product, dQ = dS K (attention_dq_ds_kernel), run after dkv: 5 products
//  instead of 7, like FA2's, without its atomics. GPT-2's step: dkv 3.20 ->
//  3.58 ms, dq 2.56 -> 1.04 (backward 5.76 -> 4.62 ms). dS^T through 4-byte
//  global stores from the fragments instead cost dkv 1.2 ms (4.42): the
//  consumers stalled on them; the TMA store leaves them to the copy engine.
//  The softcap's per-element test issued under predicates (dq_grads and
//  dkv_grads now drop it off the band's edge when there is no cap): dkv 376
//  -> 284 us a layer under ncu (threads not predicated off an issued
//  instruction: 22.8 -> 30.6 a warp).
//  Accumulator path (where the dS path is not taken and the caller did not
//  ask `deterministic`: FA2/FA3's dQ; plan::attention_dq): dkv (kAcc) also
//  multiplies dQ = dS K for its 64 keys a consumer (dS^T by stmatrix into a
//  box, read back as wgmma's m-major A) and adds the float32 tile into the
//  workspace's accumulator with one bulk reduce (cp.reduce.async.bulk ...
//  add.f32: the L2 adds); attention_dq_acc_kernel scales it into grad_q. No
//  dq kernel: 5 products instead of 7, but the adds' order, hence dQ's last
//  bits, varies run to run. H200, bf16, the backward alone (same run,
//  deterministic against not): 4 x 32 heads x 4096, D = 64: 5.29 -> 4.75 ms;
//  D = 128: 8.49 -> 8.39 (causal 4.66 -> 4.16); 16 x 32 x 512 x 128: 0.78 ->
//  0.74. The dQ product costs dkv far more than a fifth of its time: each
//  tile waits for dV/dK, then for dQ, then stages 16 (32) KiB through shared
//  memory, and the L2 takes 64 x D x 4 bytes of adds a consumer's tile (FA3
//  halves that: both consumers share one dQ tile of 128 keys). Issuing dQ with
//  dV and dK (one wait, D = 64; at D = 128 its 64 accumulators spill) measured
//  the same (4.57 against 4.75 ms, 0.90 of deterministic both times).
//
// A query that sees no key (or whose every logit is -inf): O = 0, lse = +inf,
// and P = 0 in the backward.
//
// Variable lengths (cu_seqlens): every grid above is sized by the longest
// sequence; a block (or NAIVE warp) looks up its sequence's rows and lengths
// (AttentionBatch::seq, shared/flash_attention_check.h) and returns when its
// rows lie past them. Tiles start at the sequence's first row, so a packed
// batch computes each sequence bit for bit as a batch of one would; a tile
// that runs past the sequence's end holds zeros there as a batch's would
// (MMA: cp.async's zero-fill; WGMMA, whose TMA boxes load the next
// sequence's rows: zeroed in shared memory where a product multiplies them,
// V in the forward, K in dq, Q and dO in dkv), so an inf or NaN in one
// sequence never reaches another (0 x inf = NaN even where P or dS is 0). Measured
// (H100, bf16, H = 32, D = 128, 4 x 4096 packed against [4, 4096] batched):
// forward 537 against 564 TFLOP/s (causal 479 against 492).
#include "tinycuda/flash_attention.h"
#include "../shared/flash_attention_check.h"
#include "../shared/flash_attention_plan.h"
#include "kit/cuda_utils.cuh"
#include "kit/mma.cuh"
#include "kit/pdl.cuh"
#include "kit/reduce.cuh"
#include "kit/vec.cuh"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>

namespace {

constexpr int kWarps = 4;  // warps per block of the NAIVE kernels
constexpr int kMaxNaiveDim = 512;

// One forward problem as the kernels see it: typed pointers, strides in
// elements ([batch, row, head]; a varlen batch has no batch stride: its
// sequences' rows start at AttentionSeq's q0, k0), the sequences and their
// masks, and the logit map.
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
  AttentionBatch seqs;
  Logit<A> logit;

  static Fwd of(const tc_flash_attention_params* p) {
    Fwd a{static_cast<const T*>(p->q), static_cast<const T*>(p->k), static_cast<const T*>(p->v),
          static_cast<T*>(p->o), static_cast<A*>(p->lse)};
    for (int d = 0; d < 3; ++d)
      a.qs[d] = p->q_stride[d], a.ks[d] = p->k_stride[d], a.vs[d] = p->v_stride[d], a.os[d] = p->o_stride[d];
    if (p->cu_seqlens_q) a.qs[0] = a.ks[0] = a.vs[0] = a.os[0] = 0;
    a.batch = p->batch, a.seqlen_q = p->seqlen_q, a.seqlen_k = p->seqlen_k, a.heads_q = p->heads_q;
    a.group = p->heads_q / p->heads_kv, a.head_dim = p->head_dim;
    a.seqs = attention_batch(p);
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
  AttentionBatch seqs;
  Logit<A> logit;
  A scale;
  // the wgmma backward's dS^T [batch][heads_q][seqlen_k][ds_pitch] in the
  // workspace (plan::attention_dq), or null: dq recomputes dS
  T* ds = nullptr;
  int64_t ds_pitch = 0;
  // the wgmma backward's dQ accumulator (plan::attention_dq), float32 rows of
  // the kernels' D columns that dkv adds its dQ tiles into, or null
  float* dq_acc = nullptr;

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
    if (p->cu_seqlens_q) a.qs[0] = a.ks[0] = a.vs[0] = a.os[0] = a.gos[0] = a.gqs[0] = a.gks[0] = a.gvs[0] = 0;
    a.batch = p->batch, a.seqlen_q = p->seqlen_q, a.seqlen_k = p->seqlen_k, a.heads_q = p->heads_q;
    a.heads_kv = p->heads_kv, a.group = p->heads_q / p->heads_kv, a.head_dim = p->head_dim;
    a.seqs = attention_batch(p);
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
    const AttentionSeq seq = a.seqs.seq(b);
    if (i >= seq.len_q) continue;  // past this (varlen) sequence
    const int64_t lo = seq.mask.lo(i), hi = seq.mask.hi(i);
    A acc[kPer], m = -INFINITY, l = 0;
#pragma unroll
    for (int k = 0; k < kPer; ++k) acc[k] = 0;
    if (lo < hi) {  // q, k and v are read only here: with no key they may be NULL
      const T* qi = at(a.q, a.qs, b, seq.q0 + i, h);
      A qv[kPer];
#pragma unroll
      for (int k = 0; k < kPer; ++k) qv[k] = lane + 32 * k < D ? A(to_acc(qi[lane + 32 * k])) : A(0);
      const int64_t g = h / a.group;
      const T* kj = at(a.k, a.ks, b, seq.k0 + lo, g);
      const T* vj = at(a.v, a.vs, b, seq.k0 + lo, g);
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
    T* oi = at(a.o, a.os, b, seq.q0 + i, h);
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

// The forward's per-tile steps on a warp's S = Q K^T in mma's fragment layout
// (s[nt][2r + e]: row g + 8r of the warp's 16, key 8nt + 2qd + e), shared by
// the mma.sync and wgmma kernels (wgmma's m64 accumulators are the same
// fragments side by side).
//
// Logits, then -inf outside each row's visible keys [row_lo, row_hi), only
// when `edge` (the tile crosses an edge of the band; keys >= seqlen_k are past
// every hi). The logit loop is written twice so that in the second one the
// compiler knows there is no softcap and drops the tanh and its branch.
// `fold` (the wgmma forward with no softcap and a scale > 0): s is left as
// Q K^T, and the caller hands the scale to softmax_p (xs = scale log2(e))
// and to finish_row (mscale) instead.
template <int BN, class L>
__device__ __forceinline__ void tile_logits(float (&s)[BN / 8][4], const L& logit, bool fold, bool edge,
                                            const int64_t (&row_lo)[2], const int64_t (&row_hi)[2], int64_t n0,
                                            int qd) {
  auto logits = [&] {
#pragma unroll
    for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nt][e] = logit(s[nt][e]);
  };
  if (logit.inv_cap != 0.f)
    logits();
  else if (!fold)
    logits();
  if (!edge) return;
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

// The online softmax, row by row: the max over the quad, l rescaled by
// corr = exp(m_old - m_new), s becomes P = exp(s - m_new), each exponent taken
// as exp2(xs (s - m)) (xs = log2(e), or scale log2(e) where tile_logits left
// s unscaled: `fold`); the caller rescales
// its O by corr (rescale) once no wgmma is writing O. A row with every logit
// -inf so far has m = -inf; it exponentiates against 0 instead (FA2), so P =
// exp(-inf) = 0 and the rescale exp(-inf - 0) = 0, never exp(-inf + inf).
template <int BN>
__device__ __forceinline__ void softmax_p(float (&s)[BN / 8][4], float (&m)[2], float (&l)[2], float (&corr)[2],
                                          float xs = kLog2e) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float mx = m[r];
#pragma unroll
    for (int nt = 0; nt < BN / 8; ++nt) mx = fmaxf(mx, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
    mx = quad_reduce(mx, Max{});
    const float base = mx == -INFINITY ? 0.f : mx * xs;
    corr[r] = exp2_approx(m[r] * xs - base);
    m[r] = mx;
    l[r] *= corr[r];
#pragma unroll
    for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
      for (int e = 2 * r; e < 2 * r + 2; ++e) {
        s[nt][e] = exp2_approx(s[nt][e] * xs - base);
        l[r] += s[nt][e];
      }
  }
}
template <int DT>
__device__ __forceinline__ void rescale(float (&acc)[DT][4], const float (&corr)[2]) {
#pragma unroll
  for (int nt = 0; nt < DT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[nt][e] *= corr[e / 2];
}
template <int BN, int DT>
__device__ __forceinline__ void softmax_step(float (&s)[BN / 8][4], float (&acc)[DT][4], float (&m)[2],
                                             float (&l)[2]) {
  float corr[2];
  softmax_p<BN>(s, m, l, corr);
  rescale(acc, corr);
}

// The A fragment of k16 step kk (keys 16kk..16kk+15) of P V is the D
// fragments of key tiles 2kk and 2kk+1 (FA2): a0 = (g, 2qd..) = s[2kk][0..1],
// a1 = (g+8, 2qd..) = s[2kk][2..3], a2 = (g, 2qd+8..) = s[2kk+1][0..1],
// a3 = (g+8, 2qd+8..) = s[2kk+1][2..3].
template <class T, int BN>
__device__ __forceinline__ void p_fragment(uint32_t (&pa)[4], const float (&s)[BN / 8][4], int kk) {
  pa[0] = pack2<T>(s[2 * kk][0], s[2 * kk][1]), pa[1] = pack2<T>(s[2 * kk][2], s[2 * kk][3]);
  pa[2] = pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]), pa[3] = pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
}

// lse of a finished row: m mscale + log l (l summed over the quad; mscale the
// scale where m is in Q K^T's units: `fold`), +inf for a row
// that saw no key; returns 1 / l (0 for such a row: O = 0).
__device__ __forceinline__ float finish_row(float m, float& l, float& lse, float mscale = 1.f) {
  l = quad_reduce(l, Sum{});
  lse = l == 0.f ? INFINITY : m * mscale + logf(l);
  return l == 0.f ? 0.f : 1.f / l;
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
  const AttentionSeq seq = a.seqs.seq(b);
  if (m0 >= seq.len_q) return;  // past this (varlen) sequence: rows of no one
  const int64_t last = min(m0 + kBlockM, seq.len_q) - 1;  // the block's last query row
  const AttentionMask& mask = seq.mask;
  float* lse = a.lse + bh * a.seqlen_q;
  // The bands are monotone in i, so the block's keys are [lo(m0), hi(last)).
  const int64_t kv_lo = mask.lo(m0), kv_hi = mask.hi(last);
  const int ch = tid % kChunks, r0 = tid / kChunks;  // this thread's chunk column, first row
  const bool col_in = ch * 8 < a.head_dim;

  if (kv_lo >= kv_hi) {  // no row sees a key: O = 0, lse = +inf, and nothing is read
    for (int r = r0; r < kBlockM; r += kRowStep)
      if (col_in && m0 + r <= last)
        *reinterpret_cast<uint4*>(at(a.o, a.os, b, seq.q0 + m0 + r, h) + ch * 8) = uint4{};
    if (tid < kBlockM && m0 + tid <= last) lse[m0 + tid] = INFINITY;
    return;
  }

  // Q (rows past seqlen_q and columns past head_dim zero-filled) and the first
  // K/V tile: one cp.async group. Out-of-range chunks read nothing.
  {
    const T* src = at(a.q, a.qs, b, seq.q0, h) + ch * 8;
#pragma unroll
    for (int r = r0; r < kBlockM; r += kRowStep) {
      const bool in = col_in && m0 + r <= last;
      cp_async16(sq + r * P + ch * 8, in ? src + (m0 + r) * a.qs[1] : a.q, in);
    }
  }
  const T* kp = at(a.k, a.ks, b, seq.k0, hk) + ch * 8;
  const T* vp = at(a.v, a.vs, b, seq.k0, hk) + ch * 8;
  auto load_kv = [&](int64_t n0, int stage) {  // keys [n0, n0 + BN), past seqlen_k zero-filled
    T* dk = skv + 2 * stage * BN * P;
    T* dv = dk + BN * P;
#pragma unroll
    for (int r = r0; r < BN; r += kRowStep) {
      const int64_t j = n0 + r;
      const bool in = col_in && j < seq.len_k;
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

    tile_logits<BN>(s, a.logit, false, !(n0 >= w_max_lo && n0 + BN <= w_min_hi), row_lo, row_hi, n0, qd);
    softmax_step<BN>(s, acc, m, l);

    // O += P V, P straight from the accumulators (p_fragment)
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      uint32_t pa[4];
      p_fragment<T, BN>(pa, s, kk);
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
  float inv[2], row_lse[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) inv[r] = finish_row(m[r], l[r], row_lse[r]);
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
      *reinterpret_cast<uint4*>(at(a.o, a.os, b, seq.q0 + wrow + r, h) + col) =
          *reinterpret_cast<const uint4*>(so + r * P + col);
  }
  if (qd == 0)
#pragma unroll
    for (int r = 0; r < 2; ++r)
      if (wrow + g + 8 * r <= last) lse[wrow + g + 8 * r] = row_lse[r];
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
  static std::atomic<uint64_t> smem_set{0};
  TC_RETURN_IF_ERROR(smem_opt_in(op, kernel, smem, smem_set));
  const int64_t q_tiles = (a.seqlen_q + kBlockM - 1) / kBlockM, blocks = a.batch * a.heads_q * q_tiles;
  TC_REQUIRE(blocks <= INT32_MAX, "%s: %lld blocks of %d query rows are too many for one launch", op,
             (long long)blocks, kBlockM);
  kernel<<<unsigned(blocks), kThreads, smem, stream>>>(a, q_tiles);
  return check_launch(op);
}


// ---------------------------------------------------------------------------
// MMA backward (FlashAttention-2's backward on mma.sync, deterministic)
//
// dkv: a block per (b, kv head hk, BN = 64 keys), warp w owning key rows
// 16 (w % 4).. (and, at D = 256, dK/dV columns [128 (w / 4), +128)).
// Operand map (fragments as in kit/mma.cuh; "as it lies" = ldmatrix without
// .trans, the tile row-major in shared memory):
//   S^T  = K Q^T    A = K rows [key][d] as it lies; B (k = d, n = query) =
//                   the Q tile [query][d] as it lies (col-major B)
//   dP^T = V dO^T   the same with V and dO
//   dV  += P^T dO   A = P^T from the S^T accumulators (FA2's trick); B
//                   (k = query, n = d) = dO tile [query][d] via .trans
//   dK  += dS^T Q   A = dS^T from the dP^T accumulators; B = Q tile .trans
// dq: as the forward, with
//   S  = Q K^T      A = Q rows, B = K tile as it lies
//   dP = dO V^T     A = dO rows, B = V tile as it lies
//   dQ += dS K      A = dS from the dP accumulators; B = K tile via .trans
// dkv's query tile: 32 at D = 128 keeps dK, dV, S^T, dP^T in 253 registers (64: 255 and 80-104 B of
// spills; worth timing both)
// The backward's paired products on one warp's 16 rows: c1 = A1 B1^T and
// c2 = A2 B2^T (S and dP), A1, A2 16 x D rows at ldmatrix addresses a1, a2
// (bytes, this lane's row), B1, B2 [N][D] tiles as they lie at b1, b2, b_off
// this lane's ldmatrix offset in them; rows kPitch<D> apart. The two share
// the loop so each k step's four ldmatrix feed N / 4 mma.
template <class T, int N, int D>
__device__ __forceinline__ void two_products(float (&c1)[N / 8][4], float (&c2)[N / 8][4], uint32_t a1, uint32_t a2,
                                             uint32_t b1, uint32_t b2, uint32_t b_off) {
  constexpr int P = kPitch<D>;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t x1[4], x2[4];
    ldsm_x4<false>(x1, a1 + kk * 32);
    ldsm_x4<false>(x2, a2 + kk * 32);
#pragma unroll
    for (int nt = 0; nt < N / 16; ++nt) {
      uint32_t y1[4], y2[4];
      ldsm_x4<false>(y1, b1 + b_off + (nt * 16 * P + kk * 16) * 2);
      ldsm_x4<false>(y2, b2 + b_off + (nt * 16 * P + kk * 16) * 2);
      mma_16816<T>(c1[2 * nt], x1, y1[0], y1[1]);
      mma_16816<T>(c1[2 * nt + 1], x1, y1[2], y1[3]);
      mma_16816<T>(c2[2 * nt], x2, y2[0], y2[1]);
      mma_16816<T>(c2[2 * nt + 1], x2, y2[2], y2[3]);
    }
  }
}

template <int D> constexpr int kBwdBlockM = D <= 64 ? 64 : 32;
template <int D> constexpr int kBwdSplit = D <= 128 ? 1 : 2;     // warps sharing a key row (d split)
template <int D> constexpr int kDkvThreads = kThreads * kBwdSplit<D>;
constexpr int kBwdBlockN = 64;  // dkv's key rows a block
template <int D>
constexpr size_t kDkvSmemBytes =
    size_t(2 * kBwdBlockN + 4 * kBwdBlockM<D>) * kPitch<D> * 2 + 4 * kBwdBlockM<D> * sizeof(float);
template <int D> constexpr size_t kDqSmemBytes = size_t(2 * kBlockM + 4 * kBlockN<D>) * kPitch<D> * 2;

// The row range [lo, hi) of one fragment row as columns of a tile at n0 of
// width W, clamped to [0, W].
template <int W, class I>
__device__ __forceinline__ int tile_col(I v, I n0) {
  return int(max(I(0), min(I(W), v - n0)));
}

// The backward's per-tile steps on a warp's fragments (mma.sync's m16n8
// layout, [nt][2r + e]: row g + 8r of the warp's 16, column 8nt + 2qd + e),
// shared by the mma.sync and wgmma kernels. Entries outside a row's band
// [row_lo, row_hi) (as columns from n0) are zeroed only when `edge` (the tile
// crosses an edge of the band, seqlen included). Masked entries are selected
// to 0, not multiplied by 0, so a non-finite logit there stays out of dS; the
// products after still multiply those zeros by the tile's rows, so inf in
// any of the sequence's own rows of a tile gives NaN (as FA2); rows past the
// sequence are zeros (cp.async's zero-fill; the wgmma kernels zero a varlen
// tile's rows of the next sequence where a product multiplies them).
//
// Positions (I: int64_t, or int relative to a block's first row) are
// compared only to each other.
//
// Both run their element loop as one of three variants: masked (edge) or
// not with logit and dcap as they are (each tests for the softcap), or
// unmasked with no softcap (NoCap: dcap 1), a loop with no tanh and no branch
// per element. Without a softcap every variant takes P = exp2(s scale log2(e)
// - lse log2(e)) as one FFMA of the raw product (FA3's softmax_scale_log2),
// so that P's bits do not depend on which variant a tile runs: dQ from dkv's
// dS (the accumulator path) then rounds dS as dq's would. The test
// is issued under predicates whether the tanh runs or not (20 instructions an
// element, SASS): GPT-2's dkv (B 16, H 12, T 1024, D 64, causal), H200 under
// ncu, 376 -> 284 us. The wgmma dkv at D = 128 keeps two loops (kSplit
// false): at its register limit, a third spilled 32 bytes there (ptxas). Its
// two are NoCap and the masked one, which also takes a softcap's tiles off
// the band's edge (its mask selects nothing there): the capped loop it
// used to run off the edge was 1,000 instructions a thread a tile (SASS).
struct NoCap {
  static constexpr bool kNone = true;
};
struct AnyCap {
  static constexpr bool kNone = false;
};
template <bool kSplit, class F>
__device__ __forceinline__ void grads_variant(bool edge, bool cap, F&& f) {
  if (!edge && !cap)
    f(std::false_type{}, NoCap{});
  else if (edge || !kSplit)
    f(std::true_type{}, AnyCap{});
  else
    f(std::false_type{}, AnyCap{});
}

// dq's: rows are queries, columns keys; s = S, dp = dP in, dp = dS out:
// dS = P (dP - delta_i) dcap(s), P = exp(logit(S) - lse_i); rl = lse_i log2(e)
// (+inf: P = 0), rd = delta_i of the thread's two rows.
template <int BN, class I, class L>
__device__ __forceinline__ void dq_grads(const float (&s)[BN / 8][4], float (&dp)[BN / 8][4], const L& logit,
                                         bool edge, const I (&row_lo)[2], const I (&row_hi)[2], I n0, int qd,
                                         const float (&rl)[2], const float (&rd)[2]) {
  grads_variant<true>(edge, logit.inv_cap != 0.f, [&](auto masked, auto cap) {
    const bool on = !decltype(cap)::kNone && logit.inv_cap != 0.f;  // a softcap
    const float xs = on ? kLog2e : logit.scale * kLog2e;                // see the x below
    int clo[2] = {0, 0}, chi[2] = {BN, BN};
    if constexpr (decltype(masked)::value)
#pragma unroll
      for (int r = 0; r < 2; ++r) clo[r] = tile_col<BN>(row_lo[r], n0), chi[r] = tile_col<BN>(row_hi[r], n0);
#pragma unroll
    for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e >> 1, c = nt * 8 + 2 * qd + (e & 1);
        const float x = on ? logit(s[nt][e]) : s[nt][e];  // uncapped: the scale is in xs
        const float p = exp2_approx(fmaf(x, xs, -rl[r]));
        const float d = p * (dp[nt][e] - rd[r]);
        const bool out = decltype(masked)::value && (c < clo[r] || c >= chi[r]);
        dp[nt][e] = out ? 0.f : decltype(cap)::kNone ? d : d * logit.dcap(x);
      }
  });
}

// dkv's: rows are keys, columns queries m0..; s = S^T, dp = dP^T in, s = P^T
// and dp = dS^T out: P^T = exp(logit(S^T) - lse_i), dS^T = P^T (dP^T -
// delta_i) dcap(s), lse_i log2(e) and delta_i of column i at lse2[i], dlt[i]
// (shared memory; lse +inf: P = 0).
template <int BM, bool kSplit = true, class I, class L>
__device__ __forceinline__ void dkv_grads(float (&s)[BM / 8][4], float (&dp)[BM / 8][4], const L& logit, bool edge,
                                          const I (&row_lo)[2], const I (&row_hi)[2], I m0, int qd, const float* lse2,
                                          const float* dlt) {
  grads_variant<kSplit>(edge, logit.inv_cap != 0.f, [&](auto masked, auto cap) {
    const bool on = !decltype(cap)::kNone && logit.inv_cap != 0.f;  // a softcap
    const float xs = on ? kLog2e : logit.scale * kLog2e;                // see the x below
    int clo[2] = {0, 0}, chi[2] = {BM, BM};
    if constexpr (decltype(masked)::value)
#pragma unroll
      for (int r = 0; r < 2; ++r) clo[r] = tile_col<BM>(row_lo[r], m0), chi[r] = tile_col<BM>(row_hi[r], m0);
#pragma unroll
    for (int nt = 0; nt < BM / 8; ++nt) {
      const float2 l2 = *reinterpret_cast<const float2*>(lse2 + nt * 8 + 2 * qd);
      const float2 d2 = *reinterpret_cast<const float2*>(dlt + nt * 8 + 2 * qd);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e >> 1, c = nt * 8 + 2 * qd + (e & 1);
        const float x = on ? logit(s[nt][e]) : s[nt][e];  // uncapped: the scale is in xs
        const float p = exp2_approx(fmaf(x, xs, -((e & 1) ? l2.y : l2.x)));  // lse = +inf: 0
        const float d = p * (dp[nt][e] - ((e & 1) ? d2.y : d2.x));
        const bool out = decltype(masked)::value && (c < clo[r] || c >= chi[r]);
        s[nt][e] = out ? 0.f : p;
        dp[nt][e] = out ? 0.f : decltype(cap)::kNone ? d : d * logit.dcap(x);
      }
    }
  });
}

// dK, dV for keys [n0, n0 + 64) of (b, hk).
template <class T, int D>
__global__ void __launch_bounds__(kDkvThreads<D>, 1) attention_dkv_mma_kernel(const Bwd<T> a, int64_t k_tiles) {
  constexpr int BN = kBwdBlockN, BM = kBwdBlockM<D>, P = kPitch<D>, NT = kDkvThreads<D>;
  constexpr int DW = D / kBwdSplit<D>;  // dK/dV columns a warp owns
  constexpr int kChunks = D / 8, kRowStep = NT / kChunks;
  static_assert(NT % kChunks == 0 && BN % kRowStep == 0 && BM % kRowStep == 0, "tile loads");
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sk = reinterpret_cast<T*>(smem_raw);  // [BN][P]; at the end dK
  T* sv = sk + BN * P;                     // [BN][P]; at the end dV
  T* sqg = sv + BN * P;                    // stage s: Q at sqg + 2 s BM P, dO right after
  float* sl = reinterpret_cast<float*>(sqg + 4 * BM * P);  // stage s: lse log2(e) at sl + 2 s BM, delta right after

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, qd = lane % 4;
  const int kw = warp % 4, dpart = warp / 4;
  const int64_t id = blockIdx.x, bg = id / k_tiles, n0 = id % k_tiles * BN;
  const int64_t hk = bg % a.heads_kv, b = bg / a.heads_kv;
  const AttentionSeq seq = a.seqs.seq(b);
  if (n0 >= seq.len_k) return;  // past this (varlen) sequence's keys
  const int64_t klast = min(n0 + BN, seq.len_k) - 1;  // the block's last key
  const AttentionMask& mask = seq.mask;
  // q_lo and q_hi are monotone in j: the block's queries are [q_lo(n0), q_hi(klast)), per query head.
  const int64_t qb_lo = mask.q_lo(n0), qb_hi = mask.q_hi(klast);
  const int ch = tid % kChunks, r0 = tid / kChunks;
  const bool col_in = ch * 8 < a.head_dim;

  if (qb_lo >= qb_hi || a.group == 0) {  // no query sees a key here: dK = dV = 0, nothing is read
    for (int r = r0; r < BN; r += kRowStep)
      if (col_in && n0 + r <= klast) {
        *reinterpret_cast<uint4*>(at(a.gk, a.gks, b, seq.k0 + n0 + r, hk) + ch * 8) = uint4{};
        *reinterpret_cast<uint4*>(at(a.gv, a.gvs, b, seq.k0 + n0 + r, hk) + ch * 8) = uint4{};
      }
    return;
  }

  // K and V (keys past seqlen_k, columns past head_dim zero-filled), loaded once.
  {
    const T* kp = at(a.k, a.ks, b, seq.k0, hk) + ch * 8;
    const T* vp = at(a.v, a.vs, b, seq.k0, hk) + ch * 8;
#pragma unroll
    for (int r = r0; r < BN; r += kRowStep) {
      const int64_t j = n0 + r;
      const bool in = col_in && j <= klast;
      cp_async16(sk + r * P + ch * 8, in ? kp + j * a.ks[1] : a.k, in);
      cp_async16(sv + r * P + ch * 8, in ? vp + j * a.vs[1] : a.v, in);
    }
  }
  // Query tile t: head hk group + t / q_tiles, rows qb_lo + (t % q_tiles) BM.. .
  // Rows past seqlen_q: Q = dO = 0, lse = +inf (P = 0), delta = 0.
  const int64_t q_tiles = (qb_hi - qb_lo + BM - 1) / BM, tiles = a.group * q_tiles;
  auto load_q = [&](int64_t t, int stage) {
    const int64_t h = hk * a.group + t / q_tiles, m0 = qb_lo + t % q_tiles * BM;
    const T* qp = at(a.q, a.qs, b, seq.q0, h) + ch * 8;
    const T* gp = at(a.go, a.gos, b, seq.q0, h) + ch * 8;
    T* dq = sqg + 2 * stage * BM * P;
    T* dg = dq + BM * P;
#pragma unroll
    for (int r = r0; r < BM; r += kRowStep) {
      const int64_t i = m0 + r;
      const bool in = col_in && i < seq.len_q;
      cp_async16(dq + r * P + ch * 8, in ? qp + i * a.qs[1] : a.q, in);
      cp_async16(dg + r * P + ch * 8, in ? gp + i * a.gos[1] : a.go, in);
    }
    if (tid < BM) {  // plain loads: the stage's readers are behind the next __syncthreads
      const int64_t i = m0 + tid, row = (b * a.heads_q + h) * a.seqlen_q + i;
      const bool in = i < seq.len_q;
      sl[2 * stage * BM + tid] = in ? a.lse[row] * kLog2e : INFINITY;
      sl[(2 * stage + 1) * BM + tid] = in ? a.delta[row] : 0.f;
    }
  };
  load_q(0, 0);
  cp_async_commit();

  // This warp's key rows [wk, wk + 16) and the queries they see: tiles outside
  // [w_lo, w_hi) are skipped, tiles inside [w_max_lo, w_min_hi) need no mask.
  const int64_t wk = n0 + kw * 16, wlast = min(wk + 15, klast);
  const bool live = wk <= klast;
  const int64_t w_lo = mask.q_lo(wk), w_hi = mask.q_hi(wlast), w_max_lo = mask.q_lo(wlast),
                w_min_hi = mask.q_hi(wk);
  const int64_t row_lo[2] = {mask.q_lo(wk + g), mask.q_lo(wk + g + 8)};
  const int64_t row_hi[2] = {mask.q_hi(wk + g), mask.q_hi(wk + g + 8)};

  // ldmatrix row addresses (bytes), lane l serving row l % 8 of matrix l / 8:
  //  K, V rows as A (a0..a3: keys 0-7/d 0-7, keys 8-15/d 0-7, keys 0-7/d 8-15, keys 8-15/d 8-15)
  //  Q, dO as B of S^T, dP^T (b_off: queries 0-7/d 0-7, queries 0-7/d 8-15 = b0,b1 of query tile 0;
  //    queries 8-15 = tile 1)
  //  Q, dO as B of dK, dV (.trans, t_off: queries 0-7/d 0-7, queries 8-15/d 0-7 = b0,b1 of d tile 0;
  //    d 8-15 = tile 1)
  const int lr = lane & 7, l8 = (lane >> 3 & 1) * 8, l16 = (lane >> 4) * 8;
  const uint32_t k_addr = smem_addr(sk + (kw * 16 + lr + l8) * P + l16), v_addr = k_addr + BN * P * 2;
  const uint32_t b_off = ((lr + l16) * P + l8) * 2, t_off = ((lr + l8) * P + l16 + dpart * DW) * 2;

  float dv[DW / 8][4] = {}, dk[DW / 8][4] = {};  // d tile nt, key rows g / g + 8, columns 2qd, 2qd + 1
  for (int64_t t = 0; t < tiles; ++t) {
    cp_async_wait<0>();
    // tile t (and at t = 0, K and V) has landed for every thread, and every
    // warp is done with tile t - 1, whose stage the next load overwrites
    __syncthreads();
    if (t + 1 < tiles) {
      load_q(t + 1, int((t + 1) & 1));
      cp_async_commit();
    }
    const int64_t m0 = qb_lo + t % q_tiles * BM;
    if (!live || m0 >= w_hi || m0 + BM <= w_lo) continue;  // warp-uniform: none of its keys is seen
    const int st = int(t & 1);
    const uint32_t q_tile = smem_addr(sqg + 2 * st * BM * P), g_tile = q_tile + BM * P * 2;
    const float* lse2 = sl + 2 * st * BM;
    const float* dlt = lse2 + BM;

    // S^T = K Q^T and dP^T = V dO^T: [nt] is query tile nt (8 queries),
    // key rows g / g + 8, queries 2qd, 2qd + 1
    float s[BM / 8][4] = {}, dp[BM / 8][4] = {};
    two_products<T, BM, D>(s, dp, k_addr, v_addr, q_tile, g_tile, b_off);

    // P^T, dS^T, zero outside the band (dkv_grads)
    dkv_grads<BM>(s, dp, a.logit, !(m0 >= w_max_lo && m0 + BM <= w_min_hi), row_lo, row_hi, m0, qd, lse2, dlt);

    // dV += P^T dO, dK += dS^T Q. The A fragment of k16 step kk (queries
    // 16kk..16kk+15) is the accumulators of query tiles 2kk and 2kk+1:
    // a0 = [2kk][0..1], a1 = [2kk][2..3], a2 = [2kk+1][0..1], a3 = [2kk+1][2..3].
#pragma unroll
    for (int kk = 0; kk < BM / 16; ++kk) {
      uint32_t pa[4], da[4];
      p_fragment<T, BM>(pa, s, kk);
      p_fragment<T, BM>(da, dp, kk);
#pragma unroll
      for (int dt = 0; dt < DW / 16; ++dt) {
        uint32_t gb[4], qb[4];
        ldsm_x4<true>(gb, g_tile + t_off + (kk * 16 * P + dt * 16) * 2);
        ldsm_x4<true>(qb, q_tile + t_off + (kk * 16 * P + dt * 16) * 2);
        mma_16816<T>(dv[2 * dt], pa, gb[0], gb[1]);
        mma_16816<T>(dv[2 * dt + 1], pa, gb[2], gb[3]);
        mma_16816<T>(dk[2 * dt], da, qb[0], qb[1]);
        mma_16816<T>(dk[2 * dt + 1], da, qb[2], qb[3]);
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp is done with K and V (at D = 256 two warps read each row)

  // dK = scale dK. Each warp writes its rows and columns into the K and V
  // tiles, then stores them 16 bytes a lane.
  const int row = kw * 16;
#pragma unroll
  for (int nt = 0; nt < DW / 8; ++nt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int off = (row + g + 8 * r) * P + dpart * DW + nt * 8 + 2 * qd;
      *reinterpret_cast<uint32_t*>(sk + off) = pack2<T>(dk[nt][2 * r] * a.scale, dk[nt][2 * r + 1] * a.scale);
      *reinterpret_cast<uint32_t*>(sv + off) = pack2<T>(dv[nt][2 * r], dv[nt][2 * r + 1]);
    }
  __syncwarp();
#pragma unroll
  for (int c = lane; c < 16 * (DW / 8); c += 32) {
    const int r = c / (DW / 8), col = dpart * DW + c % (DW / 8) * 8;
    if (wk + r <= klast && col < a.head_dim) {
      *reinterpret_cast<uint4*>(at(a.gk, a.gks, b, seq.k0 + wk + r, hk) + col) =
          *reinterpret_cast<const uint4*>(sk + (row + r) * P + col);
      *reinterpret_cast<uint4*>(at(a.gv, a.gvs, b, seq.k0 + wk + r, hk) + col) =
          *reinterpret_cast<const uint4*>(sv + (row + r) * P + col);
    }
  }
}

// dQ = scale dQ out of a warp's fragments (rows g, g + 8 of its 16 from
// wrow, columns 8nt + 2qd, + 1): through the warp's own 16 rows of a shared
// tile that nothing else reads any more, its row r's column col at
// elem(r, col) (the MMA kernel's padded rows, the wgmma kernels' swizzled
// boxes), then 16-byte stores of the rows up to `last` (q0: the sequence's
// first row in grad_q).
template <class T, int D, class Elem>
__device__ __forceinline__ void store_dq(const float (&acc)[D / 8][4], Elem elem, const Bwd<T>& a, int64_t b,
                                         int64_t h, int64_t q0, int64_t wrow, int64_t last, int lane) {
  const int g = lane / 4, qd = lane % 4;
#pragma unroll
  for (int nt = 0; nt < D / 8; ++nt)
#pragma unroll
    for (int r = 0; r < 2; ++r)
      *reinterpret_cast<uint32_t*>(elem(g + 8 * r, nt * 8 + 2 * qd)) =
          pack2<T>(acc[nt][2 * r] * a.scale, acc[nt][2 * r + 1] * a.scale);
  __syncwarp();
#pragma unroll
  for (int i = lane; i < 16 * (D / 8); i += 32) {
    const int r = i / (D / 8), col = i % (D / 8) * 8;
    if (wrow + r <= last && col < a.head_dim)
      *reinterpret_cast<uint4*>(at(a.gq, a.gqs, b, q0 + wrow + r, h) + col) =
          *reinterpret_cast<const uint4*>(elem(r, col));
  }
}

// dQ for query rows [m0, m0 + 64) of (b, h): the forward's shape, K and V
// tiles through the same cp.async pipeline.
template <class T, int D>
__global__ void __launch_bounds__(kThreads, 1) attention_dq_mma_kernel(const Bwd<T> a, int64_t q_tiles) {
  constexpr int BN = kBlockN<D>, P = kPitch<D>;
  constexpr int kChunks = D / 8, kRowStep = kThreads / kChunks;
  static_assert(kThreads % kChunks == 0 && kBlockM % kRowStep == 0 && BN % kRowStep == 0, "tile loads");
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sq = reinterpret_cast<T*>(smem_raw);  // [kBlockM][P]; at the end each warp's 16 rows of dQ
  T* sg = sq + kBlockM * P;                // dO, [kBlockM][P]
  T* skv = sg + kBlockM * P;               // stage s: K at skv + 2s BN P, V right after

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, qd = lane % 4;
  const int64_t id = blockIdx.x, bh = id / q_tiles, m0 = (q_tiles - 1 - id % q_tiles) * kBlockM;
  const int64_t h = bh % a.heads_q, b = bh / a.heads_q, hk = h / a.group;
  const AttentionSeq seq = a.seqs.seq(b);
  if (m0 >= seq.len_q) return;  // past this (varlen) sequence
  const int64_t last = min(m0 + kBlockM, seq.len_q) - 1;
  const AttentionMask& mask = seq.mask;
  const int64_t kv_lo = mask.lo(m0), kv_hi = mask.hi(last);
  const int ch = tid % kChunks, r0 = tid / kChunks;
  const bool col_in = ch * 8 < a.head_dim;

  if (kv_lo >= kv_hi) {  // no row sees a key: dQ = 0
    for (int r = r0; r < kBlockM; r += kRowStep)
      if (col_in && m0 + r <= last)
        *reinterpret_cast<uint4*>(at(a.gq, a.gqs, b, seq.q0 + m0 + r, h) + ch * 8) = uint4{};
    return;
  }

  {
    const T* qp = at(a.q, a.qs, b, seq.q0, h) + ch * 8;
    const T* gp = at(a.go, a.gos, b, seq.q0, h) + ch * 8;
#pragma unroll
    for (int r = r0; r < kBlockM; r += kRowStep) {
      const bool in = col_in && m0 + r <= last;
      cp_async16(sq + r * P + ch * 8, in ? qp + (m0 + r) * a.qs[1] : a.q, in);
      cp_async16(sg + r * P + ch * 8, in ? gp + (m0 + r) * a.gos[1] : a.go, in);
    }
  }
  const T* kp = at(a.k, a.ks, b, seq.k0, hk) + ch * 8;
  const T* vp = at(a.v, a.vs, b, seq.k0, hk) + ch * 8;
  auto load_kv = [&](int64_t n0, int stage) {
    T* dk = skv + 2 * stage * BN * P;
    T* dv = dk + BN * P;
#pragma unroll
    for (int r = r0; r < BN; r += kRowStep) {
      const int64_t j = n0 + r;
      const bool in = col_in && j < seq.len_k;
      cp_async16(dk + r * P + ch * 8, in ? kp + j * a.ks[1] : a.k, in);
      cp_async16(dv + r * P + ch * 8, in ? vp + j * a.vs[1] : a.v, in);
    }
  };
  load_kv(kv_lo, 0);
  cp_async_commit();

  const int64_t wrow = m0 + warp * 16, wlast = min(wrow + 15, last);
  const bool live = wrow <= last;
  const int64_t w_lo = mask.lo(wrow), w_hi = mask.hi(wlast), w_max_lo = mask.lo(wlast), w_min_hi = mask.hi(wrow);
  const int64_t row_lo[2] = {mask.lo(wrow + g), mask.lo(wrow + g + 8)};
  const int64_t row_hi[2] = {mask.hi(wrow + g), mask.hi(wrow + g + 8)};
  // this thread's rows' lse log2(e) and delta (rows past seqlen_q: P = 0)
  float rl[2], rd[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t i = wrow + g + 8 * r;
    rl[r] = i <= last ? a.lse[bh * a.seqlen_q + i] * kLog2e : INFINITY;
    rd[r] = i <= last ? a.delta[bh * a.seqlen_q + i] : 0.f;
  }

  // ldmatrix row addresses: Q and dO as A (the forward's Q), K and V as B of
  // S and dP as they lie (b_off, the forward's K), K as B of dQ via .trans
  // (t_off, the forward's V).
  const int lr = lane & 7, l8 = (lane >> 3 & 1) * 8, l16 = (lane >> 4) * 8;
  const uint32_t q_addr = smem_addr(sq + (warp * 16 + lr + l8) * P + l16), g_addr = q_addr + kBlockM * P * 2;
  const uint32_t b_off = ((lr + l16) * P + l8) * 2, t_off = ((lr + l8) * P + l16) * 2;

  float acc[D / 8][4] = {};  // dQ: d tile nt, rows g / g + 8, columns 2qd, 2qd + 1
  const int64_t tiles = (kv_hi - kv_lo + BN - 1) / BN;
  for (int64_t t = 0; t < tiles; ++t) {
    cp_async_wait<0>();
    __syncthreads();
    if (t + 1 < tiles) {
      load_kv(kv_lo + (t + 1) * BN, int((t + 1) & 1));
      cp_async_commit();
    }
    const int64_t n0 = kv_lo + t * BN;
    if (!live || n0 >= w_hi || n0 + BN <= w_lo) continue;
    const uint32_t k_tile = smem_addr(skv + 2 * int(t & 1) * BN * P), v_tile = k_tile + BN * P * 2;

    // S = Q K^T, dP = dO V^T: [nt] is key tile nt, rows g / g + 8, keys 2qd, 2qd + 1
    float s[BN / 8][4] = {}, dp[BN / 8][4] = {};
    two_products<T, BN, D>(s, dp, q_addr, g_addr, k_tile, v_tile, b_off);

    // dS = P (dP - delta_i) dcap, P = exp(logit(S) - lse_i), 0 outside the band
    dq_grads<BN>(s, dp, a.logit, !(n0 >= w_max_lo && n0 + BN <= w_min_hi), row_lo, row_hi, n0, qd, rl, rd);

    // dQ += dS K: A = dS from the dP accumulators (key tiles 2kk, 2kk+1), K via .trans
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      uint32_t da[4];
      p_fragment<T, BN>(da, dp, kk);
#pragma unroll
      for (int dt = 0; dt < D / 16; ++dt) {
        uint32_t kb[4];
        ldsm_x4<true>(kb, k_tile + t_off + (kk * 16 * P + dt * 16) * 2);
        mma_16816<T>(acc[2 * dt], da, kb[0], kb[1]);
        mma_16816<T>(acc[2 * dt + 1], da, kb[2], kb[3]);
      }
    }
  }
  cp_async_wait<0>();

  // through this warp's own rows of the Q tile, once every lane's ldmatrix of them is done
  __syncwarp();
  T* so = sq + warp * 16 * P;
  store_dq<T, D>(acc, [so](int r, int col) { return so + r * P + col; }, a, b, h, seq.q0, wrow, last, lane);
}

// Why the MMA backward cannot run this problem, or nullptr when it can.
template <class T>
const char* bwd_blocker(const tc_flash_attention_backward_params* p) {
  if constexpr (!std::is_same_v<T, __half> && !std::is_same_v<T, __nv_bfloat16>) {
    return "fp16 or bf16";
  } else {
    if (p->head_dim % 8 != 0 || p->head_dim > 256) return "head_dim a multiple of 8 and at most 256";
    if (!aligned16(p->q) || !aligned16(p->k) || !aligned16(p->v) || !aligned16(p->grad_o) ||
        !aligned16(p->grad_q) || !aligned16(p->grad_k) || !aligned16(p->grad_v))
      return "16-byte aligned q, k, v, grad_o, grad_q, grad_k and grad_v";
    for (int d = 0; d < 3; ++d)
      if (p->q_stride[d] % 8 || p->k_stride[d] % 8 || p->v_stride[d] % 8 || p->grad_o_stride[d] % 8 ||
          p->grad_q_stride[d] % 8 || p->grad_k_stride[d] % 8 || p->grad_v_stride[d] % 8)
        return "q, k, v, grad_o, grad_q, grad_k and grad_v strides that are multiples of 8 elements";
    const size_t smem = p->head_dim <= 64    ? std::max(kDkvSmemBytes<64>, kDqSmemBytes<64>)
                        : p->head_dim <= 128 ? std::max(kDkvSmemBytes<128>, kDqSmemBytes<128>)
                                             : std::max(kDkvSmemBytes<256>, kDqSmemBytes<256>);
    if (size_t(smem_optin()) < smem) return "more shared memory per block than this device allows";
    return nullptr;
  }
}

template <class T, int D>
tc_status launch_backward(const char* op, const Bwd<T>& a, bool rows_q, bool rows_k, cudaStream_t stream) {
  if (rows_q) {
    auto kernel = attention_dq_mma_kernel<T, D>;
    constexpr size_t smem = kDqSmemBytes<D>;
    static std::atomic<uint64_t> smem_set{0};
    TC_RETURN_IF_ERROR(smem_opt_in(op, kernel, smem, smem_set));
    const int64_t q_tiles = (a.seqlen_q + kBlockM - 1) / kBlockM, blocks = a.batch * a.heads_q * q_tiles;
    TC_REQUIRE(blocks <= INT32_MAX, "%s: %lld blocks of %d query rows are too many for one launch", op,
               (long long)blocks, kBlockM);
    kernel<<<unsigned(blocks), kThreads, smem, stream>>>(a, q_tiles);
    TC_RETURN_IF_ERROR(check_launch(op));
  }
  if (rows_k) {
    auto kernel = attention_dkv_mma_kernel<T, D>;
    constexpr size_t smem = kDkvSmemBytes<D>;
    static std::atomic<uint64_t> smem_set{0};
    TC_RETURN_IF_ERROR(smem_opt_in(op, kernel, smem, smem_set));
    const int64_t k_tiles = (a.seqlen_k + kBwdBlockN - 1) / kBwdBlockN, blocks = a.batch * a.heads_kv * k_tiles;
    TC_REQUIRE(blocks <= INT32_MAX, "%s: %lld blocks of %d keys are too many for one launch", op,
               (long long)blocks, kBwdBlockN);
    kernel<<<unsigned(blocks), kDkvThreads<D>, smem, stream>>>(a, k_tiles);
    TC_RETURN_IF_ERROR(check_launch(op));
  }
  return TC_OK;
}

}  // namespace fa2

// ---------------------------------------------------------------------------
// WGMMA forward (Hopper, sm_90a): FlashAttention-3's structure, with its
// ping-pong between consumers and its intra-warpgroup overlap. A block is 3
// warpgroups over 128 query rows of one (b, h): a producer whose one thread
// issues TMA copies (Q once, then K and V tiles of kBN keys into a kStages
// ring, 128-byte swizzled, zero-filled past seqlen and head_dim; a varlen
// sequence's last tile holds the next one's rows instead, which the
// producer's warp zeroes in V), and two consumers of 64 rows each that run,
// per tile t,
//   S = Q K^T   wgmma_ss m64 n=kBN, Q and K k-major from shared memory,
//               issued together with tile t-1's P V (below)
//   softmax     the mma.sync kernel's tile_logits / softmax_p on the same
//               fragments (wgmma's m64 accumulators are four warps' m16 ones),
//               while t-1's P V is still running; then O *= exp(m_old - m_new)
//   O += P V    wgmma_rs m64 n=D, P from registers (p_fragment), V n-major
//               (transpose bit) as it lies, [key][d] in 64-column boxes;
//               issued at tile t+1 (or after the last tile)
// K's and V's halves of a stage have their own barriers (KvBars): K goes back
// once S has read it, V once P V has, a tile later. The two consumers take
// turns issuing their wgmmas, so one's softmax also runs under the other's
// (causal D = 128, H100, before the overlap: 500 against 441 TFLOP/s left to
// the scheduler). H200, bf16, 4 x 4096 x 32 heads (scripts/attention_fwd_probe.py,
// one run), with the overlap against without: D = 128 570 against 511-515
// TFLOP/s (causal 480-503 against 425-459), D = 64 353 against 313, D = 256
// (16 heads) 607 against 574-584; cuDNN 688 / 601 / 481 / 734. Registers:
// the producer gives its own away (setmaxnreg 24 / 240): O is D/2 floats a
// thread, S kBN/2 and the pending P kBN/4.
namespace fa3 {
using namespace fa2;

constexpr int kBM = 128, kStages = 2, kThreads3 = 384;
template <int D> constexpr int kBN = D <= 128 ? 128 : 64;  // keys a tile
// Shared memory: Q [D/64 boxes][128 rows][64], each stage K and V [D/64][kBN][64], + 1 KiB to align
//   D = 64: 81 KiB, D = 128: 161 KiB, D = 256: 193 KiB
template <int D> constexpr size_t kSmem = size_t(kBM + 2 * kStages * kBN<D>) * D * 2 + 1024;

// Ping-pong (FA3): the two consumers take turns issuing a tile's first
// products, so one's CUDA-core work (softmax, or the backward's dS) lines up
// with the other's wgmmas. Named barrier 1 + c is consumer c's turn: its 128
// threads sync there (mine), and the other consumer arrives there once it
// has issued its own (yours). Both walk every tile, skipped ones too, so the
// syncs and arrivals pair up: consumer 0 goes first (start), and after the
// loop takes consumer 1's last arrival (finish). (Leaving that arrival out
// instead needs the tile count in the loop: 12 bytes of spills in dkv at
// D = 128, ptxas; and with turns at all dkv at D = 128 spills 12 bytes, so
// there `on` is false and the consumers are left to the warp schedulers.)
struct Turns {
  int c;
  bool any;  // the loop has tiles
  bool on;   // a compile-time constant at every use
  __device__ __forceinline__ void start() const {
    if (c == 1 && any) yours();
  }
  __device__ __forceinline__ void mine() const {
    if (on) asm volatile("bar.sync %0, 256;\n" ::"r"(1 + c) : "memory");
  }
  __device__ __forceinline__ void yours() const {
    if (on) asm volatile("bar.arrive %0, 256;\n" ::"r"(2 - c) : "memory");
  }
  __device__ __forceinline__ void finish() const {
    if (c == 0 && any) mine();
  }
};

// The first 1 KiB boundary at or after p (dynamic shared memory): the
// 128-byte swizzle repeats every 1 KiB, so the swizzled tiles start there. An
// offset added to p, not p cast through an integer and masked: the compiler
// then still knows the pointer is shared and issues LDS/STS through it, not
// generic LD/ST (the dK/dV kernel's lse/delta loads and dQ staging were
// generic LD.E.64 and ST.E.128, SASS; ncu: long-scoreboard stalls 1.36 an
// issued instruction).
template <class T>
__device__ __forceinline__ T* align_1k(unsigned char* p) {
  return reinterpret_cast<T*>(p + ((1024 - (smem_addr(p) & 1023)) & 1023));
}

// Element (row r, column c) of a [rows][D] tile stored as 64-column boxes
// with the 128-byte swizzle TMA writes: 16-byte chunk j of row r at j ^ (r % 8).
template <int kRows>
__device__ __forceinline__ int swizzled(int r, int c) {
  return (c / 64) * kRows * 64 + r * 64 + (((c % 64) / 8) ^ (r % 8)) * 8 + c % 8;
}

// Zeroes rows [from, kRows) of such a tile, thread i of n, 16 bytes a store:
// the swizzle moves chunks only within a row, so row r is still bytes
// [128 r, 128 r + 128) of each box. For the varlen tiles that run past their
// sequence's last row (the kernels below: which tiles, who, and why). The
// caller then fences (fence_async_shared: wgmma reads through the async
// proxy) before it hands the stage to the consumers.
template <class T, int kRows, int D>
__device__ __forceinline__ void zero_rows(T* tile, int from, int i, int n) {
#pragma unroll
  for (int x = 0; x < D / 64; ++x) {
    uint4* box = reinterpret_cast<uint4*>(tile + x * kRows * 64);
    for (int j = from * 8 + i; j < kRows * 8; j += n) box[j] = make_uint4(0, 0, 0, 0);
  }
}

// wgmma_pin for registers a wgmma_rs reads: they stay that operand's until the
// wgmma has completed, not reused for the code issued under it.
template <int R>
__device__ __forceinline__ void pin_regs(uint32_t (&r)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

// The barriers of a K/V ring's stages. The forward splits them: K and V of a
// stage each have a `full` and an `empty`, so K's half goes back to the
// producer once S = Q K^T has read it while V's waits for P V, which the
// overlapped consumers issue a tile later. dq joins them (full_v = full_k,
// empty_v = empty_k): one wait and one release a stage. `tail` is the varlen
// tail's (kv_ring).
struct KvBars {
  uint64_t *full_k, *full_v, *empty_k, *empty_v, *tail;
  __device__ __forceinline__ bool split() const { return full_k != full_v; }
};

// The producer warp of the forward and of dq (`lane` 0..31): thread 0
// streams `tiles` tiles of BN keys, K then V of kv head hk from key row n0,
// through the kStages ring at skv (stage s: K at skv + 2 s BN D, V after),
// each half refilled once its `empty` says its readers are done with it.
// When the last tile runs past a varlen sequence's end (`part`), the copies
// of K (kZeroK: dq) or of V (the forward) land on `tail` instead (joined bars:
// both halves', one barrier), and the warp zeroes that half's rows `from`..
// before it hands it over on its `full` (the kernels say why those rows).
template <class T, int BN, int D, bool kZeroK>
__device__ __forceinline__ void kv_ring(const CUtensorMap* tk, const CUtensorMap* tv, T* skv, const KvBars& bar,
                                        int tiles, int n0, int hk, int tb, bool part, int from, int lane) {
  constexpr uint32_t kHalf = BN * D * sizeof(T);
  const bool split = bar.split();
  if (lane == 0)
    for (int t = 0; t < tiles; ++t) {
      const int s = t % kStages, phase = (t / kStages - 1) & 1;
      const bool tail = part && t == tiles - 1;
      uint64_t* k_landed = tail && (kZeroK || !split) ? bar.tail : &bar.full_k[s];
      uint64_t* v_landed = tail && (!kZeroK || !split) ? bar.tail : &bar.full_v[s];
      T* sk = skv + 2 * s * BN * D;
      if (t >= kStages) mbar_wait(&bar.empty_k[s], phase);
      mbar_expect_bytes(k_landed, split ? kHalf : 2 * kHalf);
#pragma unroll
      for (int x = 0; x < D / 64; ++x) tma_load_4d(sk + x * BN * 64, tk, 64 * x, n0 + t * BN, hk, tb, k_landed);
      if (split) {
        if (t >= kStages) mbar_wait(&bar.empty_v[s], phase);
        mbar_expect_bytes(v_landed, kHalf);
      }
#pragma unroll
      for (int x = 0; x < D / 64; ++x)
        tma_load_4d(sk + BN * D + x * BN * 64, tv, 64 * x, n0 + t * BN, hk, tb, v_landed);
    }
  __syncwarp();
  if (part) {  // warp-uniform; at most 127 rows x 256 bytes (D = 128): 64 stores a lane
    const int s = (tiles - 1) % kStages;
    mbar_wait(bar.tail, 0);
    zero_rows<T, BN, D>(skv + 2 * s * BN * D + (kZeroK ? 0 : BN * D), from, lane, 32);
    fence_async_shared();  // each lane, before the consumers' wgmma (async proxy) read the rows
    __syncwarp();
    // release: the warp's zeros are seen by whoever waits
    if (lane == 0) mbar_arrive(kZeroK ? &bar.full_k[s] : &bar.full_v[s]);
  }
}

template <class T, int D>
__global__ void __launch_bounds__(kThreads3, 1)
attention_wgmma_kernel(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
                       const __grid_constant__ CUtensorMap tv, const Fwd<T> a, int64_t q_tiles) {
  pdl_start();
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int BN = kBN<D>, kBoxes = D / 64;
  extern __shared__ unsigned char smem_raw[];
  T* sq = align_1k<T>(smem_raw);
  T* skv = sq + kBM * D;  // stage s: K at skv + 2 s BN D, V right after
  __shared__ __align__(8) uint64_t q_full, full_k[kStages], full_v[kStages], empty_k[kStages], empty_v[kStages],
      tail_full;

  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  const int64_t id = blockIdx.x, bh = id / q_tiles, m0 = (q_tiles - 1 - id % q_tiles) * kBM;
  const int64_t h = bh % a.heads_q, b = bh / a.heads_q, hk = h / a.group;
  const AttentionSeq seq = a.seqs.seq(b);
  if (m0 >= seq.len_q) return;  // past this (varlen) sequence
  const int64_t last = min(m0 + kBM, seq.len_q) - 1;
  const AttentionMask& mask = seq.mask;
  const int64_t kv_lo = mask.lo(m0), kv_hi = mask.hi(last);
  const int tiles = kv_lo < kv_hi ? int((kv_hi - kv_lo + BN - 1) / BN) : 0;
  // TMA coordinates: a varlen batch is one packed [total, heads, D] tensor
  // (tensor_map's batch of 1), its sequence b at row q0 (k0). Rows loaded past
  // the sequence's end are the next sequence's (or zeros past the tensor):
  // keys there are masked like keys past seqlen_k (and V's zeroed: the
  // producer's `part`), query rows never stored.
  const int tb = a.seqs.cu_q ? 0 : int(b), tq0 = int(seq.q0 + m0), tk0 = int(seq.k0 + kv_lo);

  if (threadIdx.x == 0) {
    mbar_init(&q_full, 1);
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full_k[s], 1), mbar_init(&full_v[s], 1);
      mbar_init(&empty_k[s], 2), mbar_init(&empty_v[s], 2);
    }
    mbar_init(&tail_full, 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");  // visible to the TMA unit
  }
  __syncthreads();

  if (wg == 0) {  // producer
    setmaxnreg_dec<24>();
    // Keys masked past the sequence are not enough for P V: it multiplies
    // their P = 0 by the V rows loaded there, the next varlen sequence's, and
    // 0 x inf = NaN, so an inf or NaN in that sequence's V would reach this
    // one's O. Only the last tile can hold such rows (every earlier one ends
    // at or below kv_lo + (tiles - 1) BN < kv_hi <= len_k): when it does
    // (`part`), its V copies complete on `tail_full` instead of full_v[s],
    // and this warp zeroes V's rows len_k - n_last.. once they have landed,
    // then thread 0 arrives on full_v[s] in place of its expect_tx. Here and not in
    // the consumers: their loop keeps no test per tile and no stores on its
    // critical path (and in dkv, at its register limit, a conditional
    // zeroing there spilled). A batch's rows past seqlen_k are TMA's zeros
    // already. K's need nothing: tile_logits selects -inf over those logits
    // whatever Q K^T gave there (inf, NaN).
    const int64_t n_last = kv_lo + int64_t(tiles - 1) * BN;  // the last tile's first key
    const bool part = a.seqs.cu_q && n_last + BN > seq.len_k;
    if (tid < 32 && tiles > 0) {
      if (tid == 0) {
        mbar_expect_bytes(&q_full, kBM * D * sizeof(T));
#pragma unroll
        for (int x = 0; x < kBoxes; ++x) tma_load_4d(sq + x * kBM * 64, &tq, 64 * x, tq0, int(h), tb, &q_full);
      }
      kv_ring<T, BN, D, false>(&tk, &tv, skv, KvBars{full_k, full_v, empty_k, empty_v, &tail_full}, tiles, tk0,
                               int(hk), tb, part, int(seq.len_k - n_last), tid);
    }
    return;
  }

  setmaxnreg_inc<240>();
  const int c = wg - 1, warp = tid / 32, lane = tid % 32, g = lane / 4, qd = lane % 4;
  const int64_t c0 = m0 + 64 * c, wrow = c0 + 16 * warp;  // the consumer's and the warp's first rows
  const int64_t wlast = min(wrow + 15, last);
  // The consumer's band skips whole tiles (wgmma is warpgroup-wide); a warp's
  // own rows are masked per element where the tile crosses their band's edge.
  const bool c_live = c0 <= last;
  const int64_t c_lo = c_live ? mask.lo(c0) : 0, c_hi = c_live ? mask.hi(min(c0 + 63, last)) : 0;
  const int64_t w_max_lo = mask.lo(wlast), w_min_hi = mask.hi(wrow);
  const int64_t row_lo[2] = {mask.lo(wrow + g), mask.lo(wrow + g + 8)};
  const int64_t row_hi[2] = {mask.hi(wrow + g), mask.hi(wrow + g + 8)};

  // With no softcap the scale goes into the exponent, exp2(s scale log2(e) -
  // m scale log2(e)), as FA3 does: S is never scaled on its own (one FMUL an
  // element less; m stays in Q K^T's units). A scale <= 0 would turn the max
  // into the min: those scale first, as the capped logits do.
  const bool fold = a.logit.inv_cap == 0.f && a.logit.scale > 0.f;
  const float xs = fold ? a.logit.scale * kLog2e : kLog2e;
  float acc[D / 8][4] = {}, m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  uint32_t pa[BN / 16][4];  // P of tile `pend`, whose P V is issued with the next tile's S
  int pend = -1;            // -1: none yet
  // Tile u's V has landed. Called before the wgmma_fence that precedes
  // issue_pv: a wait's spin loop between the fence and the wgmma serialized
  // every wgmma of the kernel (ptxas C7520; 464 against 570 TFLOP/s at D = 128).
  auto v_landed = [&](int u) { mbar_wait(&full_v[u % kStages], (u / kStages) & 1); };
  // O += P V for tile u, issued and committed
  auto issue_pv = [&](int u) {
    const T* sv = skv + (2 * (u % kStages) + 1) * BN * D;
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk)  // keys 16kk.. are rows 16kk.. of every V box
      wgmma_rs<T, D, true>(reinterpret_cast<float(&)[D / 2]>(acc), pa[kk],
                           wgmma_desc_mn(sv + kk * 16 * 64, BN * 64 * sizeof(T)));
    wgmma_commit();
  };
  // once tile u's P V has completed: O is ours again, so are P's registers, and V's half of the stage goes back
  auto pv_done = [&](int u) {
    wgmma_pin(reinterpret_cast<float(&)[D / 2]>(acc));
    pin_regs(reinterpret_cast<uint32_t(&)[BN / 4]>(pa));
    if (tid == 0) mbar_arrive(&empty_v[u % kStages]);
  };
  if (tiles > 0) mbar_wait(&q_full, 0);
  const T* q_rows = sq + 64 * c * 64;  // this consumer's rows of box 0
  const Turns turn{c, tiles > 0, true};  // Q K^T and the pending P V in turns
  turn.start();
  for (int t = 0; t < tiles; ++t) {
    const int s = t % kStages;
    const int64_t n0 = kv_lo + int64_t(t) * BN;
    mbar_wait(&full_k[s], (t / kStages) & 1);
    turn.mine();
    // A consumer's tiles are one run: the bands have slope 1, so consumer 0
    // ends at most 64 keys (one tile) before the block and consumer 1 starts
    // at most one tile after it. So a skip after a live tile is the last
    // tile, and its stage is not the pending P V's: releasing its V here
    // never waits on a copy that needs `pend`'s release (which comes after
    // the loop). Two skips after a live tile would deadlock.
    if (!(c_live && n0 < c_hi && n0 + BN > c_lo)) {
      turn.yours();
      if (tid == 0) {  // both halves back; V's once it has landed, or its next copy would race this one
        mbar_arrive(&empty_k[s]);
        mbar_wait(&full_v[s], (t / kStages) & 1);
        mbar_arrive(&empty_v[s]);
      }
      continue;
    }
    const T* sk = skv + 2 * s * BN * D;
    float sacc[BN / 8][4];
    auto issue_s = [&] {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)  // 16 columns of box kk / 4
        wgmma_ss<T, BN, false, false>(reinterpret_cast<float(&)[BN / 2]>(sacc),
                                      wgmma_desc(q_rows + (kk / 4) * kBM * 64 + kk % 4 * 16),
                                      wgmma_desc(sk + (kk / 4) * BN * 64 + kk % 4 * 16), kk > 0);
      wgmma_commit();
    };
    // Each branch holds its own fence, issues and wait: with the P V issue
    // alone under `pend >= 0`, ptxas serialized the wgmmas again (C7520).
    if (pend >= 0) {
      v_landed(pend);
      wgmma_fence();  // also orders rescale's and p_fragment's register writes before P V reads them
      issue_s();
      issue_pv(pend);
      turn.yours();
      wgmma_wait<1>();  // S is in; P V may still run under the softmax below
    } else {
      wgmma_fence();
      issue_s();
      turn.yours();
      wgmma_wait<0>();
    }
    wgmma_pin(reinterpret_cast<float(&)[BN / 2]>(sacc));
    if (tid == 0) mbar_arrive(&empty_k[s]);

    float corr[2];
    tile_logits<BN>(sacc, a.logit, fold, !(n0 >= w_max_lo && n0 + BN <= w_min_hi), row_lo, row_hi, n0, qd);
    softmax_p<BN>(sacc, m, l, corr, xs);
    wgmma_wait<0>();  // (a no-op at a consumer's first tile)
    if (pend >= 0) pv_done(pend);
    rescale(acc, corr);
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) p_fragment<T, BN>(pa[kk], sacc, kk);
    pend = t;
  }
  turn.finish();
  if (pend >= 0) {  // the last tile's P V
    v_landed(pend);
    wgmma_fence();
    issue_pv(pend);
    wgmma_wait<0>();
    pv_done(pend);
  }

  // O = acc / l through this warp's own 16 rows of the Q tile (its reads of
  // them ended with the last wgmma), then 16-byte stores.
  float inv[2], row_lse[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) inv[r] = finish_row(m[r], l[r], row_lse[r], fold ? a.logit.scale : 1.f);
  const int rw = 64 * c + 16 * warp;  // the warp's first row in the tile
#pragma unroll
  for (int nt = 0; nt < D / 8; ++nt)
#pragma unroll
    for (int r = 0; r < 2; ++r)
      *reinterpret_cast<uint32_t*>(sq + swizzled<kBM>(rw + g + 8 * r, nt * 8 + 2 * qd)) =
          pack2<T>(acc[nt][2 * r] * inv[r], acc[nt][2 * r + 1] * inv[r]);
  __syncwarp();
#pragma unroll
  for (int i = lane; i < 16 * (D / 8); i += 32) {
    const int r = i / (D / 8), col = i % (D / 8) * 8;
    if (wrow + r <= last && col < a.head_dim)
      *reinterpret_cast<uint4*>(at(a.o, a.os, b, seq.q0 + wrow + r, h) + col) =
          *reinterpret_cast<const uint4*>(sq + swizzled<kBM>(rw + r, col));
  }
  if (qd == 0)
#pragma unroll
    for (int r = 0; r < 2; ++r)
      if (wrow + g + 8 * r <= last) a.lse[bh * a.seqlen_q + wrow + g + 8 * r] = row_lse[r];
#endif
}

// q, k or v as a 4-D TMA map (head_dim, rows, heads, batch) in [box_rows][64]
// boxes; false when TMA cannot describe it (tma_map: AUTO then runs mma). A size-1
// dimension's stride is never stepped: any legal value stands in for it.
template <class T>
bool tensor_map(CUtensorMap* map, const T* x, const int64_t (&s)[3], int64_t rows, int64_t heads, int64_t batch,
                int64_t head_dim, int box_rows) {
  const int64_t row = rows > 1 ? s[1] : head_dim, head = heads > 1 ? s[2] : row * rows,
                bat = batch > 1 ? s[0] : head * heads;
  return tma_map<T, 4>(map, x, {head_dim, rows, heads, batch}, {row, head, bat}, {64, cuuint32_t(box_rows), 1, 1});
}

// Why the wgmma kernel cannot run this problem (beyond fa2::blocker's rules,
// which it shares), or nullptr when it can.
template <class T>
const char* blocker(const tc_flash_attention_params* p) {
  int dev = 0;
  if (!hopper_runs<attention_wgmma_kernel<T, 128>>(&dev)) return "an sm_90 device and a build with sm_90a";
  if (p->seqlen_q > INT32_MAX || p->seqlen_k > INT32_MAX || p->heads_q > INT32_MAX || p->batch > INT32_MAX ||
      (p->cu_seqlens_q && (p->total_q > INT32_MAX || p->total_k > INT32_MAX)))
    return "sizes below 2^31 (TMA coordinates are 32-bit)";
  const size_t smem = p->head_dim <= 64 ? kSmem<64> : p->head_dim <= 128 ? kSmem<128> : kSmem<256>;
  if (size_t(smem_optin()) < smem) return "more shared memory per block than this device allows";
  return nullptr;
}

// Launches the kernel, or returns `why` set when a tensor map cannot be made.
template <class T, int D>
tc_status launch(const char* op, const Fwd<T>& a, cudaStream_t stream, const char** why) {
  CUtensorMap tq, tk, tv;
  const int64_t heads_kv = a.heads_q / a.group;
  const bool varlen = a.seqs.cu_q;  // one packed tensor of total rows
  const int64_t rows_q = varlen ? a.seqs.total_q : a.seqlen_q, rows_k = varlen ? a.seqs.total_k : a.seqlen_k,
                batch = varlen ? 1 : a.batch;
  if (!tensor_map(&tq, a.q, a.qs, rows_q, a.heads_q, batch, a.head_dim, kBM) ||
      !tensor_map(&tk, a.k, a.ks, rows_k, heads_kv, batch, a.head_dim, kBN<D>) ||
      !tensor_map(&tv, a.v, a.vs, rows_k, heads_kv, batch, a.head_dim, kBN<D>)) {
    *why = "q, k and v that TMA can describe";
    return TC_OK;
  }
  auto kernel = attention_wgmma_kernel<T, D>;
  static std::atomic<uint64_t> smem_set{0};
  TC_RETURN_IF_ERROR(smem_opt_in(op, kernel, kSmem<D>, smem_set));
  const int64_t q_tiles = (a.seqlen_q + kBM - 1) / kBM, blocks = a.batch * a.heads_q * q_tiles;
  TC_REQUIRE(blocks <= INT32_MAX, "%s: %lld blocks of %d query rows are too many for one launch", op,
             (long long)blocks, kBM);
  return launch_pdl(op, kernel, unsigned(blocks), kThreads3, kSmem<D>, stream, tq, tk, tv, a, q_tiles);
}

// ---------------------------------------------------------------------------
// WGMMA backward (Hopper, sm_90a): the MMA backward's two kernels (dq, dkv;
// delta stays attention_delta_kernel) in the forward's shape: 3 warpgroups, a
// producer whose TMA thread fills a kStages ring of 128-byte swizzled boxes
// (64 columns; zero-filled past seqlen and head_dim, or the next varlen
// sequence's rows, masked, and zeroed where dQ += dS K or dV, dK read them:
// the producers' `part`), two consumers of 64 output rows each. D in {64,
// 128} (a smaller D rounds up: TMA zero-fills the columns past head_dim).
//
// dq: a block per (b, h, 128 query rows), last query tiles first; Q and dO
// loaded once, K and V tiles of 64 keys through the ring. Per tile, consumer c
// (query rows 64c..):
//   S  = Q K^T     wgmma_ss m64 n64, Q and K k-major
//   dP = dO V^T    wgmma_ss m64 n64, dO and V k-major (one commit with S)
//   dS = P (dP - delta_i) dcap(s), P = exp(logit(S) - lse_i)  (dq_grads, as MMA)
//   dQ += dS K     wgmma_rs m64 n=D, dS from the accumulators (p_fragment),
//                  K n-major (transpose bit) as it lies, [key][d]
// dkv: a block per (b, kv head hk, 128 keys); K and V loaded once, then the
// group's query heads and, in each, query tiles of 64 over [q_lo(first key),
// q_hi(last key)) through the ring, with the tile's lse log2(e) and delta
// (plain loads by the producer's first warp into the stage). Consumer c (keys
// 64c..):
//   S^T  = K Q^T   wgmma_ss m64 n64, K and Q k-major
//   dP^T = V dO^T  wgmma_ss m64 n64
//   P^T, dS^T      dkv_grads, as MMA
//   dV += P^T dO   wgmma_rs m64 n=D, P^T from the accumulators, dO n-major
//   dK += dS^T Q   wgmma_rs m64 n=D, Q n-major (one commit with dV)
//   kAcc (the accumulator path): dS^T by stmatrix into the consumer's box,
//   dQ = dS K      wgmma_ss m64 n=D, dS m-major out of the box, K n-major,
//                  then the tile through `stage` and one bulk add (add_dq)
// dQ and dK are scaled once at the end and leave through their warp's own rows
// of the Q (K, V) tile as 16-byte stores. One owner per output row, tiles in
// a fixed order: no atomics, the same bits every run (but for kAcc's dQ,
// whose shares the L2 adds in no fixed order).
//
// A consumer skips the tiles outside its 64 rows' band (wgmma is
// warpgroup-wide); a warp masks per element only tiles crossing its 16 rows'
// band edge. Barriers: `q_full` (dq) / `kv_full` (dkv), count 1, the TMA
// thread's expect_tx; `full[s]`, count 1 in dq, 33 in dkv (the TMA thread's
// expect_tx and each of the producer warp's 32 lanes after storing lse/delta);
// `empty[s]`, count 8: every consumer warp arrives once per tile, skipped
// tiles included, from lane 0 after __syncwarp and after its last wgmma reading
// the stage completed, so the producer overwrites a stage no warp still reads.
// A tile holding the next varlen sequence's rows (`part`: dq's last, dkv's
// last of each head) completes its copies on `tail_full` (count 1, the TMA
// thread's expect_tx) instead; the producer's warp waits there, zeroes K's
// rows (dq) or Q's and dO's (dkv), fences, and arrives on full[s] for the
// copies: dq's thread 0 once, after a __syncwarp; dkv's thread 0 twice.
// A block with no tile (no key in its queries' band, or no query seeing its
// keys) loads nothing and writes zeros.
//
// Shared memory (+ 1 KiB to align the swizzled tiles on 1 KiB):
//   dq:  Q, dO [D/64][128][64] + 2 stages x (K, V) [D/64][64][64]:
//        D = 64: 65 KiB, D = 128: 129 KiB
//   dkv: K, V [D/64][128][64] + 2 stages x (Q, dO [D/64][64][64], 64 lse and delta floats),
//        at D = 64 + the dS path's 4 [64][64] boxes: D = 64: 98 KiB, D = 128: 130 KiB;
//        kAcc: the boxes at D = 128 too, + 2 x float dQ [64][D]: 130 KiB, 226 KiB
//   dq on the dS path: 4 stages x (dS^T [2][64][64], K [64][64]) + dQ [128][64]: 113 KiB
// Registers (a thread; setmaxnreg 24 for the producers, 240 for the
// consumers): dq's consumers hold dQ (D/2 floats) and S, dP (32 each); dkv's
// dK, dV (D/2 each) and S^T, dP^T (32 each), 192 floats at D = 128, which is
// why its loop keeps query positions in 32 bits relative to the block's first
// query (64-bit ones spilled 48 bytes; at 232 registers, 24 bytes spilled).
// No spills at D = 64 and 128, fp16 and bf16 (ptxas -v), but for kAcc's dkv
// at D = 128: 16 bytes (its dQ tile, 64 floats, lives next to dK and dV).
// Performance: the header's backward section.
//
// compute-sanitizer racecheck reports hazards between the producer's lse/delta
// stores and dkv_grads' loads of them: its model does not order plain shared
// accesses through an mbarrier arrive (release) and parity wait (acquire).
// scripts/probe_racecheck_mbarrier.cu, this hand-over alone with a result that
// checks, draws the same report (H200, CUDA 13.0's compute-sanitizer).
constexpr int kBwdRows = 128;  // dq's query rows and dkv's keys a block (two consumers of 64)
constexpr int kBwdTile = 64;   // dq's keys and dkv's queries a ring tile
template <int D>
constexpr size_t kDqSmem = size_t(2 * kBwdRows + 2 * kStages * kBwdTile) * D * 2 + 1024;
// dkv at D = 64 (and with kAcc) also holds the dS boxes: two [64 keys][64
// queries] a consumer, filled in turns so one is read while the other fills;
// with kAcc, each consumer's float32 dQ tile [64][D] on its way out too
// (D = 128: 226 KiB of the 227 a block may have)
template <int D, bool kAcc = false>
constexpr size_t kDkvSmem = kDqSmem<D> + size_t(2 * kStages * kBwdTile) * sizeof(float) +
                            (D == 64 || kAcc ? size_t(4) * 64 * 64 * 2 : 0) +
                            (kAcc ? size_t(2) * 64 * D * sizeof(float) : 0);

// store_dq's elements in a [kBwdRows][D] swizzled tile, for the warp whose 16 rows start at row rw
template <class T>
__device__ __forceinline__ auto in_box(T* tile, int rw) {
  return [tile, rw](int r, int col) { return tile + swizzled<kBwdRows>(rw + r, col); };
}

// dq on the dS path: dQ = scale dS K, dS^T as dkv stored it. A block per (b,
// h, 128 queries) as the dq kernel below, its key tiles through a ring of
// kDsStages stages of dS^T [2][64 keys][64 queries] (box c: consumer c's
// queries) and K [64 keys][64]. Consumer c's warp takes its 16 queries' dS
// fragment (m16 x k16) by ldmatrix.trans out of the key-major box, zeroes the
// pairs outside the band on a tile crossing its band's edge (dkv stored dS
// only inside its own band: elsewhere the workspace holds stale values, and
// 0 x stale could be NaN), and issues dQ += dS K (wgmma_rs, K n-major) as the
// dq kernel does. One product of 2 Sq S' D FLOPs against dq's three; the
// block reads 24 KiB a tile, so the ring is deeper than dq's 2 stages.
constexpr int kDsStages = 4;
constexpr size_t kDqDsSmem = size_t(kDsStages * 3 * kBwdTile + kBwdRows) * 64 * 2 + 1024;

template <class T>
__global__ void __launch_bounds__(kThreads3, 1)
attention_dq_ds_kernel(const __grid_constant__ CUtensorMap tds, const __grid_constant__ CUtensorMap tk,
                       const Bwd<T> a, int64_t q_tiles) {
  pdl_start();
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int BM = kBwdRows, BN = kBwdTile, D = 64;
  extern __shared__ unsigned char smem_raw[];
  T* ring = align_1k<T>(smem_raw);             // stage s: dS^T boxes 0, 1, then K, at ring + 3 s BN 64
  T* sout = ring + kDsStages * 3 * BN * 64;    // dQ [BM][64] on its way out
  __shared__ __align__(8) uint64_t full[kDsStages], empty[kDsStages];

  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  const int64_t id = blockIdx.x, bh = id / q_tiles, m0 = (q_tiles - 1 - id % q_tiles) * BM;
  const int64_t h = bh % a.heads_q, b = bh / a.heads_q, hk = h / a.group;
  const AttentionSeq seq = a.seqs.seq(b);  // fixed lengths on this path
  const int64_t last = min(m0 + BM, seq.len_q) - 1;
  const AttentionMask& mask = seq.mask;
  const int64_t kv_lo = mask.lo(m0), kv_hi = mask.hi(last);
  const int tiles = kv_lo < kv_hi ? int((kv_hi - kv_lo + BN - 1) / BN) : 0;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kDsStages; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], 8);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {  // producer
    setmaxnreg_dec<24>();
    if (tid == 0)
      for (int t = 0; t < tiles; ++t) {
        const int s = t % kDsStages, n0 = int(kv_lo + int64_t(t) * BN);
        if (t >= kDsStages) mbar_wait(&empty[s], (t / kDsStages - 1) & 1);
        mbar_expect_bytes(&full[s], 3 * BN * 64 * sizeof(T));
        T* st = ring + 3 * s * BN * 64;
        tma_load_3d(st, &tds, int(m0), n0, int(bh), &full[s]);
        tma_load_3d(st + BN * 64, &tds, int(m0 + 64), n0, int(bh), &full[s]);
        tma_load_4d(st + 2 * BN * 64, &tk, 0, n0, int(hk), int(b), &full[s]);
      }
    return;
  }

  setmaxnreg_inc<240>();
  const int c = wg - 1, warp = tid / 32, lane = tid % 32, g = lane / 4, qd = lane % 4;
  const int64_t c0 = m0 + 64 * c, wrow = c0 + 16 * warp;
  const int64_t wlast = min(wrow + 15, last);
  const bool c_live = c0 <= last;
  const int64_t c_lo = c_live ? mask.lo(c0) : 0, c_hi = c_live ? mask.hi(min(c0 + 63, last)) : 0;
  const int64_t w_max_lo = mask.lo(wlast), w_min_hi = mask.hi(wrow);
  const int64_t row_lo[2] = {mask.lo(wrow + g), mask.lo(wrow + g + 8)};
  const int64_t row_hi[2] = {mask.hi(wrow + g), mask.hi(wrow + g + 8)};
  // ldmatrix.trans row addresses in box c: lane l serves matrix l / 8 (keys
  // + 8 (l / 16), queries + 8 (l / 8 % 2) of the warp's 16), row (key) l % 8;
  // 16-byte chunk (query / 8) ^ (key % 8), the 128-byte swizzle
  const uint32_t a_off = uint32_t((8 * (lane / 16) + lane % 8) * 128 +
                                  (((2 * warp + lane / 8 % 2) ^ (lane % 8)) << 4));

  float acc[D / 8][4] = {};
  for (int t = 0; t < tiles; ++t) {
    const int s = t % kDsStages;
    const int64_t n0 = kv_lo + int64_t(t) * BN;
    mbar_wait(&full[s], (t / kDsStages) & 1);
    if (c_live && n0 < c_hi && n0 + BN > c_lo) {  // consumer-uniform
      const T* st = ring + 3 * s * BN * 64;
      const uint32_t box = smem_addr(st + c * BN * 64) + a_off;
      uint32_t da[BN / 16][4];
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) ldsm_x4<true>(da[kk], box + kk * 16 * 128);
      if (!(n0 >= w_max_lo && n0 + BN <= w_min_hi)) {  // the tile crosses this warp's band edge
#pragma unroll
        for (int kk = 0; kk < BN / 16; ++kk)
#pragma unroll
          for (int i = 0; i < 4; ++i) {  // register i: row g + 8 (i % 2), keys + 8 (i / 2)
            const int r = i % 2;
            const int64_t j = n0 + 16 * kk + 8 * (i / 2) + 2 * qd;
            const uint32_t keep = (j >= row_lo[r] && j < row_hi[r] ? 0xFFFFu : 0u) |
                                  (j + 1 >= row_lo[r] && j + 1 < row_hi[r] ? 0xFFFF0000u : 0u);
            da[kk][i] &= keep;
          }
      }
      wgmma_pin(reinterpret_cast<float(&)[D / 2]>(acc));
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk)  // keys 16kk.. are rows 16kk.. of K
        wgmma_rs<T, D, true>(reinterpret_cast<float(&)[D / 2]>(acc), da[kk],
                             wgmma_desc_mn(st + 2 * BN * 64 + kk * 16 * 64, BN * 64 * sizeof(T)));
      wgmma_commit();
      wgmma_wait<0>();
      wgmma_pin(reinterpret_cast<float(&)[D / 2]>(acc));
    }
    __syncwarp();  // every lane's ldmatrix and wgmma reading stage s have completed
    if (lane == 0) mbar_arrive(&empty[s]);
  }

  store_dq<T, D>(acc, in_box(sout, 64 * c + 16 * warp), a, b, h, seq.q0, wrow, last, lane);
#endif
}

template <class T, int D>
__global__ void __launch_bounds__(kThreads3, 1)
attention_dq_wgmma_kernel(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tg,
                          const __grid_constant__ CUtensorMap tk, const __grid_constant__ CUtensorMap tv,
                          const Bwd<T> a, int64_t q_tiles) {
  pdl_start();
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int BM = kBwdRows, BN = kBwdTile, kBoxes = D / 64;
  extern __shared__ unsigned char smem_raw[];
  T* sq = align_1k<T>(smem_raw);  // Q [kBoxes][BM][64]; at the end dQ
  T* sg = sq + BM * D;            // dO, the same
  T* skv = sg + BM * D;           // stage s: K at skv + 2 s BN D, V right after
  __shared__ __align__(8) uint64_t q_full, full[kStages], empty[kStages], tail_full;

  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  const int64_t id = blockIdx.x, bh = id / q_tiles, m0 = (q_tiles - 1 - id % q_tiles) * BM;
  const int64_t h = bh % a.heads_q, b = bh / a.heads_q, hk = h / a.group;
  const AttentionSeq seq = a.seqs.seq(b);
  if (m0 >= seq.len_q) return;  // past this (varlen) sequence
  const int64_t last = min(m0 + BM, seq.len_q) - 1;
  const AttentionMask& mask = seq.mask;
  const int64_t kv_lo = mask.lo(m0), kv_hi = mask.hi(last);
  const int tiles = kv_lo < kv_hi ? int((kv_hi - kv_lo + BN - 1) / BN) : 0;
  // TMA coordinates as the forward's (a varlen batch is one packed tensor)
  const int tb = a.seqs.cu_q ? 0 : int(b), tq0 = int(seq.q0 + m0), tk0 = int(seq.k0 + kv_lo);

  if (threadIdx.x == 0) {
    mbar_init(&q_full, 1);
    for (int s = 0; s < kStages; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], 8);
    mbar_init(&tail_full, 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {  // producer
    setmaxnreg_dec<24>();
    // The forward's `part`, for K: S and dP over the next varlen sequence's
    // rows are masked by dq_grads' select (dS = 0 whatever they were), but
    // dQ += dS K multiplies those zeros by the rows of K, and 0 x inf = NaN.
    // V's need nothing (only dP reads V).
    const int64_t n_last = kv_lo + int64_t(tiles - 1) * BN;  // the last tile's first key
    const bool part = a.seqs.cu_q && n_last + BN > seq.len_k;
    if (tid < 32 && tiles > 0) {
      if (tid == 0) {
        mbar_expect_bytes(&q_full, 2 * BM * D * sizeof(T));
#pragma unroll
        for (int x = 0; x < kBoxes; ++x) {
          tma_load_4d(sq + x * BM * 64, &tq, 64 * x, tq0, int(h), tb, &q_full);
          tma_load_4d(sg + x * BM * 64, &tg, 64 * x, tq0, int(h), tb, &q_full);
        }
      }
      kv_ring<T, BN, D, true>(&tk, &tv, skv, KvBars{full, full, empty, empty, &tail_full}, tiles, tk0, int(hk),
                              tb, part, int(seq.len_k - n_last), tid);
    }
    return;
  }

  setmaxnreg_inc<240>();
  const int c = wg - 1, warp = tid / 32, lane = tid % 32, g = lane / 4, qd = lane % 4;
  const int64_t c0 = m0 + 64 * c, wrow = c0 + 16 * warp;  // the consumer's and the warp's first rows
  const int64_t wlast = min(wrow + 15, last);
  const bool c_live = c0 <= last;
  const int64_t c_lo = c_live ? mask.lo(c0) : 0, c_hi = c_live ? mask.hi(min(c0 + 63, last)) : 0;
  const int64_t w_max_lo = mask.lo(wlast), w_min_hi = mask.hi(wrow);
  const int64_t row_lo[2] = {mask.lo(wrow + g), mask.lo(wrow + g + 8)};
  const int64_t row_hi[2] = {mask.hi(wrow + g), mask.hi(wrow + g + 8)};
  // this thread's rows' lse log2(e) and delta (rows past the sequence: P = 0)
  float rl[2], rd[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t i = wrow + g + 8 * r;
    rl[r] = i <= last ? a.lse[bh * a.seqlen_q + i] * kLog2e : INFINITY;
    rd[r] = i <= last ? a.delta[bh * a.seqlen_q + i] : 0.f;
  }

  float acc[D / 8][4] = {};  // dQ: d tile nt, rows g / g + 8, columns 2qd, 2qd + 1
  if (tiles > 0) mbar_wait(&q_full, 0);  // also before the epilogue overwrites Q: the copy has landed
  const T* q_rows = sq + 64 * c * 64;  // this consumer's rows of box 0
  const T* g_rows = sg + 64 * c * 64;
  const Turns turn{c, tiles > 0, true};  // S and dP in turns
  turn.start();
  for (int t = 0; t < tiles; ++t) {
    const int s = t % kStages;
    const int64_t n0 = kv_lo + int64_t(t) * BN;
    mbar_wait(&full[s], (t / kStages) & 1);
    turn.mine();
    if (!(c_live && n0 < c_hi && n0 + BN > c_lo)) {  // consumer-uniform
      turn.yours();
    } else {
      const T* sk = skv + 2 * s * BN * D;
      const T* sv = sk + BN * D;
      float sacc[BN / 8][4], dpacc[BN / 8][4];
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)  // 16 columns of box kk / 4
        wgmma_ss<T, BN, false, false>(reinterpret_cast<float(&)[BN / 2]>(sacc),
                                      wgmma_desc(q_rows + (kk / 4) * BM * 64 + kk % 4 * 16),
                                      wgmma_desc(sk + (kk / 4) * BN * 64 + kk % 4 * 16), kk > 0);
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
        wgmma_ss<T, BN, false, false>(reinterpret_cast<float(&)[BN / 2]>(dpacc),
                                      wgmma_desc(g_rows + (kk / 4) * BM * 64 + kk % 4 * 16),
                                      wgmma_desc(sv + (kk / 4) * BN * 64 + kk % 4 * 16), kk > 0);
      wgmma_commit();
      turn.yours();
      wgmma_wait<0>();
      wgmma_pin(reinterpret_cast<float(&)[BN / 2]>(sacc));
      wgmma_pin(reinterpret_cast<float(&)[BN / 2]>(dpacc));

      dq_grads<BN>(sacc, dpacc, a.logit, !(n0 >= w_max_lo && n0 + BN <= w_min_hi), row_lo, row_hi, n0, qd, rl,
                   rd);

      uint32_t da[BN / 16][4];
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) p_fragment<T, BN>(da[kk], dpacc, kk);
      wgmma_pin(reinterpret_cast<float(&)[D / 2]>(acc));
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk)  // keys 16kk.. are rows 16kk.. of every K box
        wgmma_rs<T, D, true>(reinterpret_cast<float(&)[D / 2]>(acc), da[kk],
                             wgmma_desc_mn(sk + kk * 16 * 64, BN * 64 * sizeof(T)));
      wgmma_commit();
      wgmma_wait<0>();
      wgmma_pin(reinterpret_cast<float(&)[D / 2]>(acc));
    }
    __syncwarp();  // every lane's wgmma reading stage s has completed
    if (lane == 0) mbar_arrive(&empty[s]);
  }
  turn.finish();

  // through the Q tile: its consumer's reads of the warp's rows ended with its last wgmma
  store_dq<T, D>(acc, in_box(sq, 64 * c + 16 * warp), a, b, h, seq.q0, wrow, last, lane);
#endif
}

// Adds `bytes` (a multiple of 16) of floats from shared `src` into global
// `dst` element by element, the L2 doing the adds: one bulk copy (FA3's dQ).
__device__ __forceinline__ void bulk_reduce_add(float* dst, const float* src, uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(dst),
               "r"(smem_addr(src)), "r"(bytes)
               : "memory");
}

// The accumulator's layout: row R's 16-byte chunk x (columns 16 (x / 4) +
// 2 (x % 4) + {0, 1} and the same + 8: a thread's two fragments, see add_dq)
// sits at chunk x ^ f(R % 8), f rotating R's low 3 bits (r0 r2 r1), so that
// each 8 lanes of a fragment store (rows g, g + 1, 4 chunks each: shared
// memory serves 16-byte stores 8 lanes a pass) land on 8 bank groups. x ^ (R
// % 8) put rows g and g + 1 on the same 4 groups: 2 passes each, 15% of
// dkv's shared wavefronts in excess (ncu, D = 128). Its own inverse:
// attention_dq_acc_kernel undoes it with the same call.
__device__ __forceinline__ int acc_chunk(int x, int64_t row) {
  const int r = int(row & 7);
  return x ^ ((r & 1) << 2 | r >> 1);
}

// dkv's dQ on the accumulator path (kAcc), consumer c: dQ [64 queries][D] =
// dS K over its 64 keys, dS read as wgmma's m-major A out of the dS^T box
// (the transpose bit) and K n-major, then the float32 tile through `stage`
// (acc_chunk's layout) into accumulator rows row0.. (`rows` of them) by one
// bulk add. dQ's scale comes in attention_dq_acc_kernel.
template <class T, int D>
__device__ __forceinline__ void add_dq(const T* box, const T* k_rows, float* stage, float* acc, int64_t row0, int rows,
                                       int c, int warp, int lane, int tid) {
  float dq[D / 8][4];
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)  // keys 16kk.. are the box's rows 16kk.. and K's
    wgmma_ss<T, D, true, true>(reinterpret_cast<float(&)[D / 2]>(dq), wgmma_desc_mn(box + kk * 16 * 64, 64 * 64 * sizeof(T)),
                               wgmma_desc_mn(k_rows + kk * 16 * 64, kBwdRows * 64 * sizeof(T)), kk > 0);
  wgmma_commit();
  wgmma_wait<0>();
  wgmma_pin(reinterpret_cast<float(&)[D / 2]>(dq));
  const int g = lane / 4, qd = lane % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = 16 * warp + g + 8 * h;
#pragma unroll
    for (int j = 0; j < D / 16; ++j)
      *reinterpret_cast<float4*>(stage + r * D + 4 * acc_chunk(4 * j + qd, row0 + r)) =
          make_float4(dq[2 * j][2 * h], dq[2 * j][2 * h + 1], dq[2 * j + 1][2 * h], dq[2 * j + 1][2 * h + 1]);
  }
  fence_async_shared();  // before the bulk copy (async proxy) reads them
  named_barrier(3 + c, 128);
  if (tid == 0 && rows > 0) {
    bulk_reduce_add(acc + row0 * D, stage, uint32_t(rows) * D * sizeof(float));
    bulk_commit();
  }
}

template <class T, int D, bool kAcc>
__global__ void __launch_bounds__(kThreads3, 1)
attention_dkv_wgmma_kernel(const __grid_constant__ CUtensorMap tk, const __grid_constant__ CUtensorMap tv,
                           const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tg,
                           const __grid_constant__ CUtensorMap tds, const Bwd<T> a, int64_t k_tiles) {
  pdl_start();
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int BN = kBwdRows, BM = kBwdTile, kBoxes = D / 64;
  extern __shared__ unsigned char smem_raw[];
  T* sk = align_1k<T>(smem_raw);  // K [kBoxes][BN][64]; at the end dK
  T* sv = sk + BN * D;            // V, the same; at the end dV
  T* sqg = sv + BN * D;           // stage s: Q at sqg + 2 s BM D, dO right after
  float* sl = reinterpret_cast<float*>(sqg + 2 * kStages * BM * D);  // stage s: lse log2(e) at sl + 2 s BM, delta after
  T* sds = reinterpret_cast<T*>(sl + 2 * kStages * BM);  // the dS boxes, 2 a consumer (on 1 KiB: sl's 1 KiB follows 1 KiB multiples)
  __shared__ __align__(8) uint64_t kv_full, full[kStages], empty[kStages], tail_full;

  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  const int64_t id = blockIdx.x, bg = id / k_tiles, n0 = id % k_tiles * BN;
  const int64_t hk = bg % a.heads_kv, b = bg / a.heads_kv;
  const AttentionSeq seq = a.seqs.seq(b);
  if (n0 >= seq.len_k) return;  // past this (varlen) sequence's keys
  const int64_t klast = min(n0 + BN, seq.len_k) - 1;
  const AttentionMask& mask = seq.mask;
  // q_lo and q_hi are monotone in j: the block's queries are [q_lo(n0), q_hi(klast)), per query head.
  // The tiles start on a multiple of 8 queries: the dS path's TMA store of a
  // box must start on 16 bytes (an odd start: "illegal instruction", H200),
  // and a packed (varlen) sequence tiles as it does alone, for the same bits.
  // The up to 7 rows added in front are outside the band, masked like any.
  const int64_t qb_lo = mask.q_lo(n0) / 8 * 8, qb_hi = mask.q_hi(klast);
  // Query tiles per head (32-bit: seqlen_q < 2^31, the blocker's rule); the
  // ring walks tiles = group x q_tiles of them, head by head.
  const int q_tiles = qb_lo < qb_hi ? int((qb_hi - qb_lo + BM - 1) / BM) : 0;
  const int64_t tiles = a.group * q_tiles;
  const int tb = a.seqs.cu_q ? 0 : int(b), tk0 = int(seq.k0 + n0);

  if (threadIdx.x == 0) {
    mbar_init(&kv_full, 1);
    for (int s = 0; s < kStages; ++s) mbar_init(&full[s], 1 + 32), mbar_init(&empty[s], 8);
    mbar_init(&tail_full, 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {  // producer: thread 0 issues the copies, its warp loads lse and delta
    setmaxnreg_dec<24>();
    if (tid < 32 && tiles > 0) {
      if (tid == 0) {
        mbar_expect_bytes(&kv_full, 2 * BN * D * sizeof(T));
#pragma unroll
        for (int x = 0; x < kBoxes; ++x) {
          tma_load_4d(sk + x * BN * 64, &tk, 64 * x, tk0, int(hk), tb, &kv_full);
          tma_load_4d(sv + x * BN * 64, &tv, 64 * x, tk0, int(hk), tb, &kv_full);
        }
      }
      // Query tile qt of head h: rows qb_lo + qt BM..; rows past the sequence:
      // lse = +inf (P = 0), delta = 0. The ring's stage s, the parity of its
      // current use, and whether it held an earlier tile (whose release by
      // `empty` the copies must wait for).
      //
      // A varlen sequence's last tile of each head can hold the next
      // sequence's rows of Q and dO (`part`, as the forward's). S^T and
      // dP^T there are masked by dkv_grads' select (P^T = dS^T = 0 whatever
      // they were), but dV += P^T dO and dK += dS^T Q multiply those zeros by
      // the rows of dO and Q, and 0 x inf = NaN. This warp zeroes them before
      // the consumers see the stage: that tile's copies complete on
      // `tail_full` instead of full[s], the lanes wait for them, store zeros
      // over rows len_q - m0.., fence, and arrive on full[s] (thread 0 twice,
      // for the expect_tx arrival it did not make). Here and not in the
      // consumers: their loop is at its register limit (a conditional
      // zeroing and barrier there spilled 28 bytes at D = 128, ptxas), while
      // this warp waits one copy's latency once a head, a stage ahead of them.
      int s = 0, phase = 0, tail_phase = 0;
      bool reuse = false;
      for (int64_t h = hk * a.group; h < (hk + 1) * a.group; ++h)
        for (int qt = 0; qt < q_tiles; ++qt) {
          const int64_t m0 = qb_lo + int64_t(qt) * BM;
          const bool part = a.seqs.cu_q && m0 + BM > seq.len_q;  // only the last tile can be
          if (reuse) mbar_wait(&empty[s], phase ^ 1);  // every lane: each stores into the stage below
          T* dst = sqg + 2 * s * BM * D;  // Q, then dO
          if (tid == 0) {
            uint64_t* landed = part ? &tail_full : &full[s];
            mbar_expect_bytes(landed, 2 * BM * D * sizeof(T));
#pragma unroll
            for (int x = 0; x < kBoxes; ++x) {
              tma_load_4d(dst + x * BM * 64, &tq, 64 * x, int(seq.q0 + m0), int(h), tb, landed);
              tma_load_4d(dst + BM * D + x * BM * 64, &tg, 64 * x, int(seq.q0 + m0), int(h), tb, landed);
            }
          }
          float* l = sl + 2 * s * BM;
          const int64_t row0 = (b * a.heads_q + h) * a.seqlen_q;  // lse / delta index of query 0
#pragma unroll
          for (int r = tid; r < BM; r += 32) {
            const int64_t i = m0 + r;
            const bool in = i < seq.len_q;
            l[r] = in ? a.lse[row0 + i] * kLog2e : INFINITY;
            l[BM + r] = in ? a.delta[row0 + i] : 0.f;
          }
          if (part) {  // warp-uniform
            mbar_wait(&tail_full, tail_phase);
            __syncwarp();  // every lane past this phase before thread 0 can start the next (next head's)
            tail_phase ^= 1;
            const int from = int(seq.len_q - m0);  // 1..63
            zero_rows<T, BM, D>(dst, from, tid, 32);
            zero_rows<T, BM, D>(dst + BM * D, from, tid, 32);
            fence_async_shared();  // before the consumers' wgmma (async proxy) reads them
            if (tid == 0) mbar_arrive(&full[s]);
          }
          mbar_arrive(&full[s]);  // release: these stores are seen by whoever waits on full[s]
          if (++s == kStages) s = 0, phase ^= 1, reuse = true;
        }
    }
    return;
  }

  setmaxnreg_inc<240>();
  const int c = wg - 1, warp = tid / 32, lane = tid % 32, g = lane / 4, qd = lane % 4;
  const int64_t c0 = n0 + 64 * c, wk = c0 + 16 * warp;  // the consumer's and the warp's first keys
  const int64_t wlast = min(wk + 15, klast);
  // Query positions from here on are relative to qb_lo, in 32 bits (the
  // registers go to dK and dV): every band lies in [0, seqlen_q], below 2^31.
  const bool c_live = c0 <= klast;
  const auto rel = [&](int64_t i) { return int(i - qb_lo); };
  const int c_lo = c_live ? rel(mask.q_lo(c0)) : 0, c_hi = c_live ? rel(mask.q_hi(min(c0 + 63, klast))) : 0;
  const int w_max_lo = rel(mask.q_lo(wlast)), w_min_hi = rel(mask.q_hi(wk));
  const int row_lo[2] = {rel(mask.q_lo(wk + g)), rel(mask.q_lo(wk + g + 8))};
  const int row_hi[2] = {rel(mask.q_hi(wk + g)), rel(mask.q_hi(wk + g + 8))};

  float dv[D / 8][4] = {}, dk[D / 8][4] = {};  // d tile nt, key rows g / g + 8, columns 2qd, 2qd + 1
  if (tiles > 0) mbar_wait(&kv_full, 0);  // also before the epilogue overwrites K and V
  if constexpr (kAcc) {
    // dQ += dS K sums over this consumer's keys, also those past the
    // sequence's last key, whose rows of K and V hold TMA's zeros at a
    // tensor's end but, in a packed (varlen) batch, the next sequence's keys.
    // dkv_grads does not mask those keys (their dK, dV rows are never
    // stored), so there an inf in V would make dS^T inf, and an inf in K
    // dS x K NaN. Both zeroed here, once: then S^T = dP^T = 0 and dS^T is
    // finite, times K's zeros.
    const int from = int(klast + 1 - c0);
    if (a.seqs.cu_q && tiles > 0 && c_live && from < 64) {
#pragma unroll
      for (int x = 0; x < 2 * kBoxes; ++x)  // K's boxes, then V's (sv = sk + BN D)
        for (int j = from * 8 + tid; j < 64 * 8; j += 128)  // row r: bytes [128 r, 128 r + 128) of a box
          reinterpret_cast<uint4*>(sk + x * BN * 64 + 64 * c * 64)[j] = make_uint4(0, 0, 0, 0);
      fence_async_shared();
      named_barrier(3 + c, 128);
    }
  }
  // kAcc: this consumer's dQ tile on its way to the accumulator
  float* stage = reinterpret_cast<float*>(sds + 4 * 64 * 64) + c * 64 * D;
  const T* k_rows = sk + 64 * c * 64;  // this consumer's keys of box 0
  const T* v_rows = sv + 64 * c * 64;
  // the producer's walk: stage s, its use's parity, the tile's query head
  // (of the group) and first query m0 (relative); u: dS^T boxes stored
  int s = 0, phase = 0, qt = 0, hq = 0, u = 0;
  const Turns turn{c, tiles > 0, D <= 64};  // S^T and dP^T in turns (D = 64)
  turn.start();
  for (int64_t t = 0; t < tiles; ++t) {
    const int m0 = qt * BM;
    mbar_wait(&full[s], phase);
    turn.mine();
    if (!(c_live && m0 < c_hi && m0 + BM > c_lo)) {  // consumer-uniform
      turn.yours();
    } else {
      const T* sq = sqg + 2 * s * BM * D;
      const T* sg = sq + BM * D;
      const float* lse2 = sl + 2 * s * BM;
      float st[BM / 8][4], dpt[BM / 8][4];  // [nt]: queries 8nt.., key rows g / g + 8, queries 2qd, 2qd + 1
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
        wgmma_ss<T, BM, false, false>(reinterpret_cast<float(&)[BM / 2]>(st),
                                      wgmma_desc(k_rows + (kk / 4) * BN * 64 + kk % 4 * 16),
                                      wgmma_desc(sq + (kk / 4) * BM * 64 + kk % 4 * 16), kk > 0);
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
        wgmma_ss<T, BM, false, false>(reinterpret_cast<float(&)[BM / 2]>(dpt),
                                      wgmma_desc(v_rows + (kk / 4) * BN * 64 + kk % 4 * 16),
                                      wgmma_desc(sg + (kk / 4) * BM * 64 + kk % 4 * 16), kk > 0);
      wgmma_commit();
      turn.yours();
      wgmma_wait<0>();
      wgmma_pin(reinterpret_cast<float(&)[BM / 2]>(st));
      wgmma_pin(reinterpret_cast<float(&)[BM / 2]>(dpt));

      dkv_grads<BM, D <= 64>(st, dpt, a.logit, !(m0 >= w_max_lo && m0 + BM <= w_min_hi), row_lo, row_hi, m0, qd,
                             lse2, lse2 + BM);

      uint32_t pa[BM / 16][4], da[BM / 16][4];
#pragma unroll
      for (int kk = 0; kk < BM / 16; ++kk) p_fragment<T, BM>(pa[kk], st, kk), p_fragment<T, BM>(da[kk], dpt, kk);
      if constexpr (D <= 64 && !kAcc)
        if (a.ds) {  // dS^T out: this warp's 16 keys into box u % 2 (stmatrix, TMA's swizzle), then one TMA store
          T* box = sds + (2 * c + (u & 1)) * 64 * 64;
          const uint32_t at0 = swizzled_x4_base(box, warp, lane);
#pragma unroll
          for (int kk = 0; kk < BM / 16; ++kk) stsm_x4(at0 ^ uint32_t(2 * kk << 4), da[kk]);
          fence_async_shared();
          // the box's previous store (two tiles ago) finished reading it before
          // the last tile's barrier; this one's waits for the last tile's store
          if (tid == 0) bulk_wait_read<0>();
          named_barrier(3 + c, 128);
          if (tid == 0) {
            tma_store_3d(&tds, box, int(qb_lo + m0), int(c0), int(b * a.heads_q + hk * a.group + hq));
            bulk_commit();
          }
          ++u;
        }
      // kAcc: dS^T into box u % 2 as the dS path stores it, for dQ = dS K
      // below (the box of two tiles ago: every warp's wgmma reading it
      // completed before the last tile's barrier)
      [[maybe_unused]] T* box = sds + (2 * c + (u & 1)) * 64 * 64;
      if constexpr (kAcc) {
        const uint32_t at0 = swizzled_x4_base(box, warp, lane);
#pragma unroll
        for (int kk = 0; kk < BM / 16; ++kk) stsm_x4(at0 ^ uint32_t(2 * kk << 4), da[kk]);
        fence_async_shared();
        if (tid == 0) bulk_wait_read<0>();  // the last tile's dQ add has read `stage`
        named_barrier(3 + c, 128);
        ++u;
      }
      wgmma_pin(reinterpret_cast<float(&)[D / 2]>(dv));
      wgmma_pin(reinterpret_cast<float(&)[D / 2]>(dk));
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BM / 16; ++kk) {  // queries 16kk.. are rows 16kk.. of every dO and Q box
        wgmma_rs<T, D, true>(reinterpret_cast<float(&)[D / 2]>(dv), pa[kk],
                             wgmma_desc_mn(sg + kk * 16 * 64, BM * 64 * sizeof(T)));
        wgmma_rs<T, D, true>(reinterpret_cast<float(&)[D / 2]>(dk), da[kk],
                             wgmma_desc_mn(sq + kk * 16 * 64, BM * 64 * sizeof(T)));
      }
      wgmma_commit();
      wgmma_wait<0>();
      wgmma_pin(reinterpret_cast<float(&)[D / 2]>(dv));
      wgmma_pin(reinterpret_cast<float(&)[D / 2]>(dk));
      if constexpr (kAcc) {
        const int64_t h = hk * a.group + hq, i = qb_lo + m0;  // the tile's query head and first query
        const int64_t row0 = (a.seqs.cu_q ? h * a.seqs.total_q + seq.q0 : (b * a.heads_q + h) * a.seqlen_q) + i;
        add_dq<T, D>(box, k_rows, stage, a.dq_acc, row0, int(min(int64_t(BM), seq.len_q - i)), c, warp, lane, tid);
      }
    }
    __syncwarp();  // every lane's wgmma and lse/delta reads of stage s are done
    if (lane == 0) mbar_arrive(&empty[s]);
    if (++qt == q_tiles) qt = 0, ++hq;
    if (++s == kStages) s = 0, phase ^= 1;
  }
  turn.finish();
  if (tid == 0 && u > 0) bulk_wait_all();  // the dS^T stores, before the block's shared memory goes

  // dK = scale dK, dV through this warp's own 16 rows of the K and V tiles,
  // then 16-byte stores.
  const int rw = 64 * c + 16 * warp;
#pragma unroll
  for (int nt = 0; nt < D / 8; ++nt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int off = swizzled<BN>(rw + g + 8 * r, nt * 8 + 2 * qd);
      *reinterpret_cast<uint32_t*>(sk + off) = pack2<T>(dk[nt][2 * r] * a.scale, dk[nt][2 * r + 1] * a.scale);
      *reinterpret_cast<uint32_t*>(sv + off) = pack2<T>(dv[nt][2 * r], dv[nt][2 * r + 1]);
    }
  __syncwarp();
#pragma unroll
  for (int i = lane; i < 16 * (D / 8); i += 32) {
    const int r = i / (D / 8), col = i % (D / 8) * 8;
    if (wk + r <= klast && col < a.head_dim) {
      const int off = swizzled<BN>(rw + r, col);
      *reinterpret_cast<uint4*>(at(a.gk, a.gks, b, seq.k0 + wk + r, hk) + col) =
          *reinterpret_cast<const uint4*>(sk + off);
      *reinterpret_cast<uint4*>(at(a.gv, a.gvs, b, seq.k0 + wk + r, hk) + col) =
          *reinterpret_cast<const uint4*>(sv + off);
    }
  }
#endif
}

// dQ = scale x the accumulator on the accumulator path: row R of it is query
// i of head h in batch b ((b heads_q + h) seqlen_q + i), or packed row i of
// head h (h total_q + i) in a varlen batch; a thread per 16-byte chunk
// (acc_chunk's layout, its own inverse), two column pairs of grad_q each.
template <class T, int D>
__global__ void __launch_bounds__(256) attention_dq_acc_kernel(const Bwd<T> a, int64_t rows) {
  pdl_start();
  constexpr int kChunks = D / 4;
  const float4* acc = reinterpret_cast<const float4*>(a.dq_acc);
  for (int64_t t = blockIdx.x * int64_t(256) + threadIdx.x; t < rows * kChunks; t += int64_t(gridDim.x) * 256) {
    const int64_t r = t / kChunks;
    const int x = acc_chunk(int(t % kChunks), r), col = 16 * (x / 4) + 2 * (x % 4);
    int64_t b = 0, i, h;
    if (a.seqs.cu_q) {
      h = r / a.seqs.total_q, i = r % a.seqs.total_q;
    } else {
      const int64_t bh = r / a.seqlen_q;
      i = r % a.seqlen_q, h = bh % a.heads_q, b = bh / a.heads_q;
    }
    const float4 v = acc[t];
    T* out = at(a.gq, a.gqs, b, i, h);
    if (col < a.head_dim) *reinterpret_cast<uint32_t*>(out + col) = pack2<T>(v.x * a.scale, v.y * a.scale);
    if (col + 8 < a.head_dim) *reinterpret_cast<uint32_t*>(out + col + 8) = pack2<T>(v.z * a.scale, v.w * a.scale);
  }
}

// Why the wgmma backward cannot run this problem (beyond fa2::bwd_blocker's
// rules, which it shares), or nullptr when it can.
template <class T>
const char* bwd_blocker(const tc_flash_attention_backward_params* p) {
  int dev = 0;
  if (!hopper_runs<attention_dq_wgmma_kernel<T, 128>>(&dev) ||
      !hopper_runs<attention_dkv_wgmma_kernel<T, 128, false>>(&dev))
    return "an sm_90 device and a build with sm_90a";
  if (p->seqlen_q > INT32_MAX || p->seqlen_k > INT32_MAX || p->heads_q > INT32_MAX || p->batch > INT32_MAX ||
      (p->cu_seqlens_q && (p->total_q > INT32_MAX || p->total_k > INT32_MAX)))
    return "sizes below 2^31 (TMA coordinates are 32-bit)";
  const size_t smem = p->head_dim <= 64 ? kDkvSmem<64> : kDkvSmem<128>;  // dkv's is the larger (kAcc's: the launcher)
  if (size_t(smem_optin()) < smem) return "more shared memory per block than this device allows";
  return nullptr;
}

// The tensor maps of both kernels: dq reads Q and dO in boxes of kBwdRows
// rows, K and V of kBwdTile; dkv the reverse.
struct BwdMaps {
  CUtensorMap q_rows, g_rows, k_rows, v_rows, q_tile, g_tile, k_tile, v_tile;
  CUtensorMap ds;  // the dS path's dS^T [batch heads_q][seqlen_k][ds_pitch] in [64 keys][64 queries] boxes
};

// false when TMA cannot describe one (AUTO then runs mma). Both sides have rows
// (the caller's rule): a map of zero rows does not exist.
template <class T>
bool bwd_maps(BwdMaps* m, const Bwd<T>& a) {
  const bool varlen = a.seqs.cu_q;  // one packed tensor of total rows
  const int64_t rows_q = varlen ? a.seqs.total_q : a.seqlen_q, rows_k = varlen ? a.seqs.total_k : a.seqlen_k,
                batch = varlen ? 1 : a.batch;
  return tensor_map(&m->q_rows, a.q, a.qs, rows_q, a.heads_q, batch, a.head_dim, kBwdRows) &&
         tensor_map(&m->g_rows, a.go, a.gos, rows_q, a.heads_q, batch, a.head_dim, kBwdRows) &&
         tensor_map(&m->q_tile, a.q, a.qs, rows_q, a.heads_q, batch, a.head_dim, kBwdTile) &&
         tensor_map(&m->g_tile, a.go, a.gos, rows_q, a.heads_q, batch, a.head_dim, kBwdTile) &&
         tensor_map(&m->k_rows, a.k, a.ks, rows_k, a.heads_kv, batch, a.head_dim, kBwdRows) &&
         tensor_map(&m->v_rows, a.v, a.vs, rows_k, a.heads_kv, batch, a.head_dim, kBwdRows) &&
         tensor_map(&m->k_tile, a.k, a.ks, rows_k, a.heads_kv, batch, a.head_dim, kBwdTile) &&
         tensor_map(&m->v_tile, a.v, a.vs, rows_k, a.heads_kv, batch, a.head_dim, kBwdTile);
}

// The dS path's map (a.ds set); false when TMA cannot describe it (the
// caller then leaves dS to dq).
template <class T>
bool ds_map(CUtensorMap* map, const Bwd<T>& a) {
  const int64_t pitch = a.ds_pitch;
  return tma_map<T, 3>(map, a.ds, {pitch, a.seqlen_k, a.batch * a.heads_q}, {pitch, a.seqlen_k * pitch},
                       {64, kBwdTile, 1});
}

// dq, then dkv (delta is in the workspace already); on the dS path (a.ds),
// dkv then dq from its dS; on the accumulator path (a.dq_acc, zeroed
// already), dkv with dQ, then dQ out of the accumulator.
template <class T, int D>
tc_status launch_backward(const char* op, const Bwd<T>& a, const BwdMaps& m, cudaStream_t stream) {
  const int64_t q_tiles = (a.seqlen_q + kBwdRows - 1) / kBwdRows, dq_blocks = a.batch * a.heads_q * q_tiles;
  const int64_t k_tiles = (a.seqlen_k + kBwdRows - 1) / kBwdRows, dkv_blocks = a.batch * a.heads_kv * k_tiles;
  TC_REQUIRE(dq_blocks <= INT32_MAX && dkv_blocks <= INT32_MAX,
             "%s: %lld (dq) and %lld (dkv) blocks of %d rows are too many for one launch", op, (long long)dq_blocks,
             (long long)dkv_blocks, kBwdRows);
  if (a.dq_acc) {  // dkv adds dQ into the accumulator (zeroed already), then dQ out of it
    auto dkv = attention_dkv_wgmma_kernel<T, D, true>;
    static std::atomic<uint64_t> dkv_set{0};
    TC_RETURN_IF_ERROR(smem_opt_in(op, dkv, kDkvSmem<D, true>, dkv_set));
    TC_RETURN_IF_ERROR(launch_pdl(op, dkv, unsigned(dkv_blocks), kThreads3, kDkvSmem<D, true>, stream, m.k_rows,
                                  m.v_rows, m.q_tile, m.g_tile, m.ds, a, k_tiles));
    const int64_t rows = a.heads_q * (a.seqs.cu_q ? a.seqs.total_q : a.batch * a.seqlen_q);
    return launch_pdl(op, attention_dq_acc_kernel<T, D>, grid_1d(rows * (D / 4), 256, 8192), 256, 0, stream, a, rows);
  }
  auto dkv = attention_dkv_wgmma_kernel<T, D, false>;
  static std::atomic<uint64_t> dkv_set{0};
  TC_RETURN_IF_ERROR(smem_opt_in(op, dkv, kDkvSmem<D>, dkv_set));
  if constexpr (D == 64) {
    if (a.ds) {
      auto dq = attention_dq_ds_kernel<T>;
      static std::atomic<uint64_t> dq_set{0};
      TC_RETURN_IF_ERROR(smem_opt_in(op, dq, kDqDsSmem, dq_set));
      TC_RETURN_IF_ERROR(launch_pdl(op, dkv, unsigned(dkv_blocks), kThreads3, kDkvSmem<D>, stream, m.k_rows, m.v_rows,
                                    m.q_tile, m.g_tile, m.ds, a, k_tiles));
      return launch_pdl(op, dq, unsigned(dq_blocks), kThreads3, kDqDsSmem, stream, m.ds, m.k_tile, a, q_tiles);
    }
  }
  auto dq = attention_dq_wgmma_kernel<T, D>;
  static std::atomic<uint64_t> dq_set{0};
  TC_RETURN_IF_ERROR(smem_opt_in(op, dq, kDqSmem<D>, dq_set));
  TC_RETURN_IF_ERROR(launch_pdl(op, dq, unsigned(dq_blocks), kThreads3, kDqSmem<D>, stream, m.q_rows, m.g_rows,
                                m.k_tile, m.v_tile, a, q_tiles));
  return launch_pdl(op, dkv, unsigned(dkv_blocks), kThreads3, kDkvSmem<D>, stream, m.k_rows, m.v_rows, m.q_tile,
                    m.g_tile, m.ds, a, k_tiles);
}
}  // namespace fa3

// ---------------------------------------------------------------------------
// SPLIT forward (flash-decoding): a few query rows against many keys. The
// rule, the cut and the workspace are plan::attention_split's
// (shared/flash_attention_plan.h, shared with the workspace query).
//
// attention_split_kernel: a warp per (unit, split), 4 splits of one unit a
// block; a unit is (b, kv head hk, chunk of up to kRows of the group's rows),
// group row r being query head hk * group + r / seqlen_q, query r % seqlen_q:
// a GQA group's heads share the warp, so each K/V row is read once for all
// of them. Lane l holds elements [l kPer, l kPer + kPer) (kPer = D / 32: 2 or
// 4) of each row's q and O accumulator and of each key's K and V row, loaded
// as one 4-16 byte vector (a warp reads a row's 128-256 bytes in one
// coalesced access). Keys [js, je) of the split in rounds of kSplitUnroll:
// the round's K and V rows are loaded first (8 keys in flight a warp), then
// per key the kRows dots (warp_reduce, independent chains) and the NAIVE
// kernel's online softmax for the rows that see the key. The split's partial
// O_s = acc / l and lse_s = m + log l (-inf, O_s = 0 for a row that sees none
// of its keys) go to the workspace, every (split, row) written.
// attention_combine_kernel: a warp per query row: lse = max + log sum exp
// (lse_s - max) (the lanes' strided partials, then warp_reduce's fixed
// butterfly), O = sum_s exp(lse_s - lse) O_s walked in split order: the same
// bits every run. No shared memory, no atomics.
namespace split {

constexpr int kWarps = 4;  // splits a block
constexpr int kUnroll = plan::kSplitUnroll;

// The plan as the kernels read it.
struct Plan {
  int64_t splits, chunk, kv_lo, kv_hi, row_chunks, rows_total, split_blocks, heads_kv;
  float* o;    // O_s: [splits][rows_total][D]
  float* lse;  // lse_s: [splits][rows_total]
};

template <class T, int D, int kRows>
__global__ void __launch_bounds__(kWarps * 32) attention_split_kernel(const Fwd<T> a, const Plan pl) {
  constexpr int kPer = D / 32;
  using V = Vec<T, kPer>;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t unit = blockIdx.x / pl.split_blocks, s = blockIdx.x % pl.split_blocks * kWarps + warp;
  if (s >= pl.splits) return;  // the last block's spare warps (nothing below syncs the block)
  const int64_t rc = unit % pl.row_chunks, bg = unit / pl.row_chunks, hk = bg % pl.heads_kv, b = bg / pl.heads_kv;
  const int64_t js = pl.kv_lo + s * pl.chunk, je = min(js + pl.chunk, pl.kv_hi);
  const int64_t group_rows = a.group * a.seqlen_q;
  const AttentionMask& mask = a.seqs.mask;

  // Row t: its q (pre-converted), and the keys of this split it sees as
  // offsets from js, [lo, hi) within [0, n) (empty for a row past the group's).
  // 32-bit offsets: the plan keeps chunk below 2^31.
  const int n = int(je - js);
  float q[kRows][kPer];
  int lo[kRows], hi[kRows];
#pragma unroll
  for (int t = 0; t < kRows; ++t) {
    const int64_t r = rc * kRows + t, h = hk * a.group + r / a.seqlen_q, i = r % a.seqlen_q;
    const bool valid = r < group_rows;
    lo[t] = valid ? int(min(max(mask.lo(i) - js, int64_t(0)), int64_t(n))) : 0;
    hi[t] = valid ? int(min(max(mask.hi(i) - js, int64_t(0)), int64_t(n))) : 0;
    V x{};
    if (valid) x = load_vec<T, kPer>(at(a.q, a.qs, b, i, h) + lane * kPer);
#pragma unroll
    for (int e = 0; e < kPer; ++e) q[t][e] = to_acc(x.v[e]);
  }

  float acc[kRows][kPer], m[kRows], l[kRows];
#pragma unroll
  for (int t = 0; t < kRows; ++t) {
    m[t] = -INFINITY, l[t] = 0.f;
#pragma unroll
    for (int e = 0; e < kPer; ++e) acc[t][e] = 0.f;
  }
  const int64_t ks = a.ks[1], vs = a.vs[1];
  const T* kp = at(a.k, a.ks, b, js, hk) + lane * kPer;  // key j0 of the round
  const T* vp = at(a.v, a.vs, b, js, hk) + lane * kPer;
  for (int j0 = 0; j0 < n; j0 += kUnroll, kp += kUnroll * ks, vp += kUnroll * vs) {
    V kx[kUnroll], vx[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (j0 + u < n) kx[u] = load_vec<T, kPer>(kp + u * ks), vx[u] = load_vec<T, kPer>(vp + u * vs);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int j = j0 + u;
      if (j >= n) break;  // warp-uniform, as every branch below
      float dot[kRows];
#pragma unroll
      for (int t = 0; t < kRows; ++t) {
        dot[t] = 0.f;
#pragma unroll
        for (int e = 0; e < kPer; ++e) dot[t] += q[t][e] * to_acc(kx[u].v[e]);
      }
#pragma unroll
      for (int t = 0; t < kRows; ++t) dot[t] = warp_reduce(dot[t], Sum{});  // every lane: the same bits
#pragma unroll
      for (int t = 0; t < kRows; ++t) {
        if (j < lo[t] || j >= hi[t]) continue;
        const float sc = a.logit(dot[t]);
        if (sc == -INFINITY) continue;  // weight 0 (a NaN goes on and poisons l, as in NAIVE)
        const float mn = fmaxf(m[t], sc);
        const float corr = ::exp(m[t] - mn), p = ::exp(sc - mn);  // m = -inf: corr = 0 (acc and l are 0)
        l[t] = l[t] * corr + p;
#pragma unroll
        for (int e = 0; e < kPer; ++e) acc[t][e] = acc[t][e] * corr + p * to_acc(vx[u].v[e]);
        m[t] = mn;
      }
    }
  }

#pragma unroll
  for (int t = 0; t < kRows; ++t) {
    const int64_t r = rc * kRows + t, h = hk * a.group + r / a.seqlen_q, i = r % a.seqlen_q;
    if (r >= group_rows) break;
    const int64_t row = (b * a.heads_q + h) * a.seqlen_q + i;  // lse's index
    const int64_t at_s = s * pl.rows_total + row;
    const float inv = l[t] == 0.f ? 0.f : 1.f / l[t];
    Vec<float, kPer> y;
#pragma unroll
    for (int e = 0; e < kPer; ++e) y.v[e] = acc[t][e] * inv;
    store_vec(pl.o + at_s * D + lane * kPer, y);
    if (lane == 0) pl.lse[at_s] = l[t] == 0.f ? -INFINITY : m[t] + ::log(l[t]);
  }
}

template <class T, int D>
__global__ void __launch_bounds__(kWarps * 32) attention_combine_kernel(const Fwd<T> a, const Plan pl) {
  constexpr int kPer = D / 32;
  const int lane = threadIdx.x % 32;
  for (int64_t r = blockIdx.x * int64_t(kWarps) + threadIdx.x / 32; r < pl.rows_total;
       r += int64_t(gridDim.x) * kWarps) {
    const int64_t i = r % a.seqlen_q, bh = r / a.seqlen_q, h = bh % a.heads_q, b = bh / a.heads_q;
    const float* ls = pl.lse + r;  // split s: ls[s * rows_total]
    float mx = -INFINITY;
    bool nan = false;
    for (int64_t s = lane; s < pl.splits; s += 32) {
      const float x = ls[s * pl.rows_total];
      mx = fmaxf(mx, x), nan |= x != x;
    }
    mx = warp_reduce(mx, Max{});
    Vec<float, kPer> y{};
    float lse = INFINITY;  // no key in any split: O = 0, lse = +inf
    if (__any_sync(0xffffffffu, nan)) {  // fmax skips NaN: a NaN partial makes the row NaN, as NAIVE's
      lse = NAN;
#pragma unroll
      for (int e = 0; e < kPer; ++e) y.v[e] = NAN;
    } else if (mx != -INFINITY) {
      float sum = 0.f;
      for (int64_t s = lane; s < pl.splits; s += 32) sum += ::exp(ls[s * pl.rows_total] - mx);
      lse = mx + ::log(warp_reduce(sum, Sum{}));
      const float* os = pl.o + r * D + lane * kPer;
#pragma unroll 4
      for (int64_t s = 0; s < pl.splits; ++s) {
        const float w = ::exp(ls[s * pl.rows_total] - lse);  // lse_s = -inf (O_s = 0): 0
        const Vec<float, kPer> x = load_vec<float, kPer>(os + s * pl.rows_total * D);
#pragma unroll
        for (int e = 0; e < kPer; ++e) y.v[e] += w * x.v[e];
      }
    }
    Vec<T, kPer> out;
#pragma unroll
    for (int e = 0; e < kPer; ++e) out.v[e] = from_acc<T>(y.v[e]);
    store_vec(at(a.o, a.os, b, i, h) + lane * kPer, out);
    if (lane == 0) a.lse[r] = lse;
  }
}

template <class T, int D>
tc_status launch(const char* op, const Fwd<T>& a, const plan::AttentionSplit& sp, void* workspace,
                 cudaStream_t stream) {
  Plan pl{sp.splits, sp.chunk, sp.kv_lo, sp.kv_hi, sp.row_chunks, sp.rows_total, (sp.splits + kWarps - 1) / kWarps,
          a.heads_q / a.group, static_cast<float*>(workspace),
          reinterpret_cast<float*>(static_cast<unsigned char*>(workspace) + sp.o_bytes)};
  const int64_t blocks = sp.units * pl.split_blocks;
  TC_REQUIRE(blocks <= INT32_MAX, "%s: %lld blocks of %d key splits are too many for one launch", op,
             (long long)blocks, kWarps);
  const unsigned grid = unsigned(blocks);
  switch (sp.rows) {
    case 1: attention_split_kernel<T, D, 1><<<grid, kWarps * 32, 0, stream>>>(a, pl); break;
    case 2: attention_split_kernel<T, D, 2><<<grid, kWarps * 32, 0, stream>>>(a, pl); break;
    case 4: attention_split_kernel<T, D, 4><<<grid, kWarps * 32, 0, stream>>>(a, pl); break;
    default: attention_split_kernel<T, D, plan::kSplitRows><<<grid, kWarps * 32, 0, stream>>>(a, pl); break;
  }
  TC_RETURN_IF_ERROR(check_launch(op));
  attention_combine_kernel<T, D><<<grid_1d(sp.rows_total, kWarps), kWarps * 32, 0, stream>>>(a, pl);
  return check_launch(op);
}

}  // namespace split

// ---------------------------------------------------------------------------
// NAIVE backward

// D_i = <dO_i, O_i> into the workspace: G lanes per (b, h, i) row (a row's
// head_dim over G lanes: 8 at d = 64), N elements a load (16 bytes where both
// rows allow it, else 1). Every backward runs it. A warp per row with 2-byte
// loads took 0.64 ms of GPT-2's 35.8 ms step (12 layers of 16384 x 12 x 64
// bf16, 50 MB each: 12 us at the H200's 4.2 TB/s).
template <class T, int N, int G>
__global__ void __launch_bounds__(256) attention_delta_kernel(const Bwd<T> a) {
  pdl_start();
  using A = acc_t<T>;
  constexpr int kRows = 256 / G;
  const int sub = threadIdx.x % G, D = int(a.head_dim);
  const int64_t rows = a.batch * a.heads_q * a.seqlen_q;
  for (int64_t r = blockIdx.x * int64_t(kRows) + threadIdx.x / G; r < rows; r += int64_t(gridDim.x) * kRows) {
    const int64_t i = r % a.seqlen_q, bh = r / a.seqlen_q, h = bh % a.heads_q, b = bh / a.heads_q;
    const AttentionSeq seq = a.seqs.seq(b);
    if (i >= seq.len_q) continue;  // uniform over the row's G lanes, which reduce on their own
    const T* oi = at(a.o, a.os, b, seq.q0 + i, h);
    const T* gi = at(a.go, a.gos, b, seq.q0 + i, h);
    A s = 0;
    for (int d = sub * N; d < D; d += G * N) {
      const Vec<T, N> o = load_vec<T, N>(oi + d), g = load_vec<T, N>(gi + d);
#pragma unroll
      for (int e = 0; e < N; ++e) s += A(to_acc(g.v[e])) * A(to_acc(o.v[e]));
    }
    s = warp_reduce<G>(s, Sum{});
    if (sub == 0) a.delta[r] = s;
  }
}

template <class T>
tc_status launch_delta(const char* op, const Bwd<T>& a, int64_t rows, cudaStream_t stream) {
  constexpr int N = 16 / sizeof(T);
  bool vec = a.head_dim % N == 0 && aligned16(a.o) && aligned16(a.go);
  for (int d = 0; d < 3; ++d) vec = vec && a.os[d] % N == 0 && a.gos[d] % N == 0;
  auto go = [&](auto n, auto g) {
    constexpr int kN = decltype(n)::value, kG = decltype(g)::value;
    return launch_pdl(op, attention_delta_kernel<T, kN, kG>, grid_1d(rows, 256 / kG, 8192), 256, 0, stream, a);
  };
  using I = std::integral_constant<int, 1>;
  if (!vec) return go(I{}, std::integral_constant<int, 32>{});
  using V = std::integral_constant<int, N>;
  if (a.head_dim <= 8 * N) return go(V{}, std::integral_constant<int, 8>{});
  if (a.head_dim <= 16 * N) return go(V{}, std::integral_constant<int, 16>{});
  return go(V{}, std::integral_constant<int, 32>{});
}

// dQ_i = scale sum_j dS'_ij K_j, a warp per (b, h, i) walking its keys in order.
template <class T, int kPer>
__global__ void __launch_bounds__(kWarps * 32) attention_dq_kernel(const Bwd<T> a) {
  using A = acc_t<T>;
  const int lane = threadIdx.x % 32, D = int(a.head_dim);
  const int64_t rows = a.batch * a.heads_q * a.seqlen_q;
  for (int64_t r = blockIdx.x * int64_t(kWarps) + threadIdx.x / 32; r < rows; r += int64_t(gridDim.x) * kWarps) {
    const int64_t i = r % a.seqlen_q, bh = r / a.seqlen_q, h = bh % a.heads_q, b = bh / a.heads_q;
    const AttentionSeq seq = a.seqs.seq(b);
    if (i >= seq.len_q) continue;
    const int64_t lo = seq.mask.lo(i), hi = seq.mask.hi(i);
    A dq[kPer];
#pragma unroll
    for (int k = 0; k < kPer; ++k) dq[k] = 0;
    const A lse_i = lo < hi ? a.lse[r] : A(INFINITY);
    if (lse_i != A(INFINITY)) {  // lse = +inf: the forward saw nothing, P = 0 everywhere
      const T* qi = at(a.q, a.qs, b, seq.q0 + i, h);
      const T* gi = at(a.go, a.gos, b, seq.q0 + i, h);
      A qv[kPer], gv[kPer];
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        const int d = lane + 32 * k;
        qv[k] = d < D ? A(to_acc(qi[d])) : A(0);
        gv[k] = d < D ? A(to_acc(gi[d])) : A(0);
      }
      const A di = a.delta[r];
      const int64_t g = h / a.group;
      const T* kj = at(a.k, a.ks, b, seq.k0 + lo, g);
      const T* vj = at(a.v, a.vs, b, seq.k0 + lo, g);
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
    T* dqi = at(a.gq, a.gqs, b, seq.q0 + i, h);
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
    const AttentionSeq seq = a.seqs.seq(b);
    if (j >= seq.len_k) continue;
    const int64_t qlo = seq.mask.q_lo(j), qhi = seq.mask.q_hi(j);
    A dk[kPer], dv[kPer];
#pragma unroll
    for (int k = 0; k < kPer; ++k) dk[k] = 0, dv[k] = 0;
    if (qlo < qhi) {  // q, grad_o, lse are read only here: with no query they may be NULL
      const T* kj = at(a.k, a.ks, b, seq.k0 + j, g);
      const T* vj = at(a.v, a.vs, b, seq.k0 + j, g);
      A kv[kPer], vv[kPer];
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        const int d = lane + 32 * k;
        kv[k] = d < D ? A(to_acc(kj[d])) : A(0);
        vv[k] = d < D ? A(to_acc(vj[d])) : A(0);
      }
      for (int64_t h = g * a.group; h < (g + 1) * a.group; ++h) {
        const int64_t row0 = (b * a.heads_q + h) * a.seqlen_q;  // lse / delta index of query 0
        const T* qi = at(a.q, a.qs, b, seq.q0 + qlo, h);
        const T* gi = at(a.go, a.gos, b, seq.q0 + qlo, h);
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
    T* dkj = at(a.gk, a.gks, b, seq.k0 + j, g);
    T* dvj = at(a.gv, a.gvs, b, seq.k0 + j, g);
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
  const int64_t rows = p->batch * p->heads_q * p->seqlen_q;
  if (rows == 0) return TC_OK;
  // AUTO with a few query rows and too few (b, kv head) pairs to fill the GPU: split the keys
  const plan::AttentionSplit sp = plan::attention_split(p);
  TC_REQUIRE(sp.splits == 0 || (p->workspace && p->workspace_bytes >= sp.total),
             "%s: workspace of %zu bytes needed (tc_flash_attention_workspace_size), %zu given", op, sp.total,
             p->workspace ? p->workspace_bytes : size_t(0));
  return dispatch_cuda(p->dtype, op, [&](auto tag) -> tc_status {
    using T = decltype(tag);
    const Fwd<T> a = Fwd<T>::of(p);
    cudaStream_t stream = as_stream(p->stream);
    if constexpr (!std::is_same_v<T, double>) {
      if (sp.splits > 0)  // head_dim is 64 or 128 (the plan's rule)
        return p->head_dim == 64 ? split::launch<T, 64>(op, a, sp, p->workspace, stream)
                                 : split::launch<T, 128>(op, a, sp, p->workspace, stream);
    }
    // head_dim 0 has no product to multiply, only lse (= log of the visible
    // key count): the naive kernel writes it without touching q, k or v.
    const char* why = p->head_dim == 0 ? nullptr : fa2::blocker<T>(p);
    TC_REQUIRE(!why || p->algo < TC_ATTENTION_MMA, "%s: algo %d (%s) needs %s (dtype %d, head_dim %lld)", op,
               int(p->algo), p->algo == TC_ATTENTION_MMA ? "mma" : "wgmma", why, int(p->dtype),
               (long long)p->head_dim);
    if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) {
      if (!why && p->head_dim > 0 && (p->algo == TC_ATTENTION_AUTO || p->algo == TC_ATTENTION_WGMMA)) {
        const char* no = fa3::blocker<T>(p);
        if (!no) {
          tc_status s = p->head_dim <= 64    ? fa3::launch<T, 64>(op, a, stream, &no)
                        : p->head_dim <= 128 ? fa3::launch<T, 128>(op, a, stream, &no)
                                             : fa3::launch<T, 256>(op, a, stream, &no);
          if (s != TC_OK || !no) return s;
        }
        TC_REQUIRE(p->algo != TC_ATTENTION_WGMMA, "%s: algo 3 (wgmma) needs %s", op, no);
      }
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
  return dispatch_cuda(p->dtype, op, [&](auto tag) -> tc_status {
    using T = decltype(tag);
    const char* why = fa2::bwd_blocker<T>(p);
    TC_REQUIRE(!why || p->algo < TC_ATTENTION_MMA, "%s: algo %d (%s) needs %s (dtype %d, head_dim %lld)", op,
               int(p->algo), p->algo == TC_ATTENTION_MMA ? "mma" : "wgmma", why, int(p->dtype),
               (long long)p->head_dim);
    TC_REQUIRE(!why || p->head_dim <= kMaxNaiveDim, "%s: head_dim must be <= %d on CUDA, got %lld", op,
               kMaxNaiveDim, (long long)p->head_dim);
    Bwd<T> a = Bwd<T>::of(p);
    cudaStream_t stream = as_stream(p->stream);
    const int64_t rows_q = p->batch * p->heads_q * p->seqlen_q, rows_k = p->batch * p->heads_kv * p->seqlen_k;
    // WGMMA (and AUTO where it runs): the wgmma backward at head_dim <= 128
    // when both sides have rows; head_dim above 128, or no query or no key row
    // (only zeros to write), runs MMA under WGMMA too. Decided (and WGMMA
    // refused) before anything is launched.
    fa3::BwdMaps maps{};
    bool wgmma = false;
    if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) {
      const bool packed_rows = !p->cu_seqlens_q || (p->total_q > 0 && p->total_k > 0);
      if (!why && (p->algo == TC_ATTENTION_AUTO || p->algo == TC_ATTENTION_WGMMA) && p->head_dim <= 128 &&
          rows_q > 0 && rows_k > 0 && packed_rows) {
        const char* no = fa3::bwd_blocker<T>(p);
        if (!no && !fa3::bwd_maps(&maps, a)) no = "q, k, v and grad_o that TMA can describe";
        TC_REQUIRE(!no || p->algo != TC_ATTENTION_WGMMA, "%s: algo 3 (wgmma) needs %s (head_dim %lld)", op, no,
                   (long long)p->head_dim);
        wgmma = !no;
        // the plan's dS path or accumulator path (the workspace holds either: checked above)
        const plan::AttentionDq dq = plan::attention_dq(p);
        unsigned char* ws = static_cast<unsigned char*>(p->workspace) + dq.offset;
        if (wgmma && dq.pitch) {
          a.ds = reinterpret_cast<T*>(ws);
          a.ds_pitch = dq.pitch;
          if (!fa3::ds_map(&maps.ds, a)) a.ds = nullptr;
        }
        // the accumulator path where its bulk adds can run (16-byte aligned rows, kAcc's shared memory); else dq
        // recomputes dS, deterministic anyway
        const size_t acc_smem = p->head_dim <= 64 ? fa3::kDkvSmem<64, true> : fa3::kDkvSmem<128, true>;
        if (wgmma && dq.acc_dim && reinterpret_cast<uintptr_t>(ws) % 16 == 0 && size_t(smem_optin()) >= acc_smem) {
          a.dq_acc = reinterpret_cast<float*>(ws);
          TC_RETURN_IF_ERROR(
              cuda_status(op, "cudaMemsetAsync", cudaMemsetAsync(a.dq_acc, 0, dq.total - dq.offset, stream)));
        }
      }
    }
    // seqlen_q == 0: only dK, dV (zeros); seqlen_k == 0: only dQ (zeros, no delta needed)
    if (rows_q > 0 && rows_k > 0) {
      TC_RETURN_IF_ERROR(launch_delta(op, a, rows_q, stream));
    }
    if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) {
      if (wgmma)
        return p->head_dim <= 64 ? fa3::launch_backward<T, 64>(op, a, maps, stream)
                                 : fa3::launch_backward<T, 128>(op, a, maps, stream);
      if (!why && p->algo != TC_ATTENTION_NAIVE) {
        if (p->head_dim <= 64) return fa2::launch_backward<T, 64>(op, a, rows_q > 0, rows_k > 0, stream);
        if (p->head_dim <= 128) return fa2::launch_backward<T, 128>(op, a, rows_q > 0, rows_k > 0, stream);
        return fa2::launch_backward<T, 256>(op, a, rows_q > 0, rows_k > 0, stream);
      }
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
