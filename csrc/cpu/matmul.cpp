// matmul on the CPU: the same strided, batched C[z] = A[z] @ B[z] (+ bias) as
// csrc/cuda/matmul.cu (the operand conventions are in tinycuda/matmul.h).
//
// A blocked kernel in the GotoBLAS shape, in the accumulator type (float;
// double for double), no BLAS:
//   - B is packed once per batch into panels of NR = 16 columns, [K][16] each,
//     zero-padded, so the inner loop reads 16 contiguous values per k;
//   - threads take blocks of MB = 96 rows; a block packs its A rows, 256 of
//     K at a time, into panels of MR = 6 rows, [256][6] each;
//   - the micro-kernel keeps a 6 x 16 tile of C in registers (12 AVX2
//     registers for float) over 256 of K, then adds it into the block's
//     accumulator: a partial sum per 256 of K (one running sum over all of K
//     had 7-11x torch's max error at K = 4099 and 65536 in fp32).
// The micro-kernel is GCC vector code; on a CPU with AVX2 and FMA the block
// loop runs a copy compiled for them (chosen once at run time), elsewhere the
// baseline build. 4096 x 784 x 256 fp32 on 2 cores: see docs/BENCHMARKS.md.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>
#include <system_error>
#include <thread>
#include <vector>

#include "tinycuda/matmul.h"
#include "../shared/matmul_core.h"
#include "kit/cpu_utils.h"

namespace {

constexpr int64_t MR = 6, NR = 16, MB = 96, KB = 256;
static_assert(MB % MR == 0, "a block's accumulator holds whole row panels");

// 32 bytes of Acc: one AVX2 register (8 floats, 4 doubles). A 64-byte type
// (all 16 columns in one value) kept the tile on the stack.
template <class Acc>
struct VecOf;
// `load` reads one from any address (a memcpy of the 16-column row went
// through the stack in 16-byte pieces, stalling each 32-byte reload).
template <>
struct VecOf<float> {
  typedef float type __attribute__((vector_size(32)));
  typedef float load __attribute__((vector_size(32), aligned(4), may_alias));
};
template <>
struct VecOf<double> {
  typedef double type __attribute__((vector_size(32)));
  typedef double load __attribute__((vector_size(32), aligned(8), may_alias));
};

// The problem of one batch, its B packed.
template <class T>
struct Job {
  int64_t M, N, K;
  const T* A;
  int64_t sam, sak;
  const acc_t<T>* bp;  // [panels][K][NR]
  const T* bias;
  T* C;
};

// Rows [i0, i1) of C (at most MB). Inlined into both copies below.
template <class T>
__attribute__((always_inline)) inline void rows_block(const Job<T>& j, int64_t i0, int64_t i1, acc_t<T>* ap,
                                                      acc_t<T>* acc) {
  using Acc = acc_t<T>;
  using V = typename VecOf<Acc>::type;
  using L = typename VecOf<Acc>::load;
  constexpr int W = NR * sizeof(Acc) / sizeof(V);  // vectors per row of the tile
  const int64_t K = j.K, N = j.N, panels = (N + NR - 1) / NR, width = panels * NR;
  const int64_t rows = i1 - i0, row_panels = (rows + MR - 1) / MR;
  std::fill(acc, acc + row_panels * MR * width, Acc(0));
  for (int64_t k0 = 0; k0 < K; k0 += KB) {
    const int64_t kb = std::min(KB, K - k0);
    for (int64_t p = 0; p < row_panels; ++p)  // this k-block's A panels: [kb][MR], rows past i1 zero
      for (int64_t k = 0; k < kb; ++k)
        for (int64_t r = 0; r < MR; ++r) {
          const int64_t i = i0 + p * MR + r;
          ap[(p * KB + k) * MR + r] = i < i1 ? to_acc(j.A[i * j.sam + (k0 + k) * j.sak]) : Acc(0);
        }
    for (int64_t p = 0; p < row_panels; ++p) {
      const Acc* a = ap + p * KB * MR;
      for (int64_t q = 0; q < panels; ++q) {
        const Acc* b = j.bp + (q * K + k0) * NR;
        // every index below is a constant after unrolling, so c stays in
        // registers (12 FMAs on 12 ymm per k for float); the padding rows
        // past `rows` are written and never read
        V c[MR][W] = {};
        for (int64_t k = 0; k < kb; ++k) {
          V bv[W];
#pragma GCC unroll 4
          for (int w = 0; w < W; ++w) bv[w] = *reinterpret_cast<const L*>(b + k * NR + w * (NR / W));
#pragma GCC unroll 6
          for (int64_t r = 0; r < MR; ++r)
#pragma GCC unroll 4
            for (int w = 0; w < W; ++w) c[r][w] += a[k * MR + r] * bv[w];
        }
#pragma GCC unroll 6
        for (int64_t r = 0; r < MR; ++r) {
          Acc* out = acc + (p * MR + r) * width + q * NR;
#pragma GCC unroll 4
          for (int w = 0; w < W; ++w) *reinterpret_cast<L*>(out + w * (NR / W)) += c[r][w];
        }
      }
    }
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t n = 0; n < N; ++n)
      j.C[(i0 + r) * N + n] = from_acc<T>(acc[r * width + n] + (j.bias ? to_acc(j.bias[n]) : Acc(0)));
}

template <class T>
void rows_block_base(const Job<T>& j, int64_t i0, int64_t i1, acc_t<T>* ap, acc_t<T>* acc) {
  rows_block(j, i0, i1, ap, acc);
}
template <class T>
__attribute__((target("avx2,fma"))) void rows_block_avx2(const Job<T>& j, int64_t i0, int64_t i1, acc_t<T>* ap,
                                                          acc_t<T>* acc) {
  rows_block(j, i0, i1, ap, acc);
}

bool has_avx2() {
#if defined(__x86_64__)
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
#else
  return false;
#endif
}

// Blocks of MB rows, dealt round-robin to up to one thread per core; a
// problem under ~4M multiply-adds stays on the calling thread.
// False when a buffer could not be allocated.
template <class T>
bool gemm(const Job<T>& j) {
  using Acc = acc_t<T>;
  const int64_t blocks = (j.M + MB - 1) / MB, width = (j.N + NR - 1) / NR * NR;
  const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
  const int64_t threads = j.M * j.N * j.K < (int64_t(1) << 22) ? 1 : std::min(cores, blocks);
  std::atomic<bool> out_of_memory{false};
  auto work = [&](int64_t t) noexcept {
    try {
      std::vector<Acc> ap(size_t(MB * KB)), acc(size_t(MB * width));
      for (int64_t b = t; b < blocks; b += threads) {
        const int64_t i0 = b * MB, i1 = std::min(j.M, i0 + MB);
        if (has_avx2())
          rows_block_avx2(j, i0, i1, ap.data(), acc.data());
        else
          rows_block_base(j, i0, i1, ap.data(), acc.data());
      }
    } catch (const std::bad_alloc&) {
      out_of_memory = true;
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(size_t(threads));
  int64_t started = 1;
  try {
    for (; started < threads; ++started) pool.emplace_back(work, started);
  } catch (const std::system_error&) {  // no thread to be had: this one does the rest
  }
  work(0);
  for (int64_t t = started; t < threads; ++t) work(t);
  for (auto& th : pool) th.join();
  return !out_of_memory;
}

template <class T>
void pack_b(int64_t N, int64_t K, const T* B, int64_t sbk, int64_t sbn, acc_t<T>* bp) {
  for (int64_t q = 0; q < (N + NR - 1) / NR; ++q)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t e = 0; e < NR; ++e) {
        const int64_t n = q * NR + e;
        bp[(q * K + k) * NR + e] = n < N ? to_acc(B[k * sbk + n * sbn]) : acc_t<T>(0);
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
    std::vector<acc_t<T>> bp;
    try {
      bp.resize(size_t((p->N + NR - 1) / NR * NR * p->K));
    } catch (const std::bad_alloc&) {
      return tc_fail(TC_ERR_INTERNAL, "%s: out of memory packing b (%lld x %lld)", op, (long long)p->K,
                     (long long)p->N);
    }
    for (int64_t z = 0; z < p->batch; ++z) {
      if (z == 0 || p->b_stride[0] != 0)
        pack_b(p->N, p->K, b + z * p->b_stride[0], p->b_stride[1], p->b_stride[2], bp.data());
      if (!gemm<T>({p->M, p->N, p->K, a + z * p->a_stride[0], p->a_stride[1], p->a_stride[2], bp.data(),
                    static_cast<const T*>(p->bias), c + z * p->M * p->N}))
        return tc_fail(TC_ERR_INTERNAL, "%s: out of memory in a row block", op);
    }
    return TC_OK;
  });
}

tc_status tc_matmul_cpu(const tc_matmul_params* p) { return matmul_cpu("matmul", p); }

size_t tc_matmul_workspace_size(const tc_matmul_params* p) {
  return p ? matmul_workspace_bytes(fold_batch(*p)) : 0;
}
