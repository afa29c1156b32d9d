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

// Sequence b of a batch: its queries are rows [q0, q0 + len_q) of q and o,
// its keys rows [k0, k0 + len_k) of k and v (fixed lengths: q0 = k0 = 0 in
// batch b's slice), and its mask, aligned to its own lengths.
struct AttentionSeq {
  int64_t q0, k0, len_q, len_k;
  AttentionMask mask;
};

// Where the sequences lie: fixed lengths (cu_q == NULL), or packed by offsets
// (varlen). Offsets are clamped into the packed rows and the maxima, so
// CUDA kernels, which cannot report bad ones, stay inside the tensors.
struct AttentionBatch {
  const int32_t* cu_q;
  const int32_t* cu_k;
  int64_t total_q, total_k;
  AttentionMask mask;  // over seqlen_q x seqlen_k (varlen: the maxima)
  int top_left;

  TC_HD static int64_t clamp(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }
  TC_HD AttentionSeq seq(int64_t b) const {
    if (!cu_q) return {0, 0, mask.seqlen_q, mask.seqlen_k, mask};
    const int64_t q0 = clamp(cu_q[b], 0, total_q), k0 = clamp(cu_k[b], 0, total_k);
    const int64_t lq = clamp(int64_t(cu_q[b + 1]) - q0, 0, total_q - q0 < mask.seqlen_q ? total_q - q0 : mask.seqlen_q);
    const int64_t lk = clamp(int64_t(cu_k[b + 1]) - k0, 0, total_k - k0 < mask.seqlen_k ? total_k - k0 : mask.seqlen_k);
    AttentionMask m = mask;
    m.shift = top_left ? 0 : lk - lq, m.seqlen_q = lq, m.seqlen_k = lk;
    return {q0, k0, lq, lk, m};
  }
};

template <class P>
AttentionBatch attention_batch(const P* p) {
  return AttentionBatch{p->cu_seqlens_q, p->cu_seqlens_k, p->total_q, p->total_k, attention_mask(p), p->top_left};
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
  TC_REQUIRE(!p->cu_seqlens_q == !p->cu_seqlens_k, "%s: cu_seqlens_q and cu_seqlens_k must be both set or both NULL",
             op);
  TC_REQUIRE(!p->cu_seqlens_q || (p->total_q >= 0 && p->total_k >= 0), "%s: negative total_q or total_k", op);
  return TC_OK;
}

// The CPU reads the offsets, so it checks them (CUDA clamps: AttentionBatch).
template <class P>
tc_status flash_attention_check_offsets(const char* op, const P* p) {
  if (!p->cu_seqlens_q) return TC_OK;
  const struct {
    const char* name;
    const int32_t* cu;
    int64_t total, max;
    const char* max_name;
  } sides[2] = {{"cu_seqlens_q", p->cu_seqlens_q, p->total_q, p->seqlen_q, "seqlen_q"},
                {"cu_seqlens_k", p->cu_seqlens_k, p->total_k, p->seqlen_k, "seqlen_k"}};
  for (const auto& s : sides) {
    TC_REQUIRE(s.cu[0] >= 0, "%s: %s[0] must be >= 0, got %d", op, s.name, int(s.cu[0]));
    for (int64_t b = 0; b < p->batch; ++b) {
      const int64_t len = int64_t(s.cu[b + 1]) - s.cu[b];
      TC_REQUIRE(len >= 0, "%s: %s must be non-decreasing, got %d after %d", op, s.name, int(s.cu[b + 1]),
                 int(s.cu[b]));
      TC_REQUIRE(len <= s.max, "%s: sequence %lld has length %lld, above %s (%lld)", op, (long long)b,
                 (long long)len, s.max_name, (long long)s.max);
    }
    TC_REQUIRE(s.cu[p->batch] <= s.total, "%s: %s ends at %d, past the %lld packed rows", op, s.name,
               int(s.cu[p->batch]), (long long)s.total);
  }
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
