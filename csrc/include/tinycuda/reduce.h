/* reduce family: reductions over any set of dims, one machinery for all.
 *
 *   sum          sum x
 *   mean         sum x / n
 *   prod         the product of x
 *   amax, amin   the largest (smallest) x; NaN if any x is NaN
 *   logsumexp    m + log sum e^(x - m), m = max x (-inf for an empty or all -inf slice)
 *   var          sum (x - mean)^2 / max(0, n - c)       c: correction (scalar)
 *   std          sqrt(var)
 *   vector_norm  (sum |x|^p)^(1/p)   p: ord (scalar); p = inf: max |x|, -inf: min |x|,
 *                0: the count of nonzero x
 *   argmax, argmin  the index of the first largest (smallest) x along the
 *                reduced dims, flattened in row-major order; NaN counts as the largest
 *                (smallest), as in torch. y is int64.
 *   max, min     argmax's (argmin's) element, y its value (x's dtype) and `indices`
 *                its index (int64): torch.max(x, dim) / torch.min(x, dim), two outputs.
 * n is the number of elements reduced into one output. var and std use
 * Welford's update and Chan's merge. Accumulation is float32 (float64 for
 * double input), in a fixed order: results are bit-identical run to run.
 *
 * Gradients, with g = grad_y at x's output and y the forward's output:
 *   sum         g
 *   mean        g / n
 *   prod        g y / x where x != 0; at a slice's only zero g * (the product of the
 *               others); 0 elsewhere (torch's)
 *   amax, amin  g / k where x == y (k: how many x equal y), else 0 (torch's even split)
 *   max, min    g at the element `indices` names, 0 elsewhere (torch's
 *               value_selecting_reduction_backward: one element, not amax's split);
 *               reads grad_y and indices only (x and y may be NULL)
 *   logsumexp   g e^(x - y)
 *   var         g 2 (x - mean) / max(0, n - c)
 *   std         g (x - mean) / (max(0, n - c) y)             (0 where y = 0)
 *   vector_norm g sign(x) |x|^(p-1) / y^(p-1)  (0 where x or y = 0); p = 1: g sign(x);
 *               p = +-inf: as amax/amin of |x|, times sign(x); p = 0: 0
 * argmax and argmin have none. The backward computes what it needs beyond
 * x and y (var's and std's mean, amax's tie counts, prod's product of the nonzero x) into its workspace.
 *
 * The op list is declared once, here: tc_reduce_op, and tc_reduce_schema(op)
 * gives each op's torch schema (name, dims argument, keepdim, its scalar and
 * defaults; max's and min's return (values, indices)). Both doors build their
 * functions from it.
 *
 * Layout: x is any strided view (element strides, any sign or 0) of `ndim`
 * <= 8 dims of `sizes`; bit d of reduce_mask marks dim d as reduced (0: none
 * is, and every output reduces one element). y is contiguous over the kept
 * dims in order (keepdim is the caller's view of it). The backward's x,
 * grad_x are contiguous in sizes, grad_y and y contiguous over the kept dims.
 * On CUDA both directions take a workspace of tc_reduce_workspace_size() /
 * tc_reduce_backward_workspace_size() bytes (a pure function of the params).
 * An op with no identity (amax, amin, argmax, argmin, max, min, vector_norm
 * with ord = +-inf) refuses a reduced dim of size 0, output or not (torch's rule). */
#ifndef TINYCUDA_REDUCE_H
#define TINYCUDA_REDUCE_H
#include "common.h"

typedef enum {
  TC_REDUCE_MEAN = 0,
  TC_REDUCE_AMAX = 1,
  TC_REDUCE_AMIN = 2,
  TC_REDUCE_LOGSUMEXP = 3,
  TC_REDUCE_VAR = 4,
  TC_REDUCE_STD = 5,
  TC_REDUCE_VECTOR_NORM = 6,
  TC_REDUCE_ARGMAX = 7,
  TC_REDUCE_ARGMIN = 8,
  TC_REDUCE_PROD = 9,
  TC_REDUCE_SUM = 10,
  TC_REDUCE_MAX = 11,
  TC_REDUCE_MIN = 12,
  TC_REDUCE_COUNT = 13
} tc_reduce_op;

typedef struct {
  tc_dtype dtype;             /* x's; y's too, but int64 for argmax, argmin */
  tc_reduce_op op;
  double scalar;              /* var, std: correction; vector_norm: ord */
  int ndim;                   /* 0 to 8 */
  int64_t sizes[8];           /* x's shape */
  int64_t x_strides[8];       /* in elements; any sign or 0 */
  unsigned reduce_mask;       /* bit d set: dim d is reduced */
  const void* x;
  void* y;                    /* contiguous over the kept dims */
  void* indices;              /* max, min: int64, laid out as y; unused by the other ops */
  void* workspace;
  size_t workspace_bytes;
  void* stream;               /* cudaStream_t; ignored on the CPU */
} tc_reduce_params;

typedef struct {
  tc_dtype dtype;
  tc_reduce_op op;
  double scalar;
  int ndim;
  int64_t sizes[8];
  unsigned reduce_mask;
  const void* grad_y;         /* contiguous over the kept dims */
  const void* x;              /* contiguous in sizes */
  const void* y;              /* the forward's output */
  const void* indices;        /* max, min: the forward's indices (then x and y are unread) */
  void* grad_x;               /* contiguous in sizes */
  void* workspace;
  size_t workspace_bytes;
  void* stream;
} tc_reduce_backward_params;

/* The op's torch schema; NULL for an unknown op. */
TC_API const char* tc_reduce_schema(int op);
/* 1 if the op has a gradient (a float result), 0 if not (argmax, argmin), -1 for an unknown op. */
TC_API int tc_reduce_differentiable(int op);

TC_API size_t tc_reduce_workspace_size(const tc_reduce_params* p);
TC_API size_t tc_reduce_backward_workspace_size(const tc_reduce_backward_params* p);
TC_API tc_status tc_reduce_cpu(const tc_reduce_params* p);
TC_API tc_status tc_reduce_cuda(const tc_reduce_params* p);
TC_API tc_status tc_reduce_backward_cpu(const tc_reduce_backward_params* p);
TC_API tc_status tc_reduce_backward_cuda(const tc_reduce_backward_params* p);

#endif
