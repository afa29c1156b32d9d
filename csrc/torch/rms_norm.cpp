// rms_norm, rms_norm_, rms_norm_backward: torch layer. x is [...,
// *normalized_shape]; the core sees it as [rows, cols]. The forward also
// returns rstd (float32, float64 for float64 x; [rows]) for the backward.
// eps=None is torch's default: the epsilon of the statistics' type (float32
// for 16-bit x). offset and casting_mode: rms_norm.h. rms_norm_ writes y
// over x (inference: no autograd, no rstd) and returns nothing (torch.compile
// functionalizes no custom op whose output aliases an input).
#include "tinycuda/rms_norm.h"
#include "norm.h"

namespace {
using namespace tc_torch;

// Checks the arguments and runs the forward from xc into y (which may be xc).
at::Tensor forward(const char* op, const at::Tensor& x, const at::Tensor& xc, at::IntArrayRef normalized_shape,
                   const std::optional<at::Tensor>& weight, std::optional<double> eps, double offset,
                   c10::string_view casting_mode, at::Tensor& y) {
  const NormView v = norm_view(op, x, normalized_shape);
  check_affine(op, "weight", weight, x, normalized_shape);
  const int casting = parse_casting(op, casting_mode);
  const at::Tensor wc = contiguous_or_undefined(weight);
  at::Tensor rstd = new_stats(xc, v.rows);
  call(op, xc, tc_rms_norm_cpu, tc_rms_norm_cuda,
       tc_rms_norm_params{.rows = v.rows, .cols = v.cols, .eps = rms_eps(x, eps), .offset = offset,
                          .casting = casting, .x = xc.data_ptr(), .weight = ptr_or_null(wc),
                          .y = y.data_ptr(), .rstd = rstd.data_ptr()});
  return rstd;
}

std::tuple<at::Tensor, at::Tensor> rms_norm(const at::Tensor& x, at::IntArrayRef normalized_shape,
                                            const std::optional<at::Tensor>& weight,
                                            std::optional<double> eps, double offset,
                                            c10::string_view casting_mode) {
  const char* op = "rms_norm";
  check_args(op, {{"x", x}});
  const at::Tensor xc = x.contiguous();
  at::Tensor y = empty_contiguous(xc.sizes(), xc);
  at::Tensor rstd = forward(op, x, xc, normalized_shape, weight, eps, offset, casting_mode, y);
  return {y, rstd};
}

void rms_norm_(at::Tensor& x, at::IntArrayRef normalized_shape, const std::optional<at::Tensor>& weight,
                      std::optional<double> eps, double offset, c10::string_view casting_mode) {
  const char* op = "rms_norm_";
  check_args(op, {{"x", x}});
  TC_CHECK(x.is_contiguous(), op, "x must be contiguous to be normalized in place");
  forward(op, x, x, normalized_shape, weight, eps, offset, casting_mode, x);
}

std::tuple<at::Tensor, at::Tensor> rms_norm_backward(const at::Tensor& grad_out, const at::Tensor& x,
                                                     at::IntArrayRef normalized_shape, const at::Tensor& rstd,
                                                     const std::optional<at::Tensor>& weight,
                                                     std::array<bool, 2> mask, double offset,
                                                     c10::string_view casting_mode) {
  const char* op = "rms_norm_backward";
  check_args(op, {{"grad_out", grad_out}, {"x", x}});
  check_same_shape(op, {"grad_out", grad_out}, {"x", x});
  const NormView v = norm_view(op, x, normalized_shape);
  check_affine(op, "weight", weight, x, normalized_shape);
  check_stats(op, "rstd", rstd, x, v.rows);
  const int casting = parse_casting(op, casting_mode);
  const at::Tensor gc = grad_out.contiguous(), xc = x.contiguous(), rc = rstd.contiguous(),
                   wc = contiguous_or_undefined(weight);
  at::Tensor gx = empty_contiguous(mask[0] ? xc.sizes() : at::IntArrayRef{0}, xc);
  at::Tensor gw = empty_contiguous(mask[1] ? normalized_shape : at::IntArrayRef{0}, xc);
  call_with_workspace(op, xc, tc_rms_norm_backward_cpu, tc_rms_norm_backward_cuda,
                      tc_rms_norm_backward_workspace_size,
                      tc_rms_norm_backward_params{.rows = v.rows, .cols = v.cols, .offset = offset,
                                                  .casting = casting, .grad_y = gc.data_ptr(),
                                                  .x = xc.data_ptr(), .rstd = rc.data_ptr(),
                                                  .weight = ptr_or_null(wc),
                                                  .grad_x = mask[0] ? gx.data_ptr() : nullptr,
                                                  .grad_weight = mask[1] ? gw.data_ptr() : nullptr});
  return {gx, gw};
}

template <class M>
void impls(M& m) {
  m.impl("rms_norm", &rms_norm);
  m.impl("rms_norm_", &rms_norm_);
  m.impl("rms_norm_backward", &rms_norm_backward);
}
}  // namespace

TORCH_LIBRARY_FRAGMENT(tinycuda, m) {
  m.def("rms_norm(Tensor x, int[] normalized_shape, Tensor? weight=None, float? eps=None, float offset=0., "
        "str casting_mode=\"gemma\") -> (Tensor, Tensor)");
  m.def("rms_norm_(Tensor(a!) x, int[] normalized_shape, Tensor? weight=None, float? eps=None, "
        "float offset=0., str casting_mode=\"gemma\") -> ()");
  m.def("rms_norm_backward(Tensor grad_out, Tensor x, int[] normalized_shape, Tensor rstd, "
        "Tensor? weight, bool[2] output_mask, float offset=0., str casting_mode=\"gemma\") -> (Tensor, Tensor)");
}

TC_REGISTER_IMPLS(impls)
