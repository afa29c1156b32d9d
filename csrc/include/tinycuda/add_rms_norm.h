/* add_rms_norm family: a pre-norm transformer block's residual add fused with
 * the RMSNorm that follows it, over the last dim of [rows, cols] (contiguous;
 * cols is the product of normalized_shape):
 *   s    = x + residual                 (rounded to x's dtype: the new residual stream, written out)
 *   rstd = 1 / sqrt(sum(s^2) / cols + eps),   y = s * rstd * weight   (weight [cols]; NULL: 1)
 * One pass: x and residual are read once, y and s written once (rms_norm
 * after a separate add reads s again). The statistics are those of the
 * rounded s, so y is rms_norm(s) bit for bit.
 * Backward from s and the saved rstd, with shat = s * rstd, wg = grad_y * weight
 * and grad_s the gradient reaching s from later blocks (NULL: 0):
 *   grad_x = grad_residual = rstd * (wg - shat * mean(wg * shat)) + grad_s
 *   grad_weight = sum over rows of grad_y * shat
 * offset and casting as rms_norm's (rms_norm.h).
 * rstd is a float32 array of `rows` (float64 for float64 x). On CUDA
 * grad_weight is reduced in two deterministic stages through a workspace of
 * tc_add_rms_norm_backward_workspace_size() bytes (0 on the CPU). */
#ifndef TINYCUDA_ADD_RMS_NORM_H
#define TINYCUDA_ADD_RMS_NORM_H
#include "common.h"

typedef struct {
  tc_dtype dtype;
  int64_t rows, cols;
  double eps;
  double offset;       /* the weight is offset + weight */
  int casting;         /* TC_RMS_CAST_* (rms_norm.h) */
  const void* x;
  const void* residual;
  const void* weight;  /* [cols] or NULL */
  void* y;
  void* residual_out;  /* s = x + residual */
  void* rstd;          /* [rows] float32 (float64 for float64), or NULL: not written */
  void* stream;
} tc_add_rms_norm_params;

typedef struct {
  tc_dtype dtype;
  int64_t rows, cols;
  double offset;                  /* the forward's */
  int casting;
  const void* grad_y;
  const void* grad_residual_out;  /* grad_s, or NULL: 0 */
  const void* residual_out;       /* the forward's s */
  const void* rstd;
  const void* weight;             /* [cols] or NULL */
  void* grad_x;                   /* also grad_residual; may be NULL: not computed */
  void* grad_weight;              /* may be NULL: not computed */
  void* workspace;
  size_t workspace_bytes;
  void* stream;
} tc_add_rms_norm_backward_params;

TC_API tc_status tc_add_rms_norm_cpu(const tc_add_rms_norm_params* p);
TC_API tc_status tc_add_rms_norm_cuda(const tc_add_rms_norm_params* p);
TC_API size_t tc_add_rms_norm_backward_workspace_size(const tc_add_rms_norm_backward_params* p);
TC_API tc_status tc_add_rms_norm_backward_cpu(const tc_add_rms_norm_backward_params* p);
TC_API tc_status tc_add_rms_norm_backward_cuda(const tc_add_rms_norm_backward_params* p);

#endif
