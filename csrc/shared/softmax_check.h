// Argument checks shared by the CPU and CUDA entry points of the softmax
// family (the CUDA forward also checks `algo`, which only it reads).
#pragma once
#include "internal.h"
#include "tinycuda/softmax.h"

inline tc_status softmax_check(const tc_softmax_params* p) {
  TC_REQUIRE(p, "softmax: params is NULL");
  TC_REQUIRE(p->rows >= 0 && p->cols >= 0, "softmax: negative size");
  TC_REQUIRE(p->rows * p->cols == 0 || (p->x && p->y), "softmax: x or y is NULL");
  return TC_OK;
}

inline tc_status softmax_check(const tc_softmax_backward_params* p) {
  const char* op = "softmax_backward";
  TC_REQUIRE(p, "%s: params is NULL", op);
  TC_REQUIRE(p->rows >= 0 && p->cols >= 0, "%s: negative size", op);
  TC_REQUIRE(p->rows * p->cols == 0 || (p->grad_y && p->y && p->grad_x), "%s: a pointer is NULL", op);
  return TC_OK;
}
