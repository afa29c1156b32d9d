// linear: y = x @ W^T + b, and its backward, through one strided GEMM
//
//   C[M, N] = A[M, K] @ B[K, N] (+ bias[N]),  A(m, k) = A[m*sam + k*sak],
//                                             B(k, n) = B[k*sbk + n*sbn],
//   C row-major. Accumulation in float (double for double).
//
//   forward      y  = x  @ W^T : A = x  (K, 1)  B = W  (1, K)   M, N, K
//   grad_x          = gy @ W   : A = gy (N, 1)  B = W  (K, 1)   M, K, N
//   grad_W          = gy^T @ x : A = gy (1, N)  B = x  (K, 1)   N, K, M
//   grad_b          = column sums of gy (the sum family's kernels)
//
// Three variants, kept to show why the last is fast (bench: linear variants):
//   naive    one thread per output, K loads of A and B from global memory each:
//            2K loads per 2K flops, bound by L1/L2 bandwidth.
//   tiled    32x32 tiles staged in shared memory: each global element is read
//            once per tile instead of 32 times; still 2 shared loads per FMA.
//   regtile  128x128x8 tiles, 256 threads, 8x8 outputs per thread held in
//            registers: 16 shared loads (4 LDS.128) feed 64 FMAs; the next
//            tile is fetched into registers while this one is multiplied
//            (double-buffered shared memory, one barrier per k-step).
// Tile loads pick the thread->element map that keeps global reads coalesced
// for the operand's contiguous axis, and shared rows are padded by 4 floats so
// the transposing stores hit 32 distinct banks.
#include "../linear.h"
#include "../sum.h"
#include "cuda_utils.cuh"

namespace {

struct Operand {
  const void* ptr;
  int64_t s0, s1;  // stride of the first (row) and second (col) index
};

// ---------------------------------------------------------------------------
// naive

template <class T>
__global__ void gemm_naive_kernel(int64_t M, int64_t N, int64_t K, const T* __restrict__ A,
                                  int64_t sam, int64_t sak, const T* __restrict__ B, int64_t sbk,
                                  int64_t sbn, const T* __restrict__ bias, T* __restrict__ C) {
  using Acc = acc_t<T>;
  const int64_t n = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int64_t m = blockIdx.y * int64_t(blockDim.y) + threadIdx.y;
  if (m >= M || n >= N) return;
  Acc acc = bias ? to_acc(bias[n]) : Acc(0);
  for (int64_t k = 0; k < K; ++k) acc += to_acc(A[m * sam + k * sak]) * to_acc(B[k * sbk + n * sbn]);
  C[m * N + n] = from_acc<T>(acc);
}

// ---------------------------------------------------------------------------
// tiled

constexpr int kTile = 32;

template <class T>
__global__ void __launch_bounds__(kTile * kTile)
gemm_tiled_kernel(int64_t M, int64_t N, int64_t K, const T* __restrict__ A, int64_t sam,
                  int64_t sak, const T* __restrict__ B, int64_t sbk, int64_t sbn,
                  const T* __restrict__ bias, T* __restrict__ C) {
  using Acc = acc_t<T>;
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
  if (m < M && n < N) C[m * N + n] = from_acc<T>(acc + (bias ? to_acc(bias[n]) : Acc(0)));
}

// ---------------------------------------------------------------------------
// regtile

constexpr int BM = 128, BN = 128, BK = 8, kThreads = 256;
constexpr int kPad = 4;                                // floats of padding per shared row
constexpr int kLoadsA = BM * BK / kThreads;            // 4 elements of A per thread per tile
constexpr int kLoadsB = BN * BK / kThreads;            // 4 of B

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

// 147 registers for fp32: one block per SM. Capping at 128 (2 blocks) spills
// 68 bytes; which wins is measured in the bench (BENCHMARKS.md).
template <class T>
__global__ void __launch_bounds__(kThreads)
gemm_regtile_kernel(int64_t M, int64_t N, int64_t K, const T* __restrict__ A, int64_t sam,
                    int64_t sak, const T* __restrict__ B, int64_t sbk, int64_t sbn,
                    const T* __restrict__ bias, T* __restrict__ C) {
  using Acc = acc_t<T>;
  __shared__ __align__(16) Acc As[2][BK][BM + kPad];
  __shared__ __align__(16) Acc Bs[2][BK][BN + kPad];
  const int tid = threadIdx.x;
  const int64_t m0 = blockIdx.x * int64_t(BM), n0 = blockIdx.y * int64_t(BN);
  const bool a_kmajor = sak == 1, b_nmajor = sbn == 1;

  // Element e of a tile -> (row, col) chosen so consecutive threads read
  // consecutive addresses of the operand's contiguous axis.
  auto a_coord = [&](int e, int& m, int& k) {
    if (a_kmajor) m = e / BK, k = e % BK; else m = e % BM, k = e / BM;
  };
  auto b_coord = [&](int e, int& k, int& n) {
    if (b_nmajor) k = e / BN, n = e % BN; else k = e % BK, n = e / BK;
  };
  Acc ra[kLoadsA], rb[kLoadsB];
  auto fetch = [&](int64_t k0) {
#pragma unroll
    for (int i = 0; i < kLoadsA; ++i) {
      int m, k;
      a_coord(tid + i * kThreads, m, k);
      ra[i] = (m0 + m < M && k0 + k < K) ? to_acc(A[(m0 + m) * sam + (k0 + k) * sak]) : Acc(0);
    }
#pragma unroll
    for (int i = 0; i < kLoadsB; ++i) {
      int k, n;
      b_coord(tid + i * kThreads, k, n);
      rb[i] = (k0 + k < K && n0 + n < N) ? to_acc(B[(k0 + k) * sbk + (n0 + n) * sbn]) : Acc(0);
    }
  };
  auto stash = [&](int buf) {
#pragma unroll
    for (int i = 0; i < kLoadsA; ++i) {
      int m, k;
      a_coord(tid + i * kThreads, m, k);
      As[buf][k][m] = ra[i];
    }
#pragma unroll
    for (int i = 0; i < kLoadsB; ++i) {
      int k, n;
      b_coord(tid + i * kThreads, k, n);
      Bs[buf][k][n] = rb[i];
    }
  };

  // Thread (ty, tx) owns rows ty*4 + {0..3, 64..67} and cols tx*4 + {0..3, 64..67}:
  // two 4-wide groups 64 apart keep each warp's LDS.128 reads conflict-free.
  const int ty = tid / 16, tx = tid % 16;
  Acc acc[8][8] = {};
  Acc a[8], b[8];
  const int64_t tiles = (K + BK - 1) / BK;
  if (tiles > 0) {
    fetch(0);
    stash(0);
    __syncthreads();
  }
  for (int64_t t = 0; t < tiles; ++t) {
    const int buf = int(t & 1);
    if (t + 1 < tiles) fetch((t + 1) * BK);
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      lds4(&As[buf][k][ty * 4], a, 0);
      lds4(&As[buf][k][ty * 4 + 64], a, 4);
      lds4(&Bs[buf][k][tx * 4], b, 0);
      lds4(&Bs[buf][k][tx * 4 + 64], b, 4);
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] += a[i] * b[j];
    }
    if (t + 1 < tiles) stash(buf ^ 1);
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int64_t m = m0 + ty * 4 + (i & 3) + (i >> 2) * 64;
    if (m >= M) continue;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int64_t n = n0 + tx * 4 + (j & 3) + (j >> 2) * 64;
      if (n < N) C[m * N + n] = from_acc<T>(acc[i][j] + (bias ? to_acc(bias[n]) : Acc(0)));
    }
  }
}

// ---------------------------------------------------------------------------
// launchers

template <class T>
tc_status gemm(const char* op, tc_gemm_algo algo, int64_t M, int64_t N, int64_t K, Operand a,
               Operand b, const void* bias, void* c, cudaStream_t stream) {
  if (M == 0 || N == 0) return TC_OK;
  const T* A = static_cast<const T*>(a.ptr);
  const T* B = static_cast<const T*>(b.ptr);
  const T* bs = static_cast<const T*>(bias);
  T* C = static_cast<T*>(c);
  switch (algo) {
    case TC_GEMM_NAIVE: {
      dim3 block(16, 16), grid(unsigned((N + 15) / 16), unsigned((M + 15) / 16));
      TC_REQUIRE(grid.y <= 65535, "%s: M = %lld too large for the naive variant", op, (long long)M);
      gemm_naive_kernel<T><<<grid, block, 0, stream>>>(M, N, K, A, a.s0, a.s1, B, b.s0, b.s1, bs, C);
      break;
    }
    case TC_GEMM_TILED: {
      dim3 block(kTile, kTile), grid(unsigned((N + kTile - 1) / kTile), unsigned((M + kTile - 1) / kTile));
      TC_REQUIRE(grid.y <= 65535, "%s: M = %lld too large for the tiled variant", op, (long long)M);
      gemm_tiled_kernel<T><<<grid, block, 0, stream>>>(M, N, K, A, a.s0, a.s1, B, b.s0, b.s1, bs, C);
      break;
    }
    case TC_GEMM_AUTO:
    case TC_GEMM_REGTILE: {
      dim3 grid(unsigned((M + BM - 1) / BM), unsigned((N + BN - 1) / BN));
      TC_REQUIRE((N + BN - 1) / BN <= 65535, "%s: N = %lld too large", op, (long long)N);
      gemm_regtile_kernel<T><<<grid, kThreads, 0, stream>>>(M, N, K, A, a.s0, a.s1, B, b.s0, b.s1, bs, C);
      break;
    }
    default:
      return tc_fail(TC_ERR_INVALID_ARGUMENT, "%s: unknown algo %d", op, int(algo));
  }
  return check_launch(op);
}

}  // namespace

tc_status tc_linear_cuda(const tc_linear_params* p) {
  TC_REQUIRE(p, "linear: params is NULL");
  TC_REQUIRE(p->M >= 0 && p->N >= 0 && p->K >= 0, "linear: negative size");
  if (p->M * p->N == 0) return TC_OK;
  TC_REQUIRE(p->y && (p->K == 0 || (p->x && p->weight)), "linear: a pointer is NULL");
  return dispatch_cuda(p->dtype, "linear", [&](auto tag) {
    using T = decltype(tag);
    return gemm<T>("linear", p->algo, p->M, p->N, p->K, {p->x, p->K, 1}, {p->weight, 1, p->K},
                   p->bias, p->y, as_stream(p->stream));
  });
}

tc_status tc_linear_backward_cuda(const tc_linear_backward_params* p) {
  const char* op = "linear_backward";
  TC_REQUIRE(p, "%s: params is NULL", op);
  TC_REQUIRE(p->M >= 0 && p->N >= 0 && p->K >= 0, "%s: negative size", op);
  TC_REQUIRE(p->M * p->N == 0 || p->grad_y, "%s: grad_y is NULL", op);
  TC_REQUIRE(!p->grad_weight || p->M * p->K == 0 || p->x, "%s: x is NULL", op);
  TC_REQUIRE(!p->grad_x || p->N * p->K == 0 || p->weight, "%s: weight is NULL", op);
  cudaStream_t stream = as_stream(p->stream);
  return dispatch_cuda(p->dtype, op, [&](auto tag) -> tc_status {
    using T = decltype(tag);
    if (p->grad_x)
      TC_RETURN_IF_ERROR(gemm<T>(op, p->algo, p->M, p->K, p->N, {p->grad_y, p->N, 1},
                                 {p->weight, p->K, 1}, nullptr, p->grad_x, stream));
    if (p->grad_weight)
      TC_RETURN_IF_ERROR(gemm<T>(op, p->algo, p->N, p->K, p->M, {p->grad_y, 1, p->N},
                                 {p->x, p->K, 1}, nullptr, p->grad_weight, stream));
    if (p->grad_bias) {
      tc_sum_params s{p->dtype, 1, p->M, p->N, p->grad_y, p->grad_bias,
                      p->workspace, p->workspace_bytes, p->stream};
      TC_RETURN_IF_ERROR(tc_sum_cuda(&s));
    }
    return TC_OK;
  });
}
