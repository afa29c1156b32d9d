/* scan family: prefix scans along one dim, one machinery for all.
 *
 *   cumsum        y_i = x_0 + ... + x_i
 *   cumprod       y_i = x_0 * ... * x_i
 *   logcumsumexp  y_i = log(e^x_0 + ... + e^x_i), as a running (max, sum e^(x - max))
 * i runs along the scanned dim. reverse: the scan runs from the end
 * (y_i folds x_i ... x_(n-1)); exclusive: y_i leaves x_i out, so the first
 * output is the identity (0, 1, -inf). Accumulation is float32 (float64 for
 * double input); every fold runs in an order fixed by the shape, so results
 * are bit-identical run to run.
 *
 * Gradients, with g = grad_y, each a scan in the other direction (the same
 * exclusive flag) of a per-element term, finished with x and y:
 *   cumsum        grad_x_j = the sum of g_i over the i that y_i folds x_j into
 *   cumprod       grad_x_j = P_j S_j: P_j the product of the x before j (y_(j-1),
 *                 or y_j when exclusive), S_j = sum_i g_i (the product of the x
 *                 strictly between j and i, and x_i itself unless exclusive):
 *                 no division, so zeros give torch's gradient exactly
 *   logcumsumexp  grad_x_j = e^(x_j + L+_j) - e^(x_j + L-_j), L+-_j the
 *                 log-sum-exp of log|g_i| - y_i over those i with g_i > 0 (< 0)
 *                 (torch's formula)
 *
 * The op list is declared once, here: tc_scan_op, and tc_scan_schema(op)
 * gives each op's torch schema. Both doors build their functions from it.
 *
 * Layout: x, y (and the backward's grad_y, grad_x) are contiguous
 * [outer, n, inner], scanned along n (the torch layer makes x contiguous and
 * folds the dims before and after the scanned one). On CUDA both directions
 * take a workspace of tc_scan_workspace_size() /
 * tc_scan_backward_workspace_size() bytes (a pure function of the params),
 * which the launcher clears on the stream. */
#ifndef TINYCUDA_SCAN_H
#define TINYCUDA_SCAN_H
#include "common.h"

typedef enum {
  TC_SCAN_CUMSUM = 0,
  TC_SCAN_CUMPROD = 1,
  TC_SCAN_LOGCUMSUMEXP = 2,
  TC_SCAN_COUNT = 3
} tc_scan_op;

typedef struct {
  tc_dtype dtype;
  tc_scan_op op;
  int reverse;                /* 0 or 1 */
  int exclusive;              /* 0 or 1 */
  int64_t outer, n, inner;    /* x, y contiguous [outer, n, inner] */
  const void* x;
  void* y;
  void* workspace;
  size_t workspace_bytes;
  void* stream;               /* cudaStream_t; ignored on the CPU */
} tc_scan_params;

typedef struct {
  tc_dtype dtype;
  tc_scan_op op;
  int reverse;                /* the forward's */
  int exclusive;
  int64_t outer, n, inner;
  const void* grad_y;         /* all four contiguous [outer, n, inner] */
  const void* x;              /* the forward's input */
  const void* y;              /* the forward's output */
  void* grad_x;
  void* workspace;
  size_t workspace_bytes;
  void* stream;
} tc_scan_backward_params;

/* The op's torch schema; NULL for an unknown op. */
TC_API const char* tc_scan_schema(int op);

TC_API size_t tc_scan_workspace_size(const tc_scan_params* p);
TC_API size_t tc_scan_backward_workspace_size(const tc_scan_backward_params* p);
TC_API tc_status tc_scan_cpu(const tc_scan_params* p);
TC_API tc_status tc_scan_cuda(const tc_scan_params* p);
TC_API tc_status tc_scan_backward_cpu(const tc_scan_backward_params* p);
TC_API tc_status tc_scan_backward_cuda(const tc_scan_backward_params* p);

#endif
