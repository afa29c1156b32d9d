// transpose family, CPU: y = the contiguous copy of a strided view of x
// (tinycuda/transpose.h), on the plan of shared/transpose_plan.h.
//
// rows   a batched copy: a row's x offset by an odometer over the outer dims,
//        then one memcpy of the row (x's inner stride 1), or an element at a
//        time along a strided or broadcast row. Threads split the rows.
// tile   a cache-blocked transpose of (k, inner), over the batch of the other
//        dims: square blocks of 128-byte rows (32 x 32 fp32, 128 x 128 bytes;
//        32 x 32 of wider elements: 4 to 16 KB, whose lines stay in L1 while
//        the block is walked), each cut into R x R squares of 16-byte rows
//        (R = 16 / itemsize: 4 x 4 fp32), which R loads, log2 R rounds of R
//        interleaves and R stores transpose (2048^2 on 2 cores, against an
//        element at a time: fp32 2x, fp16 and bytes 4x, fp64 even); the
//        block's ragged edges an element at a time. Threads split the blocks.
// Elements are moved as bytes (memcpy of a constant itemsize: one load and
// one store), never read as numbers.
#include <cstring>
#include <utility>

#include "kit/parallel.h"
#include "../shared/transpose_plan.h"

namespace {

// Work under ~1 MB stays on the calling thread (parallel.h: ~20 us a thread)
int64_t threads_for_bytes(int64_t items, int64_t bytes) { return threads_for(items, 4 * bytes); }

// An odometer over dims [0, nd) of l (sizes, x strides): the x offset of
// linear index i, then of i + 1, ... by one add and a carry now and then.
struct Odometer {
  const StridedLayout<1>& l;
  int nd;
  int64_t idx[8] = {}, off = 0;
  Odometer(const StridedLayout<1>& layout, int dims, int64_t i) : l(layout), nd(dims) {
    for (int d = nd - 1; d >= 0; --d) idx[d] = i % l.sizes[d], off += idx[d] * l.strides[0][d], i /= l.sizes[d];
  }
  void next() {
    for (int d = nd - 1; d >= 0; --d) {
      off += l.strides[0][d];
      if (++idx[d] < l.sizes[d]) return;
      off -= idx[d] * l.strides[0][d], idx[d] = 0;
    }
  }
};

template <size_t B>
bool copy_rows(const StridedLayout<1>& l, const char* x, char* y) {
  const int inner = l.ndim - 1;
  const int64_t len = inner >= 0 ? l.sizes[inner] : 1, step = inner >= 0 ? l.strides[0][inner] : 0;
  const int64_t rows = l.n / len, threads = threads_for_bytes(rows, l.n * int64_t(B));
  return run_threads(threads, [&](int64_t t) {
    const int64_t r0 = rows * t / threads, r1 = rows * (t + 1) / threads;
    Odometer row(l, inner, r0);
    for (int64_t r = r0; r < r1; ++r, row.next()) {
      char* out = y + r * len * int64_t(B);
      const char* in = x + row.off * int64_t(B);
      if (step == 1) {
        std::memcpy(out, in, size_t(len) * B);
        continue;
      }
      for (int64_t j = 0; j < len; ++j) std::memcpy(out + j * int64_t(B), in + j * step * int64_t(B), B);
    }
  });
}

// 16 bytes of B-byte elements (GCC's and Clang's vector extension: SSE on x86, NEON on Arm);
// interleave<HI>(a, b) = (a_0, b_0, a_1, b_1, ...) of a's and b's low (HI: high) halves
template <size_t B> struct Lanes;
template <> struct Lanes<1> { typedef uint8_t type __attribute__((vector_size(16))); };
template <> struct Lanes<2> { typedef uint16_t type __attribute__((vector_size(16))); };
template <> struct Lanes<4> { typedef uint32_t type __attribute__((vector_size(16))); };
template <> struct Lanes<8> { typedef uint64_t type __attribute__((vector_size(16))); };
template <size_t B> using Vec16 = typename Lanes<B>::type;

template <size_t B, bool HI, size_t... J>
inline Vec16<B> interleave(Vec16<B> a, Vec16<B> b, std::index_sequence<J...>) {
  constexpr size_t R = 16 / B, first = HI ? R / 2 : 0;
#if defined(__clang__)
  return __builtin_shufflevector(a, b, int(first + J / 2 + J % 2 * R)...);
#else
  return __builtin_shuffle(a, b, Vec16<B>{(first + J / 2 + J % 2 * R)...});
#endif
}

// y[k][c] = x[c][k] for an R x R square: rows i and i + R / 2 interleaved into 2i and 2i + 1, log2 R times
template <size_t B>
inline void transpose_square(const char* x, int64_t x_row, char* y, int64_t y_row) {
  constexpr size_t R = 16 / B;
  constexpr auto lanes = std::make_index_sequence<R>{};
  Vec16<B> r[R], t[R];
  for (size_t i = 0; i < R; ++i) std::memcpy(&r[i], x + int64_t(i) * x_row, 16);
  for (size_t s = 1; s < R; s *= 2) {
    for (size_t i = 0; i < R / 2; ++i)
      t[2 * i] = interleave<B, false>(r[i], r[i + R / 2], lanes), t[2 * i + 1] = interleave<B, true>(r[i], r[i + R / 2], lanes);
    for (size_t i = 0; i < R; ++i) r[i] = t[i];
  }
  for (size_t i = 0; i < R; ++i) std::memcpy(y + int64_t(i) * y_row, &r[i], 16);
}

// y[k][c] = x[k + c sc] for k < kn, c < cn (byte pointers; sc, yk in elements)
template <size_t B>
void transpose_block(const char* x, int64_t sc, char* y, int64_t yk, int64_t kn, int64_t cn) {
  constexpr int64_t R = B < 16 ? 16 / int64_t(B) : 1, b = int64_t(B);
  const int64_t kr = R > 1 ? kn / R * R : 0, cr = R > 1 ? cn / R * R : 0;
  if constexpr (R > 1)
    for (int64_t k = 0; k < kr; k += R)
      for (int64_t c = 0; c < cr; c += R) transpose_square<B>(x + (k + c * sc) * b, sc * b, y + (k * yk + c) * b, yk * b);
  auto one = [&](int64_t k, int64_t c) { std::memcpy(y + (k * yk + c) * b, x + (k + c * sc) * b, B); };
  for (int64_t k = 0; k < kr; ++k)
    for (int64_t c = cr; c < cn; ++c) one(k, c);
  for (int64_t k = kr; k < kn; ++k)
    for (int64_t c = 0; c < cn; ++c) one(k, c);
}

template <size_t B>
bool copy_tiles(const StridedLayout<1>& l, int k, const char* x, char* y) {
  constexpr int64_t kTile = B <= 4 ? 128 / int64_t(B) : 32;  // elements of k (and of c) a block
  const int c = l.ndim - 1;
  int64_t ystride[8];
  contiguous_strides(l, ystride);
  // the batch: every dim but k and c, outer to inner
  StridedLayout<1> batch;
  int64_t batch_ystride[8];
  for (int d = 0; d < c; ++d) {
    if (d == k) continue;
    batch.sizes[batch.ndim] = l.sizes[d], batch.strides[0][batch.ndim] = l.strides[0][d];
    batch_ystride[batch.ndim++] = ystride[d];
  }
  const int64_t nk = l.sizes[k], nc = l.sizes[c], sc = l.strides[0][c], yk = ystride[k];
  const int64_t tk = (nk + kTile - 1) / kTile, tc = (nc + kTile - 1) / kTile, per_batch = tk * tc;
  const int64_t items = l.n / (nk * nc) * per_batch, threads = threads_for_bytes(items, l.n * int64_t(B));
  return run_threads(threads, [&](int64_t t) {
    const int64_t i0 = items * t / threads, i1 = items * (t + 1) / threads;
    for (int64_t i = i0; i < i1; ++i) {
      int64_t b = i / per_batch, xb = 0, yb = 0;
      for (int d = batch.ndim - 1; d >= 0; --d) {
        const int64_t j = b % batch.sizes[d];
        xb += j * batch.strides[0][d], yb += j * batch_ystride[d], b /= batch.sizes[d];
      }
      const int64_t k0 = i % per_batch / tc * kTile, c0 = i % tc * kTile;
      transpose_block<B>(x + (xb + k0 + c0 * sc) * int64_t(B), sc, y + (yb + k0 * yk + c0) * int64_t(B), yk,
                         std::min(kTile, nk - k0), std::min(kTile, nc - c0));
    }
  });
}

template <size_t B>
bool permute_copy_cpu(const PermutePlan& plan, const void* x, void* y) {
  const char* in = static_cast<const char*>(x);
  char* out = static_cast<char*>(y);
  return plan.k < 0 ? copy_rows<B>(plan.l, in, out) : copy_tiles<B>(plan.l, plan.k, in, out);
}

}  // namespace

tc_status tc_permute_copy_cpu(const tc_permute_copy_params* p) {
  TC_RETURN_IF_ERROR(permute_copy_check(p));
  const PermutePlan plan = permute_plan(p);
  if (plan.l.n == 0) return TC_OK;
  bool ok = false;
  switch (p->itemsize) {
    case 1: ok = permute_copy_cpu<1>(plan, p->x, p->y); break;
    case 2: ok = permute_copy_cpu<2>(plan, p->x, p->y); break;
    case 4: ok = permute_copy_cpu<4>(plan, p->x, p->y); break;
    case 8: ok = permute_copy_cpu<8>(plan, p->x, p->y); break;
    default: ok = permute_copy_cpu<16>(plan, p->x, p->y); break;
  }
  return ok ? TC_OK : tc_fail(TC_ERR_INTERNAL, "permute_copy: a CPU worker failed");
}
