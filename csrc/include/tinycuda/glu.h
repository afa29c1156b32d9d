/* glu family (gated linear units), elementwise over n contiguous elements of
 * one dtype: y = act(a) * b, with act one of
 *   TC_GLU_SILU       swiglu: silu(a) = a / (1 + exp(-a))
 *   TC_GLU_GELU       geglu:  gelu(a), erf form      (F.gelu approximate='none')
 *   TC_GLU_GELU_TANH  geglu:  gelu(a), tanh form     (F.gelu approximate='tanh')
 * Backward, one pass from the forward inputs (act recomputed, nothing saved):
 *   grad_a = grad_y * b * act'(a),  grad_b = grad_y * act(a).
 * Computed in float (double for double). */
#ifndef TINYCUDA_GLU_H
#define TINYCUDA_GLU_H
#include "common.h"

typedef enum { TC_GLU_SILU = 0, TC_GLU_GELU = 1, TC_GLU_GELU_TANH = 2 } tc_glu_act;

typedef struct {
  tc_dtype dtype;
  int64_t n;
  int act; /* a tc_glu_act */
  const void* a;
  const void* b;
  void* y;
  void* stream; /* cudaStream_t; ignored on the CPU */
} tc_glu_params;

typedef struct {
  tc_dtype dtype;
  int64_t n;
  int act;
  const void* grad_y;
  const void* a; /* the forward inputs */
  const void* b;
  void* grad_a;
  void* grad_b;
  void* stream;
} tc_glu_backward_params;

TC_API tc_status tc_glu_cpu(const tc_glu_params* p);
TC_API tc_status tc_glu_cuda(const tc_glu_params* p);
TC_API tc_status tc_glu_backward_cpu(const tc_glu_backward_params* p);
TC_API tc_status tc_glu_backward_cuda(const tc_glu_backward_params* p);

#endif
