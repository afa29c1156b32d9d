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
       tc_square_params{.n = xc.numel(), .x = xc.data_ptr(), .y = y.data_ptr()});
  return y;
}

at::Tensor square_backward(const at::Tensor& grad_out, const at::Tensor& x) {
  check_args("square_backward", {{"grad_out", grad_out}, {"x", x}});
  check_same_shape("square_backward", {"grad_out", grad_out}, {"x", x});
  const at::Tensor gc = grad_out.contiguous(), xc = x.contiguous();
  at::Tensor gx = empty_contiguous(xc.sizes(), xc);
  call("square_backward", xc, tc_square_backward_cpu, tc_square_backward_cuda,
       tc_square_backward_params{.n = xc.numel(), .grad_y = gc.data_ptr(), .x = xc.data_ptr(),
                                 .grad_x = gx.data_ptr()});
  return gx;
}

template <class M>
void impls(M& m) {
  m.impl("square", &square);
  m.impl("square_backward", &square_backward);
}
}  // namespace

TORCH_LIBRARY_FRAGMENT(tinycuda, m) {
  m.def("square(Tensor x) -> Tensor");
  m.def("square_backward(Tensor grad_out, Tensor x) -> Tensor");
}

TC_REGISTER_IMPLS(impls)
