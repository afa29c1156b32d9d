// square, square_backward: torch layer.
#include "tinycuda/square.h"
#include "torch_utils.h"

namespace {
using namespace tc_torch;

at::Tensor square(const at::Tensor& x) { return unary("square", x, tc_square_cpu, tc_square_cuda); }

at::Tensor square_backward(const at::Tensor& grad_out, const at::Tensor& x) {
  return unary_backward("square_backward", grad_out, x, tc_square_backward_cpu, tc_square_backward_cuda);
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
