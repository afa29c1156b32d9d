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
       tc_layer_norm_params{dtype_of(xc), v.rows, v.cols, eps, xc.data_ptr(), ptr_or_null(wc),
                            ptr_or_null(bc), y.data_ptr(), mean.data_ptr(), rstd.data_ptr(),
                            nullptr});
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
  tc_layer_norm_backward_params p{dtype_of(xc), v.rows, v.cols, gc.data_ptr(), xc.data_ptr(),
                                  mc.data_ptr(), rc.data_ptr(), ptr_or_null(wc),
                                  mask[0] ? gx.data_ptr() : nullptr,
                                  mask[1] ? gw.data_ptr() : nullptr,
                                  mask[2] ? gb.data_ptr() : nullptr, nullptr, 0, nullptr};
  call_with_workspace(op, xc, tc_layer_norm_backward_cpu, tc_layer_norm_backward_cuda,
                      tc_layer_norm_backward_workspace_size, p);
  return {gx, gw, gb};
}

template <class M>
void impls(M& m) {
  m.impl("layer_norm", &layer_norm);
  m.impl("layer_norm_backward", &layer_norm_backward);
}
}  // namespace

TC_REGISTER_IMPLS(impls)
