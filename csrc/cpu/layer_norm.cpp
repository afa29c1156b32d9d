// layer_norm on the CPU: the shared norm kernels (cpu/norm.h) with a mean and
// a bias. The workspace query lives here, not in cuda/, so that it answers
// in CPU-only builds too.
#include "tinycuda/layer_norm.h"
#include "norm.h"

tc_status tc_layer_norm_cpu(const tc_layer_norm_params* p) {
  TC_REQUIRE(p, "layer_norm: params is NULL");
  return norm_forward_cpu<false>(norms::view(*p));
}

size_t tc_layer_norm_backward_workspace_size(const tc_layer_norm_backward_params* p) {
  return p ? norms::workspace_bytes(norms::view(*p)) : 0;
}

tc_status tc_layer_norm_backward_cpu(const tc_layer_norm_backward_params* p) {
  TC_REQUIRE(p, "layer_norm_backward: params is NULL");
  return norm_backward_cpu<false>(norms::view(*p));
}
