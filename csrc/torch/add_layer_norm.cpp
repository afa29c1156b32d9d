// add_layer_norm, add_layer_norm_backward: torch layer. x and residual are
// [..., *normalized_shape]; the core sees them as [rows, cols]. The forward
// returns y, the new residual stream s = x + residual, and mean and rstd
// (float32, float64 for float64 x; [rows]) for the backward, which takes s.
#include "tinycuda/add_layer_norm.h"
#include "norm.h"

namespace {
using namespace tc_torch;

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> add_layer_norm(
    const at::Tensor& x, const at::Tensor& residual, at::IntArrayRef normalized_shape,
    const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias, double eps) {
  const char* op = "add_layer_norm";
  check_args(op, {{"x", x}, {"residual", residual}});
  check_same_shape(op, {"residual", residual}, {"x", x});
  const NormView v = norm_view(op, x, normalized_shape);
  check_affine(op, "weight", weight, x, normalized_shape);
  check_affine(op, "bias", bias, x, normalized_shape);
  const at::Tensor xc = x.contiguous(), rc = residual.contiguous(), wc = contiguous_or_undefined(weight),
                   bc = contiguous_or_undefined(bias);
  at::Tensor y = empty_contiguous(xc.sizes(), xc), s = empty_contiguous(xc.sizes(), xc),
             mean = new_stats(xc, v.rows), rstd = new_stats(xc, v.rows);
  call(op, xc, tc_add_layer_norm_cpu, tc_add_layer_norm_cuda,
       tc_add_layer_norm_params{.rows = v.rows, .cols = v.cols, .eps = eps, .x = xc.data_ptr(),
                                .residual = rc.data_ptr(), .weight = ptr_or_null(wc), .bias = ptr_or_null(bc),
                                .y = y.data_ptr(), .residual_out = s.data_ptr(), .mean = mean.data_ptr(),
                                .rstd = rstd.data_ptr()});
  return {y, s, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> add_layer_norm_backward(
    const at::Tensor& grad_out, const std::optional<at::Tensor>& grad_residual_out, const at::Tensor& residual_out,
    at::IntArrayRef normalized_shape, const at::Tensor& mean, const at::Tensor& rstd,
    const std::optional<at::Tensor>& weight, std::array<bool, 3> mask) {
  const char* op = "add_layer_norm_backward";
  check_residual_grads(op, grad_out, grad_residual_out, residual_out);
  const NormView v = norm_view(op, residual_out, normalized_shape);
  check_affine(op, "weight", weight, residual_out, normalized_shape);
  check_stats(op, "mean", mean, residual_out, v.rows);
  check_stats(op, "rstd", rstd, residual_out, v.rows);
  const at::Tensor gc = grad_out.contiguous(), sc = residual_out.contiguous(), mc = mean.contiguous(),
                   rc = rstd.contiguous(), wc = contiguous_or_undefined(weight),
                   gsc = contiguous_or_undefined(grad_residual_out);
  at::Tensor gx = empty_contiguous(mask[0] ? sc.sizes() : at::IntArrayRef{0}, sc);
  at::Tensor gw = empty_contiguous(mask[1] ? normalized_shape : at::IntArrayRef{0}, sc);
  at::Tensor gb = empty_contiguous(mask[2] ? normalized_shape : at::IntArrayRef{0}, sc);
  call_with_workspace(op, sc, tc_add_layer_norm_backward_cpu, tc_add_layer_norm_backward_cuda,
                      tc_add_layer_norm_backward_workspace_size,
                      tc_add_layer_norm_backward_params{
                          .rows = v.rows, .cols = v.cols, .grad_y = gc.data_ptr(),
                          .grad_residual_out = ptr_or_null(gsc), .residual_out = sc.data_ptr(),
                          .mean = mc.data_ptr(), .rstd = rc.data_ptr(), .weight = ptr_or_null(wc),
                          .grad_x = mask[0] ? gx.data_ptr() : nullptr,
                          .grad_weight = mask[1] ? gw.data_ptr() : nullptr,
                          .grad_bias = mask[2] ? gb.data_ptr() : nullptr});
  return {gx, gw, gb};
}

template <class M>
void impls(M& m) {
  m.impl("add_layer_norm", &add_layer_norm);
  m.impl("add_layer_norm_backward", &add_layer_norm_backward);
}
}  // namespace

TORCH_LIBRARY_FRAGMENT(tinycuda, m) {
  m.def("add_layer_norm(Tensor x, Tensor residual, int[] normalized_shape, Tensor? weight=None, "
        "Tensor? bias=None, float eps=1e-05) -> (Tensor, Tensor, Tensor, Tensor)");
  m.def("add_layer_norm_backward(Tensor grad_out, Tensor? grad_residual_out, Tensor residual_out, "
        "int[] normalized_shape, Tensor mean, Tensor rstd, Tensor? weight, bool[3] output_mask) "
        "-> (Tensor, Tensor, Tensor)");
}

TC_REGISTER_IMPLS(impls)
