// gelu on the CPU: the pointwise loop (kit/pointwise.h) with gelu_math.h's
// functions, in the accumulator type.
#include "../shared/act_check.h"
#include "../shared/gelu_math.h"
#include "kit/pointwise.h"

tc_status tc_gelu_cpu(const tc_gelu_params* p) {
  TC_RETURN_IF_ERROR(gelu_check(p));
  return with_gelu(p->approximate, [&](auto act) {
    return pointwise_cpu<false>("gelu", p->dtype, p->n, p->x, nullptr, p->y, GeluFn<decltype(act)>{});
  });
}

tc_status tc_gelu_backward_cpu(const tc_gelu_backward_params* p) {
  TC_RETURN_IF_ERROR(gelu_check(p));
  return with_gelu(p->approximate, [&](auto act) {
    return pointwise_cpu<true>("gelu_backward", p->dtype, p->n, p->grad_y, p->x, p->grad_x,
                               GeluBackwardFn<decltype(act)>{});
  });
}
