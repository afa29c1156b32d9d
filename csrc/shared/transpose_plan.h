// The transpose family's argument checks and the plan both devices follow
// (tinycuda/transpose.h): y's dims collapsed with x's strides, then
//   rows   the innermost dim steps through x by 1 (or 0, or no dim of x
//          has stride 1): a batched copy of rows, each row read in order;
//   tile   another dim k steps through x by 1: a transpose of (k, inner),
//          x read along k and y written along inner, a tile at a time,
//          over the batch of the remaining dims.
#pragma once
#include "elementwise_check.h"  // StridedLayout, coalesce, shape_check
#include "tinycuda/transpose.h"

inline tc_status permute_copy_check(const tc_permute_copy_params* p) {
  TC_REQUIRE(p, "permute_copy: params is NULL");
  const size_t b = p->itemsize;
  TC_REQUIRE(b == 1 || b == 2 || b == 4 || b == 8 || b == 16,
             "permute_copy: itemsize must be 1, 2, 4, 8 or 16, got %zu", b);
  TC_REQUIRE(p->algo >= TC_TRANSPOSE_AUTO && p->algo <= TC_TRANSPOSE_PADDED,
             "permute_copy: algo must be 0 (auto), 1 (naive), 2 (shared) or 3 (padded), got %d", int(p->algo));
  int64_t n = 0;
  TC_RETURN_IF_ERROR(shape_check("permute_copy", p->ndim, p->sizes, &n));
  TC_REQUIRE(n == 0 || (p->x && p->y), "permute_copy: x or y is NULL");
  return TC_OK;
}

struct PermutePlan {
  StridedLayout<1> l;  // y's dims collapsed, x's strides in l.strides[0]
  int k = -1;          // tile: the dim of x stride 1 read along; -1: rows
};

inline PermutePlan permute_plan(const tc_permute_copy_params* p) {
  const int64_t* strides[1] = {p->x_strides};
  PermutePlan plan{coalesce<1>(p->ndim, p->sizes, strides)};
  const StridedLayout<1>& l = plan.l;
  const int inner = l.ndim - 1;
  if (inner < 1 || l.strides[0][inner] == 0 || l.strides[0][inner] == 1) return plan;
  for (int d = inner - 1; d >= 0 && plan.k < 0; --d)
    if (l.strides[0][d] == 1) plan.k = d;
  return plan;
}

// y's contiguous strides of the collapsed dims (the batch dims' steps through y)
inline void contiguous_strides(const StridedLayout<1>& l, int64_t* out) {
  int64_t s = 1;
  for (int d = l.ndim - 1; d >= 0; --d) out[d] = s, s *= l.sizes[d];
}
