// The adamw family's checks (their messages name adamw_, the in-place op of
// both doors), its per-element update and the norm's chunks, shared by the
// CPU and CUDA kernels (the math: tinycuda/adamw.h).
#pragma once
#include <cmath>

#include "tinycuda/adamw.h"
#include "internal.h"

// The norm's partial sums: one per chunk of this many elements of a tensor
// (a tensor's last chunk may be short), in tensor order. The CUDA kernel
// gives a chunk to one block; the CPU sums it the same way, left to right.
constexpr int64_t kNormChunk = 16384;

inline int64_t norm_chunks(const tc_multi_tensor_l2norm_params* p) {
  int64_t chunks = 0;
  for (int64_t t = 0; t < p->count; ++t) chunks += (p->numel[t] + kNormChunk - 1) / kNormChunk;
  return chunks;
}

inline tc_status tensor_list_check(const char* op, int64_t count, const int64_t* numel) {
  TC_REQUIRE(count >= 0, "%s: count must be >= 0, got %lld", op, (long long)count);
  TC_REQUIRE(count == 0 || numel, "%s: numel is NULL", op);
  for (int64_t t = 0; t < count; ++t)
    TC_REQUIRE(numel[t] >= 0, "%s: tensor %lld has %lld elements", op, (long long)t, (long long)numel[t]);
  return TC_OK;
}

inline tc_status adamw_check(const tc_adamw_params* p) {
  const char* op = "adamw_";
  TC_RETURN_IF_ERROR(tensor_list_check(op, p->count, p->numel));
  TC_REQUIRE(p->count == 0 || (p->params && p->grads && p->exp_avg && p->exp_avg_sq),
             "%s: params, grads, exp_avg and exp_avg_sq must be given", op);
  for (int64_t t = 0; t < p->count; ++t)
    TC_REQUIRE(p->numel[t] == 0 || (p->params[t] && p->grads[t] && p->exp_avg[t] && p->exp_avg_sq[t]),
               "%s: a buffer of tensor %lld is NULL", op, (long long)t);
  if (p->master) {
    TC_REQUIRE(p->dtype == TC_FLOAT16 || p->dtype == TC_BFLOAT16,
               "%s: master weights go with float16 or bfloat16 params, got dtype code %d", op, int(p->dtype));
    for (int64_t t = 0; t < p->count; ++t)
      TC_REQUIRE(p->numel[t] == 0 || p->master[t], "%s: master[%lld] is NULL", op, (long long)t);
  }
  TC_REQUIRE(p->step >= 1, "%s: step must be >= 1 (the count after this step), got %lld", op, (long long)p->step);
  TC_REQUIRE(p->lr >= 0, "%s: lr must be >= 0, got %g", op, p->lr);
  TC_REQUIRE(p->eps >= 0, "%s: eps must be >= 0, got %g", op, p->eps);
  TC_REQUIRE(p->beta1 >= 0 && p->beta1 < 1, "%s: beta1 must be in [0, 1), got %g", op, p->beta1);
  TC_REQUIRE(p->beta2 >= 0 && p->beta2 < 1, "%s: beta2 must be in [0, 1), got %g", op, p->beta2);
  TC_REQUIRE(p->weight_decay >= 0, "%s: weight_decay must be >= 0, got %g", op, p->weight_decay);
  TC_REQUIRE(!p->grad_norm || p->max_grad_norm > 0, "%s: max_grad_norm must be > 0, got %g", op,
             p->max_grad_norm);
  return TC_OK;
}

inline tc_status l2norm_check(const tc_multi_tensor_l2norm_params* p) {
  const char* op = "multi_tensor_l2norm";
  TC_RETURN_IF_ERROR(tensor_list_check(op, p->count, p->numel));
  for (int64_t t = 0; t < p->count; ++t)
    TC_REQUIRE(p->numel[t] == 0 || (p->tensors && p->tensors[t]), "%s: tensor %lld is NULL", op, (long long)t);
  TC_REQUIRE(p->norm, "%s: norm is NULL", op);
  return TC_OK;
}

// The step's scalars, once per launch, in the accumulator type A.
template <class A> struct AdamwCoefs {
  A lr, decay, beta1, beta2, one_minus_beta1, one_minus_beta2, step_size, bias2_sqrt, eps;
};

template <class A> inline AdamwCoefs<A> adamw_coefs(const tc_adamw_params* p) {
  // torch computes the bias corrections in double (Python floats) and passes them on
  const double bias1 = 1 - std::pow(p->beta1, double(p->step)), bias2 = 1 - std::pow(p->beta2, double(p->step));
  return {A(p->lr), A(1 - p->lr * p->weight_decay), A(p->beta1), A(p->beta2), A(1 - p->beta1), A(1 - p->beta2),
          A(p->lr / bias1), A(std::sqrt(bias2)), A(p->eps)};
}

// clip_grad_norm_'s coefficient: min(1, max_norm / (norm + 1e-6)); a NaN norm gives NaN, as torch's
// clamp does (so every parameter turns NaN, as there, rather than a step unclipped)
template <class A> TC_HD inline A clip_coef(A norm, A max_norm) {
  const A c = max_norm / (norm + A(1e-6));
  return c > A(1) ? A(1) : c;
}

// One element: p, m, v updated in place (A: float, double for double), in
// torch's order of operations (its foreach path: mul_, lerp_, mul_ then
// addcmul_, sqrt, div, add, addcdiv_), so fp32 results agree to rounding.
template <class A> TC_HD inline void adamw_update(A& p, A g, A& m, A& v, const AdamwCoefs<A>& c) {
  p *= c.decay;
  // torch's lerp_(g, w): m + w (g - m) for w < 0.5, else g - (g - m)(1 - w) (the rounding differs for beta1 <= 0.5)
  const A w = c.one_minus_beta1;
  m = w < A(0.5) ? m + w * (g - m) : g - (g - m) * (A(1) - w);
  v = c.beta2 * v + c.one_minus_beta2 * g * g;
  p -= c.step_size * (m / (std::sqrt(v) / c.bias2_sqrt + c.eps));  // torch's addcdiv: p + (-step) * (m / denom)
}
