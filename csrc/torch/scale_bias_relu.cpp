// scale_bias_relu, scale_bias_relu_backward: torch layer. x is [..., C],
// bias [C]; the core sees x as [rows, C].
#include "tinycuda/scale_bias_relu.h"
#include "torch_utils.h"

namespace {
using namespace tc_torch;

at::Tensor scale_bias_relu(const at::Tensor& x, const at::Tensor& bias, double scale) {
  const char* op = "scale_bias_relu";
  check_args(op, {{"x", x}, {"bias", bias}});
  TC_CHECK(x.dim() >= 1, op, "x must have at least 1 dim, got a 0-dim tensor");
  TC_CHECK(bias.dim() == 1 && bias.size(0) == x.size(-1), op,
           "bias must have shape [%lld] (x's last dim), got %s", (long long)x.size(-1),
           shape_str(bias.sizes()).c_str());
  const at::Tensor xc = x.contiguous(), bc = bias.contiguous();
  at::Tensor y = empty_contiguous(xc.sizes(), xc);
  const int64_t cols = xc.size(-1), rows = cols ? xc.numel() / cols : 0;
  call(op, xc, tc_scale_bias_relu_cpu, tc_scale_bias_relu_cuda,
       tc_scale_bias_relu_params{.rows = rows, .cols = cols, .scale = scale, .x = xc.data_ptr(),
                                 .bias = bc.data_ptr(), .y = y.data_ptr()});
  return y;
}

std::tuple<at::Tensor, at::Tensor> scale_bias_relu_backward(const at::Tensor& grad_out,
                                                            const at::Tensor& out, double scale,
                                                            std::array<bool, 2> mask) {
  const char* op = "scale_bias_relu_backward";
  check_args(op, {{"grad_out", grad_out}, {"out", out}});
  check_same_shape(op, {"grad_out", grad_out}, {"out", out});
  TC_CHECK(out.dim() >= 1, op, "out must have at least 1 dim");
  const at::Tensor gc = grad_out.contiguous(), yc = out.contiguous();
  const int64_t cols = yc.size(-1), rows = cols ? yc.numel() / cols : 0;
  at::Tensor gx = empty_contiguous(mask[0] ? yc.sizes() : at::IntArrayRef{0}, yc);
  at::Tensor gb = empty_contiguous({mask[1] ? cols : 0}, yc);
  call_with_workspace(op, yc, tc_scale_bias_relu_backward_cpu, tc_scale_bias_relu_backward_cuda,
                      tc_scale_bias_relu_backward_workspace_size,
                      tc_scale_bias_relu_backward_params{.rows = rows, .cols = cols, .scale = scale,
                                                         .grad_y = gc.data_ptr(), .y = yc.data_ptr(),
                                                         .grad_x = mask[0] ? gx.data_ptr() : nullptr,
                                                         .grad_bias = mask[1] ? gb.data_ptr() : nullptr});
  return {gx, gb};
}

template <class M>
void impls(M& m) {
  m.impl("scale_bias_relu", &scale_bias_relu);
  m.impl("scale_bias_relu_backward", &scale_bias_relu_backward);
}
}  // namespace

TORCH_LIBRARY_FRAGMENT(tinycuda, m) {
  m.def("scale_bias_relu(Tensor x, Tensor bias, float scale) -> Tensor");
  m.def("scale_bias_relu_backward(Tensor grad_out, Tensor out, float scale, bool[2] output_mask)"
        " -> (Tensor, Tensor)");
}

TC_REGISTER_IMPLS(impls)
