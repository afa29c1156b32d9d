// Argument checks shared by the CPU and CUDA entry points of the sum family
// (the CUDA forward also checks its workspace).
#pragma once
#include "internal.h"
#include "tinycuda/sum.h"

inline tc_status sum_check_shape(const char* op, int64_t outer, int64_t reduce, int64_t inner) {
  TC_REQUIRE(outer >= 0 && reduce >= 0 && inner >= 0, "%s: negative size", op);
  return TC_OK;
}

inline tc_status sum_check(const tc_sum_params* p) {
  TC_REQUIRE(p, "sum: params is NULL");
  TC_RETURN_IF_ERROR(sum_check_shape("sum", p->outer, p->reduce, p->inner));
  TC_REQUIRE(p->outer * p->inner == 0 || p->y, "sum: y is NULL");
  TC_REQUIRE(p->outer * p->reduce * p->inner == 0 || p->x, "sum: x is NULL");
  return TC_OK;
}

inline tc_status sum_check(const tc_sum_backward_params* p) {
  TC_REQUIRE(p, "sum_backward: params is NULL");
  TC_RETURN_IF_ERROR(sum_check_shape("sum_backward", p->outer, p->reduce, p->inner));
  TC_REQUIRE(p->outer * p->reduce * p->inner == 0 || (p->grad_y && p->grad_x),
             "sum_backward: a pointer is NULL");
  return TC_OK;
}
