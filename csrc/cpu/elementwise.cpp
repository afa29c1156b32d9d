// elementwise family, CPU: y = f(x) over a strided x (kit/pointwise.h's
// strided loop), grad_x = f'(...) * grad_y over contiguous buffers.
#include "../shared/elementwise_math.h"
#include "kit/pointwise.h"

tc_status tc_unary_cpu(const tc_unary_params* p) {
  TC_RETURN_IF_ERROR(unary_check(p));
  const StridedLayout<1> l = unary_layout(p);
  if (l.n == 0) return TC_OK;
  return dispatch_unary(p->op, [&](auto k) {
    return dispatch_cpu(p->dtype, unary_name(p->op), [&](auto tag) {
      using T = decltype(tag);
      const UnaryFn<decltype(k)::value> f{p->alpha, p->beta};
      if (!strided_unary_cpu(l, static_cast<const T*>(p->x), static_cast<T*>(p->y), f))
        return tc_fail(TC_ERR_INTERNAL, "%s: a worker thread failed", unary_name(p->op));
      return TC_OK;
    });
  });
}

tc_status tc_unary_backward_cpu(const tc_unary_backward_params* p) {
  TC_RETURN_IF_ERROR(unary_check(p));
  return dispatch_unary(p->op, [&](auto k) {
    return pointwise_cpu<true>(unary_name(p->op, true), p->dtype, p->n, p->grad_y, p->saved, p->grad_x,
                               UnaryGradFn<decltype(k)::value>{p->alpha, p->beta});
  });
}
