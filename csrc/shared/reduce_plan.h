// How the CUDA reductions cut their work, shared by the launchers and the
// workspace-size queries (which must agree, and must not need a device).
//
// Row reductions (the reduced axis is contiguous: full sums, sums over the
// last dim) split each row into `row_splits` segments, one block each.
// Column reductions (reduced axis strided: sum over an inner dim, bias
// gradients) cut the reduced axis into `column_chunks` slices; every block
// writes one row of partial sums.
// A second kernel adds the partials in a fixed order, so results are
// bit-identical run to run (no float atomics).
#pragma once
#include <cstddef>
#include <cstdint>

#include "internal.h"

namespace plan {

TC_HD inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : (v > hi ? hi : v); }

constexpr int kColTile = 32;    // columns per block (scalar path) in column reductions
constexpr int kBlockRows = 8;   // rows per block iteration (threadIdx.y)

// ~1024 segments in all (7.75 blocks of 256 threads per SM on a 132-SM H100)
// and no segment shorter than 8192 elements, where launch cost would dominate.
inline int64_t row_splits(int64_t rows, int64_t reduce) {
  if (rows <= 0 || reduce <= 0) return 1;
  return clamp64(ceil_div(1024, rows), 1, clamp64(ceil_div(reduce, 8192), 1, 1024));
}

// ~8192 blocks of 32 columns in all, at least 32 rows a slice.
inline int64_t column_chunks(int64_t reduce, int64_t columns) {
  if (reduce <= 0 || columns <= 0) return 1;
  int64_t col_blocks = ceil_div(columns, kColTile);
  return clamp64(ceil_div(8192, col_blocks), 1, clamp64(ceil_div(reduce, 32), 1, 1024));
}

inline size_t acc_bytes(tc_dtype dtype) { return dtype == TC_FLOAT64 ? 8 : 4; }

// A column reduction's per-slice partials (a sum over an inner dim, a bias
// gradient by cuda/kit/colsum.cuh): column_chunks rows of cols accumulators,
// none for one slice.
inline size_t column_partials_bytes(int64_t rows, int64_t cols, tc_dtype dtype) {
  if (rows <= 0 || cols <= 0) return 0;
  const int64_t chunks = column_chunks(rows, cols);
  return chunks > 1 ? size_t(chunks * cols) * acc_bytes(dtype) : 0;
}

// Workspace for sum(x[outer, reduce, inner]) over the middle axis.
inline size_t sum_workspace(tc_dtype dtype, int64_t outer, int64_t reduce, int64_t inner) {
  if (outer <= 0 || reduce <= 0 || inner <= 0) return 0;
  if (inner == 1) {
    int64_t s = row_splits(outer, reduce);
    return s > 1 ? size_t(outer * s) * acc_bytes(dtype) : 0;
  }
  return column_partials_bytes(reduce, outer * inner, dtype);
}

}  // namespace plan

// ---------------------------------------------------------------------------
// The reduce family (tinycuda/reduce.h): its CUDA launcher and workspace query
// both cut the work here.
//   rows     the reduced dims end in a stride-1 dim, or the kept ones do not:
//            `group` threads a slice (8 for slices of up to 64 elements, a
//            warp under 2048, a block above), a long slice cut into `splits`
//            segments (row_splits) whose states a second kernel merges
//   columns  the kept dims end in a stride-1 dim and the reduced ones do not
//            (mean over dim 0 of a matrix): 32 adjacent outputs a block, its 8
//            rows of threads walking the slice, cut into `splits` chunks
//            (column_chunks)
namespace plan {

struct Reduce {
  bool columns = false;
  int group = 32;       // rows: threads a slice (8, 32 or 256)
  int64_t splits = 1;   // partial states per output (1: none, no workspace)
};

inline Reduce reduce(int64_t outputs, int64_t slice, bool columns) {
  Reduce r;
  if (outputs <= 0 || slice <= 0) return r;
  if (columns) {
    r.columns = true;
    r.splits = column_chunks(slice, outputs);
    return r;
  }
  r.group = slice <= 64 ? 8 : slice < 2048 ? 32 : 256;
  if (r.group == 256) r.splits = row_splits(outputs, slice);
  return r;
}

}  // namespace plan
