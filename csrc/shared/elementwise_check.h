// Argument checks and the strided layout shared by the CPU and CUDA entry
// points of the elementwise family (tinycuda/elementwise.h).
#pragma once
#include "tinycuda/elementwise.h"
#include "internal.h"

// An op's name as its schema spells it ("leaky_relu"), and its backward's
// ("leaky_relu_backward"), for messages; "unary" for an unknown op.
const char* unary_name(int op, bool backward = false);

// Operands walked together through one output shape, collapsed to the fewest
// dims: size-1 dims dropped, and a dim merged into its outer neighbour where
// every operand steps through the pair as through one dim (a contiguous
// tensor becomes 1-D, a transposed or sliced one keeps what it needs). The
// output is contiguous in `sizes`; operand k's element strides are
// strides[k]. NARGS counts the inputs.
template <int NARGS> struct StridedLayout {
  int ndim = 0;
  int64_t n = 1;
  int64_t sizes[8];
  int64_t strides[NARGS][8];

  // every input is contiguous too: the vector path
  bool contiguous() const {
    for (int k = 0; k < NARGS; ++k)
      if (ndim == 1 && strides[k][0] != 1) return false;
    return ndim <= 1;
  }
};

template <int NARGS>
StridedLayout<NARGS> coalesce(int ndim, const int64_t* sizes, const int64_t* const* strides) {
  StridedLayout<NARGS> l;
  for (int d = 0; d < ndim; ++d) l.n *= sizes[d];
  for (int d = 0; d < ndim; ++d) {
    if (sizes[d] == 1) continue;
    bool merge = l.ndim > 0;
    for (int k = 0; k < NARGS && merge; ++k) merge = l.strides[k][l.ndim - 1] == strides[k][d] * sizes[d];
    if (merge) {
      l.sizes[l.ndim - 1] *= sizes[d];
      for (int k = 0; k < NARGS; ++k) l.strides[k][l.ndim - 1] = strides[k][d];
    } else {
      l.sizes[l.ndim] = sizes[d];
      for (int k = 0; k < NARGS; ++k) l.strides[k][l.ndim] = strides[k][d];
      ++l.ndim;
    }
  }
  return l;
}

inline tc_status unary_check(const tc_unary_params* p) {
  TC_REQUIRE(p, "unary: params is NULL");
  TC_REQUIRE(p->op >= 0 && p->op < TC_UNARY_COUNT, "unary: op must be in [0, %d), got %d", TC_UNARY_COUNT,
             int(p->op));
  const char* name = unary_name(p->op);
  TC_REQUIRE(p->ndim >= 0 && p->ndim <= 8, "%s: ndim must be in [0, 8], got %d", name, p->ndim);
  int64_t n = 1;
  for (int d = 0; d < p->ndim; ++d) {
    TC_REQUIRE(p->sizes[d] >= 0, "%s: sizes[%d] is negative (%lld)", name, d, (long long)p->sizes[d]);
    TC_REQUIRE(p->sizes[d] == 0 || n <= INT64_MAX / p->sizes[d], "%s: more than 2^63 elements", name);
    n *= p->sizes[d];
  }
  TC_REQUIRE(n == 0 || (p->x && p->y), "%s: x or y is NULL", name);
  return TC_OK;
}

inline tc_status unary_check(const tc_unary_backward_params* p) {
  TC_REQUIRE(p, "unary_backward: params is NULL");
  TC_REQUIRE(p->op >= 0 && p->op < TC_UNARY_COUNT, "unary_backward: op must be in [0, %d), got %d",
             TC_UNARY_COUNT, int(p->op));
  const char* name = unary_name(p->op, true);
  TC_REQUIRE(p->n >= 0, "%s: n must be >= 0, got %lld", name, (long long)p->n);
  TC_REQUIRE(p->n == 0 || (p->grad_y && p->saved && p->grad_x), "%s: grad_y, saved or grad_x is NULL", name);
  return TC_OK;
}

// y's contiguous strides, the layout's second operand row is x's
inline StridedLayout<1> unary_layout(const tc_unary_params* p) {
  const int64_t* strides[1] = {p->x_strides};
  return coalesce<1>(p->ndim, p->sizes, strides);
}
