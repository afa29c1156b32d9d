// Argument checks shared by the CPU and CUDA entry points of the gelu and glu
// families.
#pragma once
#include "tinycuda/gelu.h"
#include "tinycuda/glu.h"
#include "internal.h"

inline tc_status gelu_check_args(const char* op, int64_t n, int approximate, bool have_ptrs) {
  TC_REQUIRE(n >= 0, "%s: n must be >= 0, got %lld", op, (long long)n);
  TC_REQUIRE(approximate == TC_GELU_NONE || approximate == TC_GELU_TANH,
             "%s: approximate must be %d (none) or %d (tanh), got %d", op, TC_GELU_NONE,
             TC_GELU_TANH, approximate);
  TC_REQUIRE(n == 0 || have_ptrs, "%s: a pointer is NULL", op);
  return TC_OK;
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
  TC_REQUIRE(n >= 0, "%s: n must be >= 0, got %lld", op, (long long)n);
  TC_REQUIRE(act == TC_GLU_SILU || act == TC_GLU_GELU || act == TC_GLU_GELU_TANH,
             "%s: act must be %d (silu), %d (gelu) or %d (gelu tanh), got %d", op, TC_GLU_SILU,
             TC_GLU_GELU, TC_GLU_GELU_TANH, act);
  TC_REQUIRE(n == 0 || have_ptrs, "%s: a pointer is NULL", op);
  return TC_OK;
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
