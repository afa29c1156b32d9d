// matmul: C[z] = A[z] @ B[z] (+ bias), the GEMM every product in tinycuda runs
// through (matmul itself; linear and its backward, csrc/cuda/linear.cu)
//
//   C[z, M, N] = A[z, M, K] @ B[z, K, N] (+ bias[N]),
//     A(z, m, k) = A[z*sab + m*sam + k*sak],  B(z, k, n) = B[z*sbb + k*sbk + n*sbn],
//   C contiguous. Accumulation in float (double for double); with
//   accumulate C += P, and with c_float C is float32 for 16-bit operands
//   (Out below: every kernel's epilogue stores through it). Any strides: a
//   transposed operand is a stride swap and a broadcast one a batch stride of
//   0, so no operand is copied. The batch index is the grid's last dimension
//   (chunks of 65535 batches per launch).
//
// Five variants, kept to show what each step buys (bench: matmul variants;
// H100 bf16 4096^3: regtile 41, mma 305, wgmma 658, cuBLAS 789 TFLOP/s):
//   naive    one thread per output, K loads of A and B from global memory each:
//            2K loads per 2K flops, bound by L1/L2 bandwidth.
//   tiled    32x32 tiles staged in shared memory: each global element is read
//            once per tile instead of 32 times; still 2 shared loads per FMA.
//   regtile  128x128x8 tiles, 256 threads, 8x8 outputs per thread held in
//            registers: 16 shared loads (4 LDS.128) feed 64 FMAs; the next
//            tile is fetched into registers while this one is multiplied
//            (double-buffered shared memory, one barrier per k-step).
//            Each operand's layout (which axis has stride 1) is a template
//            parameter picked at launch, so a thread reads its 4 elements of A
//            and of B per tile with one 16-byte load (fp32) from a pointer
//            computed once and bumped by a constant. The fp32 loop is 512 FFMA,
//            32 LDS.128 and ~50 other instructions (86% FFMA) in 128 registers,
//            so 2 blocks (16 warps) share an SM. The previous version, with
//            per-element 64-bit index math, runtime layout branches and scalar
//            loads, needed 147 registers (1 block/SM) and reached 24.5 TFLOP/s
//            at 4096^3 on an H100, against 51 for cuBLAS. Operands without a
//            unit stride or 4-element alignment take a scalar strided walk.
//   mma      (fp16/bf16) tensor cores through mma.sync, a 4-stage cp.async ring.
//   wgmma    (fp16/bf16, sm_90a, operands with a unit stride along k or along
//            m/n and 16-byte aligned rows) TMA + wgmma with a producer
//            warpgroup and two consumers; what `auto` runs where it can.
//   fp32 and fp64 run regtile (no TF32 yet).
// Tile loads pick the thread->element map that keeps global reads coalesced
// for the operand's contiguous axis, and shared rows are padded by 4 floats so
// the transposing stores hit 32 distinct banks.
#include "tinycuda/matmul.h"
#include "../shared/matmul_core.h"
#include "kit/cuda_utils.cuh"
#include "kit/mma.cuh"
#include "kit/pdl.cuh"
#include "kit/pointwise.cuh"
#include "kit/reduce.cuh"
#include "kit/vec.cuh"

#include <atomic>

namespace {

// The output tile of block `id` of a 1-D grid that walks the output in groups
// of 8 block-rows, so that consecutive blocks share A's rows and B's columns
// in L2 (mma and wgmma).
struct TileOrigin {
  int64_t m0, n0;
};
// I: the index type, uint32_t where every tile index fits (the wgmma
// kernel's tile start: its divisions are a quarter of 64-bit ones).
template <class I = int64_t>
__device__ __forceinline__ TileOrigin grouped_tile(I id, I M, I N, int bm, int bn) {
  const I tiles_m = (M + bm - 1) / bm, tiles_n = (N + bn - 1) / bn, width = 8 * tiles_n;
  const I first_m = id / width * 8, rows = min(tiles_m - first_m, I(8)), in = id % width;
  return {int64_t(first_m + in % rows) * bm, int64_t(in / rows) * bn};
}

// Where an epilogue stores output i, P = the accumulator (+ bias): C in T, or
// in float32 (cf, c_float), and with add onto the value there, one rounding.
// Kernels take it by value; `add` and `cf` are uniform, so the branches cost
// nothing measurable next to a tile's K loop.
template <class T>
struct Out {
  T* c;
  float* cf;
  bool add;
  __host__ __device__ Out at(int64_t offset) const { return {c ? c + offset : c, cf ? cf + offset : cf, add}; }
  // the plain store (T, no add): where the fast epilogues keep their own vector stores
  __host__ __device__ bool plain() const { return !cf && !add; }
  __device__ __forceinline__ void put(int64_t i, acc_t<T> v) const {
    if (cf) cf[i] = add ? cf[i] + float(v) : float(v);
    else c[i] = from_acc<T>(add ? to_acc(c[i]) + v : v);
  }
};

// One problem as the launchers see it: typed pointers, strides in elements.
template <class T>
struct Gemm {
  int64_t batch, M, N, K;
  const T* A;
  int64_t sab, sam, sak;
  const T* B;
  int64_t sbb, sbk, sbn;
  const T* bias;
  T* C;    // null with c_float
  float* Cf;  // c_float's C, else null
  bool add;   // accumulate
  T* pre;  // P, laid out as C, or null
  int act;

  static Gemm of(const tc_matmul_params* p) {
    return {p->batch, p->M, p->N, p->K,
            static_cast<const T*>(p->a), p->a_stride[0], p->a_stride[1], p->a_stride[2],
            static_cast<const T*>(p->b), p->b_stride[0], p->b_stride[1], p->b_stride[2],
            static_cast<const T*>(p->bias), p->c_float ? nullptr : static_cast<T*>(p->c),
            p->c_float ? static_cast<float*>(p->c) : nullptr, p->accumulate != 0, static_cast<T*>(p->pre),
            p->activation};
  }
  Out<T> out() const { return {C, Cf, add}; }
  // batches [z0, z0 + n)
  Gemm slice(int64_t z0, int64_t n) const {
    Gemm g = *this;
    g.batch = n, g.A += z0 * sab, g.B += z0 * sbb;
    if (C) g.C += z0 * M * N;
    if (Cf) g.Cf += z0 * M * N;
    if (pre) g.pre += z0 * M * N;
    return g;
  }
  // The problem for a kernel without the epilogue: P (product + bias) into
  // pre, or into C when there is none; the activation follows as a pass.
  Gemm unfused() const {
    Gemm g = *this;
    if (pre) g.C = pre;
    g.pre = nullptr, g.act = TC_ACT_NONE;
    return g;
  }
};

// ---------------------------------------------------------------------------
// naive

template <class T>
__global__ void gemm_naive_kernel(int64_t M, int64_t N, int64_t K, const T* __restrict__ A, int64_t sab,
                                  int64_t sam, int64_t sak, const T* __restrict__ B, int64_t sbb,
                                  int64_t sbk, int64_t sbn, const T* __restrict__ bias, Out<T> C) {
  using Acc = acc_t<T>;
  A += blockIdx.z * sab, B += blockIdx.z * sbb, C = C.at(blockIdx.z * M * N);
  const int64_t n = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int64_t m = blockIdx.y * int64_t(blockDim.y) + threadIdx.y;
  if (m >= M || n >= N) return;
  Acc acc = bias ? to_acc(bias[n]) : Acc(0);
  for (int64_t k = 0; k < K; ++k) acc += to_acc(A[m * sam + k * sak]) * to_acc(B[k * sbk + n * sbn]);
  C.put(m * N + n, acc);
}

// ---------------------------------------------------------------------------
// tiled

constexpr int kTile = 32;

template <class T>
__global__ void __launch_bounds__(kTile * kTile)
gemm_tiled_kernel(int64_t M, int64_t N, int64_t K, const T* __restrict__ A, int64_t sab, int64_t sam,
                  int64_t sak, const T* __restrict__ B, int64_t sbb, int64_t sbk, int64_t sbn,
                  const T* __restrict__ bias, Out<T> C) {
  using Acc = acc_t<T>;
  A += blockIdx.z * sab, B += blockIdx.z * sbb, C = C.at(blockIdx.z * M * N);
  __shared__ Acc As[kTile][kTile + 1], Bs[kTile][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t m0 = blockIdx.y * int64_t(kTile), n0 = blockIdx.x * int64_t(kTile);
  Acc acc = 0;
  for (int64_t k0 = 0; k0 < K; k0 += kTile) {
    // A: tx walks k when k is A's contiguous axis, else m. Same for B with n.
    const int am = sak == 1 ? ty : tx, ak = sak == 1 ? tx : ty;
    As[am][ak] = (m0 + am < M && k0 + ak < K) ? to_acc(A[(m0 + am) * sam + (k0 + ak) * sak]) : Acc(0);
    const int bk = sbn == 1 ? ty : tx, bn = sbn == 1 ? tx : ty;
    Bs[bk][bn] = (k0 + bk < K && n0 + bn < N) ? to_acc(B[(k0 + bk) * sbk + (n0 + bn) * sbn]) : Acc(0);
    __syncthreads();
#pragma unroll 8
    for (int k = 0; k < kTile; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  const int64_t m = m0 + ty, n = n0 + tx;
  if (m < M && n < N) C.put(m * N + n, acc + (bias ? to_acc(bias[n]) : Acc(0)));
}

// ---------------------------------------------------------------------------
// regtile

constexpr int BM = 128, BN = 128, BK = 8, kThreads = 256;
constexpr int kPad = 4;  // elements of padding per shared row
static_assert(BM == BN && BM * BK == 4 * kThreads, "each thread stages 4 elements per operand");

// How a tile loader reads its operand. The launcher picks it per operand from
// strides, sizes and alignment, so the main loop carries no layout branches.
enum class Walk {
  kVecK,     // unit stride along k: one 4-element vector along k per thread
  kVecI,     // unit stride along m (A) or n (B): one vector along that axis
  kStrided,  // anything else: 4 scalar loads along the smaller stride
};

template <class T>
struct alignas(4 * sizeof(T)) Quad {  // fp32: one LDG.128; 16-bit: LDG.64
  T v[4];
};

template <class Acc>
__device__ __forceinline__ void lds4(const Acc* p, Acc (&r)[8], int at) {
  if constexpr (sizeof(Acc) == 4) {
    float4 v = *reinterpret_cast<const float4*>(p);
    r[at] = v.x, r[at + 1] = v.y, r[at + 2] = v.z, r[at + 3] = v.w;
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) r[at + i] = p[i];
  }
}

template <class Acc>
__device__ __forceinline__ void sts4(Acc* p, const Acc (&r)[4]) {
  if constexpr (sizeof(Acc) == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(r[0], r[1], r[2], r[3]);
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) p[i] = r[i];
  }
}

// Stages the BK x 128 tile of X(k, i) = X[i*si + k*sk] (i is m for A, n for B)
// into shared Xs[k][i], 4 elements per thread, through registers so the global
// load of tile t+1 overlaps the FMAs of tile t. Thread t owns 4 consecutive
// elements along its walk:
//   along k:  i = t/2,      k = 4*(t%2) + 0..3  -> 4 STS.32 into two rows 4
//             apart; the 132-float pitch puts those rows 16 banks apart, so a
//             warp's 16 i x 2 rows hit 32 distinct banks.
//   along i:  i = 4*(t%32) + 0..3, k = t/32     -> one STS.128, a warp fills
//             512 contiguous bytes.
// The pointer is computed once in 64 bits and then advanced by a constant per
// tile. Bounds are one predicate per vector: the launcher only picks a vector
// walk when that axis's extent is a multiple of 4, so a vector is all in or all
// out. That predicate is ~4 instructions per 512 FFMAs, so interior blocks run
// the same code as edge blocks rather than a second, unchecked copy.
template <class T, Walk W>
struct TileLoader {
  using Acc = acc_t<T>;
  const T* p;      // this thread's first element of the next tile
  int64_t step;    // elements from one k-tile to the next
  int64_t sj;      // elements between this thread's 4 (kStrided only)
  int64_t i_left;  // I - (i0 + i): element j is inside while its i offset < i_left
  int64_t k_end;   // K - k: ... and while k0 + its k offset < k_end
  int i, k;        // this thread's first element within the tile
  bool along_k;    // its 4 elements run along k (a constant unless kStrided)
  Acc r[4];

  __device__ __forceinline__ TileLoader(const T* X, int64_t I, int64_t K, int64_t si, int64_t sk,
                                        int64_t i0, int t) {
    along_k = W == Walk::kVecK || (W == Walk::kStrided && sk <= si);
    if (W == Walk::kVecK) sk = 1;
    if (W == Walk::kVecI) si = 1;
    i = along_k ? t / 2 : t % 32 * 4;
    k = along_k ? t % 2 * 4 : t / 32;
    p = X + (i0 + i) * si + k * sk;
    step = BK * sk;
    sj = along_k ? sk : si;
    i_left = I - (i0 + i);
    k_end = K - k;
  }

  __device__ __forceinline__ void fetch(int64_t k0) {
    if constexpr (W == Walk::kStrided) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int di = along_k ? 0 : j, dk = along_k ? j : 0;
        r[j] = di < i_left && k0 + dk < k_end ? to_acc(p[j * sj]) : Acc(0);
      }
    } else {
      const bool in = i_left > 0 && k0 < k_end;
      const Quad<T> q = in ? *reinterpret_cast<const Quad<T>*>(p) : Quad<T>{};
#pragma unroll
      for (int j = 0; j < 4; ++j) r[j] = to_acc(q.v[j]);
    }
    p += step;
  }

  __device__ __forceinline__ void stash(Acc (*Xs)[BM + kPad]) const {
    if (along_k) {
#pragma unroll
      for (int j = 0; j < 4; ++j) Xs[k + j][i] = r[j];
    } else {
      sts4(&Xs[k][i], r);
    }
  }
};

// 128x128 outputs per block, 8x8 per thread in registers: per k, 4 LDS.128
// (rows ty*4 + {0..3, 64..67} of A, cols tx*4 + {0..3, 64..67} of B) feed 64
// FFMAs. A warp is 4 ty x 8 tx, so its A reads cover 64 contiguous bytes and
// its B reads 128: one shared wavefront each. fp32 fits 128 registers (64
// accumulators, 16 fragments, 8 staged loads, pointers), so two blocks (16
// warps) share an SM and one block's barrier is covered by the other's FMAs.
// double needs 128 registers for accumulators alone and stays at one block.
template <class T, Walk WA, Walk WB>
__global__ void __launch_bounds__(kThreads, sizeof(acc_t<T>) == 4 ? 2 : 1)
gemm_regtile_kernel(int64_t M, int64_t N, int64_t K, const T* __restrict__ A, int64_t sab, int64_t sam,
                    int64_t sak, const T* __restrict__ B, int64_t sbb, int64_t sbk, int64_t sbn,
                    const T* __restrict__ bias, Out<T> C) {
  using Acc = acc_t<T>;
  A += blockIdx.z * sab, B += blockIdx.z * sbb;  // C's batch offset waits for the epilogue (registers)
  __shared__ __align__(16) Acc As[2][BK][BM + kPad];
  __shared__ __align__(16) Acc Bs[2][BK][BN + kPad];
  const int tid = threadIdx.x;
  const int64_t m0 = blockIdx.x * int64_t(BM), n0 = blockIdx.y * int64_t(BN);
  TileLoader<T, WA> la(A, M, K, sam, sak, m0, tid);
  TileLoader<T, WB> lb(B, N, K, sbn, sbk, n0, tid);

  const int lane = tid % 32, warp = tid / 32;
  const int ty = warp / 2 * 4 + lane / 8, tx = warp % 2 * 8 + lane % 8;
  Acc acc[8][8] = {};
  if (K > 0) {
    la.fetch(0), lb.fetch(0);
    la.stash(As[0]), lb.stash(Bs[0]);
    __syncthreads();
  }
  // Double buffering, one barrier per tile: tile t+1 is written into the buffer
  // read during tile t-1, and every thread finished that read before the
  // barrier that ended tile t-1. Fetch and stash are unconditional (past the
  // last tile they load nothing and fill the idle buffer with zeros): inside a
  // branch the compiler sank the loads below the FMAs, exposing their latency.
  int buf = 0;
  for (int64_t k0 = 0; k0 < K; k0 += BK) {
    la.fetch(k0 + BK), lb.fetch(k0 + BK);
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      Acc a[8], b[8];
      lds4(&As[buf][k][ty * 4], a, 0);
      lds4(&As[buf][k][ty * 4 + 64], a, 4);
      lds4(&Bs[buf][k][tx * 4], b, 0);
      lds4(&Bs[buf][k][tx * 4 + 64], b, 4);
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] += a[i] * b[j];
    }
    la.stash(As[buf ^ 1]), lb.stash(Bs[buf ^ 1]);
    __syncthreads();
    buf ^= 1;
  }

  const Out<T> out = C.at(blockIdx.z * M * N);
  Acc bn[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int64_t n = n0 + tx * 4 + (j & 3) + (j >> 2) * 64;
    bn[j] = bias && n < N ? to_acc(bias[n]) : Acc(0);
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int64_t m = m0 + ty * 4 + (i & 3) + (i >> 2) * 64;
    if (m >= M) continue;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int64_t n = n0 + tx * 4 + (j & 3) + (j >> 2) * 64;
      if (n < N) out.put(m * N + n, acc[i][j] + bn[j]);
    }
  }
}

// ---------------------------------------------------------------------------
// mma: tensor cores (fp16/bf16 operands, fp32 accumulators) through mma.sync
//
// 128x128 outputs per block of 4 warps (2x2, 64x64 each), k-tiles of 32 in a
// 4-stage cp.async ring: tile t+3 is in flight while tile t is multiplied.
// Per k16 step a warp issues 8 ldmatrix.x4 (4 for A's 64 rows, 4 for B's 64
// columns) for 32 mma.m16n8k16, i.e. 128 accumulators per thread.
// Shared memory holds each tile as it lies in global memory, so no operand is
// ever transposed in memory: a k-major tile (unit stride along k) is
// [128 i][32 k], read with ldmatrix; an i-major one (unit stride along m or n)
// is [32 k][128 i], read with ldmatrix.trans, which yields the same fragment.
// 16-byte chunks are XOR-swizzled within a row so the 8 rows one ldmatrix
// phase reads land in 8 different bank groups (k-major rows are 64 bytes, so
// two rows share 128 bytes: chunk c of row r sits at c ^ (r/2 % 4); i-major
// rows are 256 bytes: c ^ (r % 8)).
// Operand loads: cp.async when the operand's unit-stride extent, its other
// stride and its address are multiples of 8 elements (every 16-byte chunk is
// then all inside the matrix or all outside, zero-filled); otherwise each
// thread gathers its chunk element by element (any strides, ragged edges) and
// stores it synchronously: correct for every shape, slower.
// Blocks walk the output in groups of 8 block-rows so that consecutive blocks
// share A's rows and B's columns in L2.
namespace mma {
constexpr int BM = 128, BN = 128, BK = 32, kStages = 4, kThreads = 128;
constexpr int kTileElems = BM * BK;  // one operand's k-tile: 8 KiB in 16-bit
constexpr size_t kSmemBytes = size_t(kStages) * 2 * kTileElems * 2;
static_assert(BM == BN, "A and B tiles share one loader");

// Element offset of 16-byte chunk `chunk` of shared row `row`.
template <bool kKMajor>
__device__ __forceinline__ int swizzled(int row, int chunk) {
  return kKMajor ? row * BK + ((chunk ^ (row >> 1 & 3)) << 3) : row * BM + ((chunk ^ (row & 7)) << 3);
}

// One operand X(i, k) = X[i*si + k*sk], i in [0, I): its k-tiles into shared
// memory. kThreads threads cover a tile's 512 chunks, 4 each.
template <class T, bool kKMajor, bool kAsync>
struct Loader {
  const T* X;
  int64_t I, K, si, sk, i0;

  __device__ __forceinline__ void load(T* tile, int64_t k0, int tid) const {
#pragma unroll
    for (int j = 0; j < kTileElems / 8 / kThreads; ++j) {
      const int q = tid + j * kThreads;
      // k-major: row i, 4 chunks along k; i-major: row k, 16 chunks along i
      const int row = kKMajor ? q / (BK / 8) : q / (BM / 8), chunk = kKMajor ? q % (BK / 8) : q % (BM / 8);
      const int64_t i = i0 + (kKMajor ? row : chunk * 8), k = k0 + (kKMajor ? chunk * 8 : row);
      T* dst = tile + swizzled<kKMajor>(row, chunk);
      if constexpr (kAsync) {
        const bool in = i < I && k < K;
        cp_async16(dst, in ? X + i * si + k * sk : X, in);
      } else {
        alignas(16) T v[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const int64_t ie = kKMajor ? i : i + e, ke = kKMajor ? k + e : k;
          v[e] = ie < I && ke < K ? X[ie * si + ke * sk] : from_acc<T>(0.0f);
        }
        *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(v);
      }
    }
  }
};

// ldmatrix.x4 of the 16(i) x 16(k) block at (i, k) of a tile. Lane l addresses
// row l % 8 of matrix l / 8; kAOrder puts the matrices in A's fragment order
// (i 0-7/k 0-7, i 8-15/k 0-7, i 0-7/k 8-15, i 8-15/k 8-15), otherwise B's two
// n8 fragments (i 0-7/k 0-7, i 0-7/k 8-15, then i 8-15).
template <bool kKMajor, bool kAOrder>
__device__ __forceinline__ void load_fragment(uint32_t (&r)[4], uint32_t tile, int i, int k, int lane) {
  const int m = lane >> 3, row = lane & 7;
  const int di = kAOrder ? (m & 1) * 8 : (m >> 1) * 8, dk = kAOrder ? (m >> 1) * 8 : (m & 1) * 8;
  const int off = kKMajor ? swizzled<true>(i + di + row, (k + dk) >> 3) : swizzled<false>(k + dk + row, (i + di) >> 3);
  ldsm_x4<!kKMajor>(r, tile + off * 2);
}

template <class T, bool kAK, bool kBK, bool kAsync>
__global__ void __launch_bounds__(kThreads, 2)
gemm_mma_kernel(int64_t M, int64_t N, int64_t K, const T* __restrict__ A, int64_t sab, int64_t sam,
                int64_t sak, const T* __restrict__ B, int64_t sbb, int64_t sbk, int64_t sbn,
                const T* __restrict__ bias, Out<T> out) {
  A += blockIdx.y * sab, B += blockIdx.y * sbb;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* smem = reinterpret_cast<T*>(smem_raw);  // stage s: A tile at 2s, B tile at 2s + 1
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;

  const auto [m0, n0] = grouped_tile<int64_t>(blockIdx.x, M, N, BM, BN);

  const Loader<T, kAK, kAsync> la{A, M, K, sam, sak, m0};
  const Loader<T, kBK, kAsync> lb{B, N, K, sbn, sbk, n0};
  const int64_t tiles_k = (K + BK - 1) / BK;
  auto stage = [&](int s) { return smem + 2 * s * kTileElems; };
  auto load = [&](int64_t t) {
    if (t < tiles_k) {
      T* a = stage(int(t % kStages));
      la.load(a, t * BK, tid);
      lb.load(a + kTileElems, t * BK, tid);
    }
    if constexpr (kAsync) cp_async_commit();  // an empty group past the end keeps the count uniform
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) load(s);

  const int wm = warp / 2 * 64, wn = warp % 2 * 64;
  float acc[4][8][4] = {};
  for (int64_t t = 0; t < tiles_k; ++t) {
    if constexpr (kAsync) cp_async_wait<kStages - 2>();
    // tile t has landed for every thread; and every warp is done with tile
    // t - 1, whose stage the next load overwrites
    __syncthreads();
    load(t + kStages - 1);
    const uint32_t a_tile = smem_addr(stage(int(t % kStages))), b_tile = a_tile + kTileElems * 2;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      uint32_t a[4][4], b[4][4];
#pragma unroll
      for (int mt = 0; mt < 4; ++mt) load_fragment<kAK, true>(a[mt], a_tile, wm + mt * 16, kk, lane);
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) load_fragment<kBK, false>(b[nt], b_tile, wn + nt * 16, kk, lane);
#pragma unroll
      for (int mt = 0; mt < 4; ++mt)
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) mma_16816<T>(acc[mt][nt], a[mt], b[nt / 2][nt % 2 * 2], b[nt / 2][nt % 2 * 2 + 1]);
    }
  }
  if constexpr (kAsync) cp_async_wait<0>();  // no copy may land after the block exits

  // epilogue: d0,d1 at (g, 2q..2q+1), d2,d3 at (g+8, ...) of each 16x8 tile;
  // a pair is one 4-byte store when both columns are inside, N is even and C
  // 4-byte aligned (a capi out= may start at an odd element); accumulating or
  // float32 outputs go element by element through out.put
  out = out.at(blockIdx.y * M * N);
  T* C = out.c;
  const int g = lane / 4, q = lane % 4;
  const bool paired = out.plain() && N % 2 == 0 && reinterpret_cast<uintptr_t>(C) % 4 == 0;
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    const int64_t n = n0 + wn + nt * 8 + 2 * q;
    const float b0 = bias && n < N ? to_acc(bias[n]) : 0.0f, b1 = bias && n + 1 < N ? to_acc(bias[n + 1]) : 0.0f;
#pragma unroll
    for (int mt = 0; mt < 4; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t m = m0 + wm + mt * 16 + g + h * 8;
        if (m >= M || n >= N) continue;
        if (n + 1 < N && paired) {
          T pair[2] = {from_acc<T>(acc[mt][nt][2 * h] + b0), from_acc<T>(acc[mt][nt][2 * h + 1] + b1)};
          *reinterpret_cast<uint32_t*>(C + m * N + n) = *reinterpret_cast<const uint32_t*>(pair);
        } else {
          out.put(m * N + n, acc[mt][nt][2 * h] + b0);
          if (n + 1 < N) out.put(m * N + n + 1, acc[mt][nt][2 * h + 1] + b1);
        }
      }
  }
}

// kKMajor: which shared layout suits X(z, i, k) = X[z*sz + i*si + k*sk];
// async: whether every 16-byte chunk of that layout is aligned and all-in or
// all-out, in every batch.
struct Layout {
  bool k_major, async;
};

template <class T>
Layout layout(const T* X, int64_t I, int64_t K, int64_t si, int64_t sk, int64_t sz) {
  const bool k_major = sk == 1 || (si != 1 && sk <= si);
  const int64_t unit = k_major ? sk : si, other = k_major ? si : sk, extent = k_major ? K : I;
  const bool aligned = reinterpret_cast<uintptr_t>(X) % 16 == 0 && sz % 8 == 0;
  return {k_major, unit == 1 && aligned && other % 8 == 0 && extent % 8 == 0};
}

template <class T>
tc_status launch(const char* op, const Gemm<T>& g, cudaStream_t stream) {
  const Layout la = layout(g.A, g.M, g.K, g.sam, g.sak, g.sab), lb = layout(g.B, g.N, g.K, g.sbn, g.sbk, g.sbb);
  const bool async = la.async && lb.async;
  using Kernel = void (*)(int64_t, int64_t, int64_t, const T*, int64_t, int64_t, int64_t, const T*, int64_t,
                          int64_t, int64_t, const T*, Out<T>);
  // [A k-major][B k-major][async]
  static constexpr Kernel kernels[2][2][2] = {
      {{gemm_mma_kernel<T, false, false, false>, gemm_mma_kernel<T, false, false, true>},
       {gemm_mma_kernel<T, false, true, false>, gemm_mma_kernel<T, false, true, true>}},
      {{gemm_mma_kernel<T, true, false, false>, gemm_mma_kernel<T, true, false, true>},
       {gemm_mma_kernel<T, true, true, false>, gemm_mma_kernel<T, true, true, true>}}};
  const Kernel kernel = kernels[la.k_major][lb.k_major][async];
  const int64_t blocks = ((g.M + BM - 1) / BM) * ((g.N + BN - 1) / BN);
  TC_REQUIRE(blocks <= INT32_MAX, "%s: %lld x %lld output is too large", op, (long long)g.M, (long long)g.N);
  static std::atomic<uint64_t> smem_set[2][2][2];
  TC_RETURN_IF_ERROR(smem_opt_in(op, kernel, kSmemBytes, smem_set[la.k_major][lb.k_major][async]));
  kernel<<<dim3(unsigned(blocks), unsigned(g.batch)), kThreads, kSmemBytes, stream>>>(
      g.M, g.N, g.K, g.A, g.sab, g.sam, g.sak, g.B, g.sbb, g.sbk, g.sbn, g.bias, g.out());
  return TC_OK;
}
}  // namespace mma

// ---------------------------------------------------------------------------
// wgmma: Hopper's warpgroup tensor-core instruction fed by TMA (sm_90a)
//
// 128x256 outputs per block of 3 warpgroups: one producer whose single thread
// issues TMA copies of A's 128x64 and B's 256x64 k-tiles into a 4-stage ring
// (48 KiB a stage), and two consumers that each multiply 64 rows of A by all
// of B with wgmma.m64n256k16 (4 per k-tile), 128 fp32 accumulators per thread.
// The stages are handed over with mbarriers: `full` completes when a stage's
// bytes have landed, `empty` when both consumers are done reading it. The
// producer gives its registers to the consumers (setmaxnreg 40 / 232): 128
// accumulators plus addressing do not fit the 168 a 384-thread block gets.
// The grid is persistent: one block per SM walks output tiles (batches
// included) in grouped order, and the stage ring runs on across tiles, so the
// producer loads the next tile's first stages while the consumers store this
// one. Stores go through shared memory: TMA stores (and float32 reduce-adds)
// of 64-row x 128-byte boxes where TMA can describe C (store_tma), else
// store_out.
// The epilogue adds the bias to the fp32 accumulators, rounds them to the
// output type (P), and writes P to pre and act(P) to C, as unfused torch
// would compute F.gelu(F.linear(...)), without P's round trip to memory.
// TMA zero-fills boxes past the matrix's edge, so ragged M, N and K need no
// code. Either operand may be k-major (unit stride along k: x and W of
// linear's forward) or m/n-major (unit stride along m or n: the backward's
// W and x, a transposed matmul operand); wgmma reads the latter with its
// transpose bit, so every layout runs here. TMA needs the other strides and
// the addresses to be multiples of 16 bytes; what misses that runs mma.
namespace wg {
constexpr int BM = 128, BN = 256, BK = 64, kStages = 4, kConsumers = 2, kThreads = 128 * (kConsumers + 1);
constexpr int kATile = BM * BK, kBTile = BN * BK;  // elements
constexpr int kBox = 64;                           // an m/n-major box is 64 elements (128 bytes) wide
constexpr int kOut = 64 * 64;  // a consumer's epilogue slab, floats: 64 rows x 64 columns (store_out)
// 192 KiB of stages, 32 KiB of epilogue slabs (store_out's float slab, or
// store_tma's two 64 x 64 boxes of T), the tile's 256 bias values a consumer
// (store_tma), slack to align to 1 KiB: 226 of the 227 KiB a block may have
constexpr size_t kSmemBytes =
    size_t(kStages) * (kATile + kBTile) * 2 + kConsumers * kOut * 4 + kConsumers * BN * 2 + 1024;

// k-tile t of one operand into a stage: a k-major operand is one [rows][64 k]
// box; an m/n-major one is rows/64 boxes of [64 k][64 i], 8 KiB apart.
// hint: load with L2 policy `policy` (stream-K: l2_policy).
template <bool kMN, int kRows, bool kHint = false, class T>
__device__ __forceinline__ void load_tile(T* dst, const CUtensorMap* map, int t, int64_t i0, int z,
                                          uint64_t* bar, uint64_t policy = 0) {
  auto load = [&](T* d, int x, int y) {
    if constexpr (kHint) tma_load_3d(d, map, x, y, z, bar, policy);
    else tma_load_3d(d, map, x, y, z, bar);
  };
  if constexpr (kMN) {
#pragma unroll
    for (int h = 0; h < kRows / kBox; ++h) load(dst + h * kBox * BK, int(i0) + h * kBox, t * BK);
  } else {
    load(dst, t * BK, int(i0));
  }
}

// Descriptor of the 16-deep k slice at kk of a tile as load_tile leaves it:
// k-major rows are 128 bytes, so kk moves 2*kk bytes inside a swizzle atom;
// m/n-major tiles hold 8-k row groups 1 KiB apart, so kk moves kk 128-byte
// rows, and the next 64 of m or n lie one 8 KiB box further.
template <bool kMN, class T>
__device__ __forceinline__ uint64_t tile_desc(const T* tile, int kk) {
  return kMN ? wgmma_desc_mn(tile + kk * kBox, kBox * BK * sizeof(T)) : wgmma_desc(tile + kk);
}

// store_out's cold paths, out of line: 4 outputs of C element by element (a
// ragged or misaligned C) and act() of 4 values. Inlined at each of a
// thread's 32 items, their code (erf, tanh, 64-bit bounds) took the kernel
// to ~17k instructions, and a tile's fixed cost from 6.6 to 10.1 us (fc +
// GELU forward twice as slow; instruction-cache misses, by the look of it:
// not measured).
template <class C>
__device__ __noinline__ Vec<C, 4> get4(const C* p, int64_t n_valid) {
  Vec<C, 4> v{};
  for (int e = 0; e < 4 && e < n_valid; ++e) v.v[e] = p[e];
  return v;
}
template <class C>
__device__ __noinline__ void put4(C* p, Vec<C, 4> v, int64_t n_valid) {
  for (int e = 0; e < 4 && e < n_valid; ++e) p[e] = v.v[e];
}
template <class T>
__device__ __noinline__ Vec<T, 4> activate4(int act, Vec<T, 4> v) {
  for (int e = 0; e < 4; ++e) v.v[e] = from_acc<T>(activate(act, to_acc(v.v[e])));
  return v;
}

// A consumer's 64 x 256 outputs, d[4j + 2h + e] at row 16 w + g + 8h and
// column 8j + 2q + e (w the warp, lane = 4g + q), into C: P = d + bias, and
// C = act(P) (with pre = P), C += P (Out::add) or a float32 C (Out::cf), each
// with one rounding, as Out::put would: where store_tma cannot run (a C or
// pre TMA cannot describe: N not a multiple of 16 bytes, a misaligned base). The fragments go to shared memory as
// float32, 64 rows x kCols columns a slab (kCols = 64 for a 16-bit C, 32 for
// float32: 16 or 8 KiB), and come back 4 consecutive columns a thread (the
// same 4 in every slab: 128 threads are whole rows of 16 or 8 chunks), where
// the bias is added with 4 loads a slab and C, pre and the old C are moved
// as one 8- or 16-byte access each: a warp covers whole 32-byte sectors. An
// add reads C's next slab before this slab's adds (two slabs in flight), and
// prefetch_out has asked L2 for the tile while its k-tiles were multiplied.
// Staged rows swizzle 16-byte chunk x to x ^ 2 (r % 4): a warp's fragment
// writes (8 rows x 32 bytes) take 2 wavefronts, the minimum for 256 bytes.
// Measured (H200, bf16):
// - The accumulating epilogue before this stored from the fragments, each
//   16-bit load converted as it landed, so a batch's loads waited one after
//   another: fused_linear_cross_entropy's grad_weight += (M 128256, N 4096,
//   K 512) took 3.74 ms against cuBLAS's 1.12 on the H100; 1.44 against 0.90
//   (flce_products.py) with this add path as it first landed (d939c2a,
//   store_acc), but 2.55 against 0.90 here (86721c2 on; not profiled):
//   fused_linear_cross_entropy's largest gap (BENCHMARKS, GPT step 6),
//   now store_tma's where TMA can describe C.
// - The plain epilogue here: x @ W^T + b at 16384 x 3072 x 768 ran 426
//   TFLOP/s (cuBLAS 645), a tile's fixed cost 6.6 us against cuBLAS's 1.9
//   (gemm_ksweep.py); store_tma's 582 and 2.8 us replaced it.
template <class T, bool kF>
__device__ __forceinline__ void store_out(const float (&d)[128], float* staged, int64_t m0, int64_t n0, int64_t M,
                                          int64_t N, const T* bias, T* pre, int act, const Out<T>& out, int c,
                                          int tid) {
  using C = std::conditional_t<kF, float, T>;
  using V4 = Vec<C, 4>;  // one 16- or 8-byte access
  constexpr int kCols = kF ? 32 : 64, kChunks = kCols / 4, kRowStep = 128 / kChunks, kItems = 64 / kRowStep;
  C* cp = kF ? reinterpret_cast<C*>(out.cf) : reinterpret_cast<C*>(out.c);
  const bool vec = N % 4 == 0 && reinterpret_cast<uintptr_t>(cp) % sizeof(V4) == 0 &&
                   reinterpret_cast<uintptr_t>(pre) % sizeof(V4) == 0;
  const int w = tid / 32, g = tid % 32 / 4, q = tid % 4;
  const int chunk = tid % kChunks, r0 = tid / kChunks;  // item k: row r0 + k kRowStep, columns 4 chunk..
  const int rows = int(min(M - m0, int64_t(64)));       // this consumer's rows inside C (<= 0: none)
  const int64_t at0 = (m0 + r0) * N + n0 + 4 * chunk;   // item 0 of slab 0, an offset into C and pre
  auto read = [&](int slab, V4 (&old)[kItems]) {
    const int64_t n = n0 + slab * kCols + 4 * chunk;
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int64_t at = at0 + int64_t(k) * kRowStep * N + slab * kCols;
      old[k] = V4{};
      if (!out.add || r0 + k * kRowStep >= rows || n >= N) continue;
      old[k] = vec ? load_vec<C, 4>(cp + at) : get4(cp + at, N - n);
    }
  };
  V4 cur[kItems];  // C's values as they lie (converted only when added)
  read(0, cur);
#pragma unroll
  for (int slab = 0; slab < 256 / kCols; ++slab) {
    named_barrier(1 + c, 128);  // the previous slab's reads are done
#pragma unroll
    for (int jj = 0; jj < kCols / 8; ++jj) {
      const int j = slab * (kCols / 8) + jj;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = 16 * w + g + 8 * h, x = (2 * jj + q / 2) ^ (2 * (r % 4));
        *reinterpret_cast<float2*>(staged + r * kCols + 4 * x + 2 * (q % 2)) =
            make_float2(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
      }
    }
    named_barrier(1 + c, 128);  // the slab is in shared memory
    V4 next[kItems];
    if (slab + 1 < 256 / kCols) read(slab + 1, next);
    const int64_t n = n0 + slab * kCols + 4 * chunk;
    float b[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) b[e] = bias && n + e < N ? to_acc(bias[n + e]) : 0.0f;
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int r = r0 + k * kRowStep;
      if (r >= rows || n >= N) continue;
      const int64_t at = at0 + int64_t(k) * kRowStep * N + slab * kCols;
      const float4 p = *reinterpret_cast<const float4*>(staged + r * kCols + 4 * (chunk ^ (2 * (r % 4))));
      float v[4] = {p.x + b[0], p.y + b[1], p.z + b[2], p.w + b[3]};  // P first, then the add
      V4 o;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (out.add) v[e] += float(to_acc(cur[k].v[e]));
        if constexpr (kF) o.v[e] = v[e];
        else o.v[e] = from_acc<C>(v[e]);
      }
      if constexpr (!kF) {
        if (pre) {  // P, then act(P) from the rounded P, as unfused torch computes it
          if (vec) store_vec(pre + at, o);
          else put4(pre + at, o, N - n);
        }
        if (act != TC_ACT_NONE) o = activate4(act, o);
      }
      if (vec) store_vec(cp + at, o);
      else put4(cp + at, o, N - n);
    }
#pragma unroll
    for (int k = 0; k < kItems; ++k) cur[k] = next[k];
  }
}

// GELU's tanh form for a 16-bit C: x/2 (1 + tanh u) = x sigmoid(2u), on
// ex2.approx and rcp.approx: a few float ulps (~2^-21) before the rounding
// to 8 (bf16) or 11 (fp16) bits, in 7 instructions where tanhf's branches
// take ~20. The limits are tanhf's: x -> -inf gives -0, +inf gives x, and
// -inf gives NaN (-inf * 0 in torch's form, -inf / inf here).
__device__ __forceinline__ float gelu_tanh_16(float x) {
  const float u2 = float(2 * GeluTanh::kBeta) * (x + float(GeluTanh::kKappa) * x * x * x);
  return __fdividef(x, 1.f + __expf(-u2));
}
template <int kAct>
__device__ __forceinline__ float act_16(float x) {
  return kAct == TC_ACT_GELU_TANH ? gelu_tanh_16(x) : activate(kAct, x);
}

// dst = act(src) over one 64 x 64 box of T, 8 elements (a 16-byte chunk) at
// a time: elementwise, so the boxes' swizzle does not matter. The rolled
// loop, one per activation, keeps the erf and tanh code to three copies; the
// dispatch is out of line, called once a box.
template <class T, int kAct>
__device__ __forceinline__ void act_chunks(const T* src, T* dst, int tid) {
#pragma unroll 1
  for (int i = tid; i < 64 * 64 / 8; i += 128) {
    Vec<T, 8> v = reinterpret_cast<const Vec<T, 8>*>(src)[i];
#pragma unroll
    for (int e = 0; e < 8; ++e) v.v[e] = from_acc<T>(act_16<kAct>(to_acc(v.v[e])));
    reinterpret_cast<Vec<T, 8>*>(dst)[i] = v;
  }
}
template <class T>
__device__ __noinline__ void act_box(int act, const T* src, T* dst, int tid) {
  switch (act) {
    case TC_ACT_RELU: act_chunks<T, TC_ACT_RELU>(src, dst, tid); break;
    case TC_ACT_GELU: act_chunks<T, TC_ACT_GELU>(src, dst, tid); break;
    default: act_chunks<T, TC_ACT_GELU_TANH>(src, dst, tid); break;
  }
}

// One 64-row x 128-byte box of C into shared memory by TMA (the old values a
// 16-bit C += P adds to; prefetch_out has asked L2 for them): past M and N
// the box is zero-filled, and `bar` completes when its 8 KiB have landed.
template <class C>
__device__ __forceinline__ void load_old_box(C* dst, const CUtensorMap* tc, int64_t n, int64_t m, int z,
                                             uint64_t* bar) {
  mbar_expect_bytes(bar, 64 * 128);
  tma_load_3d(dst, tc, int(n), int(m), z, bar);
}

// The epilogue through TMA stores, for a 16-bit C (C = T) or a float32 one
// (C = float: c_float, split-K's partials). With `add`, a float32 box is
// added into C by TMA in L2 (the same float adds, one rounding, as
// store_out's); a 16-bit C's old box comes in by TMA first (load_old_box,
// one box ahead, the first with the tile's k-tiles), P + old in float,
// rounded once, as addmm's beta = 1. A consumer's 64 x 256 outputs leave as boxes of
// 64 rows x 128 bytes (64 columns of T, 32 of float), in two 8 KiB shared
// buffers (X, Y) in TMA's 128-byte swizzle (16-byte chunk x of row r at
// x ^ (r % 8): a 16-bit C's fragments go in by stmatrix.x4, 16 columns of
// the warp's 16 rows an instruction, a float one's as 8 rows x 8 bytes x 4
// threads a warp, free of bank conflicts), each handed to the TMA unit, which writes it
// out while the consumer moves on: to the next box, and after the last to the
// next tile's k-tiles, so the stores overlap the MMAs that store_out's waited
// for (a tile's fixed cost 2.8 us against store_out's 6.6; cuBLAS 1.9). A box:
//   P = d + bias (+ old C) rounded to C into X   (the fragments, once)
//   pre <- X                                  (with pre)
//   act(P) rounded again into Y (X without pre), from X's chunks (act_box)
//   C <- Y, or C <- X (C += X with add) without an activation
// as unfused torch computes F.gelu(F.linear(...)). Buffers are written in
// the order their stores are issued, alternating, so before a write the
// store that read the buffer last (the one before the latest) must have
// read it: bulk_wait_read<1>; in place (act without pre), X's only store is
// C's, after it. TMA clips rows and columns past M and N. The bias of the
// tile's 256 columns sits in shared memory (bias_s, stored just before the
// epilogue; zeros without a bias). A tile stores 4 or 8 boxes, an even count, so the alternation
// runs on across tiles.
template <class T, class C>
__device__ __forceinline__ void store_tma(const float (&d)[128], C* boxes, const T* bias_s, int64_t m0, int64_t n0,
                                          int z, const CUtensorMap* tc, const CUtensorMap* tp, int act, bool add,
                                          uint64_t* loaded, int c, int tid) {
  constexpr int kW = 128 / sizeof(C), kEl = 16 / sizeof(C);  // a box's columns; a 16-byte chunk's
  constexpr bool kF = std::is_same_v<C, float>;
  const int w = tid / 32, g = tid % 32 / 4, q = tid % 4;
  int used = 0;  // boxes this call has stored
  // the consumer's 128 threads wait until the store that read buffer `used`
  // last is done with it
  auto claim = [&] {
    if (tid == 0) bulk_wait_read<1>();
    named_barrier(1 + c, 128);
  };
  // every thread's writes to buf, seen by the TMA unit, then one thread stores it
  auto store = [&](const CUtensorMap* map, const C* buf, int box, bool to_add) {
    fence_async_shared();
    named_barrier(1 + c, 128);
    if (tid == 0) {
      if (to_add) tma_reduce_add_3d(map, buf, int(n0) + kW * box, int(m0), z);
      else tma_store_3d(map, buf, int(n0) + kW * box, int(m0), z);
      bulk_commit();
    }
    ++used;
  };
#pragma unroll
  for (int box = 0; box < 256 / kW; ++box) {
    C* x = boxes + (used % 2) * 64 * kW;
    // a 16-bit C += P: the old C box comes in by TMA (load_old_box); one
    // store a box (used == box) and no act or pre, as matmul_check allows
    const bool load = !kF && add;
    if (load) {
      // box + 1's old C into the other buffer once the store that read it
      // (box - 1's) is done; box 0's was asked for with the tile's k-tiles
      if (box + 1 < 256 / kW && tid == 0) {
        bulk_wait_read<0>();
        load_old_box(boxes + (used + 1) % 2 * 64 * kW, tc, n0 + kW * (box + 1), m0, z, &loaded[(used + 1) % 2]);
      }
      // each buffer is loaded twice a tile (4 boxes): the second time, parity 1
      mbar_wait(&loaded[used % 2], box / 2);
      // the mbarrier (one arrival, thread 0's) orders no thread's bias_s
      // writes: claim's barrier does that on the other paths
      if (box == 0) named_barrier(1 + c, 128);
    } else {
      claim();
    }
    if constexpr (!kF) {
      // 16 columns (8-column groups j, j + 1) at a time by one stmatrix.x4
      // (swizzled_x4_base). The old C of a 16-bit C += P comes back through
      // ldmatrix in the same layout.
      const uint32_t base = swizzled_x4_base(x, w, tid % 32);
#pragma unroll
      for (int jj = 0; jj < kW / 8; jj += 2) {
        const int j = box * (kW / 8) + jj;
        // the thread's two columns' bias in each group, one 32-bit load each
        // (zeros without a bias: no predicate)
        float v[4][2];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int jx = j + i / 2, h = i % 2;
          const Vec<T, 2> bp = *reinterpret_cast<const Vec<T, 2>*>(bias_s + 8 * jx + 2 * q);
          v[i][0] = d[4 * jx + 2 * h] + to_acc(bp.v[0]), v[i][1] = d[4 * jx + 2 * h + 1] + to_acc(bp.v[1]);
        }
        const uint32_t addr = base ^ uint32_t(jj << 4);
        if (load) {  // P + old C in float, one rounding
          uint32_t old_c[4];
          ldsm_x4<false>(old_c, addr);
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const float2 o = unpack2<C>(old_c[i]);
            v[i][0] += o.x, v[i][1] += o.y;
          }
        }
        uint32_t r[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) r[i] = pack2<C>(v[i][0], v[i][1]);
        stsm_x4(addr, r);
      }
    } else {
#pragma unroll
      for (int jj = 0; jj < kW / 8; ++jj) {
        const int j = box * (kW / 8) + jj, col = 8 * jj + 2 * q;  // col: in the box
        // the thread's two columns' bias, one 32-bit load (zeros without a bias)
        const Vec<T, 2> bp = *reinterpret_cast<const Vec<T, 2>*>(bias_s + 8 * j + 2 * q);
        const float b0 = to_acc(bp.v[0]), b1 = to_acc(bp.v[1]);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = 16 * w + g + 8 * h;
          Vec<C, 2>* at = reinterpret_cast<Vec<C, 2>*>(x + r * kW + ((col / kEl) ^ (r % 8)) * kEl + col % kEl);
          *at = Vec<C, 2>{{d[4 * j + 2 * h] + b0, d[4 * j + 2 * h + 1] + b1}};
        }
      }
    }
    if constexpr (std::is_same_v<C, float>) {
      store(tc, x, box, add);
    } else {
      if (act == TC_ACT_NONE) {  // uniform
        store(tc, x, box, false);
        continue;
      }
      C* y = x;
      if (tp) {
        store(tp, x, box, false);
        y = boxes + (used % 2) * 64 * kW;
        claim();  // also orders X's fragment writes before act_box's reads of other threads' chunks
      } else {
        named_barrier(1 + c, 128);  // X's fragment writes before act_box's reads of other threads' chunks
      }
      act_box(act, x, y, tid);
      store(tc, y, box, false);
    }
  }
}

// Asks L2 for the C values an accumulating epilogue will read (this
// consumer's 64 rows x 256 columns), issued as the tile's k-tiles start, so
// the epilogue's loads are L2 hits: at K = 512 the tile's 8 k-tiles take ~6 us,
// several DRAM latencies.
template <class T>
__device__ __forceinline__ void prefetch_out(const Out<T>& out, int64_t m0, int64_t n0, int64_t M, int64_t N,
                                             int tid) {
  if (!out.add) return;
  const int es = out.cf ? 4 : 2, lines = 256 * es / 128;  // 128-byte lines a row
  const char* base = out.cf ? reinterpret_cast<const char*>(out.cf) : reinterpret_cast<const char*>(out.c);
  for (int i = tid; i < 64 * lines; i += 128) {
    const int64_t m = m0 + i / lines, n = n0 + i % lines * (128 / es);
    if (m < M && n < N) asm volatile("prefetch.global.L2 [%0];\n" ::"l"(base + (m * N + n) * es));
  }
}

// The k-tiles [t0, t1) a tile of batch z multiplies, and the batch its
// operands are read from: all of K in batch z, or with kslice the z-th slice
// of K in batch 0.
struct KRange {
  int t0, t1, zc;
};
__device__ __forceinline__ KRange k_range(int z, int kslice, int tiles_k) {
  if (kslice == 0) return {0, tiles_k, z};
  return {z * kslice, min(tiles_k, (z + 1) * kslice), 0};
}

// The output tile a persistent block's `tile` is: batch z, then grouped_tile
// within it (every block walks tiles blockIdx.x, + gridDim.x, ...).
struct TileAt {
  int z;
  int64_t m0, n0;
};
__device__ __forceinline__ TileAt tile_at(int64_t tile, int64_t tiles_mn, int64_t M, int64_t N, bool small) {
  if (small) {  // uniform: tiles, M and N below 2^32
    const uint32_t t = uint32_t(tile), tmn = uint32_t(tiles_mn);
    const auto [m0, n0] = grouped_tile<uint32_t>(t % tmn, uint32_t(M), uint32_t(N), BM, BN);
    return {int(t / tmn), m0, n0};
  }
  const auto [m0, n0] = grouped_tile(tile % tiles_mn, M, N, BM, BN);
  return {int(tile / tiles_mn), m0, n0};
}

// What block blockIdx.x multiplies: f(at, k-tiles, slot) for each piece.
// Tiles: its output tiles (blockIdx.x, + gridDim.x, ...), each over all of
// K (or kslice's slice), slot = the tile's batch. Stream-K (kSK): the runs
// of stream_k_groups (matmul_core.h), `units` of them; run u's pieces, a
// tile's tail and the next tile's head at most, go to partial slots 2u and
// 2u + 1.
template <bool kSK, class F>
__device__ __forceinline__ void each_work(int64_t tiles, int64_t tiles_mn, int tiles_k, int kslice, int64_t units,
                                          int64_t M, int64_t N, bool small, F&& f) {
  if constexpr (kSK) {
    const StreamKGroups sg = stream_k_groups(M, N);
    const int64_t L = sg.group_tiles() * tiles_k;  // a group's k-tiles
    for (int64_t u = blockIdx.x; u < units; u += gridDim.x) {
      const int64_t g = u % sg.groups, j = u / sg.groups, end = (j + 1) * L / sg.per_group;
      int slot = int(2 * u);
      for (int64_t i = j * L / sg.per_group; i < end; ++slot) {
        const int64_t t = i / tiles_k;
        const int t0 = int(i - t * tiles_k), t1 = int(t0 + (end - i) < tiles_k ? t0 + (end - i) : tiles_k);
        f(TileAt{0, (sg.walk_m ? t : g) * BM, (sg.walk_m ? g : t) * BN}, KRange{t0, t1, 0}, slot);
        i += t1 - t0;
      }
    }
  } else {
    for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      const TileAt at = tile_at(tile, tiles_mn, M, N, small);
      f(at, k_range(at.z, kslice, tiles_k), at.z);
    }
  }
}

// kTA: A is m-major (unit stride along m); kTB: B is n-major.
// kslice > 0 splits K (matmul_core.h): `batch` counts K's slices of kslice
// k-tiles each (the last one shorter) over one batch of A and B, and slice z
// writes its partials at z*M*N, the way batch z would.
// kSK, stream-K (matmul_core.h): `batch` counts the runs of k-tiles
// (each_work) over one batch of A and B, and each piece's float32 partial
// tile goes whole to its slot of tma_c, a [2 batch][BM][BN] workspace.
template <class T, bool kTA, bool kTB, bool kSK>
__global__ void __launch_bounds__(kThreads, 1)
gemm_wgmma_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
                  const __grid_constant__ CUtensorMap tma_c, const __grid_constant__ CUtensorMap tma_pre, bool tma_out,
                  int64_t M, int64_t N, int64_t K, int64_t batch, int kslice, const T* __restrict__ bias, T* pre,
                  int act, Out<T> out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  // the 128-byte swizzle repeats every 1 KiB: tiles start on that boundary
  // (an offset from smem_raw, not a rounded integer: the compiler then knows
  // the epilogue's slabs are shared memory and issues STS/LDS, not generic
  // ST/LD, which it did through the uintptr_t round trip)
  T* sa = reinterpret_cast<T*>(smem_raw + (1024 - smem_addr(smem_raw) % 1024) % 1024);
  T* sb = sa + kStages * kATile;
  __shared__ __align__(8) uint64_t full[kStages], empty[kStages], loaded[kConsumers][2];
  const int warpgroup = threadIdx.x / 128, tid = threadIdx.x % 128;
  const int64_t tiles_mn = ((M + BM - 1) / BM) * ((N + BN - 1) / BN), tiles = kSK ? tiles_mn : tiles_mn * batch;
  const int tiles_k = int((K + BK - 1) / BK);
  const bool small = tiles <= UINT32_MAX && M + BM <= UINT32_MAX && N + BN <= UINT32_MAX;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], kConsumers);
    for (int i = 0; i < kConsumers * 2; ++i) mbar_init(&loaded[i / 2][i % 2], 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");  // visible to the TMA unit
  }
  __syncthreads();
  pdl_start();  // the setup above overlapped the previous kernel's tail (launch_pdl)

  // `it` counts k-tiles across this block's output tiles, the same way in the
  // producer and the consumers, so stage and phase follow from it alone
  // (2^32 k-tiles in one block, ~10^18 flops, is out of reach).
  if (warpgroup == 0) {  // producer
    setmaxnreg_dec<40>();
    if (tid == 0) {
      uint32_t it = 0;
      // stream-K: the groups' runs j read the larger operand's rows together, once (stream_k_groups);
      // the other operand is read again by every tile of a group, so it should outlive the streamed one in L2
      // (GPT-2's fc weight gradient, H200 ncu: 233.9 -> 142.3 MB read from DRAM, cuBLAS 125.9; 584 -> 600
      // TFLOP/s by ncu_gpt_gemms.py --time on two machines whose cuBLAS took 683 and 673)
      bool walk_m = false;
      if constexpr (kSK) walk_m = stream_k_groups(M, N).walk_m;
      const uint64_t pol_a = kSK ? l2_policy(walk_m) : 0, pol_b = kSK ? l2_policy(!walk_m) : 0;
      each_work<kSK>(tiles, tiles_mn, tiles_k, kslice, batch, M, N, small, [&](const TileAt& at, KRange kr, int) {
        for (int t = kr.t0; t < kr.t1; ++t, ++it) {
          const int s = it % kStages;
          if (it >= kStages) mbar_wait(&empty[s], (it / kStages - 1) & 1);
          mbar_expect_bytes(&full[s], (kATile + kBTile) * sizeof(T));
          load_tile<kTA, BM, kSK>(sa + s * kATile, &tma_a, t, at.m0, kr.zc, &full[s], pol_a);
          load_tile<kTB, BN, kSK>(sb + s * kBTile, &tma_b, t, at.n0, kr.zc, &full[s], pol_b);
        }
      });
    }
    return;
  }

  setmaxnreg_inc<232>();
  const int c = warpgroup - 1;
  float* staged = reinterpret_cast<float*>(sb + kStages * kBTile) + c * kOut;  // this consumer's epilogue slab
  T* bias_s = reinterpret_cast<T*>(reinterpret_cast<float*>(sb + kStages * kBTile) + kConsumers * kOut) + c * BN;
  uint32_t it = 0;
  each_work<kSK>(tiles, tiles_mn, tiles_k, kslice, batch, M, N, small, [&](const TileAt& at, KRange kr, int slot) {
    float d[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0.0f;
    // Tile t's wgmmas are issued while tile t-1's may still run (wait<1>), so
    // the tensor cores do not drain between k-tiles; a stage goes back to the
    // producer once the group that read it has completed.
    if constexpr (!kSK) prefetch_out(out.at(at.z * M * N), at.m0 + c * 64, at.n0, M, N, tid);
    // store_tma's bias, 2 columns a thread: loaded now, stored to bias_s
    // after the k-tiles (a load's latency off the tile's start)
    T bv[2] = {from_acc<T>(0.0f), from_acc<T>(0.0f)};
    if (tma_out && bias)
#pragma unroll
      for (int e = 0; e < 2; ++e)
        if (at.n0 + tid + 128 * e < N) bv[e] = bias[at.n0 + tid + 128 * e];
    for (int t = kr.t0; t < kr.t1; ++t, ++it) {
      const int s = it % kStages;
      mbar_wait(&full[s], (it / kStages) & 1);
      wgmma_pin(d);
      wgmma_fence();
      const T* a_tile = sa + s * kATile + c * 64 * BK;  // this consumer's 64 rows (either layout)
      const T* b_tile = sb + s * kBTile;
#pragma unroll
      for (int kk = 0; kk < BK; kk += 16)
        wgmma_ss<T, 256, kTA, kTB>(d, tile_desc<kTA>(a_tile, kk), tile_desc<kTB>(b_tile, kk));
      wgmma_commit();
      wgmma_wait<1>();
      wgmma_pin(d);
      if (t > kr.t0 && tid == 0) mbar_arrive(&empty[(it - 1) % kStages]);
      // a 16-bit C += P: the old C of the epilogue's first box, asked for
      // once the previous tile's third box store (the same buffer) is done
      if (tma_out && out.add && !out.cf && t == kr.t0 && tid == 0) {
        bulk_wait_read<1>();
        load_old_box(reinterpret_cast<T*>(staged), &tma_c, at.n0, at.m0 + c * 64, at.z, &loaded[c][0]);
      }
    }
    wgmma_wait<0>();
    wgmma_pin(d);
    if (tid == 0) mbar_arrive(&empty[(it - 1) % kStages]);
    // The producer is already loading the next tile while this one is stored.
    const int64_t z_off = at.z * M * N;
    const int64_t m0 = at.m0 + c * 64;
    // the previous tile's reads of bias_s ended before its last box's
    // barrier; store_tma's first barrier orders these writes before its reads
    if (tma_out) bias_s[tid] = bv[0], bias_s[tid + 128] = bv[1];  // zeros without a bias
    if constexpr (kSK)  // the whole 128 x 256 partial tile into its slot (no bias: the sum adds it)
      store_tma<T, float>(d, staged, bias_s, c * 64, 0, slot, &tma_c, nullptr, TC_ACT_NONE, false, nullptr, c, tid);
    else if (tma_out && out.cf)
      store_tma<T, float>(d, staged, bias_s, m0, at.n0, at.z, &tma_c, nullptr, TC_ACT_NONE, out.add, nullptr, c,
                          tid);
    else if (tma_out)
      store_tma<T, T>(d, reinterpret_cast<T*>(staged), bias_s, m0, at.n0, at.z, &tma_c,
                      pre ? &tma_pre : nullptr, act, out.add, loaded[c], c, tid);
    else if (out.cf)
      store_out<T, true>(d, staged, m0, at.n0, M, N, bias, nullptr, TC_ACT_NONE, out.at(z_off), c, tid);
    else
      store_out<T, false>(d, staged, m0, at.n0, M, N, bias, pre ? pre + z_off : nullptr, act, out.at(z_off), c,
                          tid);
  });
  if (tma_out && tid == 0) bulk_wait_all();  // the boxes' shared memory lives until the stores have read it
#endif
}

// How TMA can read X(z, i, k) = X[z*sz + i*si + k*sk]: k-major (unit stride
// along k) or m/n-major (along i), the other strides and the address
// multiples of 16 bytes; kNone when neither.
enum class Major { kK, kMN, kNone };

template <class T>
Major major(const T* X, int64_t si, int64_t sk, int64_t sz, int64_t batch) {
  if (reinterpret_cast<uintptr_t>(X) % 16 != 0 || (batch > 1 && sz % 8 != 0)) return Major::kNone;
  if (sk == 1 && si % 8 == 0) return Major::kK;
  if (si == 1 && sk % 8 == 0) return Major::kMN;
  return Major::kNone;
}

// One operand's 3-D map, innermost first: k-major (K, rows, batch) in
// [box_rows][64 k] boxes, m/n-major (rows, K, batch) in [64 k][64 i] boxes.
// False when TMA cannot describe it or the driver refuses it (tma_map; the caller then runs mma).
template <class T>
bool tensor_map(CUtensorMap* map, const T* X, Major mj, int64_t rows, int64_t K, int64_t si, int64_t sk,
                int64_t sz, int64_t batch, int box_rows) {
  const bool mn = mj == Major::kMN;
  const int64_t outer = mn ? sk : si, inner_extent = mn ? rows : K, outer_extent = mn ? K : rows;
  const int64_t step = batch == 1 ? outer * outer_extent : sz;  // batch 1: never stepped, any legal stride
  return tma_map<T, 3>(map, X, {inner_extent, outer_extent, batch}, {outer, step},
                       {cuuint32_t(mn ? kBox : BK), cuuint32_t(mn ? BK : box_rows), 1});
}

// Multiprocessors of device `dev` (asked once per device).
inline int sm_count(int dev) {
  static std::atomic<int> known[64];
  int v = known[dev].load(std::memory_order_relaxed);
  if (v == 0) {
    if (cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || v <= 0) v = 1;
    known[dev].store(v, std::memory_order_relaxed);
  }
  return v;
}

// C (or pre) [batch, M, N] as a 3-D TMA map (N, M, batch) in boxes of 64
// rows x 128 bytes, for store_tma: rows 16-byte multiples, base 16-byte
// aligned; false otherwise or when the driver refuses it (store_out then).
template <class E>
bool out_map(CUtensorMap* map, const E* C, int64_t M, int64_t N, int64_t batch) {
  if (!C || N % (16 / sizeof(E)) != 0 || reinterpret_cast<uintptr_t>(C) % 16 != 0 || batch > INT32_MAX) return false;
  return tma_map<E, 3>(map, C, {N, M, batch}, {N, M * N}, {128 / sizeof(E), 64, 1}, CU_TENSOR_MAP_L2_PROMOTION_NONE);
}

// A persistent grid: one block per multiprocessor (fewer for fewer tiles),
// each walking its tiles. The shared-memory attribute is set once per device.
template <class T, bool kTA, bool kTB, bool kSK>
tc_status run(const char* op, int dev, const CUtensorMap& ta, const CUtensorMap& tb, const Gemm<T>& g, int kslice,
              int64_t batch, cudaStream_t stream) {
  auto kernel = gemm_wgmma_kernel<T, kTA, kTB, kSK>;
  static std::atomic<uint64_t> smem_set{0};
  TC_RETURN_IF_ERROR(smem_opt_in(op, kernel, kSmemBytes, smem_set));
  const int64_t tiles = kSK ? batch : ((g.M + BM - 1) / BM) * ((g.N + BN - 1) / BN) * batch;
  const int64_t blocks = std::min<int64_t>(tiles, sm_count(dev));
  // store_tma where C has a TMA map: 16-bit (C and pre), or float32
  // (split-K's partials: `batch` slices; stream-K's: 2 batch partial tiles)
  CUtensorMap tc{}, tp{};
  const bool tma_out = kSK    ? out_map(&tc, g.Cf, BM, BN, 2 * batch)
                       : g.Cf ? out_map(&tc, g.Cf, g.M, g.N, batch)
                              : kslice == 0 && out_map(&tc, g.C, g.M, g.N, batch) &&
                                    (!g.pre || out_map(&tp, g.pre, g.M, g.N, batch));
  return launch_pdl(op, kernel, unsigned(blocks), kThreads, kSmemBytes, stream, ta, tb, tc, tp, tma_out, g.M, g.N, g.K,
                    batch, kslice, g.bias, g.pre, g.act, g.out());
}

// Launches the wgmma kernel and sets *ran; leaves *ran false when this build,
// device or problem cannot run it (the caller then runs mma). With kslice,
// g (one batch) is multiplied as `slices` slices of K (split-K's partials);
// with units, as stream-K's runs into 2 units partial tiles at g.Cf.
template <class T>
tc_status launch(const char* op, const Gemm<T>& g, cudaStream_t stream, bool* ran, int kslice = 0,
                 int64_t slices = 1, int64_t units = 0) {
  *ran = false;
  // TMA coordinates are 32-bit, and a 0-wide box does not encode
  int dev = 0;
  if (!hopper_runs<gemm_wgmma_kernel<T, false, false, false>>(&dev) || g.K == 0 || g.M > INT32_MAX || g.N > INT32_MAX ||
      g.K > INT32_MAX)
    return TC_OK;
  const Major ma = major(g.A, g.sam, g.sak, g.sab, g.batch), mb = major(g.B, g.sbn, g.sbk, g.sbb, g.batch);
  CUtensorMap ta, tb;
  if (ma == Major::kNone || mb == Major::kNone ||
      !tensor_map(&ta, g.A, ma, g.M, g.K, g.sam, g.sak, g.sab, g.batch, BM) ||
      !tensor_map(&tb, g.B, mb, g.N, g.K, g.sbn, g.sbk, g.sbb, g.batch, BN))
    return TC_OK;
  if (CUtensorMap probe; units && !out_map(&probe, g.Cf, BM, BN, 2 * units)) return TC_OK;
  *ran = true;
  const bool a_mn = ma == Major::kMN, b_mn = mb == Major::kMN;
  const int64_t batch = units ? units : kslice ? slices : g.batch;
  auto go = [&](auto kernel_run) { return kernel_run(op, dev, ta, tb, g, kslice, batch, stream); };
  if (units) {
    if (!a_mn) return b_mn ? go(run<T, false, true, true>) : go(run<T, false, false, true>);
    return b_mn ? go(run<T, true, true, true>) : go(run<T, true, false, true>);
  }
  if (!a_mn) return b_mn ? go(run<T, false, true, false>) : go(run<T, false, false, false>);
  return b_mn ? go(run<T, true, true, false>) : go(run<T, true, false, false>);
}
}  // namespace wg

// ---------------------------------------------------------------------------
// gemv: y[r] = sum_k X[r*sx + k] * v[k*sv] (+ bias[r*sbias]), one 256-thread
// block per (row, K slice): the matrix is read once, in 16-byte vectors when
// its rows and v allow (kVec), each thread summing every 256th vector of its
// slice before the block's fixed-order reduction. A slice of a split K
// writes its sum to partial[slice][r] instead (float, double for double).

template <class T, bool kVec>
__global__ void __launch_bounds__(256)
gemv_kernel(int64_t rows, int64_t K, int64_t chunk, const T* __restrict__ X, int64_t sx, const T* __restrict__ v,
            int64_t sv, const T* __restrict__ bias, int64_t sbias, T* __restrict__ y, acc_t<T>* __restrict__ partial) {
  using Acc = acc_t<T>;
  __shared__ Acc scratch[32];
  const int64_t r = blockIdx.x, k0 = blockIdx.y * chunk, k1 = min(K, k0 + chunk);
  const T* x = X + r * sx;
  Acc acc = 0;
  if constexpr (kVec) {
    constexpr int V = Vec<T>::size;
    Acc lane[V] = {};  // one running sum per vector lane: 4x shorter chains than one
#pragma unroll 4
    for (int64_t k = k0 + threadIdx.x * V; k < k1; k += 256 * V) {
      const Vec<T> a = load_vec<T>(x + k), b = load_vec<T>(v + k);
#pragma unroll
      for (int j = 0; j < V; ++j) lane[j] += to_acc(a.v[j]) * to_acc(b.v[j]);
    }
#pragma unroll
    for (int j = 0; j < V; ++j) acc += lane[j];
  } else {
    for (int64_t k = k0 + threadIdx.x; k < k1; k += 256) acc += to_acc(x[k]) * to_acc(v[k * sv]);
  }
  acc = block_reduce(acc, Sum(), Acc(0), scratch, 256 / 32);
  if (threadIdx.x != 0) return;
  if (partial)
    partial[blockIdx.y * rows + r] = acc;
  else
    y[r] = from_acc<T>(acc + (bias ? to_acc(bias[r * sbias]) : Acc(0)));
}

// ---------------------------------------------------------------------------
// split K (split-K tiles and split GEMVs): out = bias + the sum of the
// slices' partials, in slice order (the same bits every run), one output per
// thread of a grid-stride loop.

template <class T>
__global__ void sum_slices_kernel(int64_t outputs, int64_t N, int64_t splits, const acc_t<T>* __restrict__ W,
                                  const T* __restrict__ bias, T* __restrict__ out) {
  pdl_start();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < outputs;
       i += int64_t(gridDim.x) * blockDim.x) {
    acc_t<T> acc = W[i];
    for (int64_t s = 1; s < splits; ++s) acc += W[s * outputs + i];
    out[i] = from_acc<T>(bias ? acc + to_acc(bias[i % N]) : acc);
  }
}

template <class T>
tc_status sum_slices(const char* op, int64_t outputs, int64_t N, int64_t splits, const acc_t<T>* W, const T* bias,
                     T* out, cudaStream_t stream) {
  const int64_t blocks = std::min<int64_t>((outputs + 255) / 256, 132 * 8);
  return launch_pdl(op, sum_slices_kernel<T>, unsigned(blocks), 256, 0, stream, outputs, N, splits, W, bias, out);
}

// stream-K (the wgmma kernel's runs, each_work): out = bias + the sum of a
// tile's partials, from the runs of its group that cover its k-tiles, in run
// order (the same bits every run). Block (tile, group of 8 rows), 8 columns
// a thread: 16-byte loads of the float32 slots, one 16-byte store where the
// 8 outputs are whole and aligned.
template <class T>
__global__ void __launch_bounds__(256)
sum_runs_kernel(int64_t M, int64_t N, int tiles_k, const float* __restrict__ W, const T* __restrict__ bias,
                T* __restrict__ out) {
  constexpr int BM = wg::BM, BN = wg::BN;
  pdl_start();
  const StreamKGroups sg = stream_k_groups(M, N);
  const int64_t mt = blockIdx.x % sg.tiles_m, nt = blockIdx.x / sg.tiles_m, m0 = mt * BM, n0 = nt * BN;
  const int r = blockIdx.y * 8 + threadIdx.x / 32, col = threadIdx.x % 32 * 8;
  if (m0 + r >= M || n0 + col >= N) return;
  const int64_t g = sg.walk_m ? nt : mt, P = sg.per_group, L = sg.group_tiles() * tiles_k;
  const int64_t first = (sg.walk_m ? mt : nt) * tiles_k, last = first + tiles_k;  // the tile's k-tiles in its group
  auto start = [&](int64_t j) { return j * L / P; };
  int64_t j = first * P / L;  // the group's run holding k-tile `first`: start(j) <= first < start(j + 1)
  while (start(j) > first) --j;
  while (start(j + 1) <= first) ++j;
  float acc[8] = {};
  for (; j < P && start(j) < last; ++j) {
    if (start(j + 1) == start(j)) continue;  // an empty run stored nothing
    // the run's second piece when it began in the tile before
    const int64_t slot = 2 * (j * sg.groups + g) + (start(j) < first);
    const float* w = W + (slot * BM + r) * BN + col;
    const float4 a = *reinterpret_cast<const float4*>(w), b = *reinterpret_cast<const float4*>(w + 4);
    acc[0] += a.x, acc[1] += a.y, acc[2] += a.z, acc[3] += a.w;
    acc[4] += b.x, acc[5] += b.y, acc[6] += b.z, acc[7] += b.w;
  }
  const int64_t m = m0 + r, n = n0 + col;
  T* o = out + m * N + n;
  if (n + 8 <= N && reinterpret_cast<uintptr_t>(o) % 16 == 0) {
    Vec<T, 8> v;
#pragma unroll
    for (int e = 0; e < 8; ++e) v.v[e] = from_acc<T>(bias ? acc[e] + to_acc(bias[n + e]) : acc[e]);
    store_vec(o, v);
  } else {
    for (int e = 0; e < 8 && n + e < N; ++e) o[e] = from_acc<T>(bias ? acc[e] + to_acc(bias[n + e]) : acc[e]);
  }
}

// Stream-K (16-bit operands): the wgmma kernel's plan.splits runs into
// float32 partial tiles at W, then their sum; *ran false where wgmma cannot
// run (the caller then runs the tiles over all of K).
template <class T>
tc_status launch_stream_k(const char* op, const Gemm<T>& g, MatmulPlan plan, float* W, cudaStream_t stream,
                          bool* ran) {
  // each_work and sum_runs_kernel assume at most two pieces a run (a tile's tail, the next one's head)
  const StreamKGroups sg = stream_k_groups(g.M, g.N);
  TC_REQUIRE(plan.splits == sg.runs() && sg.per_group >= sg.group_tiles(),
             "%s: a stream-K plan of %lld runs does not fit %lld x %lld (an internal error)", op,
             (long long)plan.splits, (long long)g.M, (long long)g.N);
  Gemm<T> s = g;
  s.bias = nullptr, s.pre = nullptr, s.act = TC_ACT_NONE, s.add = false, s.C = nullptr, s.Cf = W;
  TC_RETURN_IF_ERROR(wg::launch<T>(op, s, stream, ran, 0, 1, plan.splits));
  if (!*ran) return TC_OK;
  const int64_t tiles_mn = ((g.M + wg::BM - 1) / wg::BM) * ((g.N + wg::BN - 1) / wg::BN);
  return launch_pdl(op, sum_runs_kernel<T>, dim3(unsigned(tiles_mn), wg::BM / 8), 256, 0, stream, g.M, g.N,
                    int((g.K + wg::BK - 1) / wg::BK), W, g.bias, g.C);
}

template <class T>
tc_status launch_gemv(const char* op, const Gemm<T>& g, MatmulPlan plan, acc_t<T>* W, cudaStream_t stream) {
  const bool of_a = g.N == 1 && g.sak == 1;  // y = A v; else y = u B, B's columns as the rows
  const T* X = of_a ? g.A : g.B;
  const T* v = of_a ? g.B : g.A;
  const int64_t sx = of_a ? g.sam : g.sbn, sv = of_a ? g.sbk : g.sak;
  constexpr int V = Vec<T>::size;
  const bool vec = sv == 1 && sx % V == 0 && g.K % V == 0 && reinterpret_cast<uintptr_t>(X) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(v) % 16 == 0;
  TC_REQUIRE(plan.rows <= INT32_MAX, "%s: %lld outputs is too many for one launch", op, (long long)plan.rows);
  const dim3 grid(unsigned(plan.rows), unsigned(plan.splits));
  auto kernel = vec ? gemv_kernel<T, true> : gemv_kernel<T, false>;
  kernel<<<grid, 256, 0, stream>>>(plan.rows, g.K, plan.chunk, X, sx, v, sv, g.bias, g.N == 1 ? 0 : 1, g.C,
                                   plan.splits > 1 ? W : nullptr);
  if (plan.splits > 1) return sum_slices<T>(op, plan.rows, g.N, plan.splits, W, g.bias, g.C, stream);
  return TC_OK;
}

template <class T>
tc_status launch(const char* op, tc_gemm_algo algo, const Gemm<T>& g, cudaStream_t stream, bool* fused);

// K's slices, each writing float (double) partials W[z] for the slice from
// k = z*chunk on, then their sum. 16-bit operands: the wgmma kernel, every
// slice in one persistent launch (k offsets in the kernel; the operands' own
// 2-D tensor maps), into a float32 C (c_float). Otherwise the slices as a
// batch of one kernel (A and B advanced by chunk along k per batch): regtile
// for float and double, whose output type the partials are, mma for 16-bit
// where wgmma cannot run; the last, shorter slice on its own.
template <class T>
tc_status launch_split_k(const char* op, const Gemm<T>& g, MatmulPlan plan, acc_t<T>* W, cudaStream_t stream) {
  const int64_t full = g.K / plan.chunk, rest = g.K - full * plan.chunk, MN = g.M * g.N;
  constexpr bool kWide = std::is_same_v<T, acc_t<T>>;
  constexpr tc_gemm_algo kAlgo = kWide ? TC_GEMM_REGTILE : TC_GEMM_MMA;
  auto into = [](Gemm<T>& s, acc_t<T>* w) {
    if constexpr (kWide) s.C = w;
    else s.C = nullptr, s.Cf = w;
  };
  Gemm<T> s = g;
  s.bias = nullptr, s.pre = nullptr, s.act = TC_ACT_NONE, s.add = false;
  into(s, W);
  if constexpr (!kWide) {
    bool ran = false;
    TC_RETURN_IF_ERROR(wg::launch<T>(op, s, stream, &ran, int(plan.chunk / wg::BK), plan.splits));
    if (ran) return sum_slices<T>(op, MN, g.N, plan.splits, W, g.bias, g.C, stream);
  }
  s.K = plan.chunk, s.batch = full, s.sab = plan.chunk * g.sak, s.sbb = plan.chunk * g.sbk;
  bool fused;  // nothing to apply after: no bias, no activation
  if (full > 0) TC_RETURN_IF_ERROR(launch<T>(op, kAlgo, s, stream, &fused));
  if (rest > 0) {
    s.K = rest, s.batch = 1, s.A = g.A + full * s.sab, s.B = g.B + full * s.sbb;
    into(s, W + full * MN);
    TC_RETURN_IF_ERROR(launch<T>(op, kAlgo, s, stream, &fused));
  }
  return sum_slices<T>(op, MN, g.N, plan.splits, W, g.bias, g.C, stream);
}

// ---------------------------------------------------------------------------
// launchers

// A vector walk needs a unit stride along the walked axis, and that axis's
// extent, the other strides and the pointer all multiples of 4 elements, so
// each 4-element load is aligned and either fully inside the matrix or fully
// out. If either operand misses this both go scalar (5 instantiations per
// type, not 9).
template <class T>
Walk walk(const T* X, int64_t I, int64_t K, int64_t si, int64_t sk, int64_t sz) {
  if (reinterpret_cast<uintptr_t>(X) % sizeof(Quad<T>) != 0 || sz % 4 != 0) return Walk::kStrided;
  if (sk == 1 && K % 4 == 0 && si % 4 == 0) return Walk::kVecK;
  if (si == 1 && I % 4 == 0 && sk % 4 == 0) return Walk::kVecI;
  return Walk::kStrided;
}

// After a kernel that wrote P (unfused()): C = act(P), P read from pre, or
// from C itself in place; the relu and gelu families' pointwise loop, and
// the same values as wgmma's fused epilogue.
template <class T>
tc_status activation_pass(const char* op, tc_dtype dtype, const Gemm<T>& g, void* stream) {
  if (g.act == TC_ACT_NONE) return TC_OK;
  const int64_t n = g.batch * g.M * g.N;
  const T* P = g.pre ? g.pre : g.C;
  switch (g.act) {
    case TC_ACT_RELU: return launch_pointwise<false>(op, dtype, n, P, nullptr, g.C, stream, ReluFn());
    case TC_ACT_GELU: return launch_pointwise<false>(op, dtype, n, P, nullptr, g.C, stream, GeluFn<GeluErf>());
    default: return launch_pointwise<false>(op, dtype, n, P, nullptr, g.C, stream, GeluFn<GeluTanh>());
  }
}

// One launch of `algo` over g.batch <= 65535 batches. wgmma applies the
// epilogue itself (*fused); every other kernel writes P (unfused()).
template <class T>
tc_status launch(const char* op, tc_gemm_algo algo, const Gemm<T>& full, cudaStream_t stream, bool* fused) {
  *fused = false;
  if constexpr (sizeof(T) == 2)
    if (algo == TC_GEMM_WGMMA || algo == TC_GEMM_AUTO) {
      TC_RETURN_IF_ERROR(wg::launch<T>(op, full, stream, fused));
      if (*fused) return TC_OK;
    }
  const Gemm<T> g = full.unfused();
  const unsigned nz = unsigned(g.batch);
  switch (algo) {
    case TC_GEMM_NAIVE: {
      dim3 block(16, 16), grid(unsigned((g.N + 15) / 16), unsigned((g.M + 15) / 16), nz);
      TC_REQUIRE((g.M + 15) / 16 <= 65535, "%s: M = %lld too large for the naive variant", op, (long long)g.M);
      gemm_naive_kernel<T><<<grid, block, 0, stream>>>(g.M, g.N, g.K, g.A, g.sab, g.sam, g.sak, g.B, g.sbb,
                                                       g.sbk, g.sbn, g.bias, g.out());
      return TC_OK;
    }
    case TC_GEMM_TILED: {
      dim3 block(kTile, kTile), grid(unsigned((g.N + kTile - 1) / kTile), unsigned((g.M + kTile - 1) / kTile), nz);
      TC_REQUIRE((g.M + kTile - 1) / kTile <= 65535, "%s: M = %lld too large for the tiled variant", op,
                 (long long)g.M);
      gemm_tiled_kernel<T><<<grid, block, 0, stream>>>(g.M, g.N, g.K, g.A, g.sab, g.sam, g.sak, g.B, g.sbb,
                                                       g.sbk, g.sbn, g.bias, g.out());
      return TC_OK;
    }
    case TC_GEMM_WGMMA:
    case TC_GEMM_MMA:
    case TC_GEMM_AUTO:
      if constexpr (sizeof(T) == 2) {
        return mma::launch<T>(op, g, stream);  // where wgmma could not run
      } else if (algo != TC_GEMM_AUTO) {
        return tc_fail(TC_ERR_INVALID_ARGUMENT,
                       "%s: the %s variant takes float16 or bfloat16 (float32 and float64 run on CUDA cores)", op,
                       algo == TC_GEMM_MMA ? "mma" : "wgmma");
      }
      [[fallthrough]];
    case TC_GEMM_REGTILE: {
      dim3 grid(unsigned((g.M + BM - 1) / BM), unsigned((g.N + BN - 1) / BN), nz);
      TC_REQUIRE((g.N + BN - 1) / BN <= 65535, "%s: N = %lld too large", op, (long long)g.N);
      const Walk wa = walk<T>(g.A, g.M, g.K, g.sam, g.sak, g.sab), wb = walk<T>(g.B, g.N, g.K, g.sbn, g.sbk, g.sbb);
      auto kernel = gemm_regtile_kernel<T, Walk::kStrided, Walk::kStrided>;
      if (wa != Walk::kStrided && wb != Walk::kStrided)
        kernel = wa == Walk::kVecK
                     ? (wb == Walk::kVecK ? gemm_regtile_kernel<T, Walk::kVecK, Walk::kVecK>
                                          : gemm_regtile_kernel<T, Walk::kVecK, Walk::kVecI>)
                     : (wb == Walk::kVecK ? gemm_regtile_kernel<T, Walk::kVecI, Walk::kVecK>
                                          : gemm_regtile_kernel<T, Walk::kVecI, Walk::kVecI>);
      kernel<<<grid, kThreads, 0, stream>>>(g.M, g.N, g.K, g.A, g.sab, g.sam, g.sak, g.B, g.sbb, g.sbk, g.sbn,
                                            g.bias, g.out());
      return TC_OK;
    }
    default:
      return tc_fail(TC_ERR_INVALID_ARGUMENT, "%s: unknown algo %d", op, int(algo));
  }
}

}  // namespace

tc_status matmul_cuda(const char* op, const tc_matmul_params* p) {
  TC_RETURN_IF_ERROR(matmul_check(op, p));
  const tc_matmul_params q = fold_batch(*p);
  return dispatch_cuda(p->dtype, op, [&](auto tag) -> tc_status {
    using T = decltype(tag);
    const Gemm<T> g = Gemm<T>::of(&q);
    if (g.batch * g.M * g.N == 0) return TC_OK;
    const cudaStream_t stream = as_stream(p->stream);
    MatmulPlan plan = matmul_plan(q);
    if (plan.kind != MatmulPlan::kTiles) {
      using Acc = acc_t<T>;
      const bool have = plan.splits == 1 || (q.workspace && q.workspace_bytes >= matmul_workspace_bytes(q));
      if (plan.kind == MatmulPlan::kGemv && have) {
        TC_RETURN_IF_ERROR(launch_gemv<T>(op, g.unfused(), plan, static_cast<Acc*>(q.workspace), stream));
        TC_RETURN_IF_ERROR(check_launch(op));
        return activation_pass(op, p->dtype, g, p->stream);
      }
      if constexpr (!std::is_same_v<T, Acc>) {
        if (plan.kind == MatmulPlan::kStreamK && have) {
          bool ran = false;
          TC_RETURN_IF_ERROR(launch_stream_k<T>(op, g.unfused(), plan, static_cast<float*>(q.workspace), stream, &ran));
          TC_RETURN_IF_ERROR(check_launch(op));
          if (ran) return activation_pass(op, p->dtype, g, p->stream);
          plan = matmul_plan(q, /*stream_k=*/false);  // wgmma cannot run it: split K instead
        }
      }
      if (plan.kind == MatmulPlan::kSplitK && have) {
        TC_RETURN_IF_ERROR(launch_split_k<T>(op, g.unfused(), plan, static_cast<Acc*>(q.workspace), stream));
        TC_RETURN_IF_ERROR(check_launch(op));
        return activation_pass(op, p->dtype, g, p->stream);
      }
    }
    constexpr int64_t kMaxBatch = 65535;  // the grid's y and z limit
    for (int64_t z0 = 0; z0 < g.batch; z0 += kMaxBatch) {
      const Gemm<T> chunk = g.slice(z0, std::min(kMaxBatch, g.batch - z0));
      bool fused = false;
      TC_RETURN_IF_ERROR(launch<T>(op, p->algo, chunk, stream, &fused));
      TC_RETURN_IF_ERROR(check_launch(op));
      if (!fused) TC_RETURN_IF_ERROR(activation_pass(op, p->dtype, chunk, p->stream));
    }
    return TC_OK;
  });
}

tc_status tc_matmul_cuda(const tc_matmul_params* p) { return matmul_cuda("matmul", p); }
