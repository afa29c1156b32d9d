// add_layer_norm on CUDA: the shared norm kernels (cuda/norm.cuh, where the
// launch shape, the math and the bytes moved are described) with the residual
// add in front, as add_rms_norm's: x + residual is added, rounded and written
// as each vector is loaded and normalized from registers; the backward adds
// the residual stream's gradient as it writes grad_x.
#include "tinycuda/add_layer_norm.h"
#include "norm.cuh"

tc_status tc_add_layer_norm_cuda(const tc_add_layer_norm_params* p) {
  TC_REQUIRE(p, "add_layer_norm: params is NULL");
  return norm_forward_cuda<false, kOptions>(norms::view(*p));
}

tc_status tc_add_layer_norm_backward_cuda(const tc_add_layer_norm_backward_params* p) {
  TC_REQUIRE(p, "add_layer_norm_backward: params is NULL");
  return norm_backward_cuda<false, kOptions>(norms::view(*p));
}
