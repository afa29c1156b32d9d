/* softmax family, over the last dim of x viewed as [rows, cols] (contiguous):
 *   softmax      y = exp(x - m) / s,        m = max(x), s = sum(exp(x - m))
 *   log_softmax  y = x - m - log(s)
 * Backward from the saved output y:
 *   softmax      grad_x = y * (grad_y - sum(grad_y * y))
 *   log_softmax  grad_x = grad_y - exp(y) * sum(grad_y)
 * The backward picks its CUDA kernel like AUTO does.
 * Statistics in float (double for double). As in torch, a row holding NaN or
 * +inf, or only -inf, gives NaN; -inf entries elsewhere give 0 (softmax). */
#ifndef TINYCUDA_SOFTMAX_H
#define TINYCUDA_SOFTMAX_H
#include "common.h"

/* The CUDA forward variants, kept so a reader can measure each step
 * (tinycuda bench softmax --impls tinycuda,variants). The CPU ignores this. */
typedef enum {
  TC_SOFTMAX_AUTO = 0,      /* REGISTERS where it applies, else ONLINE */
  TC_SOFTMAX_ONLINE = 1,    /* scalar loads; online (max, sum) pass, then a pass writing y: x read twice */
  TC_SOFTMAX_REGISTERS = 2  /* 16-byte loads into registers: x read once (cols % (16 / itemsize) == 0,
                               16-byte aligned x and y; cols <= 4096 * (16 / itemsize) in one block,
                               16x that in a cluster of blocks on sm_90) */
} tc_softmax_algo;

typedef struct {
  tc_dtype dtype;
  int64_t rows, cols;
  int log; /* 0: softmax, 1: log_softmax */
  const void* x;
  void* y;
  tc_softmax_algo algo;
  void* stream;
} tc_softmax_params;

typedef struct {
  tc_dtype dtype;
  int64_t rows, cols;
  int log;
  const void* grad_y;
  const void* y; /* the forward output */
  void* grad_x;
  void* stream;
} tc_softmax_backward_params;

TC_API tc_status tc_softmax_cpu(const tc_softmax_params* p);
TC_API tc_status tc_softmax_cuda(const tc_softmax_params* p);
TC_API tc_status tc_softmax_backward_cpu(const tc_softmax_backward_params* p);
TC_API tc_status tc_softmax_backward_cuda(const tc_softmax_backward_params* p);

#endif
