/* triangle family: torch's triu and tril, x with the elements on one side of a diagonal zeroed.
 *
 *   triu  y[b, i, j] = x[b, i, j] where j - i >= diagonal, else 0
 *   tril  y[b, i, j] = x[b, i, j] where j - i <= diagonal, else 0
 *
 * over x's last two dims (rows i, cols j), batched over the others; diagonal 0 is the main one, > 0 above it,
 * < 0 below (any value: past the matrix, everything or nothing is kept). The gradient is the same op on
 * grad_y. The ops differ only in the side they keep: one op list, declared once, here: tc_triangle_op, and
 * tc_triangle_schema(op) gives each its torch schema. Both doors build their functions from it.
 *
 * Any dtype: an element moves as elem_bytes bytes, and the zero of every dtype torch has is all-zero bits
 * (0.0, 0, false, 0 + 0i). x and y contiguous [batch, rows, cols].
 */
#ifndef TINYCUDA_TRIANGLE_H
#define TINYCUDA_TRIANGLE_H
#include "common.h"

typedef enum {
  TC_TRIANGLE_TRIU = 0,
  TC_TRIANGLE_TRIL = 1,
  TC_TRIANGLE_COUNT = 2
} tc_triangle_op;

typedef struct {
  tc_triangle_op op;
  int64_t batch, rows, cols;  /* x, y contiguous [batch, rows, cols] */
  int64_t diagonal;
  int elem_bytes;             /* 1, 2, 4, 8 or 16 */
  const void* x;
  void* y;
  void* stream;               /* cudaStream_t; ignored on the CPU */
} tc_triangle_params;

/* The op's torch schema; NULL for an unknown op. */
TC_API const char* tc_triangle_schema(int op);

TC_API tc_status tc_triangle_cpu(const tc_triangle_params* p);
TC_API tc_status tc_triangle_cuda(const tc_triangle_params* p);

#endif
