// square on the CPU: the pointwise loop (kit/pointwise.h) with
// square_math.h's functions, y = x*x, grad_x = 2*x*grad_y.
#include "../shared/act_check.h"
#include "../shared/square_math.h"
#include "kit/pointwise.h"

tc_status tc_square_cpu(const tc_square_params* p) {
  TC_RETURN_IF_ERROR(square_check(p));
  return pointwise_cpu<false>("square", p->dtype, p->n, p->x, nullptr, p->y, SquareFn{});
}

tc_status tc_square_backward_cpu(const tc_square_backward_params* p) {
  TC_RETURN_IF_ERROR(square_check(p));
  return pointwise_cpu<true>("square_backward", p->dtype, p->n, p->x, p->grad_y, p->grad_x,
                             SquareBackwardFn{});
}
