/* losses family: torch.nn.functional's losses with torch's reductions, one
 * machinery for all. With d = input - target, per element:
 *
 *   mse_loss              d^2
 *   l1_loss               |d|
 *   smooth_l1_loss        |d| < beta ? d^2 / (2 beta) : |d| - beta / 2     (beta = 0: |d|)
 *   huber_loss            |d| < delta ? d^2 / 2 : delta (|d| - delta / 2)
 *   binary_cross_entropy_with_logits
 *                         w ((1 - t) x - (1 + (pw - 1) t) log sigmoid(x))
 *                         x input, t target, w weight, pw pos_weight (1 where not given)
 *   kl_div                t log t - t x, 0 where t = 0 (log_target: e^t (t - x))
 *   margin_ranking_loss   max(0, -y (x1 - x2) + margin)
 *   hinge_embedding_loss  (y != 1 ? max(0, margin - x) : 0) + (y != -1 ? x : 0)
 *   triplet_margin_loss   max(0, margin + d(a, p) - d(a, n)) a row, d(u, v) = ||u - v + eps||_p over the
 *                         last dim; swap: d(a, n) -> min(d(a, n), d(p, n))
 * then reduced: NONE (one loss an element, a row for triplet_margin_loss),
 * SUM, MEAN (SUM / their count: NaN for none), BATCHMEAN (kl_div only: SUM /
 * batch, the input's first dim). Accumulation is float32 (float64 for double)
 * in an order fixed by the shape: results are bit-identical run to run.
 *
 * Gradients (g: grad_out, one value an element for NONE, else one value
 * divided by the count or batch), each written where torch's autograd gives one:
 *   mse_loss         2 d g, -2 d g             (input, target)
 *   l1_loss          sign(d) g, -sign(d) g
 *   smooth_l1_loss   d < -beta ? -g : d > beta ? g : d g / beta, and its negation
 *   huber_loss       d < -delta ? -delta g : d > delta ? delta g : d g, and its negation
 *   bce_with_logits  w g ((pw t + 1 - t) sigmoid(x) - pw t),  w g (log sigmoid(-x) - pw log sigmoid(x))
 *                    (without pw: w g (sigmoid(x) - t), -w g x); weight and pos_weight get none
 *   kl_div           -t g, g (log t + 1 - x) (NaN at t = 0, as torch's xlogy);
 *                    log_target: -e^t g, e^t (t - x + 1) g
 *   margin_ranking   where -y (x1 - x2) + margin >= 0: -y g, y g, -(x1 - x2) g
 *   hinge_embedding  g ((y != 1 and margin - x >= 0 ? -1 : 0) + (y != -1 ? 1 : 0)); target gets none
 *   triplet_margin   where the row's loss before the clamp is >= 0, the norms' gradients
 *                    (torch's vector_norm's), a min's split evenly between equal distances
 * A clamp passes the gradient where its argument is >= 0, as torch's clamp_min.
 *
 * The op list is declared once, here: tc_loss_op, and tc_loss_schema(op)
 * gives each op's torch schema: torch.nn.functional's signature, the
 * deprecated size_average and reduce included (either given: torch's legacy
 * reduction). Its tensor arguments are the op's operands, in schema order;
 * tc_loss_grads(op) says which get a gradient, tc_loss_shape(op) how their
 * shapes must agree. Both doors build their functions from these. Refused:
 * mse_loss's, l1_loss's and huber_loss's per-element weight (recent torch's;
 * operands[2] must be NULL), triplet_margin_loss's p = +-inf (the norm's
 * gradient would need its ties counted).
 *
 * Layout: the operands are strided views (element strides, 0 along a
 * broadcast dim) of `ndim` <= 8 dims of `sizes`, their broadcast shape;
 * triplet_margin_loss's are contiguous, rows of sizes[ndim - 1]. out (NONE)
 * and the gradients are contiguous in sizes (out: without the last dim for
 * triplet_margin_loss); a gradient is written at the broadcast shape, and the
 * caller sums it over its operand's broadcast dims. On CUDA the forward of a
 * reduction takes a workspace of tc_loss_workspace_size() bytes (the blocks'
 * partial sums, a pure function of the params); the backward takes none. */
#ifndef TINYCUDA_LOSSES_H
#define TINYCUDA_LOSSES_H
#include "common.h"

typedef enum {
  TC_LOSS_MSE_LOSS = 0,
  TC_LOSS_L1_LOSS = 1,
  TC_LOSS_SMOOTH_L1_LOSS = 2,
  TC_LOSS_HUBER_LOSS = 3,
  TC_LOSS_BINARY_CROSS_ENTROPY_WITH_LOGITS = 4,
  TC_LOSS_KL_DIV = 5,
  TC_LOSS_MARGIN_RANKING_LOSS = 6,
  TC_LOSS_HINGE_EMBEDDING_LOSS = 7,
  TC_LOSS_TRIPLET_MARGIN_LOSS = 8,
  TC_LOSS_COUNT = 9
} tc_loss_op;

/* torch's reduction strings, lower case */
typedef enum {
  TC_LOSS_REDUCTION_NONE = 0,
  TC_LOSS_REDUCTION_MEAN = 1,
  TC_LOSS_REDUCTION_SUM = 2,
  TC_LOSS_REDUCTION_BATCHMEAN = 3,
  TC_LOSS_REDUCTION_COUNT = 4
} tc_loss_reduction;

/* How an op's operand shapes must agree (torch.nn.functional's checks) */
typedef enum {
  TC_LOSS_SHAPE_BROADCAST = 0,       /* they broadcast */
  TC_LOSS_SHAPE_SAME_NDIM = 1,       /* one number of dims, then they broadcast */
  TC_LOSS_SHAPE_TARGET_AS_INPUT = 2, /* target has input's shape; the others broadcast to it */
  TC_LOSS_SHAPE_ROWS = 3             /* one shape; a row is its last dim (a 0-dim one: one row of 1) */
} tc_loss_shape_rule;

typedef struct {
  tc_dtype dtype;
  tc_loss_op op;
  tc_loss_reduction reduction;
  double beta;                /* smooth_l1_loss, >= 0 */
  double delta;               /* huber_loss, > 0 */
  double margin;              /* margin_ranking_loss, hinge_embedding_loss, triplet_margin_loss */
  double p, eps;              /* triplet_margin_loss: the norm's order (finite), added to each difference */
  int swap;                   /* triplet_margin_loss, 0 or 1 */
  int log_target;             /* kl_div, 0 or 1 */
  int64_t batch;              /* BATCHMEAN's divisor: the input's first dim (1 for a 0-dim input) */
  int ndim;                   /* 0 to 8 */
  int64_t sizes[8];           /* the operands' broadcast shape */
  const void* operands[4];    /* the tensor arguments in schema order; NULL: an optional one not given */
  int64_t strides[4][8];      /* each operand's element strides in sizes */
  void* out;                  /* forward: NONE as above, else one element */
  const void* grad_out;       /* backward: NONE as out, else one element (on the device for CUDA) */
  void* grads[4];             /* backward: operand k's gradient, contiguous in sizes; NULL: not wanted */
  void* workspace;
  size_t workspace_bytes;
  void* stream;               /* cudaStream_t; ignored on the CPU */
} tc_loss_params;

/* The op's torch schema; NULL for an unknown op. */
TC_API const char* tc_loss_schema(int op);
/* Bit k set: operand k has a gradient; -1 for an unknown op. */
TC_API int tc_loss_grads(int op);
/* The op's tc_loss_shape_rule; -1 for an unknown op. */
TC_API int tc_loss_shape(int op);
/* The reduction named `name` (tc_loss_reduction in lower case) for op into *reduction; an error naming the
 * ones the op has (BATCHMEAN is kl_div's alone) otherwise. */
TC_API tc_status tc_loss_parse_reduction(int op, const char* name, tc_loss_reduction* reduction);

TC_API size_t tc_loss_workspace_size(const tc_loss_params* p);
TC_API tc_status tc_loss_cpu(const tc_loss_params* p);
TC_API tc_status tc_loss_cuda(const tc_loss_params* p);
TC_API tc_status tc_loss_backward_cpu(const tc_loss_params* p);
TC_API tc_status tc_loss_backward_cuda(const tc_loss_params* p);

#endif
