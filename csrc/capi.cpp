// Library-level functions of libtinycuda's C ABI (the op entry points are the
// core's own, declared in the family headers).
#include <cstring>

#include "tinycuda.h"
#ifdef TC_WITH_CUDA
#include <cuda_runtime.h>
#endif

const char* tc_version(void) { return TC_VERSION; }

int tc_built_with_cuda(void) {
#ifdef TC_WITH_CUDA
  return 1;
#else
  return 0;
#endif
}

int tc_cuda_device_count(void) {
#ifdef TC_WITH_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the error so later calls start clean
    return 0;
  }
  return n;
#else
  return 0;
#endif
}

size_t tc_params_sizeof(const char* name) {
  if (!name) return 0;
#define TC_SIZE(T) \
  if (std::strcmp(name, #T) == 0) return sizeof(T);
  TC_SIZE(tc_gelu_params)
  TC_SIZE(tc_gelu_backward_params)
  TC_SIZE(tc_glu_params)
  TC_SIZE(tc_glu_backward_params)
  TC_SIZE(tc_cross_entropy_params)
  TC_SIZE(tc_cross_entropy_backward_params)
  TC_SIZE(tc_layer_norm_params)
  TC_SIZE(tc_layer_norm_backward_params)
  TC_SIZE(tc_linear_params)
  TC_SIZE(tc_linear_backward_params)
  TC_SIZE(tc_relu_params)
  TC_SIZE(tc_relu_backward_params)
  TC_SIZE(tc_relu_mask_params)
  TC_SIZE(tc_relu_mask_backward_params)
  TC_SIZE(tc_rms_norm_params)
  TC_SIZE(tc_rms_norm_backward_params)
  TC_SIZE(tc_scale_bias_relu_params)
  TC_SIZE(tc_scale_bias_relu_backward_params)
  TC_SIZE(tc_softmax_params)
  TC_SIZE(tc_softmax_backward_params)
  TC_SIZE(tc_square_params)
  TC_SIZE(tc_square_backward_params)
  TC_SIZE(tc_sum_params)
  TC_SIZE(tc_sum_backward_params)
#undef TC_SIZE
  return 0;
}
