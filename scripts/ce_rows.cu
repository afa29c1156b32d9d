// ce_rows: cross_entropy's forward over short and long rows (classes N =
// 256..32768 at rows x N = 2^27 bf16), with the gradient (what training runs)
// and without, reduction 'mean' and 'none' (their difference: MEAN's count of
// valid targets and the fixed-order sum of the row losses), against a device
// copy of the logits' bytes.
//
//   nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a -Icsrc/include -Icsrc/cuda \
//        scripts/ce_rows.cu csrc/cuda/cross_entropy.cu csrc/cpu/cross_entropy.cpp csrc/shared/common.cpp \
//        -o /tmp/ce_rows
//
// CUDA events, the L2 flushed (a 256 MB memset) before every rep, median of 30.
// TB/s counts the logits read once, plus the gradient written once with it.
#include "timing.cuh"
#include "tinycuda/cross_entropy.h"

int main() {
  const int64_t total = int64_t(1) << 27;
  void *x, *g, *loss, *t;
  CK(cudaMalloc(&x, total * 2));
  CK(cudaMalloc(&g, total * 2));
  CK(cudaMalloc(&loss, total * 2));
  CK(cudaMalloc(&t, total / 256 * 8));
  {
    std::vector<uint16_t> h(total);
    for (auto& v : h) v = uint16_t(0x3c00 + (std::rand() & 0x3ff)) | uint16_t((std::rand() & 1) << 15);
    CK(cudaMemcpy(x, h.data(), total * 2, cudaMemcpyHostToDevice));
  }
  std::printf("%7s %-5s %-4s %9s %7s\n", "N", "red", "grad", "us", "TB/s");
  const double copy = median_us([&] { CK(cudaMemcpyAsync(g, x, total * 2, cudaMemcpyDeviceToDevice)); });
  std::printf("copy of the logits: %.1f us, %.2f TB/s\n", copy, 4.0 * total / copy * 1e-6);
  for (int64_t n : {256, 512, 1024, 4096, 32768}) {
    const int64_t rows = total / n;
    std::vector<int64_t> th(rows);
    for (auto& v : th) v = std::rand() % n;
    th[rows / 3] = -100;
    CK(cudaMemcpy(t, th.data(), rows * 8, cudaMemcpyHostToDevice));
    for (int red : {TC_REDUCTION_MEAN, TC_REDUCTION_NONE})
      for (int grad = 0; grad < 2; ++grad) {
        tc_cross_entropy_params p{};
        p.dtype = TC_BFLOAT16, p.rows = rows, p.cols = n, p.ignore_index = -100, p.reduction = red;
        p.logits = x, p.target = static_cast<const int64_t*>(t), p.loss = loss, p.grad_logits = grad ? g : nullptr;
        p.workspace_bytes = tc_cross_entropy_workspace_size(&p);
        void* ws = nullptr;
        if (p.workspace_bytes) CK(cudaMalloc(&ws, p.workspace_bytes));
        p.workspace = ws;
        const double us = median_us([&] { if (tc_cross_entropy_cuda(&p) != TC_OK) std::exit(2); });
        std::printf("%7lld %-5s %-4s %9.1f %7.2f\n", (long long)n, red == TC_REDUCTION_MEAN ? "mean" : "none",
                    grad ? "yes" : "no", us, (grad ? 4.0 : 2.0) * total / us * 1e-6);
        if (ws) CK(cudaFree(ws));
      }
  }
  return 0;
}
