// What the CPU and CUDA kernels of the flash_attention family share: the
// argument checks, the mask (which keys a query sees, as a range), and the
// logit map (scale, softcap).
#pragma once
#include <cmath>

#include "internal.h"
#include "tinycuda/flash_attention.h"

// Key j is visible from query i when lo(i) <= j < hi(i): a band around the
// diagonal d_i = i + shift. Ranges, not a per-element test, so kernels skip
// whole tiles; both are clamped to [0, seqlen_k] and may be empty.
struct AttentionMask {
  int64_t shift, left, right;  // left/right < 0: unbounded
  int64_t seqlen_q, seqlen_k;

  TC_HD int64_t lo(int64_t i) const {
    if (left < 0) return 0;
    const int64_t v = i + shift - left;
    return v < 0 ? 0 : v > seqlen_k ? seqlen_k : v;
  }
  TC_HD int64_t hi(int64_t i) const {
    if (right < 0) return seqlen_k;
    const int64_t v = i + shift + right + 1;
    return v < 0 ? 0 : v > seqlen_k ? seqlen_k : v;
  }
  // The queries that see key j, the same band read the other way.
  TC_HD int64_t q_lo(int64_t j) const {
    if (right < 0) return 0;
    const int64_t v = j - shift - right;
    return v < 0 ? 0 : v > seqlen_q ? seqlen_q : v;
  }
  TC_HD int64_t q_hi(int64_t j) const {
    if (left < 0) return seqlen_q;
    const int64_t v = j - shift + left + 1;
    return v < 0 ? 0 : v > seqlen_q ? seqlen_q : v;
  }
};

template <class P>
AttentionMask attention_mask(const P* p) {
  // A window at least seqlen_q + seqlen_k wide bounds nothing: -1, the same
  // band, without i + shift +- window overflowing near INT64_MAX.
  const int64_t wide = p->seqlen_q + p->seqlen_k;
  const auto bound = [wide](int64_t w) { return w >= wide ? -1 : w; };
  // causal is a right window of 0 (and wins over a wider one, as in FlashAttention)
  return AttentionMask{p->top_left ? 0 : p->seqlen_k - p->seqlen_q, bound(p->window_left),
                       p->causal ? 0 : bound(p->window_right), p->seqlen_q, p->seqlen_k};
}

// s = scale * dot, or softcap * tanh(scale * dot / softcap). With softcap the
// backward multiplies dS by ds/d(scale * dot) = 1 - (s / softcap)^2.
template <class A>
struct Logit {
  A scale, softcap, inv_cap;  // inv_cap = 0: no cap
  TC_HD A operator()(A dot) const {
    const A x = scale * dot;
    return inv_cap != A(0) ? softcap * std::tanh(x * inv_cap) : x;
  }
  TC_HD A dcap(A s) const {
    if (inv_cap == A(0)) return A(1);
    const A t = s * inv_cap;
    return A(1) - t * t;
  }
};

template <class A, class P>
Logit<A> attention_logit(const P* p) {
  return Logit<A>{A(p->scale), A(p->softcap), p->softcap > 0 ? A(1 / p->softcap) : A(0)};
}

template <class P>
tc_status flash_attention_check_common(const char* op, const P* p) {
  TC_REQUIRE(p, "%s: params is NULL", op);
  TC_REQUIRE(p->batch >= 0 && p->seqlen_q >= 0 && p->seqlen_k >= 0 && p->heads_q >= 0 && p->heads_kv >= 0 &&
                 p->head_dim >= 0,
             "%s: negative size", op);
  TC_REQUIRE(p->heads_kv > 0 ? p->heads_q % p->heads_kv == 0 : p->heads_q == 0,
             "%s: heads_q (%lld) must be a multiple of heads_kv (%lld)", op, (long long)p->heads_q,
             (long long)p->heads_kv);
  TC_REQUIRE(std::isfinite(p->scale), "%s: scale must be finite", op);
  TC_REQUIRE(p->softcap >= 0 && std::isfinite(p->softcap), "%s: softcap must be >= 0 and finite, got %g", op,
             p->softcap);
  TC_REQUIRE(p->algo >= TC_ATTENTION_AUTO && p->algo <= TC_ATTENTION_WGMMA,
             "%s: algo must be 0 (auto), 1 (naive), 2 (mma) or 3 (wgmma), got %d", op, int(p->algo));
  for (int d = 0; d < 3; ++d)
    TC_REQUIRE(p->q_stride[d] >= 0 && p->k_stride[d] >= 0 && p->v_stride[d] >= 0 && p->o_stride[d] >= 0,
               "%s: negative stride", op);
  return TC_OK;
}

inline tc_status flash_attention_check(const tc_flash_attention_params* p) {
  const char* op = "flash_attention";
  TC_RETURN_IF_ERROR(flash_attention_check_common(op, p));
  const bool out = p->batch * p->heads_q * p->seqlen_q > 0;
  TC_REQUIRE(!out || (p->o && p->lse), "%s: o or lse is NULL", op);
  TC_REQUIRE(!out || p->seqlen_k * p->head_dim == 0 || (p->q && p->k && p->v), "%s: q, k or v is NULL", op);
  return TC_OK;
}

inline tc_status flash_attention_check(const tc_flash_attention_backward_params* p) {
  const char* op = "flash_attention_backward";
  TC_RETURN_IF_ERROR(flash_attention_check_common(op, p));
  for (int d = 0; d < 3; ++d)
    TC_REQUIRE(p->grad_o_stride[d] >= 0 && p->grad_q_stride[d] >= 0 && p->grad_k_stride[d] >= 0 &&
                   p->grad_v_stride[d] >= 0,
               "%s: negative stride", op);
  const bool rows_q = p->batch * p->heads_q * p->seqlen_q * p->head_dim > 0;
  const bool rows_k = p->batch * p->heads_kv * p->seqlen_k * p->head_dim > 0;
  TC_REQUIRE(!rows_q || (p->grad_q && p->q && p->o && p->grad_o && p->lse), "%s: q, o, lse, grad_o or grad_q is NULL",
             op);
  TC_REQUIRE(!rows_k || (p->grad_k && p->grad_v && p->k && p->v), "%s: k, v, grad_k or grad_v is NULL", op);
  return TC_OK;
}
