// rope on the CPU: a plain loop over tokens, heads and pairs (the math in
// shared/rope_math.h). Position ids are all checked before anything is
// written, so a bad one leaves the outputs (and, in place, q and k) as they were.
#include "../shared/rope_check.h"
#include "../shared/rope_math.h"
#include "kit/cpu_utils.h"

tc_status tc_rope_cpu(const tc_rope_params* p) {
  TC_RETURN_IF_ERROR(rope_check(p));
  const char* op = rope_op(p);
  const int64_t B = p->batch, S = p->seqlen, D = p->head_dim, h = D / 2;
  if (p->position_ids) {
    // ids shared by every batch (pos_stride_b 0) are one row: [s]
    for (int64_t b = 0; b < (p->pos_stride_b ? B : (B ? 1 : 0)); ++b)
      for (int64_t s = 0; s < S; ++s) {
        const int64_t id = p->position_ids[b * p->pos_stride_b + s];
        if (id >= 0 && id < p->table_rows) continue;
        if (p->pos_stride_b)
          return tc_fail(TC_ERR_INVALID_ARGUMENT, "%s: position_ids[%lld, %lld] = %lld is out of range [0, %lld)", op,
                         (long long)b, (long long)s, (long long)id, (long long)p->table_rows);
        return tc_fail(TC_ERR_INVALID_ARGUMENT, "%s: position_ids[%lld] = %lld is out of range [0, %lld)", op,
                       (long long)s, (long long)id, (long long)p->table_rows);
      }
  }
  if (B == 0 || S == 0 || D == 0 || p->heads_q + p->heads_k == 0) return TC_OK;
  return dispatch_cpu(p->dtype, op, [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* cos = static_cast<const T*>(p->cos);
    const T* sin = static_cast<const T*>(p->sin);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < S; ++s) {
        const int64_t row = p->position_ids ? p->position_ids[b * p->pos_stride_b + s] : s;
        const T* c = cos + b * p->cs_stride_b + row * D;
        const T* sn = sin + b * p->cs_stride_b + row * D;
        for (int64_t head = 0; head < p->heads_q + p->heads_k; ++head) {
          const bool is_q = head < p->heads_q;
          const int64_t hh = is_q ? head : head - p->heads_q;
          const int64_t* xs = is_q ? p->q_stride : p->k_stride;
          const int64_t* os = is_q ? p->q_out_stride : p->k_out_stride;
          const T* x = static_cast<const T*>(is_q ? p->q : p->k) + b * xs[0] + hh * xs[1] + s * xs[2];
          T* o = static_cast<T*>(is_q ? p->q_out : p->k_out) + b * os[0] + hh * os[1] + s * os[2];
          for (int64_t i = 0; i < h; ++i) {
            const int64_t i0 = p->interleaved ? 2 * i : i, i1 = p->interleaved ? 2 * i + 1 : i + h;
            A s0 = to_acc(sn[i0]), s1 = to_acc(sn[i1]), o0, o1;
            if (p->transpose) rope_transpose_sin(s0, s1);
            // both read before either is written: o may be x (in place)
            rope_pair<A>(to_acc(x[i0]), to_acc(x[i1]), to_acc(c[i0]), to_acc(c[i1]), s0, s1, o0, o1);
            o[i0] = from_acc<T>(o0);
            o[i1] = from_acc<T>(o1);
          }
        }
      }
    return TC_OK;
  });
}
