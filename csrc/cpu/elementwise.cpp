// elementwise family, CPU: the unary and binary ops and where over strided
// operands (kit/pointwise.h's strided loop), the unary backward over
// contiguous buffers, the binary backward strided like its forward.
#include "../shared/elementwise_math.h"
#include "kit/pointwise.h"

namespace {
tc_status worker_failed(const char* op) { return tc_fail(TC_ERR_INTERNAL, "%s: a worker thread failed", op); }
}  // namespace

tc_status tc_unary_cpu(const tc_unary_params* p) {
  TC_RETURN_IF_ERROR(unary_check(p));
  const StridedLayout<1> l = unary_layout(p);
  if (l.n == 0) return TC_OK;
  return dispatch_unary(p->op, [&](auto k) {
    return dispatch_cpu(p->dtype, unary_name(p->op), [&](auto tag) {
      using T = decltype(tag);
      const Operand<acc_t<T>> in[1] = {{p->x}};
      if (!strided_cpu<1>(l, in, static_cast<T*>(p->y), UnaryFn<decltype(k)::value>{p->alpha, p->beta}))
        return worker_failed(unary_name(p->op));
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

tc_status tc_binary_cpu(const tc_binary_params* p) {
  TC_RETURN_IF_ERROR(binary_check(p));
  const StridedLayout<2> l = binary_layout(p);
  if (l.n == 0) return TC_OK;
  return dispatch_binary(p->op, [&](auto k) {
    return dispatch_cpu(p->dtype, binary_name(p->op), [&](auto tag) {
      using T = decltype(tag);
      using A = acc_t<T>;
      const Operand<A> in[2] = {{p->a, A(p->a_scalar)}, {p->b, A(p->b_scalar)}};
      if (!strided_cpu<2>(l, in, static_cast<T*>(p->out), BinaryFn<decltype(k)::value>{p->alpha}))
        return worker_failed(binary_name(p->op));
      return TC_OK;
    });
  });
}

tc_status tc_binary_backward_cpu(const tc_binary_backward_params* p) {
  TC_RETURN_IF_ERROR(binary_check(p));
  const StridedLayout<3> l = binary_layout(p);
  if (l.n == 0) return TC_OK;
  return dispatch_binary(p->op, [&](auto k) {
    return dispatch_cpu(p->dtype, binary_name(p->op, true), [&](auto tag) {
      using T = decltype(tag);
      using A = acc_t<T>;
      constexpr int OP = decltype(k)::value;
      const Operand<A> in[3] = {{p->grad_out}, {p->a, A(p->a_scalar)}, {p->b, A(p->b_scalar)}};
      bool ok = true;
      if (p->grad_a) ok = strided_cpu<3>(l, in, static_cast<T*>(p->grad_a), BinaryGradFn<OP, 0>{p->alpha});
      if (ok && p->grad_b) ok = strided_cpu<3>(l, in, static_cast<T*>(p->grad_b), BinaryGradFn<OP, 1>{p->alpha});
      return ok ? TC_OK : worker_failed(binary_name(p->op, true));
    });
  });
}

tc_status tc_where_cpu(const tc_where_params* p) {
  TC_RETURN_IF_ERROR(where_check(p));
  const StridedLayout<3> l = where_layout(p);
  if (l.n == 0) return TC_OK;
  return dispatch_cpu(p->dtype, "where", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const Operand<A> in[3] = {{p->condition}, {p->a, A(p->a_scalar)}, {p->b, A(p->b_scalar)}};
    return strided_cpu<3, T, uint8_t>(l, in, static_cast<T*>(p->out), WhereFn{}) ? TC_OK : worker_failed("where");
  });
}
