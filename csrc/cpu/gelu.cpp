// gelu on the CPU: one pass each way, in the accumulator type (gelu_math.h).
#include "../shared/act_check.h"
#include "../shared/gelu_math.h"
#include "kit/cpu_utils.h"

tc_status tc_gelu_cpu(const tc_gelu_params* p) {
  TC_RETURN_IF_ERROR(gelu_check(p));
  return dispatch_cpu(p->dtype, "gelu", [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(p->x);
    T* y = static_cast<T*>(p->y);
    return with_gelu(p->approximate, [&](auto act) {
      for (int64_t i = 0; i < p->n; ++i) y[i] = from_acc<T>(act.value(to_acc(x[i])));
      return TC_OK;
    });
  });
}

tc_status tc_gelu_backward_cpu(const tc_gelu_backward_params* p) {
  TC_RETURN_IF_ERROR(gelu_check(p));
  return dispatch_cpu(p->dtype, "gelu_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* g = static_cast<const T*>(p->grad_y);
    const T* x = static_cast<const T*>(p->x);
    T* gx = static_cast<T*>(p->grad_x);
    return with_gelu(p->approximate, [&](auto act) {
      for (int64_t i = 0; i < p->n; ++i) {
        A f, df;
        act.value_grad(A(to_acc(x[i])), f, df);
        gx[i] = from_acc<T>(A(to_acc(g[i])) * df);
      }
      return TC_OK;
    });
  });
}
