// swiglu / geglu on the CPU: y = act(a) * b through the pointwise loop
// (kit/pointwise.h); the backward recomputes act(a) and act'(a) and writes
// both gradients in the same pass.
#include "../shared/act_check.h"
#include "../shared/gelu_math.h"
#include "kit/pointwise.h"

tc_status tc_glu_cpu(const tc_glu_params* p) {
  TC_RETURN_IF_ERROR(glu_check(p));
  return with_act(p->act, [&](auto act) {
    return pointwise_cpu<true>("glu", p->dtype, p->n, p->a, p->b, p->y, GluFn<decltype(act)>{});
  });
}

tc_status tc_glu_backward_cpu(const tc_glu_backward_params* p) {
  TC_RETURN_IF_ERROR(glu_check(p));
  return dispatch_cpu(p->dtype, "glu_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* g = static_cast<const T*>(p->grad_y);
    const T* a = static_cast<const T*>(p->a);
    const T* b = static_cast<const T*>(p->b);
    T* ga = static_cast<T*>(p->grad_a);
    T* gb = static_cast<T*>(p->grad_b);
    return with_act(p->act, [&](auto act) {
      for (int64_t i = 0; i < p->n; ++i) {
        A f, df;
        act.value_grad(A(to_acc(a[i])), f, df);
        const A gv = to_acc(g[i]);
        ga[i] = from_acc<T>(gv * A(to_acc(b[i])) * df);
        gb[i] = from_acc<T>(gv * f);
      }
      return TC_OK;
    });
  });
}
