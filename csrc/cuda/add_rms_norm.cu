// add_rms_norm on CUDA: the shared norm kernels (cuda/norm.cuh, where the
// launch shape, the math and the bytes moved are described) with the residual
// add in front: x + residual is added, rounded and written as each vector is
// loaded, and normalized from registers, so the sum is never read back.
#include "tinycuda/add_rms_norm.h"
#include "norm.cuh"

tc_status tc_add_rms_norm_cuda(const tc_add_rms_norm_params* p) {
  TC_REQUIRE(p, "add_rms_norm: params is NULL");
  return norm_forward_cuda<true, kOptions>(norms::view(*p));
}

tc_status tc_add_rms_norm_backward_cuda(const tc_add_rms_norm_backward_params* p) {
  TC_REQUIRE(p, "add_rms_norm_backward: params is NULL");
  return norm_backward_cuda<true, kOptions>(norms::view(*p));
}
