// kit/colsum.cuh's pass at GPT-2's MLP shape (16384 x 3072 bf16): grad_P = grad_y * gelu_tanh'(P) with the
// bias's column partials, in launch shapes (rows in flight a thread, blocks an SM, row slices), against the
// plain pointwise pass of the same bytes (kit/pointwise.cuh, the gelu_backward op's) and a relu-like element
// (how much of the pass GELU's tanhf takes). colsum_backward_kernel is the library's, its shape a template
// argument. Bytes: read grad_y and P, write grad_P (the partials: < 1%). Median of 30, L2 flushed (timing.cuh).
//   nvcc -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a -Icsrc/include -Icsrc --expt-relaxed-constexpr \
//     -D__CUDA_NO_HALF_CONVERSIONS__ -D__CUDA_NO_BFLOAT16_CONVERSIONS__ -D__CUDA_NO_HALF_OPERATORS__ \
//     -D__CUDA_NO_BFLOAT16_OPERATORS__ scripts/colsum_probe.cu csrc/shared/common.cpp -o /tmp/colsum_probe
// H200, this sweep's first form (the mean of 20 back-to-back runs, no flush; BENCHMARKS, GPT step 13):
// pointwise 76.8-77.8 us; 4 rows, no bound (128 registers) 118.2-119.9; 2 rows, 4 blocks an SM (64 registers,
// the library's) 89.5; 1 row, 6 blocks, 172 slices 87.8; relu-like 80.6 (1 row, 6 blocks).
#include "timing.cuh"

#include "cuda/kit/colsum.cuh"
#include "cuda/kit/pointwise.cuh"
#include "shared/gelu_math.h"

namespace {
using bf = __nv_bfloat16;
using Gelu = GeluBackwardFn<GeluTanh>;
struct Term {  // the activation's backward as colsum's element (linear.cu's ActBackwardTerm)
  template <class A> __device__ A operator()(A g, A p, A& t) const { return t = Gelu{}(g, p); }
};
struct ReluLike {
  template <class A> __device__ A operator()(A g, A p, A& t) const { return t = p > A(0) ? g : A(0); }
};
}  // namespace

int main() {
  const int64_t rows = 16384, cols = 3072, n = rows * cols;
  bf *g, *p, *o;
  float* part;
  CK(cudaMalloc(&g, n * 2));
  CK(cudaMalloc(&p, n * 2));
  CK(cudaMalloc(&o, n * 2));
  CK(cudaMalloc(&part, 1024 * cols * 4));
  std::vector<uint16_t> h(n);  // bf16 bits of +-[0.5, 1): values every branch of the element sees
  uint32_t s = 1;
  for (auto& x : h) s = s * 1664525 + 1013904223, x = uint16_t(0x3f00 | ((s >> 16) & 0xff) | ((s >> 31) << 15));
  CK(cudaMemcpy(g, h.data(), n * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(p, h.data(), n * 2, cudaMemcpyHostToDevice));
  auto time = [&](const char* name, auto launch) {
    const double us = median_us(launch);
    std::printf("%-48s %7.1f us %6.0f GB/s  %s\n", name, us, 3.0 * n * 2 / (us * 1e-6) / 1e9,
                cudaGetErrorString(cudaGetLastError()));
  };
  time("pointwise gelu_tanh backward", [&] { launch_pointwise<true>("probe", TC_BFLOAT16, n, g, p, o, nullptr, Gelu{}); });
#define SHAPE(U, MB, CHUNKS, F, NAME)                                                                   \
  time(NAME " rows " #U " blocks/SM " #MB " slices " #CHUNKS, [&] {                                    \
    colsum_backward_kernel<bf, 8, F, U, MB><<<dim3(unsigned(cols / 256), CHUNKS), dim3(32, colsum::kRows)>>>( \
        g, p, o, part, nullptr, rows, cols, F{});                                                      \
  });
  SHAPE(4, 1, 86, Term, "colsum")
  SHAPE(2, 1, 86, Term, "colsum")
  SHAPE(1, 3, 86, Term, "colsum")
  SHAPE(1, 4, 86, Term, "colsum")
  SHAPE(2, 4, 86, Term, "colsum (the library's)")
  SHAPE(2, 4, 172, Term, "colsum")
  SHAPE(1, 6, 86, Term, "colsum")
  SHAPE(1, 6, 172, Term, "colsum")
  SHAPE(1, 8, 172, Term, "colsum")
  SHAPE(2, 4, 86, ReluLike, "colsum relu-like")
  return 0;
}
