// How the CUDA histograms cut their work, shared by the launchers and the
// workspace-size queries (which must agree, and must not need a device).
//
//   shared   the bins fit in a block's shared memory. Each block folds a
//            grid-strided share of x into its own histograms, then writes their
//            sum, bin by bin, as its row of the workspace's partials [rows,
//            bins]; a second kernel sums each bin's column in row order.
//              counts   integer atomics into `replicas` sub-histograms (warp w
//                       adds into w % replicas: fewer warps contend on a bin)
//            weights  one histogram a warp, no atomics (the lanes of a bin are
//                       summed in lane order, the warp's leader adds the sum);
//                       with more bins than a block holds, the bins in ranges of
//                       `range`, a block a (share, range) pair: x read once a range
//   global   counts with more bins than shared memory holds: uint64 atomics into
//            the workspace's [bins], then the same second kernel (one row).
// Integer adds do not depend on their order; the weighted folds have a fixed
// one (warps, then rows), so every result is bit-identical run to run.
//
// rows caps the blocks along x: a block takes at least max(4096, 2 x the bins
// it holds) elements, so its row of partials costs about half of what it
// reads or less (4 or 8 bytes a bin, an element 2 to 8 bytes); at most
// kHistMaxRows, and at most 64 MB of partials in all (weights in 100000 bins:
// 167 rows of 33 ranges, not 2048); the launcher takes fewer where fewer
// blocks fill the device.
#pragma once
#include <cstddef>
#include <cstdint>

namespace plan {

constexpr int kHistCountThreads = 256;                 // 8 warps
constexpr int kHistWeightThreads = 128;                // 4 warps, a histogram each
constexpr size_t kHistSmem = 48 * 1024;               // no opt-in needed
constexpr int kHistMaxReplicas = kHistCountThreads / 32;
constexpr int64_t kHistMaxRows = 2048;                 // 132 SMs x 8 resident blocks of 256 fit under it
constexpr int64_t kHistMinShare = 4096;
constexpr int64_t kHistMaxPartialBytes = int64_t(64) << 20;
constexpr int64_t kRangeRows = 1024;                   // the range pass's blocks (a pair of 8-byte values each)

struct Hist {
  bool global = false;
  int replicas = 1;       // counts: sub-histograms a block
  int64_t range = 0;      // bins a block holds (the smaller of bins and the shared memory's room)
  int64_t ranges = 1;     // weights: ceil(bins / range)
  int64_t rows = 1;       // the most blocks along x
  size_t smem = 0;        // dynamic shared memory a block
};

// acc_bytes: 0 for counts, else the bytes of a weighted sum (4: float, 8: double); bins >= 1
inline Hist histogram(int64_t n, int64_t bins, size_t acc_bytes) {
  Hist h;
  if (acc_bytes == 0) {
    const int64_t room = int64_t(kHistSmem / 4);
    h.global = bins > room;
    h.range = bins;
    while (!h.global && h.replicas < kHistMaxReplicas && int64_t(h.replicas) * 2 * bins <= room) h.replicas *= 2;
    h.smem = h.global ? 0 : size_t(h.replicas) * size_t(bins) * 4;
  } else {
    const int64_t room = int64_t(kHistSmem / (kHistWeightThreads / 32) / acc_bytes);
    h.range = bins < room ? bins : room;
    h.ranges = (bins + h.range - 1) / h.range;
    h.smem = size_t(kHistWeightThreads / 32) * size_t(h.range) * acc_bytes;
  }
  if (h.global) return h;  // one row: the atomics' counts
  const int64_t share = 2 * h.range > kHistMinShare ? 2 * h.range : kHistMinShare;
  const int64_t by_bytes = kHistMaxPartialBytes / (bins * int64_t(acc_bytes ? acc_bytes : 4));
  const int64_t most = by_bytes < kHistMaxRows ? by_bytes : kHistMaxRows;
  h.rows = (n + share - 1) / share;
  h.rows = h.rows > most ? most : h.rows;
  if (h.rows < 1) h.rows = 1;
  return h;
}

inline size_t hist_workspace(const Hist& h, int64_t bins, size_t acc_bytes) {
  return size_t(h.rows) * size_t(bins) * (h.global ? 8 : acc_bytes ? acc_bytes : 4);
}

inline int64_t range_rows(int64_t n) {
  const int64_t r = (n + 8191) / 8192;
  return r < 1 ? 1 : r > kRangeRows ? kRangeRows : r;
}

}  // namespace plan
