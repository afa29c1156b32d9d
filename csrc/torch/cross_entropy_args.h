// Argument checks shared by cross_entropy and fused_linear_cross_entropy.
#pragma once
#include <string>

#include "tinycuda/cross_entropy.h"
#include "torch_utils.h"

namespace tc_torch {

inline int parse_reduction(const char* op, c10::string_view reduction) {
  if (reduction == "none") return TC_REDUCTION_NONE;
  if (reduction == "mean") return TC_REDUCTION_MEAN;
  if (reduction == "sum") return TC_REDUCTION_SUM;
  fail(op, fmt("reduction must be 'mean', 'sum' or 'none', got '%s'", std::string(reduction).c_str()));
}

inline void check_label_smoothing(const char* op, double eps) {
  TC_CHECK(eps >= 0.0 && eps <= 1.0, op, "label_smoothing must be in [0, 1], got %g", eps);
}

inline void check_options(const char* op, double softcap, double lse_square_scale) {
  TC_CHECK(softcap >= 0.0, op, "softcap must be >= 0 (0: off), got %g", softcap);
  TC_CHECK(lse_square_scale >= 0.0, op, "lse_square_scale must be >= 0, got %g", lse_square_scale);
}

// target: int64 class indices, one per row, on `like`'s device.
inline void check_target(const char* op, const at::Tensor& target, const at::Tensor& like,
                         const char* like_name) {
  TC_CHECK(target.defined(), op, "target is undefined");
  TC_CHECK(target.scalar_type() == at::kLong, op, "target must be int64 class indices, got %s",
           dtype_str(target));
  TC_CHECK(target.device() == like.device(), op, "target is on %s but %s is on %s",
           target.device().str().c_str(), like_name, like.device().str().c_str());
  TC_CHECK(target.dim() == 1 && target.size(0) == like.size(0), op,
           "target must have shape [%lld] (%s's rows), got %s", (long long)like.size(0), like_name,
           shape_str(target.sizes()).c_str());
}

// Class weights (cross_entropy's weight, fused_linear_cross_entropy's
// ce_weight): [classes] of like's dtype and device, made contiguous; an
// undefined tensor when not given.
inline at::Tensor class_weight(const char* op, const c10::optional<at::Tensor>& weight, const char* name,
                               const at::Tensor& like, const char* like_name, int64_t classes) {
  if (!weight.has_value() || !weight->defined()) return at::Tensor();
  check_args(op, {{like_name, like}, {name, *weight}});
  TC_CHECK(weight->dim() == 1 && weight->size(0) == classes, op,
           "%s must have shape [%lld] (one weight per class), got %s", name, (long long)classes,
           shape_str(weight->sizes()).c_str());
  return weight->contiguous();
}

// The CPU core checks targets per call; a chunked caller checks them all
// first, so the message names the row of the whole batch.
inline void check_target_range(const char* op, const at::Tensor& target, int64_t ignore_index,
                               int64_t classes) {
  const int64_t* t = target.const_data_ptr<int64_t>();
  for (int64_t r = 0; r < target.numel(); ++r)
    TC_CHECK(t[r] == ignore_index || (t[r] >= 0 && t[r] < classes), op,
             "target %lld at row %lld is out of range [0, %lld)", (long long)t[r], (long long)r,
             (long long)classes);
}

}  // namespace tc_torch
