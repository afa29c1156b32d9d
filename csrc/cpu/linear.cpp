// linear on the CPU: the same strided C = A @ B (+ bias) as the CUDA file
// (see csrc/cuda/linear.cu for the operand table), single-threaded.
//
// B is packed once into a row-major accumulator-type copy so the innermost
// loop is a contiguous axpy over n that the compiler vectorizes; A is packed
// per block of 16 rows; C accumulates in a 16 x 512 block (32 KB fp32, L1).
#include <algorithm>
#include <vector>

#include "tinycuda/linear.h"
#include "../shared/linear_check.h"
#include "tinycuda/sum.h"
#include "kit/cpu_utils.h"

namespace {

template <class T>
void gemm(int64_t M, int64_t N, int64_t K, const T* A, int64_t sam, int64_t sak, const T* B,
          int64_t sbk, int64_t sbn, const T* bias, T* C) {
  using Acc = acc_t<T>;
  constexpr int64_t MB = 16, NB = 512;
  std::vector<Acc> bp(size_t(K * N)), ap(size_t(MB * K)), acc(size_t(MB * NB));
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) bp[k * N + n] = to_acc(B[k * sbk + n * sbn]);
  for (int64_t i0 = 0; i0 < M; i0 += MB) {
    const int64_t mb = std::min(MB, M - i0);
    for (int64_t i = 0; i < mb; ++i)
      for (int64_t k = 0; k < K; ++k) ap[i * K + k] = to_acc(A[(i0 + i) * sam + k * sak]);
    for (int64_t j0 = 0; j0 < N; j0 += NB) {
      const int64_t nb = std::min(NB, N - j0);
      for (int64_t i = 0; i < mb; ++i)
        for (int64_t j = 0; j < nb; ++j) acc[i * NB + j] = bias ? to_acc(bias[j0 + j]) : Acc(0);
      for (int64_t k = 0; k < K; ++k) {
        const Acc* brow = &bp[k * N + j0];
        for (int64_t i = 0; i < mb; ++i) {
          const Acc a = ap[i * K + k];
          Acc* crow = &acc[i * NB];
          for (int64_t j = 0; j < nb; ++j) crow[j] += a * brow[j];
        }
      }
      for (int64_t i = 0; i < mb; ++i)
        for (int64_t j = 0; j < nb; ++j) C[(i0 + i) * N + j0 + j] = from_acc<T>(acc[i * NB + j]);
    }
  }
}

}  // namespace

tc_status tc_linear_cpu(const tc_linear_params* p) {
  TC_RETURN_IF_ERROR(linear_check(p));
  if (p->M * p->N == 0) return TC_OK;
  return dispatch_cpu(p->dtype, "linear", [&](auto tag) {
    using T = decltype(tag);
    gemm<T>(p->M, p->N, p->K, static_cast<const T*>(p->x), p->K, 1, static_cast<const T*>(p->weight),
            1, p->K, static_cast<const T*>(p->bias), static_cast<T*>(p->y));
    return TC_OK;
  });
}

// The CUDA path's bias-gradient partials (the sum family's); the CPU needs none.
size_t tc_linear_backward_workspace_size(const tc_linear_backward_params* p) {
  if (!p || !p->grad_bias) return 0;
  tc_sum_params s{p->dtype, 1, p->M, p->N, p->grad_y, p->grad_bias, nullptr, 0, p->stream};
  return tc_sum_workspace_size(&s);
}

tc_status tc_linear_backward_cpu(const tc_linear_backward_params* p) {
  const char* op = "linear_backward";
  TC_RETURN_IF_ERROR(linear_backward_check(p));
  return dispatch_cpu(p->dtype, op, [&](auto tag) -> tc_status {
    using T = decltype(tag);
    const T* gy = static_cast<const T*>(p->grad_y);
    if (p->grad_x)
      gemm<T>(p->M, p->K, p->N, gy, p->N, 1, static_cast<const T*>(p->weight), p->K, 1, nullptr,
              static_cast<T*>(p->grad_x));
    if (p->grad_weight)
      gemm<T>(p->N, p->K, p->M, gy, 1, p->N, static_cast<const T*>(p->x), p->K, 1, nullptr,
              static_cast<T*>(p->grad_weight));
    if (p->grad_bias) {
      tc_sum_params s{p->dtype, 1, p->M, p->N, p->grad_y, p->grad_bias, nullptr, 0, nullptr};
      TC_RETURN_IF_ERROR(tc_sum_cpu(&s));
    }
    return TC_OK;
  });
}
