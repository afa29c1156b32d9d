// What the CPU and CUDA cross_entropy share: the argument checks, the CUDA
// workspace layout (the size query is built without CUDA too), and one row's
// loss from its statistics.
#pragma once
#include <cstddef>

#include "tinycuda/cross_entropy.h"
#include "internal.h"
#include "reduce_math.h"  // beats_max: torch.argmax's order, NaN the largest

namespace ce {

inline tc_status check(const tc_cross_entropy_params* p, const char* op) {
  TC_REQUIRE(p, "%s: params is NULL", op);
  TC_REQUIRE(p->rows >= 0, "%s: rows must be >= 0, got %lld", op, (long long)p->rows);
  TC_REQUIRE(p->cols >= 1, "%s: cols (the number of classes) must be >= 1, got %lld", op,
             (long long)p->cols);
  TC_REQUIRE(p->reduction == TC_REDUCTION_NONE || p->reduction == TC_REDUCTION_MEAN ||
                 p->reduction == TC_REDUCTION_SUM,
             "%s: reduction must be 0 (none), 1 (mean) or 2 (sum), got %d", op, p->reduction);
  TC_REQUIRE(p->label_smoothing >= 0.0 && p->label_smoothing <= 1.0,
             "%s: label_smoothing must be in [0, 1], got %g", op, p->label_smoothing);
  TC_REQUIRE(p->rows == 0 || (p->logits && p->target), "%s: logits or target is NULL", op);
  TC_REQUIRE(p->softcap >= 0.0, "%s: softcap must be >= 0 (0: off), got %g", op, p->softcap);
  TC_REQUIRE(p->lse_square_scale >= 0.0, "%s: lse_square_scale must be >= 0, got %g", op, p->lse_square_scale);
  TC_REQUIRE(p->rows == 0 || !p->grad_loss || p->grad_logits,
             "%s: grad_loss is given but grad_logits is NULL (it scales the gradient)", op);
  TC_REQUIRE(p->grad_loss_per_row == 0 || p->grad_loss_per_row == 1,
             "%s: grad_loss_per_row must be 0 (one value) or 1 (one per row), got %d", op, p->grad_loss_per_row);
  TC_REQUIRE(!p->grad_loss_per_row || p->reduction == TC_REDUCTION_NONE,
             "%s: grad_loss_per_row = 1 needs reduction NONE (the loss of SUM and MEAN is one value)", op);
  TC_REQUIRE(p->grad_in_place == 0 || p->grad_in_place == 1,
             "%s: grad_in_place must be 0 or 1, got %d", op, p->grad_in_place);
  TC_REQUIRE(!p->grad_in_place || p->rows == 0 || (p->grad_logits && p->grad_loss),
             "%s: grad_in_place needs grad_logits (the gradient for grad_loss = 1) and grad_loss", op);
  TC_REQUIRE(!p->grad_in_place || (!p->loss && !p->z_loss && !p->row_loss && !p->row_z && !p->token_accuracy &&
                                   !p->row_correct),
             "%s: grad_in_place writes the gradient alone: loss, z_loss, row_loss, row_z, token_accuracy and "
             "row_correct must be NULL", op);
  return TC_OK;
}

inline tc_status check(const tc_cross_entropy_backward_params* p, const char* op) {
  TC_REQUIRE(p, "%s: params is NULL", op);
  TC_REQUIRE(p->rows >= 0 && p->cols >= 0, "%s: negative size", op);
  TC_REQUIRE(p->rows * p->cols == 0 || (p->grad_logits && p->grad_loss),
             "%s: grad_logits or grad_loss is NULL", op);
  return TC_OK;
}

inline size_t acc_bytes(tc_dtype dtype) { return dtype == TC_FLOAT64 ? 8 : 4; }

// The CUDA workspace: [the statistics block][row losses][row z terms][row
// token accuracy][partial sums]. The
// block: without weights the n_valid count (16 bytes, when counted on the
// device); with weights always 32 bytes: n_valid (int64), W and Wsum (the
// accumulator type), those not given counted on the device.
inline bool counts_n_valid(const tc_cross_entropy_params& p) {
  return p.reduction == TC_REDUCTION_MEAN && !p.n_valid && (p.loss || p.grad_logits || p.z_loss);
}
inline bool row_losses_in_workspace(const tc_cross_entropy_params& p) {
  return p.reduction != TC_REDUCTION_NONE && p.loss && !p.row_loss;
}
// With weights, MEAN divides the z terms by n_valid and the rest by W, so the
// reduction needs each row's z term apart.
inline bool splits_z(const tc_cross_entropy_params& p) {
  return p.weight && p.reduction == TC_REDUCTION_MEAN && p.loss && p.lse_square_scale > 0;
}
inline bool row_z_in_workspace(const tc_cross_entropy_params& p) {
  return p.reduction != TC_REDUCTION_NONE && !p.row_z && (p.z_loss || splits_z(p));
}
// Token accuracy: the kernels write each row's 1 / 0; SUM and MEAN add them
// up (from row_correct, or from the workspace after the row z terms) and
// divide by n_valid, counted on the device when not given.
inline bool wants_accuracy(const tc_cross_entropy_params& p) { return p.token_accuracy || p.row_correct; }
inline bool reduces_accuracy(const tc_cross_entropy_params& p) {
  return p.reduction != TC_REDUCTION_NONE && p.token_accuracy;
}
inline bool row_correct_in_workspace(const tc_cross_entropy_params& p) {
  return reduces_accuracy(p) && !p.row_correct;
}
inline bool counts_n_valid_for_accuracy(const tc_cross_entropy_params& p) {
  return reduces_accuracy(p) && !p.n_valid;
}
constexpr size_t kCountBytes = 16, kWeightedStatsBytes = 32;
inline size_t stats_bytes(const tc_cross_entropy_params& p) {
  return p.weight ? kWeightedStatsBytes : counts_n_valid(p) || counts_n_valid_for_accuracy(p) ? kCountBytes : 0;
}
// Last, for SUM and MEAN on CUDA: two arrays of kReduceParts partial sums
// (the fixed-order sums of the row values go through contiguous slices first),
// from a 16-byte boundary: after an odd number of 4-byte accuracy flags a
// float64 partial would be misaligned (a fatal CUDA error).
constexpr int64_t kReduceParts = 1024;
inline size_t partials_bytes(const tc_cross_entropy_params& p) {
  return p.reduction != TC_REDUCTION_NONE && (p.loss || p.z_loss || reduces_accuracy(p)) ? 2 * kReduceParts * 8 : 0;
}
inline size_t workspace_bytes(const tc_cross_entropy_params& p) {
  const size_t rows = stats_bytes(p) + (row_losses_in_workspace(p) ? size_t(p.rows) * acc_bytes(p.dtype) : 0) +
                      (row_z_in_workspace(p) ? size_t(p.rows) * acc_bytes(p.dtype) : 0) +
                      (row_correct_in_workspace(p) ? size_t(p.rows) * sizeof(float) : 0);
  return partials_bytes(p) ? (rows + 15) / 16 * 16 + partials_bytes(p) : rows;
}

// Token accuracy's argmax as torch.argmax's: a (value, index) candidate, and
// the merge of two that keeps the larger value (NaN the largest), and of
// equal ones (or two NaNs) the lower index, so the answer does not depend on
// the order the elements are visited in (CUDA's threads, head and tail).
template <class A, class I>
struct Argmax {
  A v;
  I i;
};
template <class A, class I>
TC_HD inline Argmax<A, I> argmax_merge(Argmax<A, I> a, Argmax<A, I> b) {
  return beats_max(b.v, a.v) || (!beats_max(a.v, b.v) && b.i < a.i) ? b : a;
}

// softcap * tanh(x / softcap), the capped logit (cap <= 0: x)
template <class A>
TC_HD inline A capped(A x, A cap) {
  return cap > A(0) ? cap * tanh(x / cap) : x;
}

// d capped / dx from the capped value: 1 - tanh^2
template <class A>
TC_HD inline A cap_slope(A xc, A cap) {
  if (cap <= A(0)) return A(1);
  const A t = xc / cap;
  return A(1) - t * t;
}

// loss = lse - (1 - eps) x_t - eps mean(x) with lse = m + log_s, written so
// that lse's large parts cancel first: m - x_t and m - mean(x) are exact-ish.
// The eps term only when eps > 0, as torch: a -inf logit must not give 0 * inf.
template <class A>
TC_HD inline A row_loss(A m, A log_s, A xt, A sum_x, A eps, int64_t cols) {
  A loss = log_s + (A(1) - eps) * (m - xt);
  if (eps > A(0)) loss += eps * (m - sum_x / A(cols));
  return loss;
}

// With class weights: loss = (1 - eps) w_t (lse - x_t) + (eps / V) (Wsum lse -
// sum_wx), sum_wx = sum_c w_c x_c, lse = m + log_s, again with m - x_t and
// Wsum m - sum_wx formed before log_s is added.
template <class A>
TC_HD inline A row_loss_weighted(A m, A log_s, A xt, A sum_wx, A wt, A wsum, A eps, int64_t cols) {
  A loss = (A(1) - eps) * wt * (log_s + (m - xt));
  if (eps > A(0)) loss += eps / A(cols) * (wsum * log_s + (wsum * m - sum_wx));
  return loss;
}

}  // namespace ce
