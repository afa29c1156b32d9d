// layer_norm, layer_norm_backward: torch layer. x is [..., *normalized_shape];
// the core sees it as [rows, cols]. The forward also returns mean and rstd
// (float32, float64 for float64 x; [rows]) for the backward.
#include "tinycuda/layer_norm.h"
#include "norm.h"

namespace {
using namespace tc_torch;

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm(const at::Tensor& x,
                                                          at::IntArrayRef normalized_shape,
                                                          const std::optional<at::Tensor>& weight,
                                                          const std::optional<at::Tensor>& bias,
                                                          double eps) {
  const char* op = "layer_norm";
  check_args(op, {{"x", x}});
  const NormView v = norm_view(op, x, normalized_shape);
  check_affine(op, "weight", weight, x, normalized_shape);
  check_affine(op, "bias", bias, x, normalized_shape);
  const at::Tensor xc = x.contiguous(), wc = contiguous_or_undefined(weight),
                   bc = contiguous_or_undefined(bias);
  at::Tensor y = empty_contiguous(xc.sizes(), xc), mean = new_stats(xc, v.rows),
             rstd = new_stats(xc, v.rows);
  call(op, xc, tc_layer_norm_cpu, tc_layer_norm_cuda,
       tc_layer_norm_params{.rows = v.rows, .cols = v.cols, .eps = eps, .x = xc.data_ptr(),
                            .weight = ptr_or_null(wc), .bias = ptr_or_null(bc), .y = y.data_ptr(),
                            .mean = mean.data_ptr(), .rstd = rstd.data_ptr()});
  return {y, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& x, at::IntArrayRef normalized_shape,
    const at::Tensor& mean, const at::Tensor& rstd, const std::optional<at::Tensor>& weight,
    std::array<bool, 3> mask) {
  const char* op = "layer_norm_backward";
  check_args(op, {{"grad_out", grad_out}, {"x", x}});
  check_same_shape(op, {"grad_out", grad_out}, {"x", x});
  const NormView v = norm_view(op, x, normalized_shape);
  check_affine(op, "weight", weight, x, normalized_shape);
  check_stats(op, "mean", mean, x, v.rows);
  check_stats(op, "rstd", rstd, x, v.rows);
  const at::Tensor gc = grad_out.contiguous(), xc = x.contiguous(), mc = mean.contiguous(),
                   rc = rstd.contiguous(), wc = contiguous_or_undefined(weight);
  at::Tensor gx = empty_contiguous(mask[0] ? xc.sizes() : at::IntArrayRef{0}, xc);
  at::Tensor gw = empty_contiguous(mask[1] ? normalized_shape : at::IntArrayRef{0}, xc);
  at::Tensor gb = empty_contiguous(mask[2] ? normalized_shape : at::IntArrayRef{0}, xc);
  call_with_workspace(op, xc, tc_layer_norm_backward_cpu, tc_layer_norm_backward_cuda,
                      tc_layer_norm_backward_workspace_size,
                      tc_layer_norm_backward_params{.rows = v.rows, .cols = v.cols, .grad_y = gc.data_ptr(),
                                                    .x = xc.data_ptr(), .mean = mc.data_ptr(),
                                                    .rstd = rc.data_ptr(), .weight = ptr_or_null(wc),
                                                    .grad_x = mask[0] ? gx.data_ptr() : nullptr,
                                                    .grad_weight = mask[1] ? gw.data_ptr() : nullptr,
                                                    .grad_bias = mask[2] ? gb.data_ptr() : nullptr});
  return {gx, gw, gb};
}

template <class M>
void impls(M& m) {
  m.impl("layer_norm", &layer_norm);
  m.impl("layer_norm_backward", &layer_norm_backward);
}
}  // namespace

TORCH_LIBRARY_FRAGMENT(tinycuda, m) {
  m.def("layer_norm(Tensor x, int[] normalized_shape, Tensor? weight=None, Tensor? bias=None, "
        "float eps=1e-05) -> (Tensor, Tensor, Tensor)");
  m.def("layer_norm_backward(Tensor grad_out, Tensor x, int[] normalized_shape, Tensor mean, "
        "Tensor rstd, Tensor? weight, bool[3] output_mask) -> (Tensor, Tensor, Tensor)");
}

TC_REGISTER_IMPLS(impls)
