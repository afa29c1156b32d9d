/* flash_attention family: softmax attention without the score matrix in
 * memory (FlashAttention-2's algorithm), forward and backward.
 *
 * For batch b, query head h (key/value head g = h / (heads_q / heads_kv):
 * grouped-query attention, MQA when heads_kv = 1), query row i, key row j:
 *   s_ij = scale * <Q_i, K_j>,  or softcap * tanh(scale * <Q_i, K_j> / softcap) when softcap > 0
 *   s_ij = -inf where key j is masked for query i (below)
 *   lse_i = log sum_j exp(s_ij),  P_ij = exp(s_ij - lse_i),  O_i = sum_j P_ij V_j
 * Masking: the diagonal of query i is key d_i = i + seqlen_k - seqlen_q
 * (bottom-right, as FlashAttention aligns it), or d_i = i when top_left (as
 * torch's scaled_dot_product_attention aligns is_causal). Key j is visible when
 *   j >= d_i - window_left   (window_left  >= 0; < 0: no bound)
 *   j <= d_i + window_right  (window_right >= 0; < 0: no bound; causal: 0)
 * A query that sees no key gets O_i = 0 and lse_i = +inf (P = 0 in the backward).
 *
 * Layouts: Q(b, i, h, :) = q[b*q_stride[0] + i*q_stride[1] + h*q_stride[2] + :]
 * (strides in elements; head_dim contiguous), K, V, O likewise over seqlen_k
 * or seqlen_q; so [B, S, H, D] tensors and torch's [B, H, S, D] (its
 * transpose(1, 2)) are both read in place. lse: [batch, heads_q, seqlen_q]
 * contiguous, float (double for double). Accumulation in float (double).
 *
 * Variable lengths (cu_seqlens_q and cu_seqlens_k set, FlashAttention's
 * varlen): q, o hold total_q packed rows, k, v total_k; sequence b is rows
 * [cu_seqlens_q[b], cu_seqlens_q[b+1]) of q (its keys likewise of k), so
 * Q(b, i, h, :) = q[(cu_seqlens_q[b] + i)*q_stride[1] + h*q_stride[2] + :]
 * (the batch strides are ignored). seqlen_q and seqlen_k are the longest
 * sequences (FlashAttention's max_seqlen), the mask and causal alignment hold
 * per sequence, and lse keeps its [batch, heads_q, seqlen_q] layout (row i of
 * sequence b at i < its length). Rows of o, lse and the gradients that lie in
 * no sequence are not written. The offsets are int32 [batch + 1] arrays on the
 * kernel's device, non-decreasing, ending at most at total_q (total_k), each
 * length at most seqlen_q (seqlen_k): the CPU returns an error otherwise; CUDA
 * cannot check without a synchronization and clamps them into those bounds,
 * so bad offsets read and write nothing outside the tensors.
 *
 * Backward, from the saved O and lse (no P kept):
 *   D_i = <dO_i, O_i>,  dP_ij = <dO_i, V_j>,  dS_ij = P_ij (dP_ij - D_i)
 *   dV_j = sum_i P_ij dO_i,  dQ_i = scale * sum_j dS'_ij K_j,  dK_j = scale * sum_i dS'_ij Q_i
 * with dS' = dS, or dS * (1 - tanh^2) with softcap; dK, dV sum over the query
 * heads of a group. With `deterministic` set (and always on the CPU) dQ and
 * dK/dV are each computed by one block walking its keys or queries in order,
 * no atomics: the same bits every run. Without it, CUDA's wgmma backward
 * (fp16/bf16, head_dim <= 128) computes dQ where it has dS, in the dK/dV
 * kernel, and adds each block's share into a float32 accumulator in the
 * workspace (FlashAttention-2/3's dQ) where it cannot keep dS (the plan in
 * shared/flash_attention_plan.h; GPT-2's shapes keep it and stay bit-exact):
 * two products fewer, but the order of those adds, hence dQ's last bits,
 * varies run to run.
 *
 * Split-KV forward (flash-decoding; CUDA, algo AUTO only): with a few query
 * rows (seqlen_q <= 8) and too few (batch, kv head) pairs to fill the GPU,
 * the visible keys are cut into `splits` ranges; each range gives, per query
 * row, a partial O_s (normalized over its keys) and lse_s (-inf for a range
 * the row sees nothing of), and a second kernel merges them in split order:
 *   lse_i = log sum_s exp(lse_s),  O_i = sum_s exp(lse_s - lse_i) O_s
 * (no key in any split: O_i = 0, lse_i = +inf, as above). Its partials live
 * in the workspace: tc_flash_attention_workspace_size(p) bytes,
 *   splits * batch * heads_q * seqlen_q * (head_dim + 1) floats
 * (O_s, then lse_s), 0 when the path is not taken (and always 0 in a build
 * without CUDA; the CPU entry point reads no workspace). The split count is a
 * pure function of the params (no device query), so the query and the
 * launcher agree and the result's bits do not depend on the GPU model. */
#ifndef TINYCUDA_FLASH_ATTENTION_H
#define TINYCUDA_FLASH_ATTENTION_H
#include "common.h"

/* The CUDA variants, kept so a reader can measure each step
 * (tinycuda bench flash_attention --impls variants). The CPU ignores this. */
typedef enum {
  TC_ATTENTION_AUTO = 0,  /* WGMMA where it runs, else MMA, else NAIVE */
  TC_ATTENTION_NAIVE = 1, /* one warp per query (key) row, scalar loads, online softmax; any dtype, head_dim */
  TC_ATTENTION_MMA = 2,   /* FlashAttention-2 on mma.sync, 16 query (key) rows per warp, tiles through a
                             cp.async pipeline; fp16/bf16, head_dim % 8 == 0 and <= 256, 16-byte aligned
                             rows and strides that are multiples of 8 */
  TC_ATTENTION_WGMMA = 3  /* Hopper (sm_90a): TMA-fed K/V ring, a producer and two consumer warpgroups of 64
                             query rows on wgmma; the MMA rules plus an sm_90 device (the backward: head_dim
                             <= 128; above that it runs MMA) */
} tc_attention_algo;

typedef struct {
  tc_dtype dtype;
  int64_t batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim;
  const void* q;
  int64_t q_stride[3]; /* batch, row, head */
  const void* k;
  int64_t k_stride[3];
  const void* v;
  int64_t v_stride[3];
  void* o;
  int64_t o_stride[3];
  void* lse;           /* [batch, heads_q, seqlen_q] */
  double scale;        /* the caller's, usually 1 / sqrt(head_dim) */
  double softcap;      /* 0: off */
  int causal;
  int top_left;
  int64_t window_left, window_right;
  const int32_t* cu_seqlens_q; /* NULL: fixed lengths; else both set (varlen, above) */
  const int32_t* cu_seqlens_k;
  int64_t total_q, total_k;    /* varlen: the packed rows of q (and o), of k and v */
  tc_attention_algo algo;
  void* workspace;     /* CUDA: tc_flash_attention_workspace_size() bytes, the split-KV path's partials */
  size_t workspace_bytes;
  void* stream;
} tc_flash_attention_params;

typedef struct {
  tc_dtype dtype;
  int64_t batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim;
  const void* q;
  int64_t q_stride[3];
  const void* k;
  int64_t k_stride[3];
  const void* v;
  int64_t v_stride[3];
  const void* o;       /* the forward's output and lse */
  int64_t o_stride[3];
  const void* lse;
  const void* grad_o;
  int64_t grad_o_stride[3];
  void* grad_q;
  int64_t grad_q_stride[3];
  void* grad_k;
  int64_t grad_k_stride[3];
  void* grad_v;
  int64_t grad_v_stride[3];
  double scale;
  double softcap;
  int causal;
  int top_left;
  int64_t window_left, window_right;
  const int32_t* cu_seqlens_q; /* NULL: fixed lengths; else both set (varlen, above) */
  const int32_t* cu_seqlens_k;
  int64_t total_q, total_k;    /* varlen: the packed rows of q (and o), of k and v */
  tc_attention_algo algo;
  void* workspace;     /* CUDA: tc_flash_attention_backward_workspace_size() bytes (16-byte aligned): D_i,
                          [batch, heads_q, seqlen_q] float (double), then the wgmma backward's dS^T or dQ
                          accumulator */
  size_t workspace_bytes;
  void* stream;
  int deterministic;   /* nonzero: bit-identical gradients run to run (above); last, so the fields before it
                          keep their offsets */
} tc_flash_attention_backward_params;

TC_API tc_status tc_flash_attention_cpu(const tc_flash_attention_params* p);
TC_API tc_status tc_flash_attention_cuda(const tc_flash_attention_params* p);
TC_API tc_status tc_flash_attention_backward_cpu(const tc_flash_attention_backward_params* p);
TC_API tc_status tc_flash_attention_backward_cuda(const tc_flash_attention_backward_params* p);
TC_API size_t tc_flash_attention_workspace_size(const tc_flash_attention_params* p);
TC_API size_t tc_flash_attention_backward_workspace_size(const tc_flash_attention_backward_params* p);

#endif
