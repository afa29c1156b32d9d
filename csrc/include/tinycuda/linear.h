/* linear family: y = x @ weight^T + bias (torch.nn.functional.linear).
 *   x [M, K], weight [N, K], bias [N] or NULL, y [M, N]; all contiguous.
 * Backward (any output pointer may be NULL to skip it):
 *   grad_x      = grad_y @ weight        [M, K]
 *   grad_weight = grad_y^T @ x           [N, K]
 *   grad_bias   = sum over M of grad_y   [N]  (the sum family's reduction;
 *                 workspace of tc_linear_backward_workspace_size() bytes)
 * All three products are the matmul family's, with the operands' strides
 * swapped, so no operand is ever transposed in memory. */
#ifndef TINYCUDA_LINEAR_H
#define TINYCUDA_LINEAR_H
#include "common.h"
#include "matmul.h" /* tc_gemm_algo */

typedef struct {
  tc_dtype dtype;
  int64_t M, N, K;
  const void* x;
  const void* weight;
  const void* bias; /* may be NULL */
  void* y;
  tc_gemm_algo algo;
  void* stream;
} tc_linear_params;

typedef struct {
  tc_dtype dtype;
  int64_t M, N, K;
  const void* grad_y;
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
