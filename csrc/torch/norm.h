// The checks shared by the layer_norm and rms_norm torch layers:
// normalized_shape must be x's trailing dims (the core sees x as [rows,
// cols], cols their product), weight and bias must have that shape, and the
// saved statistics must be float32 (float64 for float64 x) of one per row.
#pragma once
#include <limits>
#include <optional>

#include "tinycuda/rms_norm.h"
#include "torch_utils.h"

namespace tc_torch {

struct NormView {
  int64_t rows, cols;
};

inline NormView norm_view(const char* op, const at::Tensor& x, at::IntArrayRef shape) {
  const int64_t k = int64_t(shape.size());
  TC_CHECK(k >= 1, op, "normalized_shape must have at least 1 dim, got []");
  TC_CHECK(k <= x.dim() && x.sizes().slice(size_t(x.dim() - k)) == shape, op,
           "normalized_shape %s must equal the last dims of x, whose shape is %s",
           shape_str(shape).c_str(), shape_str(x.sizes()).c_str());
  NormView v{1, 1};
  for (int64_t i = 0; i < x.dim(); ++i) (i < x.dim() - k ? v.rows : v.cols) *= x.size(i);
  return v;
}

// weight or bias, when given: x's dtype and device, normalized_shape's shape.
inline void check_affine(const char* op, const char* name, const std::optional<at::Tensor>& p,
                         const at::Tensor& x, at::IntArrayRef shape) {
  if (!p) return;
  check_args(op, {{"x", x}, {name, *p}});
  TC_CHECK(p->sizes() == shape, op, "%s must have shape %s (normalized_shape), got %s", name,
           shape_str(shape).c_str(), shape_str(p->sizes()).c_str());
}

inline at::ScalarType stats_dtype(const at::Tensor& x) {
  return x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

inline at::Tensor new_stats(const at::Tensor& x, int64_t rows) {
  return at::empty({rows}, x.options().dtype(stats_dtype(x)));
}

inline void check_stats(const char* op, const char* name, const at::Tensor& s, const at::Tensor& x,
                        int64_t rows) {
  TC_CHECK(s.defined(), op, "%s is undefined", name);
  TC_CHECK(s.scalar_type() == stats_dtype(x), op, "%s must be %s for x of dtype %s, got %s", name,
           c10::toString(stats_dtype(x)), dtype_str(x), dtype_str(s));
  TC_CHECK(s.device() == x.device(), op, "%s is on %s but x is on %s", name,
           s.device().str().c_str(), x.device().str().c_str());
  TC_CHECK(s.numel() == rows, op, "%s must have %lld elements (one per row), got %lld", name,
           (long long)rows, (long long)s.numel());
}

// rms_norm's casting_mode: 'gemma', 'llama' or 'none' (rms_norm.h)
inline int parse_casting(const char* op, c10::string_view mode) {
  if (mode == "gemma") return TC_RMS_CAST_GEMMA;
  if (mode == "llama") return TC_RMS_CAST_LLAMA;
  if (mode == "none") return TC_RMS_CAST_NONE;
  fail(op, fmt("casting_mode must be 'gemma', 'llama' or 'none', got '%s'", std::string(mode).c_str()));
}

// eps=None is torch's default for rms_norm: the epsilon of the statistics' type.
inline double rms_eps(const at::Tensor& x, std::optional<double> eps) {
  if (eps) return *eps;
  return x.scalar_type() == at::kDouble ? std::numeric_limits<double>::epsilon()
                                        : std::numeric_limits<float>::epsilon();
}

// The add_ families' backward: grad_out, and grad_residual_out when given, like residual_out.
inline void check_residual_grads(const char* op, const at::Tensor& grad_out,
                                 const std::optional<at::Tensor>& grad_residual_out, const at::Tensor& residual_out) {
  check_args(op, {{"grad_out", grad_out}, {"residual_out", residual_out}});
  check_same_shape(op, {"grad_out", grad_out}, {"residual_out", residual_out});
  if (grad_residual_out) {
    check_args(op, {{"residual_out", residual_out}, {"grad_residual_out", *grad_residual_out}});
    check_same_shape(op, {"grad_residual_out", *grad_residual_out}, {"residual_out", residual_out});
  }
}

inline const void* ptr_or_null(const at::Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

inline at::Tensor contiguous_or_undefined(const std::optional<at::Tensor>& t) {
  return t ? t->contiguous() : at::Tensor();
}

}  // namespace tc_torch
