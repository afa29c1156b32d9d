// add_rms_norm, add_rms_norm_backward: torch layer. x and residual are
// [..., *normalized_shape]; the core sees them as [rows, cols]. The forward
// returns y, the new residual stream s = x + residual, and rstd (float32,
// float64 for float64 x; [rows]) for the backward, which takes s.
#include "tinycuda/add_rms_norm.h"
#include "norm.h"

namespace {
using namespace tc_torch;

std::tuple<at::Tensor, at::Tensor, at::Tensor> add_rms_norm(const at::Tensor& x, const at::Tensor& residual,
                                                            at::IntArrayRef normalized_shape,
                                                            const std::optional<at::Tensor>& weight,
                                                            std::optional<double> eps, double offset,
                                                            c10::string_view casting_mode) {
  const char* op = "add_rms_norm";
  check_args(op, {{"x", x}, {"residual", residual}});
  check_same_shape(op, {"residual", residual}, {"x", x});
  const NormView v = norm_view(op, x, normalized_shape);
  check_affine(op, "weight", weight, x, normalized_shape);
  const double e = rms_eps(x, eps);
  const at::Tensor xc = x.contiguous(), rc = residual.contiguous(), wc = contiguous_or_undefined(weight);
  at::Tensor y = empty_contiguous(xc.sizes(), xc), s = empty_contiguous(xc.sizes(), xc),
             rstd = new_stats(xc, v.rows);
  call(op, xc, tc_add_rms_norm_cpu, tc_add_rms_norm_cuda,
       tc_add_rms_norm_params{.rows = v.rows, .cols = v.cols, .eps = e, .offset = offset,
                              .casting = parse_casting(op, casting_mode), .x = xc.data_ptr(),
                              .residual = rc.data_ptr(), .weight = ptr_or_null(wc), .y = y.data_ptr(),
                              .residual_out = s.data_ptr(), .rstd = rstd.data_ptr()});
  return {y, s, rstd};
}

std::tuple<at::Tensor, at::Tensor> add_rms_norm_backward(const at::Tensor& grad_out,
                                                         const std::optional<at::Tensor>& grad_residual_out,
                                                         const at::Tensor& residual_out,
                                                         at::IntArrayRef normalized_shape, const at::Tensor& rstd,
                                                         const std::optional<at::Tensor>& weight,
                                                         std::array<bool, 2> mask, double offset,
                                                         c10::string_view casting_mode) {
  const char* op = "add_rms_norm_backward";
  check_residual_grads(op, grad_out, grad_residual_out, residual_out);
  const NormView v = norm_view(op, residual_out, normalized_shape);
  check_affine(op, "weight", weight, residual_out, normalized_shape);
  check_stats(op, "rstd", rstd, residual_out, v.rows);
  const at::Tensor gc = grad_out.contiguous(), sc = residual_out.contiguous(), rc = rstd.contiguous(),
                   wc = contiguous_or_undefined(weight), gsc = contiguous_or_undefined(grad_residual_out);
  at::Tensor gx = empty_contiguous(mask[0] ? sc.sizes() : at::IntArrayRef{0}, sc);
  at::Tensor gw = empty_contiguous(mask[1] ? normalized_shape : at::IntArrayRef{0}, sc);
  call_with_workspace(op, sc, tc_add_rms_norm_backward_cpu, tc_add_rms_norm_backward_cuda,
                      tc_add_rms_norm_backward_workspace_size,
                      tc_add_rms_norm_backward_params{
                          .rows = v.rows, .cols = v.cols, .offset = offset,
                          .casting = parse_casting(op, casting_mode), .grad_y = gc.data_ptr(),
                          .grad_residual_out = ptr_or_null(gsc), .residual_out = sc.data_ptr(),
                          .rstd = rc.data_ptr(), .weight = ptr_or_null(wc),
                          .grad_x = mask[0] ? gx.data_ptr() : nullptr,
                          .grad_weight = mask[1] ? gw.data_ptr() : nullptr});
  return {gx, gw};
}

template <class M>
void impls(M& m) {
  m.impl("add_rms_norm", &add_rms_norm);
  m.impl("add_rms_norm_backward", &add_rms_norm_backward);
}
}  // namespace

TORCH_LIBRARY_FRAGMENT(tinycuda, m) {
  m.def("add_rms_norm(Tensor x, Tensor residual, int[] normalized_shape, Tensor? weight=None, "
        "float? eps=None, float offset=0., str casting_mode=\"gemma\") -> (Tensor, Tensor, Tensor)");
  m.def("add_rms_norm_backward(Tensor grad_out, Tensor? grad_residual_out, Tensor residual_out, "
        "int[] normalized_shape, Tensor rstd, Tensor? weight, bool[2] output_mask, float offset=0., "
        "str casting_mode=\"gemma\") -> (Tensor, Tensor)");
}

TC_REGISTER_IMPLS(impls)
