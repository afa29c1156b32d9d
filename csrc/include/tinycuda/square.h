/* square family: y = x * x and its backward grad_x = 2 * x * grad_y.
 * All buffers contiguous, n elements, one dtype. */
#ifndef TINYCUDA_SQUARE_H
#define TINYCUDA_SQUARE_H
#include "common.h"

typedef struct {
  tc_dtype dtype;
  int64_t n;
  const void* x;
  void* y;
  void* stream;
} tc_square_params;

typedef struct {
  tc_dtype dtype;
  int64_t n;
  const void* grad_y;
  const void* x;
  void* grad_x;
  void* stream;
} tc_square_backward_params;

TC_API tc_status tc_square_cpu(const tc_square_params* p);
TC_API tc_status tc_square_cuda(const tc_square_params* p);
TC_API tc_status tc_square_backward_cpu(const tc_square_backward_params* p);
TC_API tc_status tc_square_backward_cuda(const tc_square_backward_params* p);

#endif
