// Argument checks shared by the CPU and CUDA entry points of the elementwise
// families: relu (and relu_mask), square, gelu and glu.
#pragma once
#include "tinycuda/gelu.h"
#include "tinycuda/glu.h"
#include "tinycuda/relu.h"
#include "tinycuda/square.h"
#include "internal.h"

// n >= 0, and the pointers set unless n == 0 (`which` names them).
inline tc_status elementwise_check(const char* op, int64_t n, bool have_ptrs,
                                   const char* which = "a pointer") {
  TC_REQUIRE(n >= 0, "%s: n must be >= 0, got %lld", op, (long long)n);
  TC_REQUIRE(n == 0 || have_ptrs, "%s: %s is NULL", op, which);
  return TC_OK;
}

inline tc_status relu_check(const tc_relu_params* p) {
  TC_REQUIRE(p, "relu: params is NULL");
  return elementwise_check("relu", p->n, p->x && p->y, "x or y");
}

inline tc_status relu_check(const tc_relu_backward_params* p) {
  TC_REQUIRE(p, "relu_backward: params is NULL");
  return elementwise_check("relu_backward", p->n, p->grad_y && p->x && p->grad_x);
}

inline tc_status relu_check(const tc_relu_mask_params* p) {
  TC_REQUIRE(p, "relu_mask: params is NULL");
  return elementwise_check("relu_mask", p->n, p->x && p->y && p->mask, "x, y or mask");
}

inline tc_status relu_check(const tc_relu_mask_backward_params* p) {
  TC_REQUIRE(p, "relu_mask_backward: params is NULL");
  return elementwise_check("relu_mask_backward", p->n, p->grad_y && p->mask && p->grad_x);
}

inline tc_status square_check(const tc_square_params* p) {
  TC_REQUIRE(p, "square: params is NULL");
  return elementwise_check("square", p->n, p->x && p->y, "x or y");
}

inline tc_status square_check(const tc_square_backward_params* p) {
  TC_REQUIRE(p, "square_backward: params is NULL");
  return elementwise_check("square_backward", p->n, p->grad_y && p->x && p->grad_x);
}

inline tc_status gelu_check_args(const char* op, int64_t n, int approximate, bool have_ptrs) {
  TC_REQUIRE(approximate == TC_GELU_NONE || approximate == TC_GELU_TANH,
             "%s: approximate must be %d (none) or %d (tanh), got %d", op, TC_GELU_NONE,
             TC_GELU_TANH, approximate);
  return elementwise_check(op, n, have_ptrs);
}

inline tc_status gelu_check(const tc_gelu_params* p) {
  TC_REQUIRE(p, "gelu: params is NULL");
  return gelu_check_args("gelu", p->n, p->approximate, p->x && p->y);
}

inline tc_status gelu_check(const tc_gelu_backward_params* p) {
  TC_REQUIRE(p, "gelu_backward: params is NULL");
  return gelu_check_args("gelu_backward", p->n, p->approximate, p->grad_y && p->x && p->grad_x);
}

inline tc_status glu_check_args(const char* op, int64_t n, int act, bool have_ptrs) {
  TC_REQUIRE(act == TC_GLU_SILU || act == TC_GLU_GELU || act == TC_GLU_GELU_TANH,
             "%s: act must be %d (silu), %d (gelu) or %d (gelu tanh), got %d", op, TC_GLU_SILU,
             TC_GLU_GELU, TC_GLU_GELU_TANH, act);
  return elementwise_check(op, n, have_ptrs);
}

inline tc_status glu_check(const tc_glu_params* p) {
  TC_REQUIRE(p, "glu: params is NULL");
  return glu_check_args("glu", p->n, p->act, p->a && p->b && p->y);
}

inline tc_status glu_check(const tc_glu_backward_params* p) {
  TC_REQUIRE(p, "glu_backward: params is NULL");
  return glu_check_args("glu_backward", p->n, p->act,
                        p->grad_y && p->a && p->b && p->grad_a && p->grad_b);
}
