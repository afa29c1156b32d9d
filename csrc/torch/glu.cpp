// swiglu, geglu and their backwards: torch layer over the core's glu ops
// (one params struct, `act` picking silu or a gelu form). a and b must agree
// in shape, dtype and device; strided inputs are copied to contiguous ones.
#include "tinycuda/glu.h"
#include "torch_utils.h"

namespace {
using namespace tc_torch;

int geglu_act(const char* op, c10::string_view approximate) {
  if (approximate == "none") return TC_GLU_GELU;
  if (approximate == "tanh") return TC_GLU_GELU_TANH;
  fail(op, fmt("approximate must be 'none' or 'tanh', got '%s'", std::string(approximate).c_str()));
}

at::Tensor forward(const char* op, const at::Tensor& a, const at::Tensor& b, int act) {
  check_args(op, {{"a", a}, {"b", b}});
  check_same_shape(op, {"a", a}, {"b", b});
  const at::Tensor ac = a.contiguous(), bc = b.contiguous();
  at::Tensor y = empty_contiguous(ac.sizes(), ac);
  call(op, ac, tc_glu_cpu, tc_glu_cuda,
       tc_glu_params{.n = ac.numel(), .act = act, .a = ac.data_ptr(), .b = bc.data_ptr(), .y = y.data_ptr()});
  return y;
}

std::tuple<at::Tensor, at::Tensor> backward(const char* op, const at::Tensor& grad_out,
                                            const at::Tensor& a, const at::Tensor& b, int act) {
  check_args(op, {{"grad_out", grad_out}, {"a", a}, {"b", b}});
  check_same_shape(op, {"a", a}, {"b", b});
  check_same_shape(op, {"grad_out", grad_out}, {"a", a});
  const at::Tensor gc = grad_out.contiguous(), ac = a.contiguous(), bc = b.contiguous();
  at::Tensor ga = empty_contiguous(ac.sizes(), ac), gb = empty_contiguous(ac.sizes(), ac);
  call(op, ac, tc_glu_backward_cpu, tc_glu_backward_cuda,
       tc_glu_backward_params{.n = ac.numel(), .act = act, .grad_y = gc.data_ptr(), .a = ac.data_ptr(),
                              .b = bc.data_ptr(), .grad_a = ga.data_ptr(), .grad_b = gb.data_ptr()});
  return {ga, gb};
}

at::Tensor swiglu(const at::Tensor& a, const at::Tensor& b) { return forward("swiglu", a, b, TC_GLU_SILU); }

std::tuple<at::Tensor, at::Tensor> swiglu_backward(const at::Tensor& grad_out, const at::Tensor& a,
                                                   const at::Tensor& b) {
  return backward("swiglu_backward", grad_out, a, b, TC_GLU_SILU);
}

at::Tensor geglu(const at::Tensor& a, const at::Tensor& b, c10::string_view approximate) {
  return forward("geglu", a, b, geglu_act("geglu", approximate));
}

std::tuple<at::Tensor, at::Tensor> geglu_backward(const at::Tensor& grad_out, const at::Tensor& a,
                                                  const at::Tensor& b, c10::string_view approximate) {
  const char* op = "geglu_backward";
  return backward(op, grad_out, a, b, geglu_act(op, approximate));
}

template <class M>
void impls(M& m) {
  m.impl("swiglu", &swiglu);
  m.impl("swiglu_backward", &swiglu_backward);
  m.impl("geglu", &geglu);
  m.impl("geglu_backward", &geglu_backward);
}
}  // namespace

TORCH_LIBRARY_FRAGMENT(tinycuda, m) {
  m.def("swiglu(Tensor a, Tensor b) -> Tensor");
  m.def("swiglu_backward(Tensor grad_out, Tensor a, Tensor b) -> (Tensor, Tensor)");
  m.def("geglu(Tensor a, Tensor b, str approximate='tanh') -> Tensor");
  m.def("geglu_backward(Tensor grad_out, Tensor a, Tensor b, str approximate='tanh') -> (Tensor, Tensor)");
}

TC_REGISTER_IMPLS(impls)
