// transpose: y = the contiguous copy of a strided view of x (tinycuda/transpose.h),
// y[i] = x[sum_d i_d s_d], on the plan of shared/transpose_plan.h. Bytes are
// moved, never read as numbers: an element is a word of itemsize bytes.
//
// rows   the innermost dim steps through x by 1 (a permutation that keeps
//        the last dim, a slice, a broadcast, a plain copy), or no dim does:
//        a batched copy of rows. A row contiguous in x is moved in the widest
//        unit U of 16, 8, 4, 2 or 1 bytes that divides its bytes, every
//        stride, x and y (a [B, S, H, D] -> [B, H, S, D] fp16 permute: rows of
//        256 bytes in 16 units of 16 B); another row an element at a time,
//        its stride apart (a gather). A block moves 1024 consecutive units of
//        y (16 KB at U = 16), or 254 rows' worth where rows are shorter than
//        4 units: its threads first find the x offset of each row the block
//        touches (kit/index.cuh's Walk, one a row, into shared memory), then
//        each moves 4 units 256 apart, so a warp reads and writes 32
//        consecutive units of a row (512 B at U = 16). 32 registers: 8 blocks
//        an SM, 128 KB in flight.
// tile   another dim k steps through x by 1: a transpose of (k, c), c the
//        innermost dim (x stride sc), y[.., k, .., c] = x[.. + k + c sc], for
//        each element of the batch of the remaining dims. A block of 256
//        threads moves a T x T tile (64 x 64 fp32, 128 x 128 bytes: 16 KB;
//        128 x 128 fp16: 32 KB):
//          load   R consecutive k of one c are one unit of U = R itemsize
//                 bytes (fp32 R = 4 and fp16 R = 8: 16 B; bytes R = 8: 8 B;
//                 R = 1 where a size, a stride or a pointer is not a multiple
//                 of R): a thread loads the R units of an R x R block (rows
//                 c .. c + R - 1), a warp covering whole 128-byte lines of x;
//                 it transposes the block in registers (fp32: renaming 4 x 4
//                 words; 16- and 8-bit elements: byte permutes, PRMT) into R
//                 units of R consecutive c, one per k, and stores them to
//                 shared memory, tile[k][c unit];
//          store  a thread reads units of tile rows and writes them to y,
//                 a warp covering whole lines of y rows.
//        Shared memory in whole units: a unit's column is XORed with
//        (k / R) mod the units of a 128-byte line, so the units one access
//        phase touches (8 lanes of 16 B, 16 of 8 B, 32 of 4 B) fall in
//        distinct banks both when a warp stores along k (lanes k / R apart)
//        and when it reads along c (lanes a unit apart): no conflict and no
//        padding, which would break the 16-byte alignment of the units.
//        Edge tiles mask units past nk or nc. A block a tile (c fastest, then
//        k, then the batch, whose x and y offsets a Walk finds). Registers
//        capped for the loads in flight: fp32 40 (6 blocks an SM, 96 KB),
//        fp16 63 and bytes 61 (4 blocks, 128 and 64 KB).
// Bytes: x read once, y written once (2 n itemsize); shared memory a tile
// (8 KB for 8-byte elements; 4 KB one element a unit). Both doors require x
// and y aligned to itemsize (torch's tensors always are).
//
// The teaching variants (tc_transpose_algo) take a 2-D transpose y [nk, nc]
// = x[k + c sc]: naive (a thread an element: reads coalesced, writes nc
// apart), shared (32 x 32 tiles through shared memory, 32 x 8 threads of 4
// elements, the CUDA samples' kernel: a tile column read back hits one bank
// 32 times for 4-byte elements) and padded (the tile 33 columns wide: a
// column spans all 32 banks).
#include <cstring>

#include "kit/cuda_utils.cuh"
#include "kit/index.cuh"
#include "../shared/transpose_plan.h"

namespace {

constexpr int kThreads = 256;
constexpr int kRowUnits = 4;  // units a thread of the row copy moves

// U bytes as one access: the widest load and store a thread can make at U = 16
template <int U> struct WordOf;
template <> struct WordOf<1> { using type = uint8_t; };
template <> struct WordOf<2> { using type = uint16_t; };
template <> struct WordOf<4> { using type = uint32_t; };
template <> struct WordOf<8> { using type = uint2; };
template <> struct WordOf<16> { using type = uint4; };
template <int U> using Word = typename WordOf<U>::type;

// ---------------------------------------------------------------------------
// rows: a batched copy

struct RowArgs {
  Walk rows;                      // a row's x offset (units) from its index
  FastDiv width;                  // units a row
  int64_t step;                   // units between a row's elements in x (1: contiguous)
  int64_t n, per_block, blocks;   // units of y; units a block moves; blocks (the grid)
  const void* x;
  void* y;
};

template <int U>
__global__ void __launch_bounds__(kThreads) copy_rows_kernel(const RowArgs a) {
  using W = Word<U>;
  __shared__ int64_t row_x[kThreads];  // x offsets of the rows the block touches: at most 255
  const W* x = static_cast<const W*>(a.x);
  W* y = static_cast<W*>(a.y);
  const int64_t width = int64_t(a.width.d), start = blockIdx.x * a.per_block, end = min(a.n, start + a.per_block);
  const int64_t r0 = a.width.div(start), rows = a.width.div(end - 1) - r0 + 1;
  if (threadIdx.x < rows) row_x[threadIdx.x] = a.rows.offset(r0 + threadIdx.x);
  __syncthreads();
  W v[kRowUnits];
#pragma unroll
  for (int j = 0; j < kRowUnits; ++j) {
    const int64_t i = start + threadIdx.x + j * kThreads;
    if (i < end) {
      const int64_t r = a.width.div(i);
      v[j] = x[row_x[r - r0] + (i - r * width) * a.step];
    }
  }
#pragma unroll
  for (int j = 0; j < kRowUnits; ++j) {
    const int64_t i = start + threadIdx.x + j * kThreads;
    if (i < end) y[i] = v[j];
  }
}

// ---------------------------------------------------------------------------
// tile: the transpose of (k, c) through shared memory

struct TileArgs {
  Walk batch_x, batch_y;        // an element of the batch: its x and y offsets (elements)
  FastDiv tiles_c, tiles_k;     // tiles along c and along k
  int64_t tiles;                // in all: batch x tiles_k x tiles_c, a block each
  int64_t nk, nc, sc, yk;       // the tile dims' sizes; c's x stride; k's y stride
  const void* x;
  void* y;
};

// an element's offsets: its tile (c fastest, then k, then the batch)
struct TileAt {
  int64_t k0, c0, xb, yb;  // the tile's first k and c; x and y offsets of (k0, c0)
};
template <int T>
__device__ __forceinline__ TileAt tile_at(const TileArgs& a, int64_t t) {
  const int64_t q = a.tiles_c.div(t), bt = a.tiles_k.div(q);
  const int64_t k0 = (q - bt * int64_t(a.tiles_k.d)) * T, c0 = (t - q * int64_t(a.tiles_c.d)) * T;
  return {k0, c0, a.batch_x.offset(bt) + c0 * a.sc + k0, a.batch_y.offset(bt) + k0 * a.yk + c0};
}

// B-byte elements, R of them a unit (R consecutive k in x, consecutive c in y), T x T tiles,
// registers capped for MIN_BLOCKS blocks an SM
template <int B, int R, int T, int MIN_BLOCKS>
__global__ void __launch_bounds__(kThreads, MIN_BLOCKS) transpose_tiles_kernel(const TileArgs a) {
  using Elem = Word<B>;
  using Unit = Word<B * R>;
  constexpr int kUnits = T / R;                          // units a tile row holds, either side
  constexpr int kPer = T * kUnits / kThreads;            // units a thread moves
  constexpr int kBlocks = kPer / R;                      // R x R blocks a thread transposes
  constexpr int kLine = 128 / (B * R) < kUnits ? 128 / (B * R) : kUnits;  // the swizzle's period
  static_assert(kBlocks >= 1 && kPer % R == 0 && kUnits % kLine == 0, "a tile is whole blocks, rows whole lines");
  __shared__ Unit tile[T][kUnits];  // tile[k][c unit ^ ((k / R) % kLine)]
  // in units: every offset of a unit is a multiple of R elements (the launcher checks)
  const TileAt at = tile_at<T>(a, blockIdx.x);
  const Unit* x = static_cast<const Unit*>(a.x) + at.xb / R;
  Unit* y = static_cast<Unit*>(a.y) + at.yb / R;
  const int64_t sc = a.sc / R, yk = a.yk / R;
  Unit in[kBlocks][R];
#pragma unroll
  for (int g = 0; g < kBlocks; ++g) {
    const int blk = threadIdx.x + g * kThreads, cw = blk / kUnits, kw = blk % kUnits;
    const bool k_in = at.k0 + kw * R < a.nk;
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const int c = cw * R + i;
      in[g][i] = Unit{};
      if (k_in && at.c0 + c < a.nc) in[g][i] = x[c * sc + kw];
    }
  }
#pragma unroll
  for (int g = 0; g < kBlocks; ++g) {
    const int blk = threadIdx.x + g * kThreads, cw = blk / kUnits, kw = blk % kUnits;
    Elem e[R][R];  // e[i][j]: c = cw R + i, k = kw R + j
#pragma unroll
    for (int i = 0; i < R; ++i) memcpy(e[i], &in[g][i], sizeof(Unit));
#pragma unroll
    for (int j = 0; j < R; ++j) {
      Elem col[R];
#pragma unroll
      for (int i = 0; i < R; ++i) col[i] = e[i][j];
      Unit u;
      memcpy(&u, col, sizeof(Unit));
      tile[kw * R + j][cw ^ (kw % kLine)] = u;
    }
  }
  __syncthreads();
  Unit out[kPer];
#pragma unroll
  for (int m = 0; m < kPer; ++m) {
    const int q = threadIdx.x + m * kThreads, k = q / kUnits, cw = q % kUnits;
    out[m] = tile[k][cw ^ ((k / R) % kLine)];
  }
#pragma unroll
  for (int m = 0; m < kPer; ++m) {
    const int q = threadIdx.x + m * kThreads, k = q / kUnits, cw = q % kUnits;
    if (at.k0 + k < a.nk && at.c0 + cw * R < a.nc) y[k * yk + cw] = out[m];
  }
}

// ---------------------------------------------------------------------------
// the teaching variants: 2-D, 32 x 32 tiles, 32 x 8 threads of 4 elements each

constexpr int kStep = 32, kRowsPerPass = 8;

template <class Elem>
__global__ void __launch_bounds__(kStep * kRowsPerPass) transpose_naive_kernel(const TileArgs a) {
  const Elem* x = static_cast<const Elem*>(a.x);
  Elem* y = static_cast<Elem*>(a.y);
  const TileAt at = tile_at<kStep>(a, blockIdx.x);
  const int64_t k = at.k0 + threadIdx.x;
  for (int j = threadIdx.y; j < kStep; j += kRowsPerPass) {
    const int64_t c = at.c0 + j;
    if (k < a.nk && c < a.nc) y[k * a.yk + c] = x[k + c * a.sc];  // lanes along k: y written nc apart
  }
}

// PAD 0: tile[tx][j] of a warp is one bank (4-byte elements); PAD 1: 32 banks
template <class Elem, int PAD>
__global__ void __launch_bounds__(kStep * kRowsPerPass) transpose_shared_kernel(const TileArgs a) {
  __shared__ Elem tile[kStep][kStep + PAD];  // tile[c][k]
  const Elem* x = static_cast<const Elem*>(a.x);
  Elem* y = static_cast<Elem*>(a.y);
  const TileAt at = tile_at<kStep>(a, blockIdx.x);
  for (int j = threadIdx.y; j < kStep; j += kRowsPerPass) {
    const int64_t k = at.k0 + threadIdx.x, c = at.c0 + j;
    if (k < a.nk && c < a.nc) tile[j][threadIdx.x] = x[k + c * a.sc];
  }
  __syncthreads();
  for (int j = threadIdx.y; j < kStep; j += kRowsPerPass) {
    const int64_t k = at.k0 + j, c = at.c0 + threadIdx.x;
    if (k < a.nk && c < a.nc) y[k * a.yk + c] = tile[threadIdx.x][j];
  }
}

// ---------------------------------------------------------------------------
// launchers

const char* const kOp = "permute_copy";

// a block a tile (or a chunk of rows): 2^31 - 1 blocks of at least 254 units is more memory than a GPU has,
// but the grid is checked all the same
tc_status check_grid(int64_t blocks) {
  TC_REQUIRE(blocks <= INT32_MAX, "permute_copy: %lld blocks are more than a grid holds", (long long)blocks);
  return TC_OK;
}

template <int U>
tc_status launch_rows_as(const RowArgs& a, cudaStream_t s) {
  TC_RETURN_IF_ERROR(check_grid(a.blocks));
  copy_rows_kernel<U><<<unsigned(a.blocks), kThreads, 0, s>>>(a);
  return check_launch(kOp);
}

tc_status launch_rows(const StridedLayout<1>& l, size_t b, const void* x, void* y, cudaStream_t s) {
  const int inner = l.ndim - 1;
  const int64_t len = inner >= 0 ? l.sizes[inner] : 1, step = inner >= 0 ? l.strides[0][inner] : 0;
  // a contiguous row: the widest unit dividing its bytes, every other stride's, x and y; else an element
  size_t u = b;
  if (step == 1) {
    uint64_t bits = uint64_t(len) * b | reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y);
    for (int d = 0; d < inner; ++d) bits |= uint64_t(l.strides[0][d]) * b;
    for (u = 16; bits & (u - 1); u /= 2) {
    }
  }
  StridedLayout<1> rows;  // the outer dims, strides in units
  rows.ndim = inner > 0 ? inner : 0;
  for (int d = 0; d < rows.ndim; ++d)
    rows.sizes[d] = l.sizes[d], rows.strides[0][d] = l.strides[0][d] * int64_t(b) / int64_t(u);
  RowArgs a;
  a.rows = Walk(rows);
  const int64_t width = step == 1 ? len * int64_t(b) / int64_t(u) : len;  // a gather: an element a unit
  a.width = FastDiv(uint64_t(width));
  a.step = step;
  a.n = l.n / len * width;
  a.per_block = std::min<int64_t>(int64_t(kThreads) * kRowUnits, int64_t(kThreads - 2) * width);
  a.blocks = (a.n + a.per_block - 1) / a.per_block;
  a.x = x, a.y = y;
  switch (u) {
    case 16: return launch_rows_as<16>(a, s);
    case 8: return launch_rows_as<8>(a, s);
    case 4: return launch_rows_as<4>(a, s);
    case 2: return launch_rows_as<2>(a, s);
    default: return launch_rows_as<1>(a, s);
  }
}

TileArgs tile_args(const PermutePlan& plan, int tile, const void* x, void* y) {
  const StridedLayout<1>& l = plan.l;
  const int c = l.ndim - 1, k = plan.k;
  int64_t ystride[8];
  contiguous_strides(l, ystride);
  StridedLayout<1> bx, by;  // the batch: every dim but k and c, with x's and y's strides
  for (int d = 0; d < c; ++d) {
    if (d == k) continue;
    bx.sizes[bx.ndim] = by.sizes[by.ndim] = l.sizes[d];
    bx.strides[0][bx.ndim++] = l.strides[0][d], by.strides[0][by.ndim++] = ystride[d];
  }
  TileArgs a;
  a.batch_x = Walk(bx), a.batch_y = Walk(by);
  a.nk = l.sizes[k], a.nc = l.sizes[c], a.sc = l.strides[0][c], a.yk = ystride[k];
  const int64_t tk = (a.nk + tile - 1) / tile, tc = (a.nc + tile - 1) / tile;
  a.tiles_k = FastDiv(uint64_t(tk)), a.tiles_c = FastDiv(uint64_t(tc));
  a.tiles = l.n / (a.nk * a.nc) * tk * tc;
  a.x = x, a.y = y;
  return a;
}

template <int B, int R, int T, int MIN_BLOCKS = 6>
tc_status launch_tiles_as(const PermutePlan& plan, const void* x, void* y, cudaStream_t s) {
  const TileArgs a = tile_args(plan, T, x, y);
  TC_RETURN_IF_ERROR(check_grid(a.tiles));
  transpose_tiles_kernel<B, R, T, MIN_BLOCKS><<<unsigned(a.tiles), kThreads, 0, s>>>(a);
  return check_launch(kOp);
}

// R elements a unit: x's and y's offsets of every unit must be multiples of R
bool packs(const PermutePlan& plan, int r, size_t b, const void* x, const void* y) {
  const StridedLayout<1>& l = plan.l;
  const uintptr_t align = uintptr_t(r) * b - 1;
  bool ok = !(reinterpret_cast<uintptr_t>(x) & align) && !(reinterpret_cast<uintptr_t>(y) & align);
  for (int d = 0; d < l.ndim && ok; ++d) ok = (d == plan.k ? l.sizes[d] : l.strides[0][d]) % r == 0;
  return ok && l.sizes[l.ndim - 1] % r == 0;
}

// the packed instance where every unit is aligned, else one element a unit
template <int B, int R, int T, int MIN_BLOCKS>
tc_status launch_tiles_of(const PermutePlan& plan, const void* x, void* y, cudaStream_t s) {
  if (packs(plan, R, B, x, y)) return launch_tiles_as<B, R, T, MIN_BLOCKS>(plan, x, y, s);
  return launch_tiles_as<B, 1, 32>(plan, x, y, s);
}

tc_status launch_tiles(const PermutePlan& plan, size_t b, const void* x, void* y, cudaStream_t s) {
  switch (b) {
    case 1: return launch_tiles_of<1, 8, 128, 4>(plan, x, y, s);
    case 2: return launch_tiles_of<2, 8, 128, 4>(plan, x, y, s);
    case 4: return launch_tiles_of<4, 4, 64, 6>(plan, x, y, s);
    case 8: return launch_tiles_of<8, 2, 32, 6>(plan, x, y, s);
    default: return launch_tiles_as<16, 1, 32>(plan, x, y, s);
  }
}

template <class Elem>
tc_status launch_variant_as(tc_transpose_algo algo, const TileArgs& a, cudaStream_t s) {
  TC_RETURN_IF_ERROR(check_grid(a.tiles));
  const dim3 block(kStep, kRowsPerPass);
  const unsigned grid = unsigned(a.tiles);
  if (algo == TC_TRANSPOSE_NAIVE) transpose_naive_kernel<Elem><<<grid, block, 0, s>>>(a);
  else if (algo == TC_TRANSPOSE_SHARED) transpose_shared_kernel<Elem, 0><<<grid, block, 0, s>>>(a);
  else transpose_shared_kernel<Elem, 1><<<grid, block, 0, s>>>(a);
  return check_launch(kOp);
}

tc_status launch_variant(const tc_permute_copy_params* p, const PermutePlan& plan, cudaStream_t s) {
  static const char* const names[] = {"auto", "naive", "shared", "padded"};
  TC_REQUIRE(plan.l.ndim == 2 && plan.k == 0,
             "permute_copy: algo %d (%s) takes a 2-D transpose, y [n0, n1] = x[i0 + i1 s]; this layout collapses "
             "to %d dims%s",
             int(p->algo), names[p->algo], plan.l.ndim, plan.l.ndim == 2 ? " with x's inner dim kept" : "");
  const TileArgs a = tile_args(plan, kStep, p->x, p->y);
  switch (p->itemsize) {
    case 1: return launch_variant_as<uint8_t>(p->algo, a, s);
    case 2: return launch_variant_as<uint16_t>(p->algo, a, s);
    case 4: return launch_variant_as<uint32_t>(p->algo, a, s);
    case 8: return launch_variant_as<uint2>(p->algo, a, s);
    default: return launch_variant_as<uint4>(p->algo, a, s);
  }
}

}  // namespace

tc_status tc_permute_copy_cuda(const tc_permute_copy_params* p) {
  TC_RETURN_IF_ERROR(permute_copy_check(p));
  const PermutePlan plan = permute_plan(p);
  if (plan.l.n == 0) return TC_OK;
  const uintptr_t align = p->itemsize - 1;
  TC_REQUIRE(!(reinterpret_cast<uintptr_t>(p->x) & align) && !(reinterpret_cast<uintptr_t>(p->y) & align),
             "permute_copy: x and y must be aligned to itemsize (%zu bytes) on CUDA", p->itemsize);
  const cudaStream_t s = as_stream(p->stream);
  if (p->algo != TC_TRANSPOSE_AUTO) return launch_variant(p, plan, s);
  if (plan.k < 0) return launch_rows(plan.l, p->itemsize, p->x, p->y, s);
  return launch_tiles(plan, p->itemsize, p->x, p->y, s);
}
