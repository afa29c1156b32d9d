/* rope family: rotary position embedding of q and k (Hugging Face's
 * apply_rotary_pos_emb, with real position ids and the interleaved layout).
 *
 * Token (b, s) of a head of head_dim D = 2h, with the cos/sin row c, s_ of
 * that token, is rotated pair by pair: pair i is (x[i], x[i + h]) (rotate
 * half, interleaved = 0) or (x[2i], x[2i + 1]) (interleaved = 1); for a pair
 * (x0, x1) at positions (i0, i1):
 *   o0 = x0 * cos[i0] - x1 * sin[i0]
 *   o1 = x1 * cos[i1] + x0 * sin[i1]
 * that is, o = x * cos + rotate_half(x) * sin (rotate_every_two(x) when
 * interleaved), with full-width cos and sin. transpose = 1 applies the
 * transposed rotation, the backward (grad in x, grad_x in out):
 *   o0 = x0 * cos[i0] + x1 * sin[i1]
 *   o1 = x1 * cos[i1] - x0 * sin[i0]
 * Computed in float (double for double).
 *
 * Layouts (strides in elements, head_dim contiguous):
 *   q(b, h, s, :) = q[b*q_stride[0] + h*q_stride[1] + s*q_stride[2] + :]
 * for h < heads_q; k likewise for h < heads_k; q_out and k_out by their own
 * strides. So [B, H, S, D] and [B, S, H, D] tensors, and transposed views of
 * either, are read in place. q_out may be q (with q's strides) and k_out k:
 * the rotation is then in place.
 * cos and sin: rows of head_dim contiguous elements, one layout for both;
 * row r of batch b at cos[b*cs_stride_b + r*head_dim] (cs_stride_b = 0: one
 * table for every batch). Token (b, s) reads row
 *   r = position_ids[b*pos_stride_b + s]   (position_ids set: int64)
 *   r = s                                   (position_ids NULL)
 * of the table's table_rows rows. A position id outside [0, table_rows): the
 * CPU returns an error naming it; CUDA cannot check without a
 * synchronization and stops with a device-side assert (the kernel reads
 * nothing out of bounds). */
#ifndef TINYCUDA_ROPE_H
#define TINYCUDA_ROPE_H
#include "common.h"

typedef struct {
  tc_dtype dtype;
  int64_t batch, seqlen, heads_q, heads_k, head_dim;
  const void* q;
  int64_t q_stride[3]; /* batch, head, token */
  const void* k;
  int64_t k_stride[3];
  void* q_out;
  int64_t q_out_stride[3];
  void* k_out;
  int64_t k_out_stride[3];
  const void* cos;
  const void* sin;
  int64_t cs_stride_b; /* elements between the tables of two batches; 0: shared */
  int64_t table_rows;  /* rows of cos and sin (a batch's); without position_ids at least seqlen */
  const int64_t* position_ids; /* NULL: token s reads row s */
  int64_t pos_stride_b;        /* 0: one row of ids for every batch */
  int interleaved;
  int transpose; /* 1: the backward (the transposed rotation) */
  void* stream;
} tc_rope_params;

TC_API tc_status tc_rope_cpu(const tc_rope_params* p);
TC_API tc_status tc_rope_cuda(const tc_rope_params* p);

#endif
