// relu: y = max(x, 0) (NaN passes through, as in torch);
// relu_backward: grad_x = grad_y * [x > 0].
// Both are one pass of 16-byte vectors through launch_pointwise (pointwise.cuh):
// 8 bytes moved per fp32 element forward, 12 backward.
#include "../relu.h"
#include "pointwise.cuh"

// ---------------------------------------------------------------------------
// element functions

struct ReluFn {
  template <class A> __device__ A operator()(A x, A) const { return x > A(0) || x != x ? x : A(0); }
};
struct ReluBackwardFn {
  template <class A> __device__ A operator()(A g, A x) const { return x > A(0) ? g : A(0); }
};

// ---------------------------------------------------------------------------
// launchers

tc_status tc_relu_cuda(const tc_relu_params* p) {
  TC_REQUIRE(p, "relu: params is NULL");
  return launch_pointwise<false>("relu", p->dtype, p->n, p->x, nullptr, p->y, p->stream, ReluFn{});
}

tc_status tc_relu_backward_cuda(const tc_relu_backward_params* p) {
  TC_REQUIRE(p, "relu_backward: params is NULL");
  return launch_pointwise<true>("relu_backward", p->dtype, p->n, p->grad_y, p->x, p->grad_x,
                                p->stream, ReluBackwardFn{});
}
