// linear: y = x @ W^T + b and its backward, as products of the matmul family
// (csrc/cuda/matmul.cu) with the operands' strides swapped, never copied:
//
//   forward   y      = x  @ W^T : A = x  (K, 1)  B = W  (1, K)   M, N, K
//   grad_x           = gy @ W   : A = gy (N, 1)  B = W  (K, 1)   M, K, N
//   grad_W           = gy^T @ x : A = gy (1, N)  B = x  (K, 1)   N, K, M
//   grad_b           = column sums of gy (the reduce family's sum)
//
// linear_act's backward gives the activation and P: gy is then grad_P =
// grad_y * act'(P), made by kit/colsum.cuh's pass into the workspace's front
// with grad_b's partial sums in the same pass (one read of grad_y and P, one
// write of grad_P), so gy is never read a third time for the bias. (GPT-2's
// MLP, H200: the GELU backward pass, 0.93 ms a step, and the fc bias's column
// sums, ~0.39, became one pass and its partials' sum, 1.16 ms.)
//
// (A's strides are (m, k), B's (k, n).) On Hopper all three run the wgmma
// kernel: the forward reads both operands k-major, the backward products read
// W, x and gy^T m/n-major through wgmma's transpose bits. (One row of x, a
// decode step, is a GEMV.)
#include "tinycuda/linear.h"
#include "../shared/linear_check.h"
#include "../shared/matmul_core.h"
#include "kit/colsum.cuh"
#include "kit/cuda_utils.cuh"

tc_status tc_linear_cuda(const tc_linear_params* p) {
  TC_RETURN_IF_ERROR(linear_check(p));
  const tc_matmul_params mm{.dtype = p->dtype, .batch = 1, .M = p->M, .N = p->N, .K = p->K,
                            .a = p->x, .a_stride = {0, p->K, 1}, .b = p->weight, .b_stride = {0, 1, p->K},
                            .bias = p->bias, .activation = p->activation, .c = p->y, .pre = p->pre,
                            .algo = p->algo, .stream = p->stream};
  return matmul_cuda("linear", &mm);
}

namespace {
// The activation's backward as colsum's element: grad_P is both the output and the bias term.
template <class Fn>
struct ActBackwardTerm {
  Fn fn;
  template <class A> __device__ __forceinline__ A operator()(A g, A pre, A& term) const {
    term = fn(g, pre);
    return term;
  }
};
}  // namespace

tc_status tc_linear_backward_cuda(const tc_linear_backward_params* p) {
  const char* op = "linear_backward";
  TC_RETURN_IF_ERROR(linear_backward_check(p));
  if (const size_t grad_p = linear_grad_p_bytes(p)) {
    const size_t need = tc_linear_backward_workspace_size(p);
    TC_REQUIRE(p->workspace && p->workspace_bytes >= need, "%s: workspace of %zu bytes needed, %zu given", op,
               need, p->workspace_bytes);
    tc_linear_backward_params q = *p;  // the products read grad_P; the bias comes from the pass
    q.grad_y = p->workspace, q.pre = nullptr, q.activation = TC_ACT_NONE, q.grad_bias = nullptr;
    q.workspace = static_cast<unsigned char*>(p->workspace) + grad_p, q.workspace_bytes -= grad_p;
    TC_RETURN_IF_ERROR(dispatch_cuda(p->dtype, op, [&](auto tag) -> tc_status {
      using T = decltype(tag);
      return with_act_backward(p->activation, [&](auto fn) {
        return launch_colsum_backward<T>(op, p->M, p->N, static_cast<const T*>(p->grad_y),
                                         static_cast<const T*>(p->pre), static_cast<T*>(p->workspace),
                                         static_cast<T*>(p->grad_bias), q.workspace, as_stream(p->stream),
                                         ActBackwardTerm<decltype(fn)>{fn});
      });
    }));
    return tc_linear_backward_cuda(&q);
  }
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
