// matmul on the CPU: the same strided, batched C[z] = A[z] @ B[z] (+ bias) as
// csrc/cuda/matmul.cu (the operand conventions are in tinycuda/matmul.h).
//
// Per batch, B is packed once into a row-major accumulator-type copy so the
// innermost loop is a contiguous axpy over n that the compiler vectorizes; A
// is packed per block of 16 rows; C accumulates in a 16 x 512 block (32 KB
// fp32, L1), fed by a partial sum over 256 of K at a time: one running sum
// over all of K had 7-11x torch's max error at K = 4099 and 65536 (fp32).
// Single-threaded.
#include <algorithm>
#include <vector>

#include "tinycuda/matmul.h"
#include "../shared/matmul_core.h"
#include "kit/cpu_utils.h"

namespace {

template <class T>
void gemm(int64_t M, int64_t N, int64_t K, const T* A, int64_t sam, int64_t sak, const T* B,
          int64_t sbk, int64_t sbn, const T* bias, T* C) {
  using Acc = acc_t<T>;
  constexpr int64_t MB = 16, NB = 512, KB = 256;
  std::vector<Acc> bp(size_t(K * N)), ap(size_t(MB * K)), acc(size_t(MB * NB)), part(size_t(MB * NB));
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
      for (int64_t k0 = 0; k0 < K; k0 += KB) {
        std::fill(part.begin(), part.end(), Acc(0));
        for (int64_t k = k0; k < std::min(K, k0 + KB); ++k) {
          const Acc* brow = &bp[k * N + j0];
          for (int64_t i = 0; i < mb; ++i) {
            const Acc a = ap[i * K + k];
            Acc* prow = &part[i * NB];
            for (int64_t j = 0; j < nb; ++j) prow[j] += a * brow[j];
          }
        }
        for (int64_t i = 0; i < mb; ++i)
          for (int64_t j = 0; j < nb; ++j) acc[i * NB + j] += part[i * NB + j];
      }
      for (int64_t i = 0; i < mb; ++i)
        for (int64_t j = 0; j < nb; ++j) C[(i0 + i) * N + j0 + j] = from_acc<T>(acc[i * NB + j]);
    }
  }
}

}  // namespace

tc_status matmul_cpu(const char* op, const tc_matmul_params* p0) {
  TC_RETURN_IF_ERROR(matmul_check(op, p0));
  if (p0->batch * p0->M * p0->N == 0) return TC_OK;
  const tc_matmul_params folded = fold_batch(*p0), *p = &folded;
  return dispatch_cpu(p->dtype, op, [&](auto tag) {
    using T = decltype(tag);
    const T* a = static_cast<const T*>(p->a);
    const T* b = static_cast<const T*>(p->b);
    T* c = static_cast<T*>(p->c);
    for (int64_t z = 0; z < p->batch; ++z)
      gemm<T>(p->M, p->N, p->K, a + z * p->a_stride[0], p->a_stride[1], p->a_stride[2], b + z * p->b_stride[0],
              p->b_stride[1], p->b_stride[2], static_cast<const T*>(p->bias), c + z * p->M * p->N);
    return TC_OK;
  });
}

tc_status tc_matmul_cpu(const tc_matmul_params* p) { return matmul_cpu("matmul", p); }

size_t tc_matmul_workspace_size(const tc_matmul_params* p) {
  return p ? matmul_workspace_bytes(fold_batch(*p)) : 0;
}
