// Argument checks and the strided layout shared by the CPU and CUDA entry
// points of the elementwise family (tinycuda/elementwise.h).
#pragma once
#include "tinycuda/elementwise.h"
#include "internal.h"

// An op's name as its schema spells it ("leaky_relu"), and its backward's
// ("leaky_relu_backward"), for messages; "unary" for an unknown op.
const char* unary_name(int op, bool backward = false);
const char* binary_name(int op, bool backward = false);

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

// ndim in [0, 8], sizes >= 0, and their product without overflow
inline tc_status shape_check(const char* name, int ndim, const int64_t* sizes, int64_t* n) {
  TC_REQUIRE(ndim >= 0 && ndim <= 8, "%s: ndim must be in [0, 8], got %d", name, ndim);
  *n = 1;
  for (int d = 0; d < ndim; ++d) {
    TC_REQUIRE(sizes[d] >= 0, "%s: sizes[%d] is negative (%lld)", name, d, (long long)sizes[d]);
    TC_REQUIRE(sizes[d] == 0 || *n <= INT64_MAX / sizes[d], "%s: more than 2^63 elements", name);
    *n *= sizes[d];
  }
  return TC_OK;
}

inline tc_status unary_check(const tc_unary_params* p) {
  TC_REQUIRE(p, "unary: params is NULL");
  TC_REQUIRE(p->op >= 0 && p->op < TC_UNARY_COUNT, "unary: op must be in [0, %d), got %d", TC_UNARY_COUNT,
             int(p->op));
  const char* name = unary_name(p->op);
  int64_t n = 0;
  TC_RETURN_IF_ERROR(shape_check(name, p->ndim, p->sizes, &n));
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

template <class P> tc_status binary_op_check(const P* p, bool backward) {
  TC_REQUIRE(p, "binary%s: params is NULL", backward ? "_backward" : "");
  TC_REQUIRE(p->op >= 0 && p->op < TC_BINARY_COUNT, "binary%s: op must be in [0, %d), got %d",
             backward ? "_backward" : "", TC_BINARY_COUNT, int(p->op));
  return TC_OK;
}

inline tc_status binary_check(const tc_binary_params* p) {
  TC_RETURN_IF_ERROR(binary_op_check(p, false));
  const char* name = binary_name(p->op);
  int64_t n = 0;
  TC_RETURN_IF_ERROR(shape_check(name, p->ndim, p->sizes, &n));
  TC_REQUIRE(n == 0 || p->out, "%s: out is NULL", name);
  return TC_OK;
}

inline tc_status binary_check(const tc_binary_backward_params* p) {
  TC_RETURN_IF_ERROR(binary_op_check(p, true));
  const char* name = binary_name(p->op, true);
  int64_t n = 0;
  TC_RETURN_IF_ERROR(shape_check(name, p->ndim, p->sizes, &n));
  TC_REQUIRE(n == 0 || p->grad_out, "%s: grad_out is NULL", name);
  return TC_OK;
}

// (a, b): a NULL operand (a host scalar) steps nowhere
inline StridedLayout<2> binary_layout(const tc_binary_params* p) {
  static const int64_t none[8] = {};
  const int64_t* strides[2] = {p->a ? p->a_strides : none, p->b ? p->b_strides : none};
  return coalesce<2>(p->ndim, p->sizes, strides);
}

// (grad_out, a, b); grad_out and the gradients are contiguous in sizes
inline StridedLayout<3> binary_layout(const tc_binary_backward_params* p) {
  static const int64_t none[8] = {};
  int64_t g[8];
  int64_t s = 1;  // 64-bit: the result may hold more than 2^31 elements
  for (int d = p->ndim - 1; d >= 0; --d) g[d] = s, s *= p->sizes[d];
  const int64_t* strides[3] = {g, p->a ? p->a_strides : none, p->b ? p->b_strides : none};
  return coalesce<3>(p->ndim, p->sizes, strides);
}

inline tc_status where_check(const tc_where_params* p) {
  TC_REQUIRE(p, "where: params is NULL");
  int64_t n = 0;
  TC_RETURN_IF_ERROR(shape_check("where", p->ndim, p->sizes, &n));
  TC_REQUIRE(n == 0 || (p->condition && p->out), "where: condition or out is NULL");
  return TC_OK;
}

// (condition, a, b)
inline StridedLayout<3> where_layout(const tc_where_params* p) {
  static const int64_t none[8] = {};
  const int64_t* strides[3] = {p->condition_strides, p->a ? p->a_strides : none, p->b ? p->b_strides : none};
  return coalesce<3>(p->ndim, p->sizes, strides);
}
