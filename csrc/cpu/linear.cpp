// linear on the CPU: the products of csrc/cuda/linear.cu's table, run by the
// matmul family's CPU kernel (csrc/cpu/matmul.cpp).
#include "tinycuda/linear.h"
#include "../shared/linear_check.h"
#include "../shared/matmul_core.h"

tc_status tc_linear_cpu(const tc_linear_params* p) {
  TC_RETURN_IF_ERROR(linear_check(p));
  const tc_matmul_params mm{.dtype = p->dtype, .batch = 1, .M = p->M, .N = p->N, .K = p->K,
                            .a = p->x, .a_stride = {0, p->K, 1}, .b = p->weight, .b_stride = {0, 1, p->K},
                            .bias = p->bias, .activation = p->activation, .c = p->y, .pre = p->pre,
                            .algo = p->algo};
  return matmul_cpu("linear", &mm);
}

// The CUDA path's bias-gradient partials; the CPU needs none.
size_t tc_linear_backward_workspace_size(const tc_linear_backward_params* p) {
  if (!p || !p->grad_bias) return 0;
  const tc_reduce_params s = linear_bias_grad(p);
  return tc_reduce_workspace_size(&s);
}

tc_status tc_linear_backward_cpu(const tc_linear_backward_params* p) {
  const char* op = "linear_backward";
  TC_RETURN_IF_ERROR(linear_backward_check(p));
  if (p->grad_x) {
    const tc_matmul_params mm{.dtype = p->dtype, .batch = 1, .M = p->M, .N = p->K, .K = p->N,
                              .a = p->grad_y, .a_stride = {0, p->N, 1}, .b = p->weight, .b_stride = {0, p->K, 1},
                              .c = p->grad_x};
    TC_RETURN_IF_ERROR(matmul_cpu(op, &mm));
  }
  if (p->grad_weight) {
    const tc_matmul_params mm{.dtype = p->dtype, .batch = 1, .M = p->N, .N = p->K, .K = p->M,
                              .a = p->grad_y, .a_stride = {0, 1, p->N}, .b = p->x, .b_stride = {0, p->K, 1},
                              .c = p->grad_weight};
    TC_RETURN_IF_ERROR(matmul_cpu(op, &mm));
  }
  if (p->grad_bias) {
    const tc_reduce_params s = linear_bias_grad(p);
    TC_RETURN_IF_ERROR(tc_reduce_cpu(&s));
  }
  return TC_OK;
}
