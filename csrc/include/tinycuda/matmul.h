/* matmul family: C = A @ B, batched (torch.matmul / torch.bmm), and the GEMM
 * every other product in tinycuda runs through (linear, its backward).
 *
 *   P[z, m, n] = sum_k A(z, m, k) * B(z, k, n)  (+ bias[n])   z < batch
 *   C[z, m, n] = act(P[z, m, n])    act: none, relu, gelu (erf) or gelu (tanh),
 *                                   applied to the fp32 accumulator (epilogue)
 *   A(z, m, k) = a[z*a_stride[0] + m*a_stride[1] + k*a_stride[2]]
 *   B(z, k, n) = b[z*b_stride[0] + k*b_stride[1] + n*b_stride[2]]
 *   C [batch, M, N] contiguous, and pre (when not NULL) the same shape: P,
 *   what the activation's backward needs, written by the same kernel.
 *   Strides are in elements, any sign-free values:
 *   a transposed operand is a stride swap, a broadcast one a batch stride of 0,
 *   so nothing is copied. Accumulation in float (double for double).
 * Accumulation into C (accumulate = 1: C[z, m, n] += P, one rounding, BLAS's
 * beta = 1) and a float32 C for float16/bfloat16 operands (c_float = 1: P is
 * not rounded to dtype) serve chunked products that sum into one buffer, as
 * fused_linear_cross_entropy's float32 grad_weight over token chunks; neither
 * takes an activation.
 * Few output tiles and a long K, or one output row or column (a GEMV), split
 * K across blocks on CUDA when the workspace allows (tc_matmul_workspace_size):
 * slices in any dtype, or for float16/bfloat16 on Hopper stream-K's runs (a
 * tile's tail and the next tile's head each). The partial products are added
 * in a fixed order (deterministic), the bias with them, and the activation
 * after, as the tile kernels' epilogue computes it. Not with accumulate or
 * c_float: those run the tile kernels.
 * Backward is two more products of this family with swapped strides:
 *   grad_A = grad_P @ B^T,  grad_B = A^T @ grad_P
 * (summed over z where an operand was broadcast), grad_P = grad_C without an
 * activation, else grad_C * act'(pre) (the relu and gelu families' backward). */
#ifndef TINYCUDA_MATMUL_H
#define TINYCUDA_MATMUL_H
#include "common.h"

/* The CUDA GEMM variants, slowest to fastest, kept so a reader can measure
 * each step (tinycuda bench matmul --impls variants). The CPU ignores this. */
typedef enum {
  TC_GEMM_AUTO = 0,    /* the fastest: WGMMA for fp16/bf16 (MMA where it cannot run), else REGTILE;
                          GEMV for one output row or column, split-K for few fp32/fp64 tiles */
  TC_GEMM_NAIVE = 1,   /* one thread per output, operands straight from memory */
  TC_GEMM_TILED = 2,   /* 32x32 shared-memory tiles, one output per thread */
  TC_GEMM_REGTILE = 3, /* 128x128 tiles, 8x8 outputs per thread in registers */
  TC_GEMM_MMA = 4,     /* tensor cores (mma.sync), 4-stage cp.async pipeline; fp16/bf16 only */
  TC_GEMM_WGMMA = 5    /* Hopper: TMA + wgmma, producer/consumer warpgroups; on sm_90a for operands
                          with 16-byte aligned rows along k or along m/n, MMA for the rest */
} tc_gemm_algo;

/* The activation of the epilogue, the same functions as the relu and gelu
 * families (NaN passes relu). */
typedef enum { TC_ACT_NONE = 0, TC_ACT_RELU = 1, TC_ACT_GELU = 2, TC_ACT_GELU_TANH = 3 } tc_activation;

typedef struct {
  tc_dtype dtype;
  int64_t batch, M, N, K;
  const void* a;
  int64_t a_stride[3]; /* batch, m, k */
  const void* b;
  int64_t b_stride[3]; /* batch, k, n */
  const void* bias;    /* [N] or NULL: added to every row */
  int activation;      /* a tc_activation */
  void* c;             /* [batch, M, N] of dtype, or of float32 with c_float */
  int accumulate;      /* 0: C = P; 1: C += P (c is read first) */
  int c_float;         /* 1: c is float32 (float16/bfloat16 operands only) */
  void* pre;           /* NULL, or [batch, M, N]: the product + bias before the activation (needs one) */
  void* workspace;     /* CUDA split-K / split-GEMV partials; NULL (or too small): no split */
  size_t workspace_bytes;
  tc_gemm_algo algo;
  void* stream;
} tc_matmul_params;

TC_API tc_status tc_matmul_cpu(const tc_matmul_params* p);
TC_API tc_status tc_matmul_cuda(const tc_matmul_params* p);
/* Bytes of workspace with which tc_matmul_cuda splits K across blocks (0: it
 * would not): products with few output tiles and a long K (float32/float64
 * with algo auto or regtile; float16/bfloat16 with auto or wgmma), and (any
 * dtype, algo auto) one output row or column with few outputs. */
TC_API size_t tc_matmul_workspace_size(const tc_matmul_params* p);

#endif
