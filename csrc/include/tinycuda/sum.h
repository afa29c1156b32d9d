/* sum family: x viewed as [outer, reduce, inner] (contiguous) is summed over
 * the middle axis into y[outer, inner]. A full sum is outer = inner = 1; a sum
 * over the last dim is inner = 1. Accumulation is float32 (float64 for double
 * input); on CUDA through a workspace of tc_sum_workspace_size() bytes, in two
 * deterministic stages (no float atomics).
 * Backward broadcasts: grad_x[o, r, i] = grad_y[o, i]. */
#ifndef TINYCUDA_SUM_H
#define TINYCUDA_SUM_H
#include "common.h"

typedef struct {
  tc_dtype dtype;
  int64_t outer, reduce, inner;
  const void* x;
  void* y;
  void* workspace;
  size_t workspace_bytes;
  void* stream;
} tc_sum_params;

typedef struct {
  tc_dtype dtype;
  int64_t outer, reduce, inner;
  const void* grad_y;
  void* grad_x;
  void* stream;
} tc_sum_backward_params;

TC_API size_t tc_sum_workspace_size(const tc_sum_params* p);
TC_API tc_status tc_sum_cpu(const tc_sum_params* p);
TC_API tc_status tc_sum_cuda(const tc_sum_params* p);
TC_API tc_status tc_sum_backward_cpu(const tc_sum_backward_params* p);
TC_API tc_status tc_sum_backward_cuda(const tc_sum_backward_params* p);

#endif
