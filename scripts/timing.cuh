// What the standalone timing programs in scripts/ share: a checked CUDA call,
// and the median time of a GPU region with the L2 flushed before each run.
#pragma once
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

#define CK(x)                                                                        \
  do {                                                                               \
    cudaError_t e = (x);                                                             \
    if (e != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

// Microseconds, the median of 30 runs of f after 3 warm-ups, each behind a
// 256 MB memset (twice the H200's L2, five times the H100's).
template <class F>
double median_us(F f) {
  static void* flush = nullptr;
  constexpr size_t kFlush = size_t(256) << 20;
  if (!flush) CK(cudaMalloc(&flush, kFlush));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int r = 0; r < 33; ++r) {
    CK(cudaMemsetAsync(flush, r, kFlush));
    CK(cudaEventRecord(e0));
    f();
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float m;
    CK(cudaEventElapsedTime(&m, e0, e1));
    if (r >= 3) ms.push_back(m);
  }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2] * 1e3;
}
