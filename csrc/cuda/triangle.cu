// triangle: y = triu(x) or tril(x) over contiguous [batch, rows, cols]
// (tinycuda/triangle.h): row i of each matrix keeps x's columns [begin, end)
// (shared/triangle_check.h: from i + diagonal on, or up to and with it) and
// holds zeros elsewhere. Any dtype: elements move as bytes, and every dtype's
// zero is all-zero bits.
//
// Memory-bound: y is written once, x read only where kept (a triangle of a
// square matrix reads half of x: 1.5 bytes moved a byte of y, a copy's 2).
// Two instances:
//   vectors  a row is a whole number of 16-byte vectors and x, y sit on the
//            16-byte grid (fp32 cols % 4 == 0, fp16 % 8, ...): a thread owns a
//            vector of y, finds its row and its bytes' columns with two FastDivs
//            (kit/index.cuh), then the vector is all kept (one 16-byte load, one
//            store), all zero (a store, no load) or crosses the row's edge (a
//            load, the dropped bytes zeroed): whole zero and copy runs a row,
//            as 16-byte accesses. 16384^2 fp32: 2^26 threads, 2^18 blocks.
//   words    otherwise (odd cols, a misaligned view): a thread a word of an
//            element (the element itself, or half of a 16-byte one), same rule.
#include "kit/index.cuh"
#include "kit/vec.cuh"
#include "../shared/triangle_check.h"

namespace {

constexpr int kThreads = 256;

// The word an element of E bytes moves as, and how many make one
template <int E> struct Word;
template <> struct Word<1> { using type = uint8_t; static constexpr int per = 1; };
template <> struct Word<2> { using type = uint16_t; static constexpr int per = 1; };
template <> struct Word<4> { using type = uint32_t; static constexpr int per = 1; };
template <> struct Word<8> { using type = uint64_t; static constexpr int per = 1; };
template <> struct Word<16> { using type = uint64_t; static constexpr int per = 2; };

// ---------------------------------------------------------------------------
// kernels

// vectors: vector v of y is bytes [16 v, 16 v + 16): row r = v / row_vecs (of batch * rows), matrix row r % rows
__global__ void __launch_bounds__(kThreads)
triangle_vec_kernel(const uint8_t* __restrict__ x, uint8_t* __restrict__ y, int64_t vecs, FastDiv row_vecs,
                    FastDiv rows, int64_t cols, int elem_bytes, int64_t diagonal, bool triu) {
  using V = Vec<uint8_t, 16>;
  for (int64_t v = blockIdx.x * int64_t(kThreads) + threadIdx.x; v < vecs; v += int64_t(gridDim.x) * kThreads) {
    const int64_t r = row_vecs.div(v), i = r - rows.div(r) * int64_t(rows.d);
    const KeptColumns k = kept_columns(triu, i, cols, diagonal);
    // in bytes of the row
    const int64_t b0 = (v - r * int64_t(row_vecs.d)) * 16, begin = k.begin * elem_bytes, end = k.end * elem_bytes;
    V out{};
    if (b0 >= begin && b0 + 16 <= end) {
      out = load_vec<uint8_t, 16>(x + v * 16);
    } else if (b0 + 16 > begin && b0 < end) {
      const V in = load_vec<uint8_t, 16>(x + v * 16);
#pragma unroll
      for (int j = 0; j < 16; ++j) out.v[j] = b0 + j >= begin && b0 + j < end ? in.v[j] : uint8_t(0);
    }
    store_vec(y + v * 16, out);
  }
}

// words: word w of y belongs to element w / PER of the row-major [batch * rows, cols]
template <class U, int PER>
__global__ void __launch_bounds__(kThreads)
triangle_word_kernel(const U* __restrict__ x, U* __restrict__ y, int64_t words, FastDiv row_words, FastDiv rows,
                     int64_t cols, int64_t diagonal, bool triu) {
  for (int64_t w = blockIdx.x * int64_t(kThreads) + threadIdx.x; w < words; w += int64_t(gridDim.x) * kThreads) {
    const int64_t r = row_words.div(w), i = r - rows.div(r) * int64_t(rows.d);
    const int64_t j = (w - r * int64_t(row_words.d)) / PER;
    const KeptColumns k = kept_columns(triu, i, cols, diagonal);
    y[w] = j >= k.begin && j < k.end ? x[w] : U(0);
  }
}

// ---------------------------------------------------------------------------
// launchers

template <int E>
tc_status launch_words(const tc_triangle_params* p, int64_t diagonal, bool triu, cudaStream_t stream) {
  using W = Word<E>;
  using U = typename W::type;
  const int64_t words = p->batch * p->rows * p->cols * W::per;
  triangle_word_kernel<U, W::per><<<grid_1d(words, kThreads, int64_t(1) << 20), kThreads, 0, stream>>>(
      static_cast<const U*>(p->x), static_cast<U*>(p->y), words, FastDiv(uint64_t(p->cols * W::per)),
      FastDiv(uint64_t(p->rows)), p->cols, diagonal, triu);
  return check_launch(triangle_name(p->op));
}

}  // namespace

tc_status tc_triangle_cuda(const tc_triangle_params* p) {
  TC_RETURN_IF_ERROR(triangle_check(p));
  const int64_t n = p->batch * p->rows * p->cols, row_bytes = p->cols * p->elem_bytes;
  if (n == 0) return TC_OK;
  const bool triu = p->op == TC_TRIANGLE_TRIU;
  const int64_t diagonal = triangle_diagonal(p);
  cudaStream_t stream = as_stream(p->stream);
  if (row_bytes % 16 == 0 && aligned16(p->x) && aligned16(p->y)) {
    const int64_t vecs = n * p->elem_bytes / 16;
    triangle_vec_kernel<<<grid_1d(vecs, kThreads, int64_t(1) << 20), kThreads, 0, stream>>>(
        static_cast<const uint8_t*>(p->x), static_cast<uint8_t*>(p->y), vecs, FastDiv(uint64_t(row_bytes / 16)),
        FastDiv(uint64_t(p->rows)), p->cols, p->elem_bytes, diagonal, triu);
    return check_launch(triangle_name(p->op));
  }
  switch (p->elem_bytes) {
    case 1: return launch_words<1>(p, diagonal, triu, stream);
    case 2: return launch_words<2>(p, diagonal, triu, stream);
    case 4: return launch_words<4>(p, diagonal, triu, stream);
    case 8: return launch_words<8>(p, diagonal, triu, stream);
    default: return launch_words<16>(p, diagonal, triu, stream);
  }
}
