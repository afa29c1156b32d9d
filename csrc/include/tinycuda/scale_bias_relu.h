/* scale_bias_relu family: y = relu(x * scale + bias), x viewed as [rows, cols]
 * and bias [cols] broadcast over rows; scale is a scalar.
 * Backward, from the saved output y (y > 0 exactly where x*scale+bias > 0):
 *   grad_x    = grad_y * [y > 0] * scale
 *   grad_bias = sum over rows of grad_y * [y > 0]
 * grad_bias is reduced in two deterministic stages through a workspace of
 * tc_scale_bias_relu_backward_workspace_size() bytes (0 on the CPU). */
#ifndef TINYCUDA_SCALE_BIAS_RELU_H
#define TINYCUDA_SCALE_BIAS_RELU_H
#include "common.h"

typedef struct {
  tc_dtype dtype;
  int64_t rows, cols;
  double scale;
  const void* x;
  const void* bias;
  void* y;
  void* stream;
} tc_scale_bias_relu_params;

typedef struct {
  tc_dtype dtype;
  int64_t rows, cols;
  double scale;
  const void* grad_y;
  const void* y;
  void* grad_x;    /* may be NULL: not computed */
  void* grad_bias; /* may be NULL: not computed */
  void* workspace;
  size_t workspace_bytes;
  void* stream;
} tc_scale_bias_relu_backward_params;

TC_API tc_status tc_scale_bias_relu_cpu(const tc_scale_bias_relu_params* p);
TC_API tc_status tc_scale_bias_relu_cuda(const tc_scale_bias_relu_params* p);
TC_API size_t tc_scale_bias_relu_backward_workspace_size(const tc_scale_bias_relu_backward_params* p);
TC_API tc_status tc_scale_bias_relu_backward_cpu(const tc_scale_bias_relu_backward_params* p);
TC_API tc_status tc_scale_bias_relu_backward_cuda(const tc_scale_bias_relu_backward_params* p);

#endif
