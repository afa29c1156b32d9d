// softmax_rows: softmax and its backward over short rows, timed against a
// device copy of the same bytes: what the REGISTERS kernel's rows a warp
// buy at N = 256..4096 (rows x N = 2^27 elements in bf16, 2^26 in fp32).
//
//   nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a -Icsrc/include -Icsrc/cuda \
//        scripts/softmax_rows.cu csrc/cuda/softmax.cu csrc/shared/common.cpp -o /tmp/softmax_rows
//
// CUDA events, the L2 flushed (a 256 MB memset) before every rep, median of 30.
#include "timing.cuh"
#include "tinycuda/softmax.h"

int main() {
  std::printf("%-6s %7s %-4s %9s %7s %9s\n", "dtype", "N", "dir", "us", "TB/s", "copy TB/s");
  for (int f32 = 0; f32 < 2; ++f32) {
    const int64_t total = f32 ? (int64_t(1) << 26) : (int64_t(1) << 27), size = f32 ? 4 : 2;
    void *x, *y, *g, *gx;
    for (void** p : {&x, &y, &g, &gx}) CK(cudaMalloc(p, total * size));
    {
      std::vector<uint16_t> h(total * size / 2);
      for (auto& v : h) v = uint16_t(0x3c00 + (std::rand() & 0x3ff)) | uint16_t((std::rand() & 1) << 15);
      for (void* p : {x, g}) CK(cudaMemcpy(p, h.data(), total * size, cudaMemcpyHostToDevice));
    }
    for (int64_t n : {256, 512, 1024, 2048, 4096}) {
      tc_softmax_params p{};
      p.dtype = f32 ? TC_FLOAT32 : TC_BFLOAT16;
      p.rows = total / n, p.cols = n, p.x = x, p.y = y;
      tc_softmax_backward_params b{};
      b.dtype = p.dtype, b.rows = p.rows, b.cols = n, b.grad_y = g, b.y = y, b.grad_x = gx;
      const double fwd = median_us([&] { if (tc_softmax_cuda(&p) != TC_OK) std::exit(2); });
      const double bwd =
          median_us([&] { if (tc_softmax_backward_cuda(&b) != TC_OK) std::exit(2); });
      const double copy =
          median_us([&] { CK(cudaMemcpyAsync(y, x, total * size, cudaMemcpyDeviceToDevice)); });
      const double bytes = double(total) * size;
      std::printf("%-6s %7lld %-4s %9.1f %7.2f %9.2f\n", f32 ? "fp32" : "bf16", (long long)n, "fwd", fwd,
                  2 * bytes / fwd * 1e-6, 2 * bytes / copy * 1e-6);
      std::printf("%-6s %7lld %-4s %9.1f %7.2f\n", f32 ? "fp32" : "bf16", (long long)n, "bwd", bwd,
                  3 * bytes / bwd * 1e-6);
    }
    for (void* p : {x, y, g, gx}) CK(cudaFree(p));
  }
  return 0;
}
