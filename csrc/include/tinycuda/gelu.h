/* gelu family, elementwise over n contiguous elements of one dtype, as F.gelu:
 *   approximate = TC_GELU_NONE  y = x Phi(x) = x/2 (1 + erf(x / sqrt(2)))
 *   approximate = TC_GELU_TANH  y = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
 * Backward from the forward input: grad_x = grad_y * gelu'(x) (gelu_math.h).
 * Computed in float (double for double). */
#ifndef TINYCUDA_GELU_H
#define TINYCUDA_GELU_H
#include "common.h"

typedef enum { TC_GELU_NONE = 0, TC_GELU_TANH = 1 } tc_gelu_approximate;

typedef struct {
  tc_dtype dtype;
  int64_t n;
  int approximate; /* a tc_gelu_approximate */
  const void* x;
  void* y;
  void* stream; /* cudaStream_t; ignored on the CPU */
} tc_gelu_params;

typedef struct {
  tc_dtype dtype;
  int64_t n;
  int approximate;
  const void* grad_y;
  const void* x; /* the forward input */
  void* grad_x;
  void* stream;
} tc_gelu_backward_params;

TC_API tc_status tc_gelu_cpu(const tc_gelu_params* p);
TC_API tc_status tc_gelu_cuda(const tc_gelu_params* p);
TC_API tc_status tc_gelu_backward_cpu(const tc_gelu_backward_params* p);
TC_API tc_status tc_gelu_backward_cuda(const tc_gelu_backward_params* p);

#endif
