// linear on the CPU: the products of csrc/cuda/linear.cu's table, run by the
// matmul family's CPU kernel (csrc/cpu/matmul.cpp).
#include "tinycuda/linear.h"
#include "../shared/linear_check.h"
#include "../shared/matmul_core.h"
#include "../shared/reduce_plan.h"
#include "kit/pointwise.h"

#include <memory>
#include <new>

tc_status tc_linear_cpu(const tc_linear_params* p) {
  TC_RETURN_IF_ERROR(linear_check(p));
  const tc_matmul_params mm{.dtype = p->dtype, .batch = 1, .M = p->M, .N = p->N, .K = p->K,
                            .a = p->x, .a_stride = {0, p->K, 1}, .b = p->weight, .b_stride = {0, 1, p->K},
                            .bias = p->bias, .activation = p->activation, .c = p->y, .pre = p->pre,
                            .algo = p->algo};
  return matmul_cpu("linear", &mm);
}

// The CUDA path's scratch: grad_P with an activation, then the products'
// split-K partials and the bias gradient's (the activation pass's, or the
// reduce family's), one after another on the stream, so the largest of them;
// the CPU needs none.
size_t tc_linear_backward_workspace_size(const tc_linear_backward_params* p) {
  if (!p) return 0;
  const size_t grad_p = linear_grad_p_bytes(p);
  size_t bytes = 0;
  if (p->grad_x) bytes = std::max(bytes, matmul_workspace_bytes(linear_grad_x(p)));
  if (p->grad_weight) bytes = std::max(bytes, matmul_workspace_bytes(linear_grad_weight(p)));
  if (p->grad_bias && grad_p) {
    bytes = std::max(bytes, plan::column_partials_bytes(p->M, p->N, p->dtype));
  } else if (p->grad_bias) {
    const tc_reduce_params s = linear_bias_grad(p);
    bytes = std::max(bytes, tc_reduce_workspace_size(&s));
  }
  return grad_p + bytes;
}

tc_status tc_linear_backward_cpu(const tc_linear_backward_params* p) {
  const char* op = "linear_backward";
  TC_RETURN_IF_ERROR(linear_backward_check(p));
  if (linear_grad_p_bytes(p)) {  // the products and the bias read grad_P = grad_y * act'(P)
    // (not a vector: its M * N zeros would be overwritten, and an allocation that fails returns a status)
    std::unique_ptr<unsigned char[]> grad_p(new (std::nothrow) unsigned char[size_t(p->M * p->N) *
                                                                             tc_dtype_size(p->dtype)]);
    TC_REQUIRE(grad_p, "%s: out of memory for grad_P (%lld x %lld)", op, (long long)p->M, (long long)p->N);
    TC_RETURN_IF_ERROR(with_act_backward(p->activation, [&](auto fn) {
      return pointwise_cpu<true>(op, p->dtype, p->M * p->N, p->grad_y, p->pre, grad_p.get(), fn);
    }));
    tc_linear_backward_params q = *p;
    q.grad_y = grad_p.get(), q.pre = nullptr, q.activation = TC_ACT_NONE;
    return tc_linear_backward_cpu(&q);
  }
  if (p->grad_x) {
    const tc_matmul_params mm = linear_grad_x(p);
    TC_RETURN_IF_ERROR(matmul_cpu(op, &mm));
  }
  if (p->grad_weight) {
    const tc_matmul_params mm = linear_grad_weight(p);
    TC_RETURN_IF_ERROR(matmul_cpu(op, &mm));
  }
  if (p->grad_bias) {
    const tc_reduce_params s = linear_bias_grad(p);
    TC_RETURN_IF_ERROR(tc_reduce_cpu(&s));
  }
  return TC_OK;
}
