// Library-level functions of libtinycuda's C ABI (the op entry points are the
// core's own, declared in the family headers).
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
