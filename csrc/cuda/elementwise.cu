// elementwise family, CUDA: the unary ops y = f(x) and their backward
// grad_x = f'(saved) * grad_y (the math: tinycuda/elementwise.h; the element
// functions: shared/elementwise_math.h, the same the CPU loop runs).
//
// Memory-bound, 2 * n * sizeof(T) bytes forward (3 * n backward), a few
// FLOPs and at most two transcendentals per element. Launch shape:
//   - x contiguous (after collapsing dims): launch_pointwise, one 16-byte
//     vector in and out per thread, 256 threads a block;
//   - x a view (sliced, transposed, expanded): launch_strided_unary, one
//     16-byte vector of y per thread, x gathered through its strides;
//   - backward: launch_pointwise over (grad_y, saved), both contiguous.
// One kernel per op (a template over the op): a runtime switch per element
// would sit in the loop of every op for the sake of one.
#include "../shared/elementwise_math.h"
#include "kit/pointwise.cuh"

tc_status tc_unary_cuda(const tc_unary_params* p) {
  TC_RETURN_IF_ERROR(unary_check(p));
  const StridedLayout<1> l = unary_layout(p);
  if (l.n == 0) return TC_OK;
  return dispatch_unary(p->op, [&](auto k) {
    const UnaryFn<decltype(k)::value> f{p->alpha, p->beta};
    if (l.contiguous()) return launch_pointwise<false>(unary_name(p->op), p->dtype, l.n, p->x, nullptr, p->y, p->stream, f);
    return launch_strided_unary(unary_name(p->op), p->dtype, l, p->x, p->y, p->stream, f);
  });
}

tc_status tc_unary_backward_cuda(const tc_unary_backward_params* p) {
  TC_RETURN_IF_ERROR(unary_check(p));
  return dispatch_unary(p->op, [&](auto k) {
    return launch_pointwise<true>(unary_name(p->op, true), p->dtype, p->n, p->grad_y, p->saved, p->grad_x,
                                  p->stream, UnaryGradFn<decltype(k)::value>{p->alpha, p->beta});
  });
}
