// linear: y = x @ W^T + b and its backward, as products of the matmul family
// (csrc/cuda/matmul.cu) with the operands' strides swapped, never copied:
//
//   forward   y      = x  @ W^T : A = x  (K, 1)  B = W  (1, K)   M, N, K
//   grad_x           = gy @ W   : A = gy (N, 1)  B = W  (K, 1)   M, K, N
//   grad_W           = gy^T @ x : A = gy (1, N)  B = x  (K, 1)   N, K, M
//   grad_b           = column sums of gy (the reduce family's sum)
//
// (A's strides are (m, k), B's (k, n).) On Hopper all three run the wgmma
// kernel: the forward reads both operands k-major, the backward products read
// W, x and gy^T m/n-major through wgmma's transpose bits. (One row of x, a
// decode step, is a GEMV.)
#include "tinycuda/linear.h"
#include "../shared/linear_check.h"
#include "../shared/matmul_core.h"
#include "kit/cuda_utils.cuh"

tc_status tc_linear_cuda(const tc_linear_params* p) {
  TC_RETURN_IF_ERROR(linear_check(p));
  const tc_matmul_params mm{.dtype = p->dtype, .batch = 1, .M = p->M, .N = p->N, .K = p->K,
                            .a = p->x, .a_stride = {0, p->K, 1}, .b = p->weight, .b_stride = {0, 1, p->K},
                            .bias = p->bias, .activation = p->activation, .c = p->y, .pre = p->pre,
                            .algo = p->algo, .stream = p->stream};
  return matmul_cuda("linear", &mm);
}

tc_status tc_linear_backward_cuda(const tc_linear_backward_params* p) {
  const char* op = "linear_backward";
  TC_RETURN_IF_ERROR(linear_backward_check(p));
  if (p->grad_x) {
    const tc_matmul_params mm = linear_grad_x(p);
    TC_RETURN_IF_ERROR(matmul_cuda(op, &mm));
  }
  if (p->grad_weight) {  // K = M tokens: few tiles of a long K split it (matmul_core.h)
    const tc_matmul_params mm = linear_grad_weight(p);
    TC_RETURN_IF_ERROR(matmul_cuda(op, &mm));
  }
  if (p->grad_bias) {
    const tc_reduce_params s = linear_bias_grad(p);
    TC_RETURN_IF_ERROR(tc_reduce_cuda(&s));
  }
  return TC_OK;
}
