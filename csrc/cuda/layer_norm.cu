// layer_norm on CUDA: the shared norm kernels (cuda/norm.cuh, where the
// launch shape, the math and the bytes moved are described) with a mean and
// a bias.
#include "tinycuda/layer_norm.h"
#include "norm.cuh"

tc_status tc_layer_norm_cuda(const tc_layer_norm_params* p) {
  TC_REQUIRE(p, "layer_norm: params is NULL");
  return norm_forward_cuda<false, kPlain>(norms::view(*p));
}

tc_status tc_layer_norm_backward_cuda(const tc_layer_norm_backward_params* p) {
  TC_REQUIRE(p, "layer_norm_backward: params is NULL");
  return norm_backward_cuda<false, kPlain>(norms::view(*p));
}
