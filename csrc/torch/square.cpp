// square, square_backward: torch layer.
#include "tinycuda/square.h"
#include "torch_utils.h"

namespace {
using namespace tc_torch;

at::Tensor square(const at::Tensor& x) {
  check_args("square", {{"x", x}});
  const at::Tensor xc = x.contiguous();
  at::Tensor y = empty_contiguous(xc.sizes(), xc);
  call("square", xc, tc_square_cpu, tc_square_cuda,
       tc_square_params{dtype_of(xc), xc.numel(), xc.data_ptr(), y.data_ptr(), nullptr});
  return y;
}

at::Tensor square_backward(const at::Tensor& grad_out, const at::Tensor& x) {
  check_args("square_backward", {{"grad_out", grad_out}, {"x", x}});
  check_same_shape("square_backward", {"grad_out", grad_out}, {"x", x});
  const at::Tensor gc = grad_out.contiguous(), xc = x.contiguous();
  at::Tensor gx = empty_contiguous(xc.sizes(), xc);
  call("square_backward", xc, tc_square_backward_cpu, tc_square_backward_cuda,
       tc_square_backward_params{dtype_of(xc), xc.numel(), gc.data_ptr(), xc.data_ptr(),
                                 gx.data_ptr(), nullptr});
  return gx;
}

template <class M>
void impls(M& m) {
  m.impl("square", &square);
  m.impl("square_backward", &square_backward);
}
}  // namespace

TC_REGISTER_IMPLS(impls)
