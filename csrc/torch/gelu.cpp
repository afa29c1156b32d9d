// gelu, gelu_backward: torch layer. `approximate` is F.gelu's string,
// mapped here to the core's code.
#include "tinycuda/gelu.h"
#include "torch_utils.h"

namespace {
using namespace tc_torch;

int approximate_code(const char* op, c10::string_view approximate) {
  if (approximate == "none") return TC_GELU_NONE;
  if (approximate == "tanh") return TC_GELU_TANH;
  fail(op, fmt("approximate must be 'none' or 'tanh', got '%s'", std::string(approximate).c_str()));
}

at::Tensor gelu(const at::Tensor& x, c10::string_view approximate) {
  return unary("gelu", x, tc_gelu_cpu, tc_gelu_cuda,
               tc_gelu_params{.approximate = approximate_code("gelu", approximate)});
}

at::Tensor gelu_backward(const at::Tensor& grad_out, const at::Tensor& x, c10::string_view approximate) {
  const char* op = "gelu_backward";
  return unary_backward(op, grad_out, x, tc_gelu_backward_cpu, tc_gelu_backward_cuda,
                        tc_gelu_backward_params{.approximate = approximate_code(op, approximate)});
}

template <class M>
void impls(M& m) {
  m.impl("gelu", &gelu);
  m.impl("gelu_backward", &gelu_backward);
}
}  // namespace

TORCH_LIBRARY_FRAGMENT(tinycuda, m) {
  m.def("gelu(Tensor x, str approximate='none') -> Tensor");
  m.def("gelu_backward(Tensor grad_out, Tensor x, str approximate='none') -> Tensor");
}

TC_REGISTER_IMPLS(impls)
