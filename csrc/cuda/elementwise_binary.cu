// elementwise family, CUDA, the binary ops: out = f(a, b) over broadcast
// views, and grad_a = grad_out * df/da, grad_b likewise, at the output's shape
// (one launch each); where(condition, a, b), its condition read as bytes. The file header of elementwise.cu says the launch shape;
// it is in its own file only to compile beside the unary ops.
#include "../shared/elementwise_math.h"
#include "kit/pointwise.cuh"

tc_status tc_binary_cuda(const tc_binary_params* p) {
  TC_RETURN_IF_ERROR(binary_check(p));
  const StridedLayout<2> l = binary_layout(p);
  return dispatch_binary(p->op, [&](auto k) {
    return launch_strided<2>(binary_name(p->op), p->dtype, l, {p->a, p->b}, {p->a_scalar, p->b_scalar}, p->out,
                             p->stream, BinaryFn<decltype(k)::value>{p->alpha});
  });
}

tc_status tc_binary_backward_cuda(const tc_binary_backward_params* p) {
  TC_RETURN_IF_ERROR(binary_check(p));
  const StridedLayout<3> l = binary_layout(p);
  const char* name = binary_name(p->op, true);
  return dispatch_binary(p->op, [&](auto k) -> tc_status {
    constexpr int OP = decltype(k)::value;
    const void* const ptrs[3] = {p->grad_out, p->a, p->b};
    const double scalars[3] = {0.0, p->a_scalar, p->b_scalar};
    if (p->grad_a)
      TC_RETURN_IF_ERROR(launch_strided<3>(name, p->dtype, l, ptrs, scalars, p->grad_a, p->stream,
                                           BinaryGradFn<OP, 0>{p->alpha}));
    if (p->grad_b)
      TC_RETURN_IF_ERROR(launch_strided<3>(name, p->dtype, l, ptrs, scalars, p->grad_b, p->stream,
                                           BinaryGradFn<OP, 1>{p->alpha}));
    return TC_OK;
  });
}

tc_status tc_where_cuda(const tc_where_params* p) {
  TC_RETURN_IF_ERROR(where_check(p));
  return launch_strided<3, uint8_t>("where", p->dtype, where_layout(p), {p->condition, p->a, p->b},
                                    {0.0, p->a_scalar, p->b_scalar}, p->out, p->stream, WhereFn{});
}
