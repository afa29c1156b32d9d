/* embedding family: torch.nn.functional.embedding, a lookup of table rows by
 * index (GPT-2's token and position embeddings), and the gradient of its table.
 *
 * input [N] int64 (any shape, flattened), weight [V, D] (V = num_embeddings,
 * D = embedding_dim), row-major and contiguous:
 *
 *   embedding           out[i, :] = weight[input[i], :]                    out [N, D]
 *   embedding_backward  grad_weight[v, :] = sum of grad_out[i, :] over the i
 *                       with input[i] == v                                 grad_weight [V, D]
 *                       and 0 for a v no position names and for v == padding_idx
 *
 * The backward adds in float (double for float64) and rounds to the dtype
 * once, in an order fixed by input alone (no float atomics): bit-identical run
 * to run. The CPU adds a row's terms in position order; CUDA in position
 * order within chunks of 32 sorted positions, then the chunks' partial sums in
 * chunk order (cuda/embedding.cu). So the two devices agree to rounding, not
 * bit for bit, where more than one chunk holds an id.
 *
 * An index outside [0, V): the CPU entry points fail, naming its position in
 * the flattened input, before writing anything; the CUDA kernels cannot see
 * it without a synchronization, and stop with a device-side assert naming the
 * op (as torch's do), skipping the index: nothing is read or written out of
 * bounds. padding_idx is in [0, V), or -1 for none (the torch layer and capi
 * count a negative padding_idx from the end, as torch does). The forward reads
 * no padding_idx: torch's copies weight[padding_idx] like any row.
 *
 * CUDA's backward needs a workspace of tc_embedding_backward_workspace_size()
 * bytes (a pure function of the params, no device needed): the ids as sort
 * keys, their stable sort with the positions (the sort family's tc_sort_cuda
 * and its own scratch), and the chunks' partial sums, 8 bytes of float (16 of
 * double) for every 32 positions and column. The CPU needs none. */
#ifndef TINYCUDA_EMBEDDING_H
#define TINYCUDA_EMBEDDING_H
#include "common.h"

typedef struct {
  tc_dtype dtype;                        /* weight's and out's: a float dtype */
  int64_t num_indices;                   /* N, input's elements */
  int64_t num_embeddings, embedding_dim; /* V, D */
  const int64_t* input;                  /* [N] */
  const void* weight;                    /* [V, D] */
  void* out;                             /* [N, D] */
  void* stream;                          /* cudaStream_t; ignored on the CPU */
} tc_embedding_params;

typedef struct {
  tc_dtype dtype;                        /* grad_out's and grad_weight's: a float dtype */
  int64_t num_indices;                   /* N */
  int64_t num_embeddings, embedding_dim; /* V, D */
  int64_t padding_idx;                   /* in [0, V): that row of grad_weight is 0; -1: none */
  const void* grad_out;                  /* [N, D] */
  const int64_t* input;                  /* [N] */
  void* grad_weight;                     /* [V, D], every row written */
  void* workspace;
  size_t workspace_bytes;
  void* stream;
} tc_embedding_backward_params;

TC_API tc_status tc_embedding_cpu(const tc_embedding_params* p);
TC_API tc_status tc_embedding_cuda(const tc_embedding_params* p);
TC_API size_t tc_embedding_backward_workspace_size(const tc_embedding_backward_params* p);
TC_API tc_status tc_embedding_backward_cpu(const tc_embedding_backward_params* p);
TC_API tc_status tc_embedding_backward_cuda(const tc_embedding_backward_params* p);

#endif
