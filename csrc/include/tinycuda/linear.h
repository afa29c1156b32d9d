/* linear family: y = act(x @ weight^T + bias) (torch.nn.functional.linear,
 * and an activation fused into its epilogue: F.gelu(F.linear(x, w, b))).
 *   x [M, K], weight [N, K], bias [N] or NULL, y [M, N]; all contiguous.
 *   activation: a tc_activation (matmul.h), applied to the product + bias
 *   rounded to the dtype (P); pre [M, N] (or NULL) receives P, which the
 *   activation's backward reads: grad_P = grad_y * act'(P), the relu and gelu
 *   families' backward, then the backward below with grad_P for grad_y.
 * Backward (any output pointer may be NULL to skip it):
 *   grad_x      = grad_y @ weight        [M, K]
 *   grad_weight = grad_y^T @ x           [N, K]
 *   grad_bias   = sum over M of grad_y   [N]  (the reduce family's sum;
 *                 workspace of tc_linear_backward_workspace_size() bytes)
 *   With an activation, grad_y is the gradient of act(P), P at pre: the
 *   three use grad_P = grad_y * act'(P) instead, made in one pass with
 *   grad_bias's partial sums (the workspace holds grad_P on CUDA). The
 *   products read grad_P rounded to the dtype on both devices; grad_bias
 *   sums it unrounded (the accumulator type) on CUDA, rounded on the CPU,
 *   so for float16/bfloat16 the two differ by more than the order of adds.
 * All three products are the matmul family's, with the operands' strides
 * swapped, so no operand is ever transposed in memory. */
#ifndef TINYCUDA_LINEAR_H
#define TINYCUDA_LINEAR_H
#include "common.h"
#include "matmul.h" /* tc_gemm_algo, tc_activation */

typedef struct {
  tc_dtype dtype;
  int64_t M, N, K;
  const void* x;
  const void* weight;
  const void* bias; /* may be NULL */
  int activation;   /* a tc_activation */
  void* y;
  void* pre;        /* NULL, or [M, N]: P (with an activation only) */
  tc_gemm_algo algo;
  void* stream;
} tc_linear_params;

typedef struct {
  tc_dtype dtype;
  int64_t M, N, K;
  const void* grad_y;
  const void* pre;  /* NULL, or [M, N]: P, with an activation only */
  int activation;   /* a tc_activation: TC_ACT_NONE, or grad_y is act(P)'s gradient */
  const void* x;
  const void* weight;
  void* grad_x;
  void* grad_weight;
  void* grad_bias;
  void* workspace;
  size_t workspace_bytes;
  tc_gemm_algo algo;
  void* stream;
} tc_linear_backward_params;

TC_API tc_status tc_linear_cpu(const tc_linear_params* p);
TC_API tc_status tc_linear_cuda(const tc_linear_params* p);
TC_API size_t tc_linear_backward_workspace_size(const tc_linear_backward_params* p);
TC_API tc_status tc_linear_backward_cpu(const tc_linear_backward_params* p);
TC_API tc_status tc_linear_backward_cuda(const tc_linear_backward_params* p);

#endif
