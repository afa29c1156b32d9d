// Argument checks shared by the CPU and CUDA entry points of the
// scale_bias_relu family (the CUDA backward also checks its workspace).
#pragma once
#include "internal.h"
#include "tinycuda/scale_bias_relu.h"

inline tc_status scale_bias_relu_check(const tc_scale_bias_relu_params* p) {
  TC_REQUIRE(p, "scale_bias_relu: params is NULL");
  TC_REQUIRE(p->rows >= 0 && p->cols >= 0, "scale_bias_relu: negative size");
  TC_REQUIRE(p->rows * p->cols == 0 || (p->x && p->bias && p->y), "scale_bias_relu: a pointer is NULL");
  return TC_OK;
}

inline tc_status scale_bias_relu_check(const tc_scale_bias_relu_backward_params* p) {
  const char* op = "scale_bias_relu_backward";
  TC_REQUIRE(p, "%s: params is NULL", op);
  TC_REQUIRE(p->rows >= 0 && p->cols >= 0, "%s: negative size", op);
  TC_REQUIRE(p->rows * p->cols == 0 || (p->grad_y && p->y), "%s: grad_y or y is NULL", op);
  return TC_OK;
}
