// How the CUDA scans cut their work, shared by the launchers and the
// workspace-size queries (which must agree, and must not need a device).
//   columns    inner > 1: a thread a column, down n
//   warp_rows  inner = 1, n <= kWarpRowMax: a warp a row, 32 elements a step
//   tiles      inner = 1, longer rows: tiles of kScanThreads x items elements,
//              one block each, chained within a row by decoupled look-back
//              through a tile-status array in the workspace
// items = 64 bytes of states a thread (16 fp32 sums, 8 logsumexp states, ...),
// so a tile's states take 16 KB of shared memory whatever the state.
#pragma once
#include <cstddef>
#include <cstdint>

namespace plan {

constexpr int kScanThreads = 256;
constexpr int64_t kWarpRowMax = 2048;

enum ScanKind { kScanColumns, kScanWarpRows, kScanTiles };

constexpr int scan_items(size_t state_bytes) {
  return state_bytes >= 32 ? 2 : int(64 / state_bytes) > 16 ? 16 : int(64 / state_bytes);
}

struct Scan {
  ScanKind kind = kScanColumns;
  int items = 16;
  int64_t tiles_per_row = 0, tiles = 0;
};

inline Scan scan(int64_t outer, int64_t n, int64_t inner, size_t state_bytes) {
  Scan s;
  s.items = scan_items(state_bytes);
  if (inner > 1) return s;
  s.kind = n <= kWarpRowMax ? kScanWarpRows : kScanTiles;
  if (s.kind == kScanTiles) {
    const int64_t tile = int64_t(kScanThreads) * s.items;
    s.tiles_per_row = (n + tile - 1) / tile;
    s.tiles = outer * s.tiles_per_row;
  }
  return s;
}

inline size_t align256(size_t b) { return (b + 255) / 256 * 256; }

// [tile counter, 256 B][flags: a uint32 a tile, 256-aligned][aggregates][inclusive prefixes];
// the launcher clears the counter and the flags
struct ScanWorkspace {
  size_t flags, aggregates, inclusive, cleared, total;
};
inline ScanWorkspace scan_workspace(const Scan& s, size_t state_bytes) {
  if (s.kind != kScanTiles) return {0, 0, 0, 0, 0};
  const size_t t = size_t(s.tiles), flags = 256, aggregates = flags + align256(t * 4);
  const size_t inclusive = aggregates + align256(t * state_bytes);
  return {flags, aggregates, inclusive, aggregates, inclusive + align256(t * state_bytes)};
}

}  // namespace plan
