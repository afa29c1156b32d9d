/* add_layer_norm family: a pre-LayerNorm block's residual add fused with the
 * LayerNorm that follows it (GPT-2's blocks), over the last dim of
 * [rows, cols] (contiguous; cols is the product of normalized_shape):
 *   s    = x + residual              (rounded to x's dtype: the new residual stream, written out)
 *   y    = layer_norm(s) * weight + bias      (layer_norm.h's math, on the rounded s)
 * One pass: x and residual are read once, y and s written once (layer_norm
 * after a separate add reads s again), and y is layer_norm(s) bit for bit.
 * Backward from s and the saved mean and rstd, with grad_s the gradient
 * reaching s from later blocks (NULL: 0):
 *   grad_x = grad_residual = layer_norm's grad_x (layer_norm.h) + grad_s
 *   grad_weight, grad_bias as layer_norm's
 * so autograd never adds the residual stream's two gradients in a pass of its
 * own. mean and rstd are float32 arrays of `rows` (float64 for float64 x). On
 * CUDA grad_weight and grad_bias are reduced in two deterministic stages
 * through a workspace of tc_add_layer_norm_backward_workspace_size() bytes
 * (0 on the CPU). */
#ifndef TINYCUDA_ADD_LAYER_NORM_H
#define TINYCUDA_ADD_LAYER_NORM_H
#include "common.h"

typedef struct {
  tc_dtype dtype;
  int64_t rows, cols;
  double eps;
  const void* x;
  const void* residual;
  const void* weight;  /* [cols] or NULL: 1 */
  const void* bias;    /* [cols] or NULL: 0 */
  void* y;
  void* residual_out;  /* s = x + residual */
  void* mean;          /* [rows] float32 (float64 for float64), or NULL: not written */
  void* rstd;          /* [rows] likewise */
  void* stream;
} tc_add_layer_norm_params;

typedef struct {
  tc_dtype dtype;
  int64_t rows, cols;
  const void* grad_y;
  const void* grad_residual_out;  /* grad_s, or NULL: 0 */
  const void* residual_out;       /* the forward's s */
  const void* mean;               /* the forward's statistics */
  const void* rstd;
  const void* weight;             /* [cols] or NULL */
  void* grad_x;                   /* also grad_residual; may be NULL: not computed */
  void* grad_weight;              /* may be NULL: not computed */
  void* grad_bias;                /* may be NULL: not computed */
  void* workspace;
  size_t workspace_bytes;
  void* stream;
} tc_add_layer_norm_backward_params;

TC_API tc_status tc_add_layer_norm_cpu(const tc_add_layer_norm_params* p);
TC_API tc_status tc_add_layer_norm_cuda(const tc_add_layer_norm_params* p);
TC_API size_t tc_add_layer_norm_backward_workspace_size(const tc_add_layer_norm_backward_params* p);
TC_API tc_status tc_add_layer_norm_backward_cpu(const tc_add_layer_norm_backward_params* p);
TC_API tc_status tc_add_layer_norm_backward_cuda(const tc_add_layer_norm_backward_params* p);

#endif
