// Argument checks (and grad_bias's reduction) shared by the CPU and CUDA entry points of the linear family.
#pragma once
#include "internal.h"
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
  return TC_OK;
}

// grad_bias: grad_y [M, N] summed over M, by the reduce family
inline tc_reduce_params linear_bias_grad(const tc_linear_backward_params* p) {
  return {.dtype = p->dtype, .op = TC_REDUCE_SUM, .ndim = 2, .sizes = {p->M, p->N}, .x_strides = {p->N, 1},
          .reduce_mask = 1u, .x = p->grad_y, .y = p->grad_bias, .workspace = p->workspace,
          .workspace_bytes = p->workspace_bytes, .stream = p->stream};
}
