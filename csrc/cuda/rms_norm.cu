// rms_norm on CUDA: the shared norm kernels (cuda/norm.cuh, where the launch
// shape, the math and the bytes moved are described) without mean or bias.
#include "tinycuda/rms_norm.h"
#include "norm.cuh"

tc_status tc_rms_norm_cuda(const tc_rms_norm_params* p) {
  TC_REQUIRE(p, "rms_norm: params is NULL");
  return norm_forward_cuda<true, kBoth>(norms::view(*p));
}

tc_status tc_rms_norm_backward_cuda(const tc_rms_norm_backward_params* p) {
  TC_REQUIRE(p, "rms_norm_backward: params is NULL");
  return norm_backward_cuda<true, kBoth>(norms::view(*p));
}
