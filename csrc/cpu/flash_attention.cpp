// flash_attention on the CPU (the math: include/tinycuda/flash_attention.h).
// Memory-efficient, as the GPU kernels: no score matrix, only one query row's
// scores (seqlen_k values) at a time, and accumulators in float (double).
//   forward:  items of (batch, query head, 64 query rows) across threads; an
//             item converts the K and V rows its queries see once, then per
//             query row: scores, their max, exp, the weighted sum of V.
//   backward: items of (batch, key/value head) across threads; an item
//             walks the group's query heads and rows in order, accumulating
//             dQ of the row and dK, dV of the item's keys (fixed order:
//             deterministic, no two threads write one output).
#include <cmath>
#include <vector>

#include "../shared/flash_attention_check.h"
#include "../shared/flash_attention_plan.h"
#include "kit/cpu_utils.h"
#include "kit/parallel.h"

namespace {

constexpr int64_t kChunk = 64;  // query rows per forward item

// One of q, k, v, o (or a gradient) as [batch, row, head, :] with strides;
// a varlen batch's rows are packed (AttentionSeq's q0, k0): no batch stride.
template <class T>
struct Rows {
  T* base;
  int64_t stride[3];
  Rows(T* p, const int64_t* s, bool varlen) : base(p), stride{varlen ? 0 : s[0], s[1], s[2]} {}
  T* at(int64_t b, int64_t i, int64_t h) const { return base + b * stride[0] + i * stride[1] + h * stride[2]; }
};

template <class T, class A>
void to_acc_row(const T* src, int64_t n, A* dst) {
  for (int64_t d = 0; d < n; ++d) dst[d] = A(to_acc(src[d]));
}

template <class A>
A dot(const A* a, const A* b, int64_t n) {
  A s = 0;
  for (int64_t d = 0; d < n; ++d) s += a[d] * b[d];
  return s;
}

template <class T>
bool forward(const tc_flash_attention_params* p) {
  using A = acc_t<T>;
  const int64_t D = p->head_dim, group = p->heads_q / p->heads_kv;
  const AttentionBatch seqs = attention_batch(p);
  const Logit<A> logit = attention_logit<A>(p);
  const bool vl = p->cu_seqlens_q;
  const Rows<const T> q{static_cast<const T*>(p->q), p->q_stride, vl}, k{static_cast<const T*>(p->k), p->k_stride, vl},
      v{static_cast<const T*>(p->v), p->v_stride, vl};
  const Rows<T> o{static_cast<T*>(p->o), p->o_stride, vl};
  A* lse = static_cast<A*>(p->lse);
  const int64_t chunks = (p->seqlen_q + kChunk - 1) / kChunk, items = p->batch * p->heads_q * chunks;
  const int64_t threads = threads_for(items, p->batch * p->heads_q * p->seqlen_q * p->seqlen_k * D);
  return run_threads(threads, [&](int64_t t) {
    std::vector<A> kv, qa(static_cast<size_t>(D)), oa(static_cast<size_t>(D)), s(static_cast<size_t>(p->seqlen_k));
    for (int64_t item = t; item < items; item += threads) {
      const int64_t b = item / (p->heads_q * chunks), h = item / chunks % p->heads_q, c = item % chunks;
      const AttentionSeq sq = seqs.seq(b);
      const AttentionMask& mask = sq.mask;
      const int64_t g = h / group, i0 = c * kChunk, i1 = std::min(sq.len_q, i0 + kChunk);
      if (i0 >= i1) continue;  // past this sequence's queries
      // the band is monotone in i: the chunk's keys are [lo(i0), hi(i1 - 1))
      const int64_t klo = mask.lo(i0), khi = std::max(klo, mask.hi(i1 - 1)), nk = khi - klo;
      kv.resize(size_t(2 * nk * D));
      A *ka = kv.data(), *va = ka + nk * D;
      for (int64_t j = 0; j < nk; ++j) {
        to_acc_row(k.at(b, sq.k0 + klo + j, g), D, ka + j * D);
        to_acc_row(v.at(b, sq.k0 + klo + j, g), D, va + j * D);
      }
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t lo = mask.lo(i), hi = mask.hi(i);
        if (lo < hi) to_acc_row(q.at(b, sq.q0 + i, h), D, qa.data());  // with no key, q may be NULL
        A m = -INFINITY;
        for (int64_t j = lo; j < hi; ++j) {
          s[j - lo] = logit(dot(qa.data(), ka + (j - klo) * D, D));
          m = std::max(m, s[j - lo]);
        }
        std::fill(oa.begin(), oa.end(), A(0));
        A l = 0;
        for (int64_t j = lo; j < hi; ++j) {
          const A e = std::exp(s[j - lo] - m);
          l += e;
          const A* vj = va + (j - klo) * D;
          for (int64_t d = 0; d < D; ++d) oa[d] += e * vj[d];
        }
        T* oi = o.at(b, sq.q0 + i, h);
        const A inv = hi > lo ? A(1) / l : A(0);
        for (int64_t d = 0; d < D; ++d) oi[d] = from_acc<T>(oa[d] * inv);
        lse[(b * p->heads_q + h) * p->seqlen_q + i] = hi > lo ? m + std::log(l) : A(INFINITY);
      }
    }
  });
}

template <class T>
bool backward(const tc_flash_attention_backward_params* p) {
  using A = acc_t<T>;
  const int64_t D = p->head_dim, Sk = p->seqlen_k, group = p->heads_kv ? p->heads_q / p->heads_kv : 0;
  const AttentionBatch seqs = attention_batch(p);
  const Logit<A> logit = attention_logit<A>(p);
  const A scale = A(p->scale);
  const bool vl = p->cu_seqlens_q;
  const Rows<const T> q{static_cast<const T*>(p->q), p->q_stride, vl}, k{static_cast<const T*>(p->k), p->k_stride, vl},
      v{static_cast<const T*>(p->v), p->v_stride, vl}, o{static_cast<const T*>(p->o), p->o_stride, vl},
      go{static_cast<const T*>(p->grad_o), p->grad_o_stride, vl};
  const Rows<T> gq{static_cast<T*>(p->grad_q), p->grad_q_stride, vl},
      gk{static_cast<T*>(p->grad_k), p->grad_k_stride, vl}, gv{static_cast<T*>(p->grad_v), p->grad_v_stride, vl};
  const A* lse = static_cast<const A*>(p->lse);
  const int64_t items = p->batch * p->heads_kv;
  const int64_t threads = threads_for(items, 3 * p->batch * p->heads_q * p->seqlen_q * Sk * D);
  return run_threads(threads, [&](int64_t t) {
    std::vector<A> ka(static_cast<size_t>(Sk * D)), va(static_cast<size_t>(Sk * D)), dk(static_cast<size_t>(Sk * D)), dv(static_cast<size_t>(Sk * D));
    std::vector<A> qa(static_cast<size_t>(D)), oa(static_cast<size_t>(D)), ga(static_cast<size_t>(D)), dq(static_cast<size_t>(D));
    for (int64_t item = t; item < items; item += threads) {
      const int64_t b = item / p->heads_kv, g = item % p->heads_kv;
      const AttentionSeq sq = seqs.seq(b);
      const AttentionMask& mask = sq.mask;
      for (int64_t j = 0; j < sq.len_k; ++j) {
        to_acc_row(k.at(b, sq.k0 + j, g), D, ka.data() + j * D);
        to_acc_row(v.at(b, sq.k0 + j, g), D, va.data() + j * D);
      }
      std::fill(dk.begin(), dk.end(), A(0));
      std::fill(dv.begin(), dv.end(), A(0));
      for (int64_t h = g * group; h < (g + 1) * group; ++h)
        for (int64_t i = 0; i < sq.len_q; ++i) {
          const int64_t lo = mask.lo(i), hi = mask.hi(i);
          const A lse_i = lse[(b * p->heads_q + h) * p->seqlen_q + i];
          to_acc_row(q.at(b, sq.q0 + i, h), D, qa.data());
          to_acc_row(o.at(b, sq.q0 + i, h), D, oa.data());
          to_acc_row(go.at(b, sq.q0 + i, h), D, ga.data());
          const A delta = dot(ga.data(), oa.data(), D);
          std::fill(dq.begin(), dq.end(), A(0));
          for (int64_t j = lo; j < hi && lse_i != A(INFINITY); ++j) {
            const A* kj = ka.data() + j * D;
            const A* vj = va.data() + j * D;
            const A s = logit(dot(qa.data(), kj, D));
            const A pij = std::exp(s - lse_i);
            const A ds = pij * (dot(ga.data(), vj, D) - delta) * logit.dcap(s) * scale;
            A* dkj = dk.data() + j * D;
            A* dvj = dv.data() + j * D;
            for (int64_t d = 0; d < D; ++d) {
              dq[d] += ds * kj[d];
              dkj[d] += ds * qa[d];
              dvj[d] += pij * ga[d];
            }
          }
          T* dqi = gq.at(b, sq.q0 + i, h);
          for (int64_t d = 0; d < D; ++d) dqi[d] = from_acc<T>(dq[d]);
        }
      for (int64_t j = 0; j < sq.len_k; ++j) {
        T *dkj = gk.at(b, sq.k0 + j, g), *dvj = gv.at(b, sq.k0 + j, g);
        for (int64_t d = 0; d < D; ++d) {
          dkj[d] = from_acc<T>(dk[j * D + d]);
          dvj[d] = from_acc<T>(dv[j * D + d]);
        }
      }
    }
  });
}

}  // namespace

// The threads' buffers (4 Sk D accumulators a thread in the backward) are
// the only allocations: running out of memory is a status, not an abort.
tc_status tc_flash_attention_cpu(const tc_flash_attention_params* p) {
  const char* op = "flash_attention";
  TC_RETURN_IF_ERROR(flash_attention_check(p));
  TC_RETURN_IF_ERROR(flash_attention_check_offsets(op, p));
  if (p->batch * p->heads_q * p->seqlen_q == 0) return TC_OK;
  return dispatch_cpu(p->dtype, op, [&](auto tag) {
    return forward<decltype(tag)>(p) ? TC_OK : tc_fail(TC_ERR_INTERNAL, "%s: out of memory for the buffers", op);
  });
}

tc_status tc_flash_attention_backward_cpu(const tc_flash_attention_backward_params* p) {
  const char* op = "flash_attention_backward";
  TC_RETURN_IF_ERROR(flash_attention_check(p));
  TC_RETURN_IF_ERROR(flash_attention_check_offsets(op, p));
  if (p->batch * p->heads_kv * p->head_dim == 0) return TC_OK;  // no gradient has an element
  return dispatch_cpu(p->dtype, op, [&](auto tag) {
    return backward<decltype(tag)>(p) ? TC_OK : tc_fail(TC_ERR_INTERNAL, "%s: out of memory for the buffers", op);
  });
}

// The CUDA forward's split-KV partials (shared/flash_attention_plan.h); the
// CPU forward reads none, and a build without CUDA has no split path: 0.
size_t tc_flash_attention_workspace_size(const tc_flash_attention_params* p) {
#ifdef TC_WITH_CUDA
  return plan::attention_split(p).total;
#else
  (void)p;
  return 0;
#endif
}

// The CUDA backward's: delta's rows, then the wgmma backward's dS^T or dQ
// accumulator where it keeps one (shared/flash_attention_plan.h). The CPU
// backward takes none.
size_t tc_flash_attention_backward_workspace_size(const tc_flash_attention_backward_params* p) {
  return plan::attention_dq(p).total;
}
