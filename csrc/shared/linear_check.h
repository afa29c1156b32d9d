// Argument checks (and grad_bias's reduction) shared by the CPU and CUDA entry points of the linear family.
#pragma once
#include "internal.h"
#include "matmul_core.h"
#include "tinycuda/linear.h"
#include "tinycuda/reduce.h"

inline tc_status linear_check(const tc_linear_params* p) {
  TC_REQUIRE(p, "linear: params is NULL");
  TC_REQUIRE(p->M >= 0 && p->N >= 0 && p->K >= 0, "linear: negative size");
  TC_REQUIRE(p->M * p->N == 0 || (p->y && (p->K == 0 || (p->x && p->weight))),
             "linear: a pointer is NULL");
  return TC_OK;
}

inline tc_status linear_backward_check(const tc_linear_backward_params* p) {
  const char* op = "linear_backward";
  TC_REQUIRE(p, "%s: params is NULL", op);
  TC_REQUIRE(p->M >= 0 && p->N >= 0 && p->K >= 0, "%s: negative size", op);
  TC_REQUIRE(p->M * p->N == 0 || p->grad_y, "%s: grad_y is NULL", op);
  TC_REQUIRE(!p->grad_weight || p->M * p->K == 0 || p->x, "%s: x is NULL", op);
  TC_REQUIRE(!p->grad_x || p->N * p->K == 0 || p->weight, "%s: weight is NULL", op);
  TC_REQUIRE(p->activation >= TC_ACT_NONE && p->activation <= TC_ACT_GELU_TANH,
             "%s: activation must be a tc_activation, got %d", op, p->activation);
  TC_REQUIRE((p->activation == TC_ACT_NONE) == !p->pre || p->M * p->N == 0,
             "%s: pre (the forward's P) is given with an activation, and only then", op);
  return TC_OK;
}

// Calls f with the element function of an activation's backward,
// grad_P = grad_y * act'(P) (the relu and gelu families'), for linear_act's
// backward; activation is not TC_ACT_NONE.
template <class F>
inline auto with_act_backward(int activation, F&& f) {
  switch (activation) {
    case TC_ACT_RELU: return f(ReluBackwardFn{});
    case TC_ACT_GELU: return f(GeluBackwardFn<GeluErf>{});
    default: return f(GeluBackwardFn<GeluTanh>{});
  }
}

// grad_P's bytes at the front of the CUDA workspace (256-byte aligned), 0
// without an activation or for an empty grad_y.
inline size_t linear_grad_p_bytes(const tc_linear_backward_params* p) {
  if (p->activation == TC_ACT_NONE || p->M * p->N == 0) return 0;
  return (size_t(p->M * p->N) * tc_dtype_size(p->dtype) + 255) / 256 * 256;
}

// The backward's two products (linear.cu's table), with the caller's
// workspace: the products and the bias sum run one after another on the
// stream, so they share it (the CPU ignores it).
inline tc_matmul_params linear_grad_x(const tc_linear_backward_params* p) {
  return {.dtype = p->dtype, .batch = 1, .M = p->M, .N = p->K, .K = p->N, .a = p->grad_y, .a_stride = {0, p->N, 1},
          .b = p->weight, .b_stride = {0, p->K, 1}, .c = p->grad_x, .workspace = p->workspace,
          .workspace_bytes = p->workspace_bytes, .algo = p->algo, .stream = p->stream};
}
inline tc_matmul_params linear_grad_weight(const tc_linear_backward_params* p) {
  return {.dtype = p->dtype, .batch = 1, .M = p->N, .N = p->K, .K = p->M, .a = p->grad_y, .a_stride = {0, 1, p->N},
          .b = p->x, .b_stride = {0, p->K, 1}, .c = p->grad_weight, .workspace = p->workspace,
          .workspace_bytes = p->workspace_bytes, .algo = p->algo, .stream = p->stream};
}

// grad_bias: grad_y [M, N] summed over M, by the reduce family
inline tc_reduce_params linear_bias_grad(const tc_linear_backward_params* p) {
  return {.dtype = p->dtype, .op = TC_REDUCE_SUM, .ndim = 2, .sizes = {p->M, p->N}, .x_strides = {p->N, 1},
          .reduce_mask = 1u, .x = p->grad_y, .y = p->grad_bias, .workspace = p->workspace,
          .workspace_bytes = p->workspace_bytes, .stream = p->stream};
}
