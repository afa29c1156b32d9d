// The layer_norm, rms_norm, add_layer_norm and add_rms_norm families share
// their kernels: rms_norm is layer_norm without the mean and the bias, the
// add_ families normalize x + residual (written out), and their backward adds
// the residual stream's own gradient. This header gives the CPU and
// CUDA code one view of both families' params, their argument checks, and
// how the CUDA backward cuts the weight/bias gradients into per-block
// partials (shared with the workspace-size queries, which need no device).
#pragma once
#include "internal.h"
#include "tinycuda/add_layer_norm.h"
#include "tinycuda/add_rms_norm.h"
#include "tinycuda/layer_norm.h"
#include "tinycuda/rms_norm.h"

namespace norms {

struct Forward {
  const char* op;
  tc_dtype dtype;
  int64_t rows, cols;
  double eps;
  const void *x, *weight, *bias;  // weight, bias NULL: 1, 0
  void *y, *mean, *rstd;          // mean, rstd NULL: not written
  void* stream;
  double offset = 0;               // rms: the weight is offset + weight
  int casting = TC_RMS_CAST_GEMMA;  // rms: where x's dtype rounds (rms_norm.h)
  bool add = false;                // add_rms_norm: normalizes sum = x + residual,
  const void* residual = nullptr;
  void* sum = nullptr;             // written here
};

struct Backward {
  const char* op;
  tc_dtype dtype;
  int64_t rows, cols;
  const void *grad_y, *x, *mean, *rstd, *weight;  // mean NULL for rms_norm
  void *grad_x, *grad_weight, *grad_bias;         // NULL: not computed
  void* workspace;
  size_t workspace_bytes;
  void* stream;
  double offset = 0;
  int casting = TC_RMS_CAST_GEMMA;
  const void* grad_sum = nullptr;  // add_rms_norm: added to grad_x (NULL: 0)
};

inline Forward view(const tc_layer_norm_params& p) {
  return {"layer_norm", p.dtype, p.rows, p.cols, p.eps, p.x, p.weight, p.bias, p.y, p.mean, p.rstd,
          p.stream};
}
inline Forward view(const tc_rms_norm_params& p) {
  return {"rms_norm", p.dtype, p.rows, p.cols, p.eps, p.x, p.weight, nullptr, p.y, nullptr, p.rstd,
          p.stream, p.offset, p.casting};
}
inline Forward view(const tc_add_rms_norm_params& p) {
  return {"add_rms_norm", p.dtype, p.rows, p.cols, p.eps, p.x, p.weight, nullptr, p.y, nullptr, p.rstd,
          p.stream, p.offset, p.casting, true, p.residual, p.residual_out};
}
inline Forward view(const tc_add_layer_norm_params& p) {
  return {"add_layer_norm", p.dtype, p.rows, p.cols, p.eps, p.x, p.weight, p.bias, p.y, p.mean, p.rstd,
          p.stream, 0.0, TC_RMS_CAST_GEMMA, true, p.residual, p.residual_out};
}
inline Backward view(const tc_layer_norm_backward_params& p) {
  return {"layer_norm_backward", p.dtype, p.rows, p.cols, p.grad_y, p.x, p.mean, p.rstd, p.weight,
          p.grad_x, p.grad_weight, p.grad_bias, p.workspace, p.workspace_bytes, p.stream};
}
inline Backward view(const tc_rms_norm_backward_params& p) {
  return {"rms_norm_backward", p.dtype, p.rows, p.cols, p.grad_y, p.x, nullptr, p.rstd, p.weight,
          p.grad_x, p.grad_weight, nullptr, p.workspace, p.workspace_bytes, p.stream, p.offset, p.casting};
}

inline Backward view(const tc_add_rms_norm_backward_params& p) {
  return {"add_rms_norm_backward", p.dtype, p.rows, p.cols, p.grad_y, p.residual_out, nullptr, p.rstd,
          p.weight, p.grad_x, p.grad_weight, nullptr, p.workspace, p.workspace_bytes, p.stream, p.offset,
          p.casting, p.grad_residual_out};
}

inline Backward view(const tc_add_layer_norm_backward_params& p) {
  return {"add_layer_norm_backward", p.dtype, p.rows, p.cols, p.grad_y, p.residual_out, p.mean, p.rstd,
          p.weight, p.grad_x, p.grad_weight, p.grad_bias, p.workspace, p.workspace_bytes, p.stream, 0.0,
          TC_RMS_CAST_GEMMA, p.grad_residual_out};
}

// offset and casting, shared by the forward's and the backward's checks
inline tc_status check_options(const char* op, int casting, double offset, const void* weight) {
  TC_REQUIRE(casting >= TC_RMS_CAST_GEMMA && casting <= TC_RMS_CAST_NONE, "%s: casting %d is not a TC_RMS_CAST_*",
             op, casting);
  TC_REQUIRE(offset == 0 || weight, "%s: offset %g needs a weight", op, offset);
  return TC_OK;
}

inline tc_status check(const Forward& f) {
  TC_REQUIRE(f.rows >= 0 && f.cols >= 0, "%s: negative size", f.op);
  TC_RETURN_IF_ERROR(check_options(f.op, f.casting, f.offset, f.weight));
  TC_REQUIRE(f.rows * f.cols == 0 || (f.x && f.y), "%s: x or y is NULL", f.op);
  TC_REQUIRE(f.rows * f.cols == 0 || !f.add || (f.residual && f.sum), "%s: residual or residual_out is NULL",
             f.op);
  return TC_OK;
}

inline tc_status check(const Backward& b, bool rms) {
  TC_REQUIRE(b.rows >= 0 && b.cols >= 0, "%s: negative size", b.op);
  TC_RETURN_IF_ERROR(check_options(b.op, b.casting, b.offset, b.weight));
  TC_REQUIRE(b.rows * b.cols == 0 || (b.grad_y && b.x && b.rstd && (rms || b.mean)),
             "%s: grad_y, x, mean or rstd is NULL", b.op);
  return TC_OK;
}

// The CUDA backward runs at most kMaxPartials blocks (2 per SM of a 132-SM
// H100), each owning a band of rows and writing one row of partial column
// sums per gradient: 264 x 4096 x 4 B = 4 MB at 4096 columns.
constexpr int64_t kMaxPartials = 264;
inline int64_t max_partials(int64_t rows) { return rows < kMaxPartials ? rows : kMaxPartials; }

inline size_t workspace_bytes(const Backward& b) {
  const int64_t grads = (b.grad_weight != nullptr) + (b.grad_bias != nullptr);
  if (b.rows <= 0 || b.cols <= 0 || grads == 0) return 0;
  return size_t(max_partials(b.rows) * b.cols * grads) * (b.dtype == TC_FLOAT64 ? 8 : 4);
}

}  // namespace norms
