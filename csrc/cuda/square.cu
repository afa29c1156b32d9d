// square: y = x * x; square_backward: grad_x = 2 * x * grad_y.
// One pass of 16-byte vectors each through launch_pointwise (pointwise.cuh),
// with square_math.h's functions (shared with the CPU).
#include "../shared/act_check.h"
#include "../shared/square_math.h"
#include "kit/pointwise.cuh"

// ---------------------------------------------------------------------------
// launchers

tc_status tc_square_cuda(const tc_square_params* p) {
  TC_RETURN_IF_ERROR(square_check(p));
  return launch_pointwise<false>("square", p->dtype, p->n, p->x, nullptr, p->y, p->stream, SquareFn{});
}

tc_status tc_square_backward_cuda(const tc_square_backward_params* p) {
  TC_RETURN_IF_ERROR(square_check(p));
  return launch_pointwise<true>("square_backward", p->dtype, p->n, p->x, p->grad_y, p->grad_x,
                                p->stream, SquareBackwardFn{});
}
