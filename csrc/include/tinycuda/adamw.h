/* adamw family: one AdamW step (Loshchilov & Hutter, as torch.optim.AdamW
 * computes it) over many tensors in one pass, and the global L2 norm of many
 * tensors (gradient clipping's), each a few launches on CUDA however many
 * tensors there are.
 *
 * multi_tensor_l2norm: norm = sqrt(sum over tensors t and elements i of x_ti^2),
 * summed in float (double for float64) in a fixed order: the result is the
 * same bit for bit run to run.
 *
 * adamw, per element of every tensor, at step s >= 1 (the count after this
 * step, as torch's state['step']):
 *   clip = min(1, max_grad_norm / (grad_norm + 1e-6))  where grad_norm is given
 *          (torch.nn.utils.clip_grad_norm_'s coefficient, applied here instead
 *          of a pass that scales the gradients), else 1
 *   g  = grad * clip
 *   p  = p * (1 - lr * weight_decay)
 *   m  = m + (1 - beta1) * (g - m)                        (torch's lerp)
 *   v  = beta2 * v + (1 - beta2) * g * g
 *   p  = p - lr / (1 - beta1^s) * m / (sqrt(v) / sqrt(1 - beta2^s) + eps)
 * in float (double for float64), every buffer of one dtype (torch's default
 * state: exp_avg and exp_avg_sq as the parameter), each tensor contiguous.
 *
 * Master weights (master != NULL; dtype float16 or bfloat16): the parameters
 * and gradients are 16-bit, exp_avg, exp_avg_sq and master float32; the step
 * above runs on master (p is master's value) and then writes the parameter as
 * master rounded to nearest. A model then runs in 16 bits with no cast a step
 * (llm.c's arrangement; it rounds stochastically, this rounds to nearest, so
 * a run is the same bit for bit).
 * The pointer arrays are host memory (of device pointers for CUDA); CUDA
 * passes them to its kernels as launch arguments: no copy and nothing to
 * free (a CUDA graph captures the step, but replays it with the lr, step and
 * pointers it was captured with).
 *
 * CUDA: the norm needs tc_multi_tensor_l2norm_workspace_size() bytes (one
 * partial sum a chunk of 16384 elements); the step needs none. */
#ifndef TINYCUDA_ADAMW_H
#define TINYCUDA_ADAMW_H
#include "common.h"

typedef struct {
  tc_dtype dtype;          /* of every tensor */
  int64_t count;           /* tensors */
  const int64_t* numel;    /* [count] elements of each */
  void* const* params;     /* [count], updated in place */
  const void* const* grads;
  void* const* exp_avg;    /* [count], updated in place */
  void* const* exp_avg_sq; /* [count], updated in place */
  void* const* master;     /* NULL, or [count] float32 copies of 16-bit params (above), updated in place */
  double lr, beta1, beta2, eps, weight_decay;
  int64_t step;            /* >= 1 */
  const void* grad_norm;   /* NULL, or one float (double for float64): the norm to clip
                              by; device memory for CUDA */
  double max_grad_norm;    /* > 0 with grad_norm */
  void* stream;
} tc_adamw_params;

typedef struct {
  tc_dtype dtype;
  int64_t count;
  const int64_t* numel;
  const void* const* tensors; /* [count] */
  void* norm;              /* [1] float (double for float64) */
  void* workspace;
  size_t workspace_bytes;
  void* stream;
} tc_multi_tensor_l2norm_params;

TC_API size_t tc_multi_tensor_l2norm_workspace_size(const tc_multi_tensor_l2norm_params* p);

TC_API tc_status tc_adamw_cpu(const tc_adamw_params* p);
TC_API tc_status tc_adamw_cuda(const tc_adamw_params* p);
TC_API tc_status tc_multi_tensor_l2norm_cpu(const tc_multi_tensor_l2norm_params* p);
TC_API tc_status tc_multi_tensor_l2norm_cuda(const tc_multi_tensor_l2norm_params* p);

#endif
