/* layer_norm family, over the last dim of x viewed as [rows, cols] (contiguous;
 * cols is the product of normalized_shape):
 *   mean = sum(x) / cols,   rstd = 1 / sqrt(sum((x - mean)^2) / cols + eps)
 *   y    = (x - mean) * rstd * weight + bias        weight, bias [cols]; NULL: 1, 0
 * Backward from x and the saved statistics, with xhat = (x - mean) * rstd and
 * wg = grad_y * weight:
 *   grad_x      = rstd * (wg - mean(wg) - xhat * mean(wg * xhat))    (means over the row)
 *   grad_weight = sum over rows of grad_y * xhat,   grad_bias = sum over rows of grad_y
 * mean and rstd are float32 arrays of `rows` (float64 for float64 x); every
 * statistic is computed in that type. On CUDA grad_weight and grad_bias are
 * reduced in two deterministic stages (per-block partials, then a fixed-order
 * sum; no atomics) through a workspace of
 * tc_layer_norm_backward_workspace_size() bytes (0 on the CPU). */
#ifndef TINYCUDA_LAYER_NORM_H
#define TINYCUDA_LAYER_NORM_H
#include "common.h"

typedef struct {
  tc_dtype dtype;
  int64_t rows, cols;
  double eps;
  const void* x;
  const void* weight; /* [cols] or NULL */
  const void* bias;   /* [cols] or NULL */
  void* y;
  void* mean; /* [rows] float32 (float64 for float64), or NULL: not written */
  void* rstd; /* [rows] likewise */
  void* stream;
} tc_layer_norm_params;

typedef struct {
  tc_dtype dtype;
  int64_t rows, cols;
  const void* grad_y;
  const void* x;
  const void* mean; /* the forward's statistics */
  const void* rstd;
  const void* weight;  /* [cols] or NULL */
  void* grad_x;        /* may be NULL: not computed */
  void* grad_weight;   /* may be NULL: not computed */
  void* grad_bias;     /* may be NULL: not computed */
  void* workspace;
  size_t workspace_bytes;
  void* stream;
} tc_layer_norm_backward_params;

TC_API tc_status tc_layer_norm_cpu(const tc_layer_norm_params* p);
TC_API tc_status tc_layer_norm_cuda(const tc_layer_norm_params* p);
TC_API size_t tc_layer_norm_backward_workspace_size(const tc_layer_norm_backward_params* p);
TC_API tc_status tc_layer_norm_backward_cpu(const tc_layer_norm_backward_params* p);
TC_API tc_status tc_layer_norm_backward_cuda(const tc_layer_norm_backward_params* p);

#endif
