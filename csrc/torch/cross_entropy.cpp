// cross_entropy (the loss, and with compute_grad its gradient from the same
// pass, times grad_loss when given, rounded once) and cross_entropy_backward
// (a gradient made for grad_loss = 1 made the gradient for grad_loss, in
// place, rows whose grad_loss is exactly 1 untouched: with logits those rows
// recomputed from them, rounded once (the core's grad_in_place: the autograd
// backward's call); without, scaled (fused_linear_cross_entropy's, whose
// logits are gone)): torch layer. logits [rows, classes], target [rows]
// int64; grad_loss of logits' dtype, the loss's shape (0-dim for 'mean' and
// 'sum', [rows] for 'none').
// softcap and lse_square_scale (z-loss): cross_entropy.h; z_loss is the z
// terms alone, reduced as the loss, when return_z_loss (else empty). weight:
// class weights [classes] of logits' dtype, as torch's (no gradient).
// token_accuracy, when return_token_accuracy (else empty): float32, [rows]
// of 1 / 0 for 'none', else the fraction of rows not ignored whose argmax is
// the target (cross_entropy.h); a metric, no gradient.
#include <vector>

#include "cross_entropy_args.h"

namespace {
using namespace tc_torch;

// The checks the forward and the backward's recompute share, in this order,
// and the core's params for the problem they describe (outputs unset); x and
// t keep the contiguous copies the params point into alive.
struct Problem {
  at::Tensor x, t, w;
  tc_cross_entropy_params p;
};
Problem problem(const char* op, const at::Tensor& logits, const at::Tensor& target, int64_t ignore_index,
                c10::string_view reduction, double label_smoothing, double softcap, double lse_square_scale,
                const c10::optional<at::Tensor>& weight) {
  TC_CHECK(logits.dim() == 2 && logits.size(1) >= 1, op,
           "logits must be 2-D [rows, classes] with at least one class, got %s",
           shape_str(logits.sizes()).c_str());
  check_target(op, target, logits, "logits");
  const int red = parse_reduction(op, reduction);
  check_label_smoothing(op, label_smoothing);
  check_options(op, softcap, lse_square_scale);
  Problem pr{logits.contiguous(), target.contiguous(),
             class_weight(op, weight, "weight", logits, "logits", logits.size(1)), {}};
  pr.p = tc_cross_entropy_params{.rows = pr.x.size(0), .cols = pr.x.size(1), .ignore_index = ignore_index,
                                 .reduction = red, .label_smoothing = label_smoothing, .softcap = softcap,
                                 .lse_square_scale = lse_square_scale, .logits = pr.x.data_ptr(),
                                 .target = pr.t.const_data_ptr<int64_t>(),
                                 .weight = pr.w.defined() ? pr.w.const_data_ptr() : nullptr};
  return pr;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> cross_entropy(
    const at::Tensor& logits, const at::Tensor& target, int64_t ignore_index, c10::string_view reduction,
    double label_smoothing, bool compute_grad, double softcap, double lse_square_scale, bool return_z_loss,
    const c10::optional<at::Tensor>& weight, bool return_token_accuracy, const c10::optional<at::Tensor>& grad_loss) {
  const char* op = "cross_entropy";
  check_args(op, {{"logits", logits}});
  const Problem pr = problem(op, logits, target, ignore_index, reduction, label_smoothing, softcap, lse_square_scale,
                             weight);
  const at::Tensor& x = pr.x;
  const int red = pr.p.reduction;
  const int64_t rows = x.size(0);
  at::Tensor loss = empty_contiguous(red == TC_REDUCTION_NONE ? std::vector<int64_t>{rows}
                                                              : std::vector<int64_t>{}, x);
  const bool scaled = grad_loss.has_value() && grad_loss->defined();
  if (scaled) {
    TC_CHECK(compute_grad, op, "grad_loss is given but compute_grad is False (grad_loss scales the gradient)");
    check_args(op, {{"logits", logits}, {"grad_loss", *grad_loss}});
    TC_CHECK(grad_loss->sizes() == loss.sizes(), op, "grad_loss must have shape %s (the loss's), got %s",
             shape_str(loss.sizes()).c_str(), shape_str(grad_loss->sizes()).c_str());
  }
  const at::Tensor gl = scaled ? grad_loss->contiguous() : at::Tensor();
  at::Tensor grad = empty_contiguous(compute_grad ? x.sizes() : at::IntArrayRef{0}, x);
  at::Tensor z = empty_contiguous(return_z_loss ? loss.sizes() : at::IntArrayRef{0}, x);
  at::Tensor acc = at::empty(return_token_accuracy ? loss.sizes() : at::IntArrayRef{0}, x.options().dtype(at::kFloat));
  tc_cross_entropy_params p = pr.p;
  p.loss = loss.data_ptr();
  p.grad_logits = compute_grad ? grad.data_ptr() : nullptr;
  p.z_loss = return_z_loss ? z.data_ptr() : nullptr;
  p.token_accuracy = return_token_accuracy ? acc.data_ptr<float>() : nullptr;
  p.grad_loss = scaled ? gl.const_data_ptr() : nullptr;
  p.grad_loss_per_row = scaled && red == TC_REDUCTION_NONE ? 1 : 0;
  call_with_workspace(op, x, tc_cross_entropy_cpu, tc_cross_entropy_cuda, tc_cross_entropy_workspace_size, p);
  return {loss, grad, z, acc};
}

// With logits: grad_logits holds cross_entropy's compute_grad output for
// these arguments; the rows whose grad_loss is not exactly 1 are recomputed
// over it (grad_in_place, cross_entropy.h).
void recompute_in_place(const char* op, const at::Tensor& grad_logits, const at::Tensor& grad_loss,
                        const at::Tensor& logits, const c10::optional<at::Tensor>& target, int64_t ignore_index,
                        c10::string_view reduction, double label_smoothing, double softcap, double lse_square_scale,
                        const c10::optional<at::Tensor>& weight) {
  TC_CHECK(target.has_value() && target->defined(), op, "logits is given without target (both make the gradient)");
  check_args(op, {{"logits", logits}, {"grad_logits", grad_logits}, {"grad_loss", grad_loss}});
  const Problem pr = problem(op, logits, *target, ignore_index, reduction, label_smoothing, softcap, lse_square_scale,
                             weight);
  check_same_shape(op, {"grad_logits", grad_logits}, {"logits", logits});
  TC_CHECK(grad_logits.is_contiguous(), op, "grad_logits must be contiguous (it is updated in place)");
  const bool none = pr.p.reduction == TC_REDUCTION_NONE;
  const std::vector<int64_t> loss_shape = none ? std::vector<int64_t>{logits.size(0)} : std::vector<int64_t>{};
  TC_CHECK(grad_loss.sizes() == at::IntArrayRef(loss_shape), op, "grad_loss must have shape %s (the loss's), got %s",
           shape_str(loss_shape).c_str(), shape_str(grad_loss.sizes()).c_str());
  const at::Tensor gl = grad_loss.contiguous();
  tc_cross_entropy_params p = pr.p;
  p.grad_logits = grad_logits.data_ptr();
  p.grad_loss = gl.const_data_ptr();
  p.grad_loss_per_row = none ? 1 : 0;
  p.grad_in_place = 1;
  call_with_workspace(op, pr.x, tc_cross_entropy_cpu, tc_cross_entropy_cuda, tc_cross_entropy_workspace_size, p);
}

// Without logits, grad_loss: 0-dim (one scale) or grad_logits' shape without its last dim.
void cross_entropy_backward(const at::Tensor& grad_logits, const at::Tensor& grad_loss,
                            const c10::optional<at::Tensor>& logits, const c10::optional<at::Tensor>& target,
                            int64_t ignore_index, c10::string_view reduction, double label_smoothing, double softcap,
                            double lse_square_scale, const c10::optional<at::Tensor>& weight) {
  const char* op = "cross_entropy_backward";
  if (logits.has_value() && logits->defined())
    return recompute_in_place(op, grad_logits, grad_loss, *logits, target, ignore_index, reduction,
                              label_smoothing, softcap, lse_square_scale, weight);
  check_args(op, {{"grad_logits", grad_logits}, {"grad_loss", grad_loss}});
  TC_CHECK(grad_logits.is_contiguous(), op, "grad_logits must be contiguous (it is scaled in place)");
  const bool per_row = grad_loss.dim() > 0;
  TC_CHECK(!per_row || (grad_logits.dim() >= 1 &&
                        grad_loss.sizes() == grad_logits.sizes().slice(0, grad_logits.dim() - 1)),
           op, "grad_loss must be 0-dim or have shape %s (grad_logits' rows), got %s",
           shape_str(grad_logits.dim() >= 1 ? grad_logits.sizes().slice(0, grad_logits.dim() - 1)
                                            : grad_logits.sizes()).c_str(),
           shape_str(grad_loss.sizes()).c_str());
  if (grad_logits.numel() == 0) return;
  const at::Tensor scale = grad_loss.contiguous();
  const int64_t cols = per_row ? grad_logits.size(-1) : grad_logits.numel();
  call(op, grad_logits, tc_cross_entropy_backward_cpu, tc_cross_entropy_backward_cuda,
       tc_cross_entropy_backward_params{.rows = grad_logits.numel() / cols, .cols = cols,
                                        .per_row = per_row ? 1 : 0, .grad_logits = grad_logits.data_ptr(),
                                        .grad_loss = scale.data_ptr()});
}

template <class M>
void impls(M& m) {
  m.impl("cross_entropy", &cross_entropy);
  m.impl("cross_entropy_backward", &cross_entropy_backward);
}
}  // namespace

TORCH_LIBRARY_FRAGMENT(tinycuda, m) {
  m.def("cross_entropy(Tensor logits, Tensor target, int ignore_index=-100, str reduction='mean', "
        "float label_smoothing=0.0, bool compute_grad=False, float softcap=0.0, float lse_square_scale=0.0, "
        "bool return_z_loss=False, Tensor? weight=None, bool return_token_accuracy=False, Tensor? grad_loss=None) -> "
        "(Tensor loss, Tensor grad_logits, Tensor z_loss, Tensor token_accuracy)");
  m.def("cross_entropy_backward(Tensor(a!) grad_logits, Tensor grad_loss, Tensor? logits=None, Tensor? target=None, "
        "int ignore_index=-100, str reduction='mean', float label_smoothing=0.0, float softcap=0.0, "
        "float lse_square_scale=0.0, Tensor? weight=None) -> ()");
}

TC_REGISTER_IMPLS(impls)
