// add_layer_norm on the CPU: the shared norm kernels (cpu/norm.h) with the
// residual add in front. The workspace query lives here so that it answers
// in CPU-only builds.
#include "tinycuda/add_layer_norm.h"
#include "norm.h"

tc_status tc_add_layer_norm_cpu(const tc_add_layer_norm_params* p) {
  TC_REQUIRE(p, "add_layer_norm: params is NULL");
  return norm_forward_cpu<false>(norms::view(*p));
}

size_t tc_add_layer_norm_backward_workspace_size(const tc_add_layer_norm_backward_params* p) {
  return p ? norms::workspace_bytes(norms::view(*p)) : 0;
}

tc_status tc_add_layer_norm_backward_cpu(const tc_add_layer_norm_backward_params* p) {
  TC_REQUIRE(p, "add_layer_norm_backward: params is NULL");
  return norm_backward_cpu<false>(norms::view(*p));
}
