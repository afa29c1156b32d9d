// elementwise family, CUDA: the unary ops y = f(x) and their backward
// grad_x = f'(saved) * grad_y; the binary ops out = f(a, b), broadcast, and
// their backward grad_a = grad_out * df/da at the output's shape (the math:
// tinycuda/elementwise.h; the element functions: shared/elementwise_math.h,
// the same the CPU loops run).
//
// Memory-bound: 2 * n * sizeof(T) bytes for a unary op (3 * n backward),
// 3 * n for a binary op of two full-size operands, a few FLOPs and at most
// two transcendentals per element. Launch shape (cuda/kit/pointwise.cuh):
//   - contiguous unary forward and backward: launch_pointwise, one 16-byte
//     vector in and out per thread, 256 threads a block;
//   - views (sliced, transposed, broadcast, host scalars): launch_strided,
//     one 16-byte vector of the output per thread, vector loads where the
//     inner dim allows them.
// One kernel per op (a template over the op): a runtime switch per element
// would sit in the loop of every op for the sake of one. The binary ops live
// in elementwise_binary.cu: 600 kernels in one file took nvcc 86 s per arch,
// the longest compile of the build; two files build side by side.
#include "../shared/elementwise_math.h"
#include "kit/pointwise.cuh"

tc_status tc_unary_cuda(const tc_unary_params* p) {
  TC_RETURN_IF_ERROR(unary_check(p));
  const StridedLayout<1> l = unary_layout(p);
  if (l.n == 0) return TC_OK;
  const char* name = unary_name(p->op);
  return dispatch_unary(p->op, [&](auto k) {
    const UnaryFn<decltype(k)::value> f{p->alpha, p->beta};
    if (l.contiguous()) return launch_pointwise<false>(name, p->dtype, l.n, p->x, nullptr, p->y, p->stream, f);
    return launch_strided<1>(name, p->dtype, l, {p->x}, {0.0}, p->y, p->stream, f);
  });
}

tc_status tc_unary_backward_cuda(const tc_unary_backward_params* p) {
  TC_RETURN_IF_ERROR(unary_check(p));
  return dispatch_unary(p->op, [&](auto k) {
    return launch_pointwise<true>(unary_name(p->op, true), p->dtype, p->n, p->grad_y, p->saved, p->grad_x,
                                  p->stream, UnaryGradFn<decltype(k)::value>{p->alpha, p->beta});
  });
}
