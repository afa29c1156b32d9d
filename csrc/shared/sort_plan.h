// How the CUDA sort cuts its work (cuda/sort.cu), shared by the launcher and
// tc_sort_workspace_size (which must agree, and must not need a device).
//
//   block   n <= kBlockSortMax: one group of threads sorts a row in shared
//           memory (a warp for rows up to 512, 4 of them a block; 4 or 8 warps
//           for longer ones). No workspace.
//   radix   longer rows, sort and argsort (and topk with 2k > n): a segmented
//           LSD radix sort, 8-bit digits, a pass a key byte; tiles of kRadixTile
//           elements, a row's tiles cut into at most kMaxChunks chunks, one
//           block a chunk. A row of up to kMaxChunks tiles (1M elements) has a
//           chunk a tile ("medium rows"); a longer one (a large 1-D input) has
//           chunks of several tiles, a block carrying its digit offsets from
//           one tile to the next.
//   select  topk with 2k <= n on longer rows: a radix select of the k-th key
//           (a histogram a key byte, from the top), the k selected gathered in
//           row order, then sorted: by the block sort (k <= kBlockSortMax) or
//           the radix sort over rows of k.
#pragma once
#include <cstddef>
#include <cstdint>

namespace plan {

constexpr int64_t kBlockSortMax = 4096;
constexpr int kRadixThreads = 256, kRadixItems = 16;
constexpr int64_t kRadixTile = int64_t(kRadixThreads) * kRadixItems;
// the downsweep holds 111 registers a thread (sm_90a): two blocks of 256 threads an SM, 264 on an H100's or
// H200's 132 SMs, so 256 chunks (a long row's) all run in one wave
constexpr int64_t kMaxChunks = 256;
constexpr int kBins = 256;
// topk runs the select when k * kSelectRatio <= n (past the block sort's rows): it reads x key-bytes + 2 times, the
// radix sort moves every pair key-bytes times
constexpr int64_t kSelectRatio = 2;

enum SortKind { kSortNone, kSortBlock, kSortRadix, kSortSelect };

// the block sort's groups: `warps` warps a row, `items` elements a thread
struct BlockClass {
  int warps, items;
};
constexpr BlockClass block_class(int64_t n) {
  return n <= 128 ? BlockClass{1, 4} : n <= 512 ? BlockClass{1, 16} : n <= 2048 ? BlockClass{4, 16} : BlockClass{8, 16};
}

// a segmented radix sort of rows of `len` elements
struct Radix {
  int64_t tiles = 0, chunks = 0, tiles_per_chunk = 0;
};
inline Radix radix(int64_t len) {
  Radix r;
  r.tiles = (len + kRadixTile - 1) / kRadixTile;
  r.chunks = r.tiles < kMaxChunks ? r.tiles : kMaxChunks;
  r.tiles_per_chunk = r.chunks ? (r.tiles + r.chunks - 1) / r.chunks : 0;
  r.chunks = r.tiles_per_chunk ? (r.tiles + r.tiles_per_chunk - 1) / r.tiles_per_chunk : 0;
  return r;
}

inline size_t align256(size_t b) { return (b + 255) / 256 * 256; }

// The plan and its workspace: byte offsets of each region (0 size: absent).
//   radix:  keys and indices (uint32) of buffer A, of buffer B unless the outputs hold it (k = the sorted
//           length and values given: values as keys, the int64 indices' first half as uint32), the chunk
//           counts (uint32 [rows][256][chunks], scanned into offsets)
//   select: the byte histograms (uint32 [rows][key bytes][256], cleared), a (prefix, count) state a row,
//           the tiles' (less, equal) counts (uint32 [rows][2][tiles]), the gathered keys and indices
//           ([rows][k]), then the radix regions for rows of k when k > kBlockSortMax
struct Sort {
  SortKind kind = kSortNone;
  int64_t sorted = 0;  // the radix sort's row length: n, or k after a select
  Radix rx;            // the radix sort's cut (none when no radix sort runs)
  int64_t select_tiles = 0;
  size_t keys_a = 0, idx_a = 0, keys_b = 0, idx_b = 0, counts = 0;
  size_t hist = 0, state = 0, tile_counts = 0, gathered_keys = 0, gathered_idx = 0;
  bool b_in_workspace = false;
  size_t cleared_from = 0, cleared_bytes = 0, total = 0;
};

inline Sort sort(int64_t rows, int64_t n, int64_t k, size_t key_bytes, bool values) {
  Sort s;
  if (rows * k == 0) return s;
  s.kind = n <= kBlockSortMax ? kSortBlock : k * kSelectRatio <= n ? kSortSelect : kSortRadix;
  if (s.kind == kSortBlock) return s;
  size_t at = 0;
  auto take = [&](size_t bytes) {
    const size_t off = at;
    at += align256(bytes);
    return off;
  };
  if (s.kind == kSortSelect) {
    s.select_tiles = (n + kRadixTile - 1) / kRadixTile;
    s.hist = take(size_t(rows) * key_bytes * kBins * 4);
    s.cleared_from = s.hist, s.cleared_bytes = at - s.hist;
    s.state = take(size_t(rows) * 16);
    s.tile_counts = take(size_t(rows) * 2 * size_t(s.select_tiles) * 4);
    s.gathered_keys = take(size_t(rows * k) * key_bytes);
    s.gathered_idx = take(size_t(rows * k) * 4);
  }
  s.sorted = s.kind == kSortSelect ? k : n;
  if (s.sorted > kBlockSortMax) {
    s.rx = radix(s.sorted);
    const size_t len = size_t(rows * s.sorted);
    s.keys_a = take(len * key_bytes);
    s.idx_a = take(len * 4);
    s.b_in_workspace = !(values && k == s.sorted);
    if (s.b_in_workspace) {
      s.keys_b = take(len * key_bytes);
      s.idx_b = take(len * 4);
    }
    s.counts = take(size_t(rows) * kBins * size_t(s.rx.chunks) * 4);
  }
  s.total = at;
  return s;
}

}  // namespace plan
