// Argument checks the CPU and CUDA entry points of rope share.
#pragma once
#include "internal.h"
#include "tinycuda/rope.h"

// The op's name in messages: the forward's, or the backward's (transpose).
inline const char* rope_op(const tc_rope_params* p) { return p && p->transpose ? "rope_backward" : "rope"; }

inline tc_status rope_check(const tc_rope_params* p) {
  TC_REQUIRE(p, "rope: params is NULL");
  const char* op = rope_op(p);
  TC_REQUIRE(p->batch >= 0 && p->seqlen >= 0 && p->heads_q >= 0 && p->heads_k >= 0 && p->head_dim >= 0,
             "%s: sizes must be >= 0 (batch %lld, seqlen %lld, heads_q %lld, heads_k %lld, head_dim %lld)", op,
             (long long)p->batch, (long long)p->seqlen, (long long)p->heads_q, (long long)p->heads_k,
             (long long)p->head_dim);
  TC_REQUIRE(p->head_dim % 2 == 0, "%s: head_dim must be even, got %lld", op, (long long)p->head_dim);
  TC_REQUIRE(p->interleaved == 0 || p->interleaved == 1, "%s: interleaved must be 0 or 1, got %d", op,
             p->interleaved);
  TC_REQUIRE(p->transpose == 0 || p->transpose == 1, "%s: transpose must be 0 or 1, got %d", op, p->transpose);
  TC_REQUIRE(p->table_rows >= 0 && p->cs_stride_b >= 0 && p->pos_stride_b >= 0,
             "%s: table_rows, cs_stride_b and pos_stride_b must be >= 0", op);
  TC_REQUIRE(p->position_ids || p->table_rows >= p->seqlen,
             "%s: without position_ids cos and sin need a row per token: %lld rows for seqlen %lld", op,
             (long long)p->table_rows, (long long)p->seqlen);
  if (p->batch == 0 || p->seqlen == 0) return TC_OK;
  TC_REQUIRE(p->heads_q == 0 || p->head_dim == 0 || (p->q && p->q_out), "%s: q or q_out is NULL", op);
  TC_REQUIRE(p->heads_k == 0 || p->head_dim == 0 || (p->k && p->k_out), "%s: k or k_out is NULL", op);
  TC_REQUIRE(p->heads_q + p->heads_k == 0 || p->head_dim == 0 || (p->cos && p->sin), "%s: cos or sin is NULL", op);
  return TC_OK;
}
