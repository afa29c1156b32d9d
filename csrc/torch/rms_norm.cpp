// rms_norm, rms_norm_backward: torch layer. x is [..., *normalized_shape];
// the core sees it as [rows, cols]. The forward also returns rstd (float32,
// float64 for float64 x; [rows]) for the backward. eps=None is torch's
// default: the epsilon of the statistics' type (float32 for 16-bit x).
#include "tinycuda/rms_norm.h"
#include "norm.h"

namespace {
using namespace tc_torch;

std::tuple<at::Tensor, at::Tensor> rms_norm(const at::Tensor& x, at::IntArrayRef normalized_shape,
                                            const std::optional<at::Tensor>& weight,
                                            std::optional<double> eps) {
  const char* op = "rms_norm";
  check_args(op, {{"x", x}});
  const NormView v = norm_view(op, x, normalized_shape);
  check_affine(op, "weight", weight, x, normalized_shape);
  const double e = rms_eps(x, eps);
  const at::Tensor xc = x.contiguous(), wc = contiguous_or_undefined(weight);
  at::Tensor y = empty_contiguous(xc.sizes(), xc), rstd = new_stats(xc, v.rows);
  call(op, xc, tc_rms_norm_cpu, tc_rms_norm_cuda,
       tc_rms_norm_params{.rows = v.rows, .cols = v.cols, .eps = e, .x = xc.data_ptr(),
                          .weight = ptr_or_null(wc), .y = y.data_ptr(), .rstd = rstd.data_ptr()});
  return {y, rstd};
}

std::tuple<at::Tensor, at::Tensor> rms_norm_backward(const at::Tensor& grad_out,
                                                     const at::Tensor& x,
                                                     at::IntArrayRef normalized_shape,
                                                     const at::Tensor& rstd,
                                                     const std::optional<at::Tensor>& weight,
                                                     std::array<bool, 2> mask) {
  const char* op = "rms_norm_backward";
  check_args(op, {{"grad_out", grad_out}, {"x", x}});
  check_same_shape(op, {"grad_out", grad_out}, {"x", x});
  const NormView v = norm_view(op, x, normalized_shape);
  check_affine(op, "weight", weight, x, normalized_shape);
  check_stats(op, "rstd", rstd, x, v.rows);
  const at::Tensor gc = grad_out.contiguous(), xc = x.contiguous(), rc = rstd.contiguous(),
                   wc = contiguous_or_undefined(weight);
  at::Tensor gx = empty_contiguous(mask[0] ? xc.sizes() : at::IntArrayRef{0}, xc);
  at::Tensor gw = empty_contiguous(mask[1] ? normalized_shape : at::IntArrayRef{0}, xc);
  call_with_workspace(op, xc, tc_rms_norm_backward_cpu, tc_rms_norm_backward_cuda,
                      tc_rms_norm_backward_workspace_size,
                      tc_rms_norm_backward_params{.rows = v.rows, .cols = v.cols, .grad_y = gc.data_ptr(),
                                                  .x = xc.data_ptr(), .rstd = rc.data_ptr(),
                                                  .weight = ptr_or_null(wc),
                                                  .grad_x = mask[0] ? gx.data_ptr() : nullptr,
                                                  .grad_weight = mask[1] ? gw.data_ptr() : nullptr});
  return {gx, gw};
}

template <class M>
void impls(M& m) {
  m.impl("rms_norm", &rms_norm);
  m.impl("rms_norm_backward", &rms_norm_backward);
}
}  // namespace

TORCH_LIBRARY_FRAGMENT(tinycuda, m) {
  m.def("rms_norm(Tensor x, int[] normalized_shape, Tensor? weight=None, float? eps=None) "
        "-> (Tensor, Tensor)");
  m.def("rms_norm_backward(Tensor grad_out, Tensor x, int[] normalized_shape, Tensor rstd, "
        "Tensor? weight, bool[2] output_mask) -> (Tensor, Tensor)");
}

TC_REGISTER_IMPLS(impls)
