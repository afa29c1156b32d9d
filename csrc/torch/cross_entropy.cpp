// cross_entropy (the loss, and with compute_grad its gradient from the same
// pass) and cross_entropy_backward (that gradient scaled in place by
// grad_loss): torch layer. logits [rows, classes], target [rows] int64.
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

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> cross_entropy(
    const at::Tensor& logits, const at::Tensor& target, int64_t ignore_index, c10::string_view reduction,
    double label_smoothing, bool compute_grad, double softcap, double lse_square_scale, bool return_z_loss,
    const c10::optional<at::Tensor>& weight, bool return_token_accuracy) {
  const char* op = "cross_entropy";
  check_args(op, {{"logits", logits}});
  TC_CHECK(logits.dim() == 2 && logits.size(1) >= 1, op,
           "logits must be 2-D [rows, classes] with at least one class, got %s",
           shape_str(logits.sizes()).c_str());
  check_target(op, target, logits, "logits");
  const int red = parse_reduction(op, reduction);
  check_label_smoothing(op, label_smoothing);
  check_options(op, softcap, lse_square_scale);
  const at::Tensor w = class_weight(op, weight, "weight", logits, "logits", logits.size(1));
  const at::Tensor x = logits.contiguous(), t = target.contiguous();
  const int64_t rows = x.size(0), cols = x.size(1);
  at::Tensor loss = empty_contiguous(red == TC_REDUCTION_NONE ? std::vector<int64_t>{rows}
                                                              : std::vector<int64_t>{}, x);
  at::Tensor grad = empty_contiguous(compute_grad ? x.sizes() : at::IntArrayRef{0}, x);
  at::Tensor z = empty_contiguous(return_z_loss ? loss.sizes() : at::IntArrayRef{0}, x);
  at::Tensor acc = at::empty(return_token_accuracy ? loss.sizes() : at::IntArrayRef{0}, x.options().dtype(at::kFloat));
  call_with_workspace(op, x, tc_cross_entropy_cpu, tc_cross_entropy_cuda, tc_cross_entropy_workspace_size,
                      tc_cross_entropy_params{.rows = rows, .cols = cols, .ignore_index = ignore_index,
                                              .reduction = red, .label_smoothing = label_smoothing,
                                              .softcap = softcap, .lse_square_scale = lse_square_scale,
                                              .logits = x.data_ptr(), .target = t.const_data_ptr<int64_t>(),
                                              .loss = loss.data_ptr(),
                                              .grad_logits = compute_grad ? grad.data_ptr() : nullptr,
                                              .z_loss = return_z_loss ? z.data_ptr() : nullptr,
                                              .weight = w.defined() ? w.const_data_ptr() : nullptr,
                                              .token_accuracy =
                                                  return_token_accuracy ? acc.data_ptr<float>() : nullptr});
  return {loss, grad, z, acc};
}

// grad_loss: 0-dim (one scale) or grad_logits' shape without its last dim.
void cross_entropy_backward(const at::Tensor& grad_logits, const at::Tensor& grad_loss) {
  const char* op = "cross_entropy_backward";
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
        "bool return_z_loss=False, Tensor? weight=None, bool return_token_accuracy=False) -> "
        "(Tensor loss, Tensor grad_logits, Tensor z_loss, Tensor token_accuracy)");
  m.def("cross_entropy_backward(Tensor(a!) grad_logits, Tensor grad_loss) -> ()");
}

TC_REGISTER_IMPLS(impls)
