// relu, relu_backward: torch layer.
#include "tinycuda/relu.h"
#include "torch_utils.h"

namespace {
using namespace tc_torch;

at::Tensor relu(const at::Tensor& x) { return unary("relu", x, tc_relu_cpu, tc_relu_cuda); }

at::Tensor relu_backward(const at::Tensor& grad_out, const at::Tensor& x) {
  return unary_backward("relu_backward", grad_out, x, tc_relu_backward_cpu, tc_relu_backward_cuda);
}

// (y, mask): mask is uint8 [ceil(numel / 8)], bit j of byte i = [x[8i + j] > 0].
std::tuple<at::Tensor, at::Tensor> relu_mask(const at::Tensor& x) {
  check_args("relu_mask", {{"x", x}});
  const at::Tensor xc = x.contiguous();
  at::Tensor y = empty_contiguous(xc.sizes(), xc);
  at::Tensor mask = at::empty({(xc.numel() + 7) / 8}, xc.options().dtype(at::kByte));
  call("relu_mask", xc, tc_relu_mask_cpu, tc_relu_mask_cuda,
       tc_relu_mask_params{.n = xc.numel(), .x = xc.data_ptr(), .y = y.data_ptr(),
                           .mask = mask.data_ptr<uint8_t>()});
  return {y, mask};
}

at::Tensor relu_mask_backward(const at::Tensor& grad_out, const at::Tensor& mask) {
  const char* op = "relu_mask_backward";
  check_args(op, {{"grad_out", grad_out}});
  TC_CHECK(mask.defined() && mask.scalar_type() == at::kByte, op, "mask must be a uint8 tensor");
  TC_CHECK(mask.device() == grad_out.device(), op, "mask is on %s but grad_out is on %s",
           mask.device().str().c_str(), grad_out.device().str().c_str());
  TC_CHECK(mask.dim() == 1 && mask.numel() == (grad_out.numel() + 7) / 8, op,
           "mask must have shape [%lld] (one bit per element of grad_out), got %s",
           (long long)((grad_out.numel() + 7) / 8), shape_str(mask.sizes()).c_str());
  const at::Tensor gc = grad_out.contiguous(), mc = mask.contiguous();
  at::Tensor gx = empty_contiguous(gc.sizes(), gc);
  call(op, gc, tc_relu_mask_backward_cpu, tc_relu_mask_backward_cuda,
       tc_relu_mask_backward_params{.n = gc.numel(), .grad_y = gc.data_ptr(),
                                    .mask = mc.data_ptr<uint8_t>(), .grad_x = gx.data_ptr()});
  return gx;
}

template <class M>
void impls(M& m) {
  m.impl("relu", &relu);
  m.impl("relu_backward", &relu_backward);
  m.impl("relu_mask", &relu_mask);
  m.impl("relu_mask_backward", &relu_mask_backward);
}
}  // namespace

TORCH_LIBRARY_FRAGMENT(tinycuda, m) {
  m.def("relu(Tensor x) -> Tensor");
  m.def("relu_backward(Tensor grad_out, Tensor x) -> Tensor");
  m.def("relu_mask(Tensor x) -> (Tensor, Tensor)");
  m.def("relu_mask_backward(Tensor grad_out, Tensor mask) -> Tensor");
}

TC_REGISTER_IMPLS(impls)
