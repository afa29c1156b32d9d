/* sort family: sort, argsort and topk along the rows of x [rows, n], and the
 * gradient of the values they select.
 *
 *   sort     values[r, j] = the j-th smallest (descending: largest) element of
 *            row r, indices[r, j] its position in the row: a stable sort (equal
 *            elements keep their order in x), which is torch.sort(stable=True)
 *            and one of the orders stable=False allows
 *   argsort  indices alone (values NULL)
 *   topk     the first k of the same stable sort: the k smallest (descending:
 *            the k largest), in order, ties to the lower position
 * One entry point does all three: the first k of the sorted row are written
 * (k = n for sort and argsort).
 *
 * Order, as torch's: a float NaN sorts after +inf (descending: first), -0.0
 * and 0.0 are equal (so they keep their order in x); integers by value, bool
 * false before true. values are x's elements bit for bit (a -0.0 stays -0.0,
 * a NaN keeps its payload). dtypes: float32, float16, bfloat16, float64, int8,
 * int16, int32, int64, uint8, bool (a byte, 0 or 1).
 *
 * Every dtype is sorted as an unsigned key of its width (the math:
 * shared/sort_math.h): integers with the sign bit flipped, floats with every bit
 * flipped when negative and the sign bit set otherwise, -0.0 made 0.0 and every
 * NaN the largest key; descending complements the key. A stable sort of the
 * keys is the order above.
 *
 *   sort_backward  grad_x[r, :] = 0, then grad_x[r, indices[r, j]] =
 *                  grad_values[r, j] for j < k (the gradient of sort's and topk's
 *                  values: an index out of [0, n) is an error; of an index given
 *                  twice, one of the gradients lands). A float dtype.
 *
 * The torch layer moves the sorted dim last (a contiguous copy) and moves the
 * results back. On CUDA, tc_sort_workspace_size() (a pure function of the
 * params) gives the scratch a call needs; rows of up to 4096 elements need none. */
#ifndef TINYCUDA_SORT_H
#define TINYCUDA_SORT_H
#include "common.h"

typedef struct {
  tc_dtype dtype;
  int64_t rows, n;      /* x: [rows, n], contiguous */
  int64_t k;            /* the outputs' row length, 0 <= k <= n: n for sort, argsort; topk's k */
  int descending;       /* 0 or 1; topk: largest */
  const void* x;
  void* values;         /* [rows, k], x's dtype; NULL: indices only (argsort) */
  int64_t* indices;     /* [rows, k] */
  void* workspace;
  size_t workspace_bytes;
  void* stream;         /* cudaStream_t; ignored on the CPU */
} tc_sort_params;

typedef struct {
  tc_dtype dtype;             /* grad_values' and grad_x's: a float dtype */
  int64_t rows, n, k;         /* grad_values, indices: [rows, k]; grad_x: [rows, n] */
  const void* grad_values;
  const int64_t* indices;
  void* grad_x;
  void* stream;
} tc_sort_backward_params;

TC_API size_t tc_sort_workspace_size(const tc_sort_params* p);
TC_API tc_status tc_sort_cpu(const tc_sort_params* p);
TC_API tc_status tc_sort_cuda(const tc_sort_params* p);
TC_API tc_status tc_sort_backward_cpu(const tc_sort_backward_params* p);
TC_API tc_status tc_sort_backward_cuda(const tc_sort_backward_params* p);

#endif
