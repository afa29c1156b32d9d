// square: y = x * x; square_backward: grad_x = 2 * x * grad_y.
// One pass of 16-byte vectors each through launch_pointwise (pointwise.cuh).
#include "tinycuda/square.h"
#include "kit/pointwise.cuh"

// ---------------------------------------------------------------------------
// element functions

struct SquareFn {
  template <class A> __device__ A operator()(A x, A) const { return x * x; }
};
struct SquareBackwardFn {
  template <class A> __device__ A operator()(A x, A g) const { return A(2) * x * g; }
};

// ---------------------------------------------------------------------------
// launchers

tc_status tc_square_cuda(const tc_square_params* p) {
  TC_REQUIRE(p, "square: params is NULL");
  return launch_pointwise<false>("square", p->dtype, p->n, p->x, nullptr, p->y, p->stream, SquareFn{});
}

tc_status tc_square_backward_cuda(const tc_square_backward_params* p) {
  TC_REQUIRE(p, "square_backward: params is NULL");
  return launch_pointwise<true>("square_backward", p->dtype, p->n, p->x, p->grad_y, p->grad_x,
                                p->stream, SquareBackwardFn{});
}
