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
#include <cstring>
#include <new>
#include <vector>

#include "tinycuda/matmul.h"
#include "../shared/matmul_core.h"
#include "kit/cpu_utils.h"
#include "kit/parallel.h"

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
  T* C;       // null with c_float
  float* Cf;  // c_float's C, else null
  bool add;   // accumulate: C += P
  T* pre;     // or null
  int act;
};

// One work item: rows [i0, i1) of C (at most MB) by B's panels [q0, q1).
struct Item {
  int64_t i0, i1, q0, q1;
};

// Inlined into both copies below.
template <class T>
__attribute__((always_inline)) inline void rows_block(const Job<T>& j, Item it, acc_t<T>* ap, acc_t<T>* acc) {
  const int64_t i0 = it.i0, i1 = it.i1;
  using Acc = acc_t<T>;
  using V = typename VecOf<Acc>::type;
  using L = typename VecOf<Acc>::load;
  constexpr int W = NR * sizeof(Acc) / sizeof(V);  // vectors per row of the tile
  const int64_t K = j.K, N = j.N, width = (it.q1 - it.q0) * NR, n0 = it.q0 * NR, n1 = std::min(N, it.q1 * NR);
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
      for (int64_t q = it.q0; q < it.q1; ++q) {
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
          Acc* out = acc + (p * MR + r) * width + (q - it.q0) * NR;
#pragma GCC unroll 4
          for (int w = 0; w < W; ++w) *reinterpret_cast<L*>(out + w * (NR / W)) += c[r][w];
        }
      }
    }
  }
  // the epilogue, as the CUDA kernels': P = acc + bias rounded to T, into
  // pre; act(P) into C. Accumulating, C + (acc + bias) is rounded once; with
  // c_float not at all
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t n = n0; n < n1; ++n) {
      const int64_t i = (i0 + r) * N + n;
      const Acc v = acc[r * width + n - n0] + (j.bias ? to_acc(j.bias[n]) : Acc(0));
      if (j.Cf) {
        j.Cf[i] = j.add ? j.Cf[i] + float(v) : float(v);
        continue;
      }
      const T P = from_acc<T>(j.add ? to_acc(j.C[i]) + v : v);
      if (j.pre) j.pre[i] = P;
      j.C[i] = j.act == TC_ACT_NONE ? P : from_acc<T>(activate(j.act, to_acc(P)));
    }
}

template <class T>
void rows_block_base(const Job<T>& j, Item it, acc_t<T>* ap, acc_t<T>* acc) {
  rows_block(j, it, ap, acc);
}
// fp-contract=fast for this copy alone: the build's -ffp-contract=off (tinycuda/_build.py: every copy of the
// elementwise loops gives the same bits) would leave the tile's c += a b a multiply and an add; with it, gcc 11 and
// 12 emit the FMAs main's build did (36 vfmadd231ps in the float copy)
template <class T>
__attribute__((target("avx2,fma"), optimize("fp-contract=fast"))) void rows_block_avx2(const Job<T>& j, Item it,
                                                                                      acc_t<T>* ap, acc_t<T>* acc) {
  rows_block(j, it, ap, acc);
}

bool has_avx2() {
#if defined(__x86_64__)
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
#else
  return false;
#endif
}

// Items of MB rows by a range of B's panels, dealt round-robin to up to one
// thread per core: a short C (fewer row blocks than cores, as MNIST's 64-row
// batches) is cut along N too. A problem under ~4M multiply-adds stays on the
// calling thread.
struct Split {
  int64_t row_blocks, cuts, per_cut, items, threads;
  Split(int64_t M, int64_t N, int64_t K) {
    const int64_t panels = (N + NR - 1) / NR, cores = cpu_cores();
    const bool small = serial_work(M * N * K);
    row_blocks = (M + MB - 1) / MB;
    cuts = small ? 1 : std::max<int64_t>(1, std::min(panels, (cores + row_blocks - 1) / row_blocks));
    per_cut = (panels + cuts - 1) / cuts, items = row_blocks * cuts;
    threads = threads_for(items, M * N * K);
  }
  int64_t scratch_per_thread() const { return MB * KB + MB * per_cut * NR; }  // A panels, C accumulator
};

template <class T>
void gemm(const Job<T>& j, const Split& sp, acc_t<T>* scratch) {
  const int64_t panels = (j.N + NR - 1) / NR;
  auto work = [&](int64_t t) {
    acc_t<T>* ap = scratch + t * sp.scratch_per_thread();
    acc_t<T>* acc = ap + MB * KB;
    for (int64_t i = t; i < sp.items; i += sp.threads) {
      const int64_t b = i / sp.cuts, c = i % sp.cuts;
      const Item it{b * MB, std::min(j.M, b * MB + MB), c * sp.per_cut, std::min(panels, (c + 1) * sp.per_cut)};
      if (it.q0 >= it.q1) continue;
      if (has_avx2())
        rows_block_avx2(j, it, ap, acc);
      else
        rows_block_base(j, it, ap, acc);
    }
  };
  (void)run_threads(sp.threads, work);  // work allocates nothing: the scratch is the caller's
}

// The calling thread's scratch (packed B, then each worker's A panels and
// accumulator), kept between calls up to 32 MB: a fresh buffer of this size
// is mapped anew by malloc each call, and its page faults cost more than a
// small product (~50 us of a 64 x 784 x 256 linear).
template <class Acc>
Acc* scratch(size_t n, std::vector<Acc>& once) {
  thread_local std::vector<Acc> kept;
  if (n * sizeof(Acc) > (size_t(32) << 20)) {
    once.resize(n);
    return once.data();
  }
  if (kept.size() < n) kept.resize(n);
  return kept.data();
}

// B's panels: panel q holds columns [16q, 16q + 16) as [K][16], zero past N.
// Read in 8 x 16 tiles so that a k-major B (linear's weight, read along k)
// and an n-major one (read along n) both move whole cache lines.
template <class T>
void pack_b(int64_t N, int64_t K, const T* B, int64_t sbk, int64_t sbn, acc_t<T>* bp) {
  for (int64_t q = 0; q < (N + NR - 1) / NR; ++q) {
    acc_t<T>* panel = bp + q * K * NR;
    const int64_t cols = std::min(NR, N - q * NR);
    const T* src = B + q * NR * sbn;
    for (int64_t k0 = 0; k0 < K; k0 += 8) {
      const int64_t kn = std::min<int64_t>(8, K - k0);
      if (sbk < sbn)
        for (int64_t e = 0; e < cols; ++e)
          for (int64_t k = k0; k < k0 + kn; ++k) panel[k * NR + e] = to_acc(src[k * sbk + e * sbn]);
      else
        for (int64_t k = k0; k < k0 + kn; ++k)
          for (int64_t e = 0; e < cols; ++e) panel[k * NR + e] = to_acc(src[k * sbk + e * sbn]);
      for (int64_t k = k0; k < k0 + kn; ++k)
        for (int64_t e = cols; e < NR; ++e) panel[k * NR + e] = acc_t<T>(0);
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
    // c_float: float32 C for 16-bit operands (matmul_check allows nothing else)
    T* c = p->c_float ? nullptr : static_cast<T*>(p->c);
    float* cf = p->c_float ? static_cast<float*>(p->c) : nullptr;
    const Split sp(p->M, p->N, p->K);
    const int64_t packed = (p->N + NR - 1) / NR * NR * p->K;
    std::vector<acc_t<T>> once;
    acc_t<T>* bp;
    try {
      bp = scratch<acc_t<T>>(size_t(packed + sp.threads * sp.scratch_per_thread()), once);
    } catch (const std::bad_alloc&) {
      return tc_fail(TC_ERR_INTERNAL, "%s: out of memory for a %lld x %lld x %lld product's scratch", op,
                     (long long)p->M, (long long)p->N, (long long)p->K);
    }
    for (int64_t z = 0; z < p->batch; ++z) {
      if (z == 0 || p->b_stride[0] != 0)
        pack_b(p->N, p->K, b + z * p->b_stride[0], p->b_stride[1], p->b_stride[2], bp);
      gemm<T>({p->M, p->N, p->K, a + z * p->a_stride[0], p->a_stride[1], p->a_stride[2], bp,
               static_cast<const T*>(p->bias), c ? c + z * p->M * p->N : nullptr,
               cf ? cf + z * p->M * p->N : nullptr, p->accumulate != 0,
               p->pre ? static_cast<T*>(p->pre) + z * p->M * p->N : nullptr, p->activation},
              sp, bp + packed);
    }
    return TC_OK;
  });
}

tc_status tc_matmul_cpu(const tc_matmul_params* p) { return matmul_cpu("matmul", p); }

size_t tc_matmul_workspace_size(const tc_matmul_params* p) {
  return p ? matmul_workspace_bytes(fold_batch(*p)) : 0;
}
