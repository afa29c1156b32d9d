// sort family, CUDA: the first k of each row's stable sort, and the gradient
// scatter (tinycuda/sort.h; the keys in shared/sort_math.h, the plan in
// shared/sort_plan.h).
//
// Every dtype is sorted as an unsigned key of its width B (1, 2, 4 or 8
// bytes), made from x's bits as it is loaded; the pair (key, index) travels,
// the index a uint32 (rows of up to 2^32 - 1 elements). Written out: the index
// as int64, and the value's bits from the key (or, for a float zero or NaN,
// whose key drops the sign or payload, from x at the index). Digits are 8 bits:
// a pass a key byte, least significant first, each pass a stable sort by its
// digit, so the passes together sort stably by key.
//
// The building block: a group of W warps holds a tile of W x 32 x ITEMS
// pairs in registers, warp-striped (warp w, lane l, item i: tile position
// w*32*ITEMS + i*32 + l, so an item's loads are coalesced and a warp's positions
// one contiguous run), and ranks it on one digit (rank_tile): within a warp,
// item by item, __match_any_sync finds the lanes holding the same digit, the
// lowest of them adds their count to the warp's counter of that digit in shared
// memory and every lane's rank is the counter before plus its peers on lower
// lanes; then each thread turns the counters of 256 / (32 W) digits into
// offsets, digit-major (every warp's digit 0, then digit 1, ...), and a scan of
// the threads' totals gives the tile positions. Equal digits keep their tile
// order: the rank is stable. exchange() moves the pairs to their positions
// through shared memory.
//
// Plans (plan::sort):
// block   n <= 4096: one group a row (a warp for rows up to 128 (4 items a
//         thread) or 512 (16), four of them a block; 4 warps x 16 items up to
//         2048, 8 up to 4096): load the row (keys past n are ~0 and sort last),
//         a rank and an exchange a key byte, write the first k. One launch; no
//         workspace.
// radix   a segmented LSD radix sort (classic, three kernels a pass: Merrill and
//         Grimshaw's reduce-then-scan). A row's tiles of 4096 (8 warps x 16) go
//         in chunks of tiles_per_chunk, one block a chunk (at most 256 chunks a
//         row: one wave of blocks on an H100/H200).
//           upsweep    the chunk's digit counts (shared-memory atomics into a
//                      histogram a warp, summed) -> counts[row][digit][chunk]
//           scan       a row's counts, digit-major, exclusive: where each
//                      chunk's pairs of each digit start in the row
//           downsweep  tile by tile: rank_tile, the pairs to their sorted tile
//                      positions in shared memory, then read back in order
//                      (thread t: t, t + 256, ...) and stored at the chunk's
//                      running start of their digit + their place among the
//                      tile's pairs of that digit: runs of one digit go to
//                      consecutive addresses. The starts then advance by the
//                      tile's counts.
//         Buffers ping-pong between the workspace (A) and the outputs (B: the
//         values as keys, the int64 indices' first half as uint32), or a second
//         workspace buffer when the outputs cannot hold them; the first pass
//         reads x (keys made on the load, indices counted), the last writes the
//         outputs. Bytes a pass: the upsweep reads the keys, the downsweep reads
//         and writes keys and indices (fp32: 4 + 16 = 20 B an element; CUB's
//         onesweep, one kernel a pass with decoupled look-back, moves 16).
// select  topk, k <= n / 2, n > 4096: a radix select. A round a key byte, most
//         significant first: every tile's histogram of that digit over the keys
//         whose higher digits match the prefix found so far (shared-memory
//         atomics, then integer global atomics into the row's histogram: exact,
//         so deterministic), then a warp a row finds the digit holding the k-th
//         key. After the last round the k-th key K and how many keys equal to K
//         are taken (the first ones, by index, as the stable sort takes them)
//         are known; the tiles count their keys < K and == K, a scan gives each
//         tile its starts, and every key < K and every taken key == K goes to
//         the gathered [rows, k] pairs in row order. Those are then sorted: the
//         block plan (k <= 4096) or the radix plan over rows of k. Reads x
//         (key bytes + 2) times.
//
// sort_backward: grad_x cleared (cudaMemsetAsync), then a thread an element of
// grad_values writes it at its index (a device-side assert, as torch's, for an
// index out of [0, n)).
#include <cstdint>

#include "kit/cuda_utils.cuh"
#include "kit/index.cuh"
#include "kit/prefix.cuh"
#include "kit/reduce.cuh"
#include "../shared/sort_math.h"
#include "../shared/sort_plan.h"

namespace {

constexpr unsigned kFull = 0xffffffffu;
constexpr int kBins = plan::kBins;
constexpr int kWarpGroups = 4;  // one-warp groups a block
constexpr int kRadixWarps = plan::kRadixThreads / 32;
constexpr int kRadixItems = plan::kRadixItems;
constexpr int kTile = int(plan::kRadixTile);

template <class B> __device__ __forceinline__ unsigned digit_of(B key, int shift) {
  return unsigned(key >> shift) & 0xffu;
}

// ---------------------------------------------------------------------------
// a group's tile: ranks and the exchange

template <int W, int ITEMS> struct Group {
  static constexpr int kThreads = 32 * W, kTile = kThreads * ITEMS;
  int tid, warp, lane;
  __device__ explicit Group(int t) : tid(t), warp(t >> 5), lane(t & 31) {}
  __device__ int pos(int i) const { return warp * 32 * ITEMS + i * 32 + lane; }
  __device__ static void sync() {
    if constexpr (W == 1) __syncwarp();
    else __syncthreads();
  }
};

template <class B, int W, int ITEMS> struct TileSmem {
  union {
    B keys[Group<W, ITEMS>::kTile];
    uint32_t idx[Group<W, ITEMS>::kTile];
  } ex;
  uint16_t offset[W][kBins];  // a warp's counts of each digit, then where its pairs of that digit go
  unsigned warp_total[W];
};

// dest[i]: item i's tile position after a stable sort of the tile on the digit at `shift`. After it,
// s.offset[0][d] is the tile's first position of digit d.
template <class B, int W, int ITEMS>
__device__ __forceinline__ void rank_tile(const Group<W, ITEMS>& g, TileSmem<B, W, ITEMS>& s, const B (&key)[ITEMS],
                                          int shift, int (&dest)[ITEMS]) {
  using G = Group<W, ITEMS>;
  for (int d = g.lane; d < kBins; d += 32) s.offset[g.warp][d] = 0;
  __syncwarp();
  const unsigned lt = lanemask_lt();
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const unsigned d = digit_of(key[i], shift);
    const unsigned peers = __match_any_sync(kFull, d);
    const unsigned below = __popc(peers & lt);
    const unsigned base = s.offset[g.warp][d];
    __syncwarp();
    if (below == 0) s.offset[g.warp][d] = uint16_t(base + __popc(peers));
    __syncwarp();
    dest[i] = int(base + below);
  }
  G::sync();
  // digits d0 .. d0 + kPer - 1 a thread: their warps' counts into offsets within the thread's run
  constexpr int kPer = kBins / G::kThreads;
  static_assert(kPer >= 1 && kBins % G::kThreads == 0, "a group of at most 256 threads");
  const int d0 = g.tid * kPer;
  unsigned run = 0;
#pragma unroll
  for (int j = 0; j < kPer; ++j)
#pragma unroll
    for (int w = 0; w < W; ++w) {
      const unsigned c = s.offset[w][d0 + j];
      s.offset[w][d0 + j] = uint16_t(run);
      run += c;
    }
  unsigned warp_sum;
  unsigned before = warp_exclusive_sum(run, g.lane, &warp_sum);
  if constexpr (W > 1) {
    if (g.lane == 0) s.warp_total[g.warp] = warp_sum;
    G::sync();
    for (int w = 0; w < g.warp; ++w) before += s.warp_total[w];
  }
#pragma unroll
  for (int j = 0; j < kPer; ++j)
#pragma unroll
    for (int w = 0; w < W; ++w) s.offset[w][d0 + j] = uint16_t(s.offset[w][d0 + j] + before);
  G::sync();
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) dest[i] += s.offset[g.warp][digit_of(key[i], shift)];
}

// v to the tile positions dest (a permutation of the tile) through buf, then back in the group's striped order
template <class T, int W, int ITEMS>
__device__ __forceinline__ void permute(const Group<W, ITEMS>& g, T* buf, T (&v)[ITEMS], const int (&dest)[ITEMS]) {
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) buf[dest[i]] = v[i];
  Group<W, ITEMS>::sync();
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) v[i] = buf[g.pos(i)];
  Group<W, ITEMS>::sync();
}

// the pairs, keys then indices through the one buffer
template <class B, int W, int ITEMS>
__device__ __forceinline__ void exchange(const Group<W, ITEMS>& g, TileSmem<B, W, ITEMS>& s, B (&key)[ITEMS],
                                         uint32_t (&idx)[ITEMS], const int (&dest)[ITEMS]) {
  permute(g, s.ex.keys, key, dest);
  permute(g, s.ex.idx, idx, dest);
}

// ---------------------------------------------------------------------------
// where pairs come from and go

template <class B> struct SortIo {
  KeyMap<B> m;
  const B* x;             // [rows, xn]: the keys' elements (values are read back from it)
  const B* keys;          // [rows, n] pairs to sort instead of x's rows (topk's gathered ones), or NULL
  const uint32_t* idx;
  B* values;              // [rows, k], or NULL
  int64_t* indices;       // [rows, k]
  int64_t xn, n, k;       // x's row length, the sorted length, the outputs' row length
};

// the pair at position p < n of row r of the sort's input
template <class B, bool PAIRS>
__device__ __forceinline__ void load_pair(const SortIo<B>& io, int64_t r, int64_t p, B& key, uint32_t& idx) {
  if constexpr (PAIRS) {
    key = io.keys[r * io.n + p], idx = io.idx[r * io.n + p];
  } else {
    key = io.m.key(io.x[r * io.xn + p]), idx = uint32_t(p);
  }
}

template <class B>
__device__ __forceinline__ void write_out(const SortIo<B>& io, int64_t r, int64_t j, B key, uint32_t idx) {
  io.indices[r * io.k + j] = int64_t(idx);
  if (io.values) io.values[r * io.k + j] = io.m.invertible(key) ? io.m.bits(key) : io.x[r * io.xn + idx];
}

// ---------------------------------------------------------------------------
// block plan: a group a row

template <int W> constexpr int block_threads() { return W == 1 ? 32 * kWarpGroups : 32 * W; }

template <class B, int W, int ITEMS, bool PAIRS>
__global__ void __launch_bounds__(block_threads<W>())
block_sort_kernel(SortIo<B> io, int64_t rows) {
  using G = Group<W, ITEMS>;
  constexpr int kGroups = W == 1 ? kWarpGroups : 1;
  __shared__ TileSmem<B, W, ITEMS> smem[kGroups];
  const int gi = int(threadIdx.x) / G::kThreads;
  const G g(int(threadIdx.x) % G::kThreads);
  TileSmem<B, W, ITEMS>& s = smem[gi];
  // r is uniform over the group (a warp, or the whole block), so every lane of it takes every barrier
  for (int64_t r = int64_t(blockIdx.x) * kGroups + gi; r < rows; r += int64_t(gridDim.x) * kGroups) {
    B key[ITEMS];
    uint32_t idx[ITEMS];
    int dest[ITEMS];
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const int p = g.pos(i);
      if (p < io.n) load_pair<B, PAIRS>(io, r, p, key[i], idx[i]);
      else key[i] = KeyMap<B>::kOnes, idx[i] = uint32_t(p);  // past the row: last, in position order
    }
    for (int shift = 0; shift < int(8 * sizeof(B)); shift += 8) {
      rank_tile(g, s, key, shift, dest);
      exchange(g, s, key, idx, dest);
    }
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
      if (g.pos(i) < io.k) write_out(io, r, g.pos(i), key[i], idx[i]);
  }
}

// ---------------------------------------------------------------------------
// radix plan: upsweep, scan, downsweep a pass

template <class B> struct RadixPass {
  SortIo<B> io;                       // x (or the gathered pairs) and the outputs
  const B* keys_in;                   // this pass's pairs, [rows, n] (a later pass)
  const uint32_t* idx_in;
  B* keys_out;                        // where it puts them (not the last pass)
  uint32_t* idx_out;
  uint32_t* counts;                   // [rows][256][chunks]
  int64_t tiles, chunks, tiles_per_chunk;
  int shift;
};

// the key at position p < n of row r for this pass
template <class B, bool FIRST, bool PAIRS>
__device__ __forceinline__ void pass_pair(const RadixPass<B>& a, int64_t r, int64_t p, B& key, uint32_t& idx) {
  if constexpr (FIRST) load_pair<B, PAIRS>(a.io, r, p, key, idx);
  else key = a.keys_in[r * a.io.n + p], idx = a.idx_in[r * a.io.n + p];
}

// the key alone (the upsweep's)
template <class B, bool FIRST, bool PAIRS>
__device__ __forceinline__ B pass_key(const RadixPass<B>& a, int64_t r, int64_t p) {
  if constexpr (FIRST && !PAIRS) return a.io.m.key(a.io.x[r * a.io.xn + p]);
  else if constexpr (FIRST) return a.io.keys[r * a.io.n + p];
  else return a.keys_in[r * a.io.n + p];
}

template <class B, bool FIRST, bool PAIRS>
__global__ void __launch_bounds__(plan::kRadixThreads)
radix_upsweep_kernel(RadixPass<B> a) {
  __shared__ unsigned hist[kRadixWarps][kBins];
  const int tid = int(threadIdx.x), warp = tid >> 5;
  const int64_t row = int64_t(blockIdx.x) / a.chunks, chunk = int64_t(blockIdx.x) % a.chunks;
  for (int i = tid; i < kRadixWarps * kBins; i += plan::kRadixThreads) (&hist[0][0])[i] = 0;
  __syncthreads();
  const int64_t t0 = chunk * a.tiles_per_chunk, t1 = min(a.tiles, t0 + a.tiles_per_chunk);
  const int64_t end = min(a.io.n, t1 * kTile);
  for (int64_t base = t0 * kTile; base < end; base += kTile) {
    B key[kRadixItems];
#pragma unroll
    for (int i = 0; i < kRadixItems; ++i) {  // all loads first: 16 in flight a thread
      const int64_t p = base + i * plan::kRadixThreads + tid;
      key[i] = p < end ? pass_key<B, FIRST, PAIRS>(a, row, p) : B(0);
    }
#pragma unroll
    for (int i = 0; i < kRadixItems; ++i)
      if (base + i * plan::kRadixThreads + tid < end) atomicAdd(&hist[warp][digit_of(key[i], a.shift)], 1u);
  }
  __syncthreads();
  unsigned c = 0;
#pragma unroll
  for (int w = 0; w < kRadixWarps; ++w) c += hist[w][tid];
  a.counts[(row * kBins + tid) * a.chunks + chunk] = c;
}

// exclusive prefix sums of `segments` runs of `len` uint32 (a block a run), in place: a thread a contiguous
// piece, the pieces' totals scanned across the block
constexpr int kScanThreads = 256;
__global__ void __launch_bounds__(kScanThreads)
scan_segments_kernel(uint32_t* data, int64_t len) {
  __shared__ unsigned warp_total[kScanThreads / 32];
  uint32_t* seg = data + int64_t(blockIdx.x) * len;
  const int tid = int(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int64_t per = (len + kScanThreads - 1) / kScanThreads, lo = min(len, tid * per), hi = min(len, lo + per);
  unsigned sum = 0;
  for (int64_t i = lo; i < hi; ++i) sum += seg[i];
  unsigned total;
  unsigned before = warp_exclusive_sum(sum, lane, &total);
  if (lane == 0) warp_total[warp] = total;
  __syncthreads();
  for (int w = 0; w < warp; ++w) before += warp_total[w];
  for (int64_t i = lo; i < hi; ++i) {
    const unsigned v = seg[i];
    seg[i] = before;
    before += v;
  }
}

template <class B, bool FIRST, bool PAIRS, bool LAST>
__global__ void __launch_bounds__(plan::kRadixThreads)
radix_downsweep_kernel(RadixPass<B> a) {
  using G = Group<kRadixWarps, kRadixItems>;
  __shared__ TileSmem<B, kRadixWarps, kRadixItems> s;
  __shared__ uint32_t next[kBins];  // the chunk's next row position of each digit
  const G g(int(threadIdx.x));
  const int tid = g.tid;
  const int64_t row = int64_t(blockIdx.x) / a.chunks, chunk = int64_t(blockIdx.x) % a.chunks;
  next[tid] = a.counts[(row * kBins + tid) * a.chunks + chunk];  // read after rank_tile's barriers
  const int64_t t0 = chunk * a.tiles_per_chunk, t1 = min(a.tiles, t0 + a.tiles_per_chunk);
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t base = t * kTile;
    const int valid = int(min(int64_t(kTile), a.io.n - base));
    B key[kRadixItems];
    uint32_t idx[kRadixItems];
    int dest[kRadixItems];
#pragma unroll
    for (int i = 0; i < kRadixItems; ++i) {
      const int q = g.pos(i);
      if (q < valid) pass_pair<B, FIRST, PAIRS>(a, row, base + q, key[i], idx[i]);
      else key[i] = KeyMap<B>::kOnes, idx[i] = 0;  // past the row: digit 255, after the row's own
    }
    rank_tile(g, s, key, a.shift, dest);
    // the keys, then the indices, to their sorted tile positions; sorted position q = j * 256 + tid (read back in
    // that order) goes to row position next[d] + (q - the tile's first q of d)
#pragma unroll
    for (int i = 0; i < kRadixItems; ++i) s.ex.keys[dest[i]] = key[i];
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kRadixItems; ++j) key[j] = s.ex.keys[j * plan::kRadixThreads + tid];
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kRadixItems; ++i) s.ex.idx[dest[i]] = idx[i];
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kRadixItems; ++j) {
      const int q = j * plan::kRadixThreads + tid;
      if (q >= valid) continue;
      const unsigned d = digit_of(key[j], a.shift);
      const int64_t to = next[d] + unsigned(q - s.offset[0][d]);
      const uint32_t i = s.ex.idx[q];
      if constexpr (LAST) {
        if (to < a.io.k) write_out(a.io, row, to, key[j], i);
      } else {
        a.keys_out[row * a.io.n + to] = key[j];
        a.idx_out[row * a.io.n + to] = i;
      }
    }
    __syncthreads();  // every thread's reads of next[] above, before it moves on
    // the tile's count of each digit (padding is digit 255's, past `valid`)
    const unsigned first = s.offset[0][tid], last = tid + 1 < kBins ? s.offset[0][tid + 1] : unsigned(valid);
    next[tid] += last - first;
    __syncthreads();  // next, offsets and the exchange buffer, before the next tile
  }
}

// ---------------------------------------------------------------------------
// select plan (topk)

template <class B> struct Select {
  KeyMap<B> m;
  const B* x;                 // [rows, n]
  int64_t n, k, tiles;        // tiles of kTile a row
  uint32_t* hist;             // [rows][sizeof(B)][256], cleared
  unsigned long long* state;  // [rows][2]: the prefix (the k-th key, after the last round), how many of it to take
  uint32_t* tile_counts;      // [rows][2][tiles]: keys < K, keys == K; scanned into each tile's starts
  B* keys;                    // [rows, k]: the gathered pairs
  uint32_t* idx;
};

// the digits above `shift` of a key
template <class B> __device__ __forceinline__ B above(int shift) {
  return shift + 8 >= int(8 * sizeof(B)) ? B(0) : B(B(~B(0)) << (shift + 8));
}

template <class B>
__global__ void __launch_bounds__(plan::kRadixThreads)
select_histogram_kernel(Select<B> a, int round) {
  __shared__ unsigned hist[kBins];
  const int tid = int(threadIdx.x);
  const int64_t row = int64_t(blockIdx.x) / a.tiles, t = int64_t(blockIdx.x) % a.tiles;
  hist[tid] = 0;
  const int shift = 8 * (int(sizeof(B)) - 1 - round);
  const B mask = above<B>(shift), prefix = round ? B(a.state[row * 2]) : B(0);
  __syncthreads();
  B key[kRadixItems];
#pragma unroll
  for (int i = 0; i < kRadixItems; ++i) {
    const int64_t p = t * kTile + i * plan::kRadixThreads + tid;
    key[i] = p < a.n ? a.m.key(a.x[row * a.n + p]) : B(0);
  }
#pragma unroll
  for (int i = 0; i < kRadixItems; ++i) {
    const int64_t p = t * kTile + i * plan::kRadixThreads + tid;
    if (p < a.n && B(key[i] & mask) == prefix) atomicAdd(&hist[digit_of(key[i], shift)], 1u);
  }
  __syncthreads();
  if (hist[tid]) atomicAdd(&a.hist[(row * int64_t(sizeof(B)) + round) * kBins + tid], hist[tid]);
}

// a warp a row: the digit whose keys hold the remaining k-th one
template <class B>
__global__ void __launch_bounds__(256)
select_bucket_kernel(Select<B> a, int round, int64_t rows) {
  const int lane = int(threadIdx.x) & 31;
  const int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (row >= rows) return;  // whole warps
  const int shift = 8 * (int(sizeof(B)) - 1 - round);
  const uint32_t* h = a.hist + (row * int64_t(sizeof(B)) + round) * kBins;
  unsigned c[8], sum = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) c[j] = h[lane * 8 + j], sum += c[j];
  unsigned total;
  const unsigned before = warp_exclusive_sum(sum, lane, &total);
  const unsigned long long need = round ? a.state[row * 2 + 1] : (unsigned long long)a.k;
  const B prefix = round ? B(a.state[row * 2]) : B(0);
  const unsigned hit = __ballot_sync(kFull, before < need && need <= before + sum);
  if (lane != __ffs(hit) - 1) return;
  unsigned long long acc = before;
  int d = lane * 8;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    if (acc + c[j] >= need) break;
    acc += c[j], ++d;
  }
  a.state[row * 2] = (unsigned long long)B(prefix | B(B(d) << shift));
  a.state[row * 2 + 1] = need - acc;
}

// each tile's count of keys < K and == K, summed as one 64-bit word (less << 32 | equal: each at most 4096)
template <class B>
__global__ void __launch_bounds__(plan::kRadixThreads)
select_count_kernel(Select<B> a) {
  __shared__ unsigned long long scratch[32];
  const int tid = int(threadIdx.x);
  const int64_t row = int64_t(blockIdx.x) / a.tiles, t = int64_t(blockIdx.x) % a.tiles;
  const B kth = B(a.state[row * 2]);
  unsigned long long counts = 0;
#pragma unroll
  for (int i = 0; i < kRadixItems; ++i) {
    const int64_t p = t * kTile + i * plan::kRadixThreads + tid;
    if (p < a.n) {
      const B key = a.m.key(a.x[row * a.n + p]);
      counts += (key < kth ? 1ull << 32 : 0ull) + (key == kth ? 1ull : 0ull);
    }
  }
  counts = block_reduce(counts, Sum{}, 0ull, scratch, kRadixWarps);
  if (tid == 0) {
    a.tile_counts[(row * 2) * a.tiles + t] = uint32_t(counts >> 32);
    a.tile_counts[(row * 2 + 1) * a.tiles + t] = uint32_t(counts);
  }
}

// every key < K, and the first `take` keys == K, to the gathered pairs, in row order: a key's place is the
// count of those before it (the tile's starts, then the warps', then the earlier items' and lanes')
template <class B>
__global__ void __launch_bounds__(plan::kRadixThreads)
select_gather_kernel(Select<B> a) {
  using G = Group<kRadixWarps, kRadixItems>;
  __shared__ unsigned warp_less[kRadixWarps], warp_equal[kRadixWarps];
  const G g(int(threadIdx.x));
  const int64_t row = int64_t(blockIdx.x) / a.tiles, t = int64_t(blockIdx.x) % a.tiles;
  const B kth = B(a.state[row * 2]);
  const unsigned long long take = a.state[row * 2 + 1];
  B key[kRadixItems];
  bool in[kRadixItems];
  unsigned less = 0, equal = 0;
#pragma unroll
  for (int i = 0; i < kRadixItems; ++i) {
    const int64_t p = t * kTile + g.pos(i);
    in[i] = p < a.n;
    key[i] = in[i] ? a.m.key(a.x[row * a.n + p]) : B(0);
  }
#pragma unroll
  for (int i = 0; i < kRadixItems; ++i) {
    less += __popc(__ballot_sync(kFull, in[i] && key[i] < kth));
    equal += __popc(__ballot_sync(kFull, in[i] && key[i] == kth));
  }
  if (g.lane == 0) warp_less[g.warp] = less, warp_equal[g.warp] = equal;
  __syncthreads();
  unsigned long long run_less = a.tile_counts[(row * 2) * a.tiles + t];
  unsigned long long run_equal = a.tile_counts[(row * 2 + 1) * a.tiles + t];
  for (int w = 0; w < g.warp; ++w) run_less += warp_less[w], run_equal += warp_equal[w];
  const unsigned lt = lanemask_lt();
#pragma unroll
  for (int i = 0; i < kRadixItems; ++i) {
    const bool is_less = in[i] && key[i] < kth, is_equal = in[i] && key[i] == kth;
    const unsigned bl = __ballot_sync(kFull, is_less), be = __ballot_sync(kFull, is_equal);
    const unsigned long long l = run_less + __popc(bl & lt), e = run_equal + __popc(be & lt);
    if (is_less || (is_equal && e < take)) {
      const int64_t to = row * a.k + int64_t(l + (e < take ? e : take));
      a.keys[to] = key[i];
      a.idx[to] = uint32_t(t * kTile + g.pos(i));
    }
    run_less += __popc(bl), run_equal += __popc(be);
  }
}

// ---------------------------------------------------------------------------
// sort_backward

template <class B>
__global__ void __launch_bounds__(256)
scatter_kernel(const B* __restrict__ g, const int64_t* __restrict__ indices, B* __restrict__ gx, int64_t total,
               FastDiv k, int64_t n) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = indices[e];
    TC_DEVICE_REQUIRE(i >= 0 && i < n, "tinycuda::sort_backward: an index is out of range [0, n)");
    if (i >= 0 && i < n) gx[k.div(e) * n + i] = g[e];
  }
}

// ---------------------------------------------------------------------------
// launchers

template <class B, int W, int ITEMS, bool PAIRS>
tc_status launch_block_class(const SortIo<B>& io, int64_t rows, cudaStream_t stream) {
  constexpr int kGroups = W == 1 ? kWarpGroups : 1;
  block_sort_kernel<B, W, ITEMS, PAIRS><<<grid_1d(rows, kGroups, 1 << 20), block_threads<W>(), 0, stream>>>(io, rows);
  return check_launch("sort");
}

// the block plan over rows of io.n <= kBlockSortMax
template <class B, bool PAIRS>
tc_status launch_block(const SortIo<B>& io, int64_t rows, cudaStream_t stream) {
  const plan::BlockClass c = plan::block_class(io.n);
  if (c.warps == 1 && c.items == 4) return launch_block_class<B, 1, 4, PAIRS>(io, rows, stream);
  if (c.warps == 1) return launch_block_class<B, 1, 16, PAIRS>(io, rows, stream);
  if (c.warps == 4) return launch_block_class<B, 4, 16, PAIRS>(io, rows, stream);
  return launch_block_class<B, 8, 16, PAIRS>(io, rows, stream);
}

// the radix plan over rows of io.n (PAIRS: io.keys / io.idx hold them); a, b: the ping-pong buffers
template <class B, bool PAIRS>
tc_status launch_radix(const SortIo<B>& io, int64_t rows, const plan::Sort& pl, B* keys_a, uint32_t* idx_a,
                       B* keys_b, uint32_t* idx_b, uint32_t* counts, cudaStream_t stream) {
  constexpr int kPasses = int(sizeof(B));
  TC_REQUIRE(rows * pl.rx.chunks <= INT32_MAX, "sort: %lld chunks, more than a grid holds",
             (long long)(rows * pl.rx.chunks));
  RadixPass<B> a{io, nullptr, nullptr, nullptr, nullptr, counts, pl.rx.tiles, pl.rx.chunks, pl.rx.tiles_per_chunk, 0};
  const unsigned grid = unsigned(rows * pl.rx.chunks), scan_grid = unsigned(rows);
  const int64_t scan_len = int64_t(kBins) * pl.rx.chunks;
  for (int pass = 0; pass < kPasses; ++pass) {
    a.shift = 8 * pass;
    // pass p writes A when an odd number of passes follow it, else B (the outputs' buffer): the last reads A
    const bool to_a = (kPasses - 1 - pass) % 2 == 1;
    a.keys_out = to_a ? keys_a : keys_b, a.idx_out = to_a ? idx_a : idx_b;
    const bool first = pass == 0, last = pass == kPasses - 1;
    if (first) radix_upsweep_kernel<B, true, PAIRS><<<grid, plan::kRadixThreads, 0, stream>>>(a);
    else radix_upsweep_kernel<B, false, PAIRS><<<grid, plan::kRadixThreads, 0, stream>>>(a);
    TC_RETURN_IF_ERROR(check_launch("sort"));
    scan_segments_kernel<<<scan_grid, kScanThreads, 0, stream>>>(counts, scan_len);
    TC_RETURN_IF_ERROR(check_launch("sort"));
    if (first && last) radix_downsweep_kernel<B, true, PAIRS, true><<<grid, plan::kRadixThreads, 0, stream>>>(a);
    else if (first) radix_downsweep_kernel<B, true, PAIRS, false><<<grid, plan::kRadixThreads, 0, stream>>>(a);
    else if (last) radix_downsweep_kernel<B, false, PAIRS, true><<<grid, plan::kRadixThreads, 0, stream>>>(a);
    else radix_downsweep_kernel<B, false, PAIRS, false><<<grid, plan::kRadixThreads, 0, stream>>>(a);
    TC_RETURN_IF_ERROR(check_launch("sort"));
    a.keys_in = a.keys_out, a.idx_in = a.idx_out;
  }
  return TC_OK;
}

template <class B, bool PAIRS>
tc_status launch_sorted(const SortIo<B>& io, int64_t rows, const plan::Sort& pl, char* ws, cudaStream_t stream) {
  if (io.n <= plan::kBlockSortMax) return launch_block<B, PAIRS>(io, rows, stream);
  B* keys_b = pl.b_in_workspace ? reinterpret_cast<B*>(ws + pl.keys_b) : static_cast<B*>(io.values);
  uint32_t* idx_b = pl.b_in_workspace ? reinterpret_cast<uint32_t*>(ws + pl.idx_b)
                                      : reinterpret_cast<uint32_t*>(io.indices);
  return launch_radix<B, PAIRS>(io, rows, pl, reinterpret_cast<B*>(ws + pl.keys_a),
                                reinterpret_cast<uint32_t*>(ws + pl.idx_a), keys_b, idx_b,
                                reinterpret_cast<uint32_t*>(ws + pl.counts), stream);
}

template <class B>
tc_status launch_select(const tc_sort_params* p, KeyMap<B> m, const plan::Sort& pl, char* ws, cudaStream_t stream) {
  const int64_t rows = p->rows;
  TC_REQUIRE(rows * pl.select_tiles <= INT32_MAX, "sort: %lld tiles, more than a grid holds",
             (long long)(rows * pl.select_tiles));
  const Select<B> a{m, static_cast<const B*>(p->x), p->n, p->k, pl.select_tiles,
                    reinterpret_cast<uint32_t*>(ws + pl.hist), reinterpret_cast<unsigned long long*>(ws + pl.state),
                    reinterpret_cast<uint32_t*>(ws + pl.tile_counts), reinterpret_cast<B*>(ws + pl.gathered_keys),
                    reinterpret_cast<uint32_t*>(ws + pl.gathered_idx)};
  TC_RETURN_IF_ERROR(cuda_status("sort", "cudaMemsetAsync",
                                 cudaMemsetAsync(ws + pl.cleared_from, 0, pl.cleared_bytes, stream)));
  const unsigned grid = unsigned(rows * pl.select_tiles);
  for (int round = 0; round < int(sizeof(B)); ++round) {
    select_histogram_kernel<B><<<grid, plan::kRadixThreads, 0, stream>>>(a, round);
    TC_RETURN_IF_ERROR(check_launch("sort"));
    select_bucket_kernel<B><<<grid_1d(rows, 8), 256, 0, stream>>>(a, round, rows);
    TC_RETURN_IF_ERROR(check_launch("sort"));
  }
  select_count_kernel<B><<<grid, plan::kRadixThreads, 0, stream>>>(a);
  TC_RETURN_IF_ERROR(check_launch("sort"));
  scan_segments_kernel<<<unsigned(rows * 2), kScanThreads, 0, stream>>>(a.tile_counts, pl.select_tiles);
  TC_RETURN_IF_ERROR(check_launch("sort"));
  select_gather_kernel<B><<<grid, plan::kRadixThreads, 0, stream>>>(a);
  TC_RETURN_IF_ERROR(check_launch("sort"));
  const SortIo<B> io{m, a.x, a.keys, a.idx, static_cast<B*>(p->values), p->indices, p->n, p->k, p->k};
  return launch_sorted<B, true>(io, rows, pl, ws, stream);
}

}  // namespace

tc_status tc_sort_cuda(const tc_sort_params* p) {
  TC_RETURN_IF_ERROR(sort_check(p));
  if (p->rows * p->k == 0) return TC_OK;
  TC_REQUIRE(p->n <= int64_t(UINT32_MAX), "sort: rows of more than 2^32 - 1 elements are not supported on CUDA, got "
             "n = %lld", (long long)p->n);
  return dispatch_sort(p->dtype, p->descending != 0, "sort", [&](auto m) -> tc_status {
    using B = typename decltype(m)::Bits;
    const plan::Sort pl = plan::sort(p->rows, p->n, p->k, sizeof(B), p->values != nullptr);
    TC_REQUIRE(pl.total == 0 || (p->workspace && p->workspace_bytes >= pl.total),
               "sort: workspace of %zu bytes needed, %zu given", pl.total, p->workspace_bytes);
    char* ws = static_cast<char*>(p->workspace);
    const cudaStream_t stream = as_stream(p->stream);
    if (pl.kind == plan::kSortSelect) return launch_select<B>(p, m, pl, ws, stream);
    const SortIo<B> io{m, static_cast<const B*>(p->x), nullptr, nullptr, static_cast<B*>(p->values), p->indices,
                       p->n, p->n, p->k};
    return launch_sorted<B, false>(io, p->rows, pl, ws, stream);
  });
}

tc_status tc_sort_backward_cuda(const tc_sort_backward_params* p) {
  TC_RETURN_IF_ERROR(sort_check(p));
  if (p->rows * p->n == 0) return TC_OK;
  return dispatch_float_bits(p->dtype, "sort_backward", [&](auto tag) -> tc_status {
    using B = decltype(tag);
    const cudaStream_t stream = as_stream(p->stream);
    TC_RETURN_IF_ERROR(cuda_status("sort_backward", "cudaMemsetAsync",
                                   cudaMemsetAsync(p->grad_x, 0, size_t(p->rows * p->n) * sizeof(B), stream)));
    const int64_t total = p->rows * p->k;
    if (total == 0) return TC_OK;
    scatter_kernel<B><<<grid_1d(total, 256, 1 << 20), 256, 0, stream>>>(
        static_cast<const B*>(p->grad_values), p->indices, static_cast<B*>(p->grad_x), total,
        FastDiv(uint64_t(p->k)), p->n);
    return check_launch("sort_backward");
  });
}
