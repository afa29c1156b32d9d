/* relu family: y = max(x, 0) and its backward grad_x = grad_y * [x > 0].
 * All buffers contiguous, n elements, one dtype.
 *
 * The training pair relu_mask / relu_mask_backward (what tinycuda.relu's
 * autograd uses) keeps the sign as a bitmask instead of a saved activation:
 * bit j of mask[i] is [x[8i + j] > 0], ceil(n / 8) bytes. The backward then
 * reads 4 + 1/8 bytes per fp32 element instead of 8. */
#ifndef TINYCUDA_RELU_H
#define TINYCUDA_RELU_H
#include "common.h"

typedef struct {
  tc_dtype dtype;
  int64_t n;
  const void* x;
  void* y;
  void* stream; /* cudaStream_t; ignored on the CPU */
} tc_relu_params;

typedef struct {
  tc_dtype dtype;
  int64_t n;
  const void* grad_y;
  const void* x; /* the forward input, or its output: same mask */
  void* grad_x;
  void* stream;
} tc_relu_backward_params;

typedef struct {
  tc_dtype dtype;
  int64_t n;
  const void* x;
  void* y;
  uint8_t* mask; /* ceil(n / 8) bytes */
  void* stream;
} tc_relu_mask_params;

typedef struct {
  tc_dtype dtype;
  int64_t n;
  const void* grad_y;
  const uint8_t* mask; /* from relu_mask */
  void* grad_x;
  void* stream;
} tc_relu_mask_backward_params;

TC_API tc_status tc_relu_cpu(const tc_relu_params* p);
TC_API tc_status tc_relu_cuda(const tc_relu_params* p);
TC_API tc_status tc_relu_backward_cpu(const tc_relu_backward_params* p);
TC_API tc_status tc_relu_backward_cuda(const tc_relu_backward_params* p);
TC_API tc_status tc_relu_mask_cpu(const tc_relu_mask_params* p);
TC_API tc_status tc_relu_mask_cuda(const tc_relu_mask_params* p);
TC_API tc_status tc_relu_mask_backward_cpu(const tc_relu_mask_backward_params* p);
TC_API tc_status tc_relu_mask_backward_cuda(const tc_relu_mask_backward_params* p);

#endif
