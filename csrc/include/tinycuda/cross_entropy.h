/* cross_entropy family: torch.nn.functional.cross_entropy of logits x
 * [rows, cols] (rows tokens, cols classes) against class indices t[rows]
 * (int64), with label smoothing eps in [0, 1] and optional class weights w[cols]
 * (w_c = 1 without them):
 *   lse_i  = log sum_c exp(x_ic)
 *   loss_i = (1 - eps) w_t (lse_i - x_it) + (eps / cols) sum_c w_c (lse_i - x_ic)
 * and loss_i = 0 where t_i == ignore_index. Reductions: NONE (loss[rows]),
 * SUM, MEAN (sum / W, W = sum of w_t over the rows not ignored: n_valid, their
 * count, without weights; NaN when 0), exactly torch's, whose MEAN also divides
 * the smoothing term by W.
 *
 * The gradient is written by the same pass that computes the loss (when
 * grad_logits is given), times the upstream gradient g_i = grad_loss (one
 * value for SUM and MEAN; one per row for NONE with grad_loss_per_row; 1 when
 * grad_loss is NULL):
 *   grad_ic = ((1 - eps) w_t (softmax_ic - [c == t_i])
 *              + (eps / cols) (Wsum softmax_ic - w_c)) * scale * g_i,   Wsum = sum_c w_c
 * (without weights: softmax_ic - (1 - eps) [c == t_i] - eps / cols), scale =
 * 1 / W for MEAN, 1 for SUM and NONE, and grad_i = 0 on ignored rows. Math in
 * float (double for double), g_i taken into the scale factors before the one
 * rounding to dtype: the gradient for grad_loss = 1 rounded to bf16, then
 * scaled and rounded again, was 1.3-2x as far from a float64 reference as
 * torch's own bf16 gradient. The torch op's autograd forward makes the
 * gradient for grad_loss = 1 and its backward recomputes, with grad_in_place,
 * only the rows whose grad_loss is not 1: 2 N V s bytes (s: the element size)
 * for forward and backward of loss.backward(), 4 N V s for another grad_loss,
 * one rounding either way. tc_cross_entropy_backward (scale in place, rows of
 * 1 skipped) rounds twice; chunked callers whose logits are gone by the
 * backward (fused_linear_cross_entropy) still use it.
 *
 * Options, as Gemma 2 and PaLM train (and Liger-Kernel computes them):
 *   softcap > 0: every logit is capped first, x -> softcap * tanh(x / softcap),
 *     and the gradient carries its derivative 1 - tanh^2 (0: off)
 *   lse_square_scale (z-loss): each row's loss gains z_i = lse_square_scale * lse_i^2,
 *     its gradient 2 lse_square_scale lse_i softmax_ic; z_loss, when given,
 *     receives the z terms alone, reduced as the loss (for logging)
 * so grad_ic = (the weighted terms above * scale + 2 lse_square_scale lse_i softmax_ic
 *               * scale_z) * g_i * (1 - tanh^2(x_ic / softcap)).
 * z-loss with class weights, as Liger-Kernel: z_i is not weighted, and MEAN
 * divides it by n_valid (the count of rows not ignored), not by W: scale_z =
 * 1 / n_valid for MEAN, 1 otherwise, and the MEAN loss is
 * sum_i (loss_i - z_i) / W + sum_i z_i / n_valid (without weights W = n_valid).
 *
 * A target outside [0, cols) other than ignore_index: the CPU entry point
 * fails (naming the row) before writing anything; the CUDA kernel stops with
 * a device-side assert naming the op, before reading out of bounds (as torch's
 * kernel does): the stream reports cudaErrorAssert at the next synchronization
 * and the CUDA context is unusable from then on.
 *
 * Chunked callers (fused_linear_cross_entropy runs this on slices of rows):
 * grad_logits may be logits itself (the gradient overwrites the logits),
 * n_valid and target_weight_sum may come from the caller (the divisors of the
 * whole batch), loss may be NULL, and row_loss and row_z keep each row's loss
 * and z term in the accumulator type.
 *
 * Token accuracy (opt-in, as Liger-Kernel's return_token_accuracy; nothing is
 * computed while token_accuracy and row_correct are NULL): a row not ignored
 * is correct when argmax_c x_ic == t_i, argmax as torch.argmax's: the first
 * index of the largest logit, NaN counting as the largest. The raw logits are
 * compared, softcap or not: tanh is increasing, so the capped logits have the
 * same order, and the raw values keep apart logits that the rounded tanh
 * would tie (both saturate to softcap), so the answer is torch's
 * logits.argmax(-1) on either device (Liger-Kernel compares the capped
 * float32 values: where they saturate into a tie, its first index wins and
 * the two can differ). Ignored rows are never correct and do
 * not count; class weights do not enter (Liger's). token_accuracy is
 * reduced as the loss, always in float32:
 * NONE: [rows], 1 or 0 per row (0 on ignored rows); SUM and MEAN alike: [1],
 * the count of correct rows / n_valid (Liger's: a fraction for 'sum' too;
 * 0 / 0 = NaN when every row is ignored, as torch's mean of nothing). The
 * divisor is n_valid when given (chunked callers), else counted here.
 * row_correct keeps the per-row 1 / 0 for chunked callers that reduce
 * themselves. Accuracy is a metric: it has no gradient.
 *
 * CUDA needs a workspace of tc_cross_entropy_workspace_size() bytes (the
 * n_valid count, with weights also W and Wsum, and the per-row losses, z
 * terms and, for a reduced token_accuracy, correct flags of SUM/MEAN); the
 * CPU needs none. */
#ifndef TINYCUDA_CROSS_ENTROPY_H
#define TINYCUDA_CROSS_ENTROPY_H
#include "common.h"

enum { TC_REDUCTION_NONE = 0, TC_REDUCTION_MEAN = 1, TC_REDUCTION_SUM = 2 };

typedef struct {
  tc_dtype dtype;        /* of logits, loss and grad_logits */
  int64_t rows, cols;    /* cols >= 1 */
  int64_t ignore_index;
  int reduction;         /* TC_REDUCTION_* */
  double label_smoothing;
  double softcap;        /* > 0: logits capped at +-softcap by tanh; 0: off */
  double lse_square_scale; /* z-loss weight; 0: off */
  const void* logits;    /* [rows, cols] */
  const int64_t* target; /* [rows] */
  void* loss;            /* NONE: [rows]; SUM, MEAN: [1]. NULL: not written */
  void* grad_logits;     /* [rows, cols], or NULL: not computed. May be == logits */
  const int64_t* n_valid; /* MEAN: the count of rows not ignored, the divisor
                             (without weights; of the z terms with them); SUM and
                             MEAN: token_accuracy's divisor; device memory for
                             CUDA; NULL: counted here from target */
  void* row_loss;        /* NULL, or [rows] of float (double for float64): each
                            row's loss, unreduced */
  void* z_loss;          /* NULL, or the z terms alone, reduced as loss: NONE: [rows]; SUM, MEAN: [1] */
  const void* weight;    /* NULL (every class weighs 1), or [cols] class weights of dtype */
  const void* target_weight_sum; /* MEAN with weight: W, the divisor of the weighted terms:
                             sum of weight[t_i] over rows not ignored, one float
                             (double for float64); device memory for CUDA; NULL:
                             summed here from target */
  void* row_z;           /* NULL, or [rows] of float (double for float64): each
                            row's z term (part of row_loss) */
  void* workspace;
  size_t workspace_bytes;
  void* stream;
  /* Appended after stream, so that a C caller's positional initializer of the
   * fields above still compiles and leaves these NULL (not computed). */
  float* token_accuracy; /* NULL, or the token accuracy (float32 for every dtype):
                            NONE: [rows], 1 where the row's argmax is its target,
                            else 0 (0 on ignored rows); SUM, MEAN: [1], the
                            fraction of rows not ignored that are correct */
  float* row_correct;    /* NULL, or [rows]: each row's 1 / 0 as token_accuracy's
                            NONE, unreduced (for chunked callers) */
  /* Appended after row_correct, for the same reason. */
  const void* grad_loss; /* NULL (grad_loss = 1), or the upstream gradient of dtype
                            that grad_logits is multiplied by before its rounding;
                            device memory for CUDA */
  int grad_loss_per_row; /* 0: grad_loss is one value; 1: [rows], one per row
                            (reduction NONE only) */
  int grad_in_place;     /* 0: as above; 1: grad_logits already holds this gradient
                            for grad_loss = 1 (this call's, grad_loss NULL), and only
                            the rows whose grad_loss is not exactly 1 (read on the
                            device: no host sync) are computed over it, times
                            grad_loss before the one rounding; rows of 1 are not
                            touched (the same arithmetic gives the same bits) and
                            nothing else is written: grad_loss is needed, loss,
                            z_loss, row_loss, row_z, token_accuracy and row_correct
                            must be NULL. A backward after a forward that made the
                            gradient: 2 N V s bytes in all where grad_loss is 1, 4 N V
                            s where it is not, rounded once either way */
} tc_cross_entropy_params;

/* grad_logits *= grad_loss in place; grad_loss is one value (per_row = 0, the
 * whole buffer is scaled) or one per row (per_row = 1). Rows whose scale is
 * exactly 1 are left untouched (read on the device: no host sync). */
typedef struct {
  tc_dtype dtype;
  int64_t rows, cols;
  int per_row;
  void* grad_logits;     /* [rows, cols] */
  const void* grad_loss; /* [1] or [rows], of dtype */
  void* stream;
} tc_cross_entropy_backward_params;

TC_API size_t tc_cross_entropy_workspace_size(const tc_cross_entropy_params* p);

/* Rows per chunk for a caller that runs this core on slices of a linear
 * layer's output (fused_linear_cross_entropy's torch op and capi): the chunk
 * of `tokens` rows of hidden size `hidden` into `classes` logits, grad_weight
 * accumulated in elements of `accum_bytes` (0: no gradient). Liger's
 * next_pow2(ceil(tokens / ceil(classes / hidden))), whose [chunk, classes]
 * buffer holds about tokens x hidden elements, but at least 512 rows, 1024
 * for a float32 or float64 accumulator (float64 is a CPU reference: no
 * larger buffer for it): each chunk adds its
 * [classes, hidden] product into grad_weight, reading and writing it, so with
 * K = chunk rows that product makes 2 chunk FLOPs per 2 accum_bytes bytes,
 * under an H100's 250 FLOP/byte (760 TFLOP/s over 3 TB/s) below the floor.
 * (GPT-2 124M's step, 16384 tokens, float32 grad_weight: at 512 rows 32
 * chunks moved 9.9 GB of accumulator, 5.35 ms of cuBLAS's addmm.)
 * H100, 8192 x 4096 x 128256 bf16, the chunk's three cuBLAS products
 * (scripts/flce_chunks.py): 256 rows 61.7 ms, 512 44.8, 1024 43.5, 2048 38.8
 * (torch.compile's linear + cross_entropy: 38.4 ms, 2.2 GiB above its inputs).
 * Never more than tokens (at least 1). */
TC_API int64_t tc_fused_linear_cross_entropy_chunk(int64_t tokens, int64_t hidden, int64_t classes,
                                                  int64_t accum_bytes);
TC_API tc_status tc_cross_entropy_cpu(const tc_cross_entropy_params* p);
TC_API tc_status tc_cross_entropy_cuda(const tc_cross_entropy_params* p);
TC_API tc_status tc_cross_entropy_backward_cpu(const tc_cross_entropy_backward_params* p);
TC_API tc_status tc_cross_entropy_backward_cuda(const tc_cross_entropy_backward_params* p);

#endif
