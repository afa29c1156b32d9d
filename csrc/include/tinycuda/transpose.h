/* transpose family: y = a contiguous copy of a strided view of x.
 *
 *   y[i_0, ..., i_(n-1)] = x[i_0 s_0 + ... + i_(n-1) s_(n-1)]
 *
 * with y contiguous in `sizes` and s = x_strides, in elements. One entry
 * point serves every op of the family: permute_copy(x, dims) (sizes[k] =
 * x.size(dims[k]), s_k = x.stride(dims[k])), transpose_copy(x, d0, d1) (the
 * permutation swapping d0 and d1), and the contiguous copy of any strided
 * view (the identity permutation of the view's own sizes and strides), so a
 * permuted, transposed or sliced view costs one copy and no extra one first.
 * Gradients are copies too: permute_copy's is permute_copy by the inverse
 * permutation.
 *
 * A copy moves bytes: elements are `itemsize` bytes (1, 2, 4, 8 or 16: any
 * dtype of that width, floating, integer, bool or complex), never read as
 * numbers, so the result is bit for bit x's elements. Strides may be any
 * sign or 0 (a broadcast dim); y must not overlap x.
 *
 * CUDA: the dims are collapsed (unit dims dropped, neighbours that stay
 * neighbours in x merged); a layout whose innermost dim steps through x by 1
 * is a batched copy of rows, any other with a dim of x stride 1 a tiled
 * transpose through shared memory (tinycuda/cuda/transpose.cu says how). */
#ifndef TINYCUDA_TRANSPOSE_H
#define TINYCUDA_TRANSPOSE_H
#include "common.h"

/* The CUDA kernel's teaching steps, kept so a reader can measure each one
 * (tinycuda bench transpose_copy --impls tinycuda,variants). Each takes a
 * layout that collapses to a 2-D transpose, y [n0, n1] of x strides (1, s):
 * an error otherwise. The CPU ignores this. */
typedef enum {
  TC_TRANSPOSE_AUTO = 0,    /* the tiled kernels (and the row copy), any layout */
  TC_TRANSPOSE_NAIVE = 1,   /* a thread an element: reads coalesced, writes 32 rows apart */
  TC_TRANSPOSE_SHARED = 2,  /* 32 x 32 tiles through shared memory: both sides coalesced, but a
                               tile column read from shared memory hits one bank 32 times */
  TC_TRANSPOSE_PADDED = 3   /* the tile padded to 33 columns: a column spans all 32 banks */
} tc_transpose_algo;

typedef struct {
  size_t itemsize;      /* bytes an element: 1, 2, 4, 8 or 16 */
  int ndim;             /* 0 (one element) to 8 */
  int64_t sizes[8];     /* y's shape */
  int64_t x_strides[8]; /* x's element strides along y's dims; any sign or 0 */
  const void* x;
  void* y;              /* contiguous */
  tc_transpose_algo algo;
  void* stream;         /* cudaStream_t; ignored on the CPU */
} tc_permute_copy_params;

TC_API tc_status tc_permute_copy_cpu(const tc_permute_copy_params* p);
TC_API tc_status tc_permute_copy_cuda(const tc_permute_copy_params* p);

#endif
