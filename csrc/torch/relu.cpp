// relu, relu_backward: torch layer.
#include "../relu.h"
#include "torch_utils.h"

namespace {
using namespace tc_torch;

at::Tensor relu(const at::Tensor& x) {
  check_args("relu", {{"x", x}});
  const at::Tensor xc = x.contiguous();
  at::Tensor y = empty_contiguous(xc.sizes(), xc);
  call("relu", xc, tc_relu_cpu, tc_relu_cuda,
       tc_relu_params{dtype_of(xc), xc.numel(), xc.data_ptr(), y.data_ptr(), nullptr});
  return y;
}

at::Tensor relu_backward(const at::Tensor& grad_out, const at::Tensor& x) {
  check_args("relu_backward", {{"grad_out", grad_out}, {"x", x}});
  check_same_shape("relu_backward", {"grad_out", grad_out}, {"x", x});
  const at::Tensor gc = grad_out.contiguous(), xc = x.contiguous();
  at::Tensor gx = empty_contiguous(xc.sizes(), xc);
  call("relu_backward", xc, tc_relu_backward_cpu, tc_relu_backward_cuda,
       tc_relu_backward_params{dtype_of(xc), xc.numel(), gc.data_ptr(), xc.data_ptr(),
                               gx.data_ptr(), nullptr});
  return gx;
}

template <class M>
void impls(M& m) {
  m.impl("relu", &relu);
  m.impl("relu_backward", &relu_backward);
}
}  // namespace

TC_REGISTER_IMPLS(impls)
