/* rms_norm family, over the last dim of x viewed as [rows, cols] (contiguous;
 * cols is the product of normalized_shape):
 *   rstd = 1 / sqrt(sum(x^2) / cols + eps),   y = x * rstd * weight   (weight [cols]; NULL: 1;
 *                                                                    in place when y == x)
 * Backward from x and the saved rstd, with xhat = x * rstd, wg = grad_y * weight:
 *   grad_x      = rstd * (wg - xhat * mean(wg * xhat))     (mean over the row)
 *   grad_weight = sum over rows of grad_y * xhat
 * rstd is a float32 array of `rows` (float64 for float64 x); every statistic
 * is computed in that type.
 *
 * Options, as Hugging Face's models and Liger-Kernel compute them:
 *   offset: the weight is (offset + weight), Gemma's 1 + weight (needs a weight)
 *   casting (where x's dtype T rounds; no difference for float32/float64):
 *     TC_RMS_CAST_GEMMA  all in float, one rounding: y = T(xhat * (offset + w)) (the default; Gemma)
 *     TC_RMS_CAST_LLAMA  y = T(T(xhat) * T(offset + w)): xhat rounded, then times the weight (LLaMA:
 *                        `weight * hidden.to(input_dtype)`)
 *     TC_RMS_CAST_NONE   as LLAMA with rstd rounded to T too (the module written without casts)
 *   The backward follows the same roundings: LLAMA and NONE round wg = grad_y * (offset + w)
 *   to T and add grad_weight from T(xhat), as autograd through those modules does. torch's default eps (None) is the epsilon of that
 * type; the torch layer resolves it, the core takes a number. On CUDA
 * grad_weight is reduced in two deterministic stages through a workspace of
 * tc_rms_norm_backward_workspace_size() bytes (0 on the CPU). */
#ifndef TINYCUDA_RMS_NORM_H
#define TINYCUDA_RMS_NORM_H
#include "common.h"

enum { TC_RMS_CAST_GEMMA = 0, TC_RMS_CAST_LLAMA = 1, TC_RMS_CAST_NONE = 2 };

typedef struct {
  tc_dtype dtype;
  int64_t rows, cols;
  double eps;
  double offset;       /* the weight is offset + weight */
  int casting;         /* TC_RMS_CAST_* */
  const void* x;
  const void* weight; /* [cols] or NULL */
  void* y;
  void* rstd; /* [rows] float32 (float64 for float64), or NULL: not written */
  void* stream;
} tc_rms_norm_params;

typedef struct {
  tc_dtype dtype;
  int64_t rows, cols;
  double offset;       /* the forward's */
  int casting;
  const void* grad_y;
  const void* x;
  const void* rstd;    /* the forward's statistic */
  const void* weight;  /* [cols] or NULL */
  void* grad_x;        /* may be NULL: not computed */
  void* grad_weight;   /* may be NULL: not computed */
  void* workspace;
  size_t workspace_bytes;
  void* stream;
} tc_rms_norm_backward_params;

TC_API tc_status tc_rms_norm_cpu(const tc_rms_norm_params* p);
TC_API tc_status tc_rms_norm_cuda(const tc_rms_norm_params* p);
TC_API size_t tc_rms_norm_backward_workspace_size(const tc_rms_norm_backward_params* p);
TC_API tc_status tc_rms_norm_backward_cpu(const tc_rms_norm_backward_params* p);
TC_API tc_status tc_rms_norm_backward_cuda(const tc_rms_norm_backward_params* p);

#endif
