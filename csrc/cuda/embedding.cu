// embedding, CUDA: the table lookup and the gradient of the table
// (tinycuda/embedding.h; the backward's workspace in shared/embedding_plan.h).
//
//   forward   out[i, :] = weight[input[i], :]                      i < N, weight [V, D]
//   backward  grad_weight[v, :] = sum of grad_out[i, :] over the i with input[i] == v,
//             0 for ids no position names and for padding_idx
//
// Forward: a row copy, one thread a vector of an output row: VEC = 16 bytes of
// T when D is a multiple of VEC and weight and out are 16-byte aligned, else
// one element (D = 3, 17, an offset view). A thread finds its row by FastDiv
// (no 64-bit divide) and reads the row's index, which the row's other threads
// read too (an L1 broadcast). 256 threads a block, grid-stride. Bytes: N D s
// read (rows of repeated ids from L2) + N D s written + 8 N: GPT-2's 8 x 1024
// tokens of D = 768 in bf16 are 25.2 MB, ~9 us at 2.8 TB/s.
//
// Backward, deterministic without float atomics: the positions are grouped by
// id in a fixed order and each group is summed in that order.
//   1. keys    a thread a position: its id as a sort key of the plan's width
//              (int16 for GPT-2's 50304 ids); an index out of range asserts and
//              becomes the largest key, which sorts last and which no sum reads
//   2. sort    the sort family's stable sort of the keys (tc_sort_cuda: one
//              block in shared memory up to 4096 positions, else an LSD radix
//              sort, three launches a key byte): the keys in order and each
//              one's position; one id's positions stay in increasing order
//   3. clear   grad_weight zeroed (cudaMemsetAsync): the rows no position
//              names, and padding_idx's, stay 0
//   4. sums    a warp a (chunk, slice): chunk c is sorted positions [32c,
//              32c + 32), lane l holding position 32c + l's key and row; the
//              slice is 32 x VEC columns (the grid's y), VEC a lane, VEC = 16
//              bytes of T as in the forward. The warp walks its chunk in order,
//              8 grad_out rows loaded before any is added (8 vector loads in
//              flight a lane), summing into VEC floats (doubles) a lane. Where
//              the id changes its sum is done: an id lying wholly in the chunk
//              is rounded and written to grad_weight; the chunk's first id, if
//              the chunk before holds it too, goes to the chunk's partial slot
//              0, and its last id, if only chunks after hold it too, to slot 1
//   5. carry   a warp a (chunk, slice) again: where an id begins in chunk c
//              and runs on past it, c's slot 1 plus the slot 0 of each chunk
//              after that it fills or ends in, in chunk order, rounded once
// Every sum thus has one order, fixed by input (the chunks hold the positions
// in increasing order, the partials are added in chunk order): bit-identical
// run to run, whatever the timing.
//
// Launch shape of the sums and the carry: blocks of 4 warps, (chunks / 4,
// slices) blocks; GPT-2's 8192 positions in bf16 are 256 chunks and 3 slices
// of 256 columns: 192 blocks, 768 warps, each with 8 x 16 bytes in flight a
// lane. ptxas (sm_90a): the sums hold 126 registers in bf16 (94 fp16, 86 fp32,
// 88 fp64, 64-80 on the scalar path), the carry at most 40, the gather 27, the
// keys 28; no spills.
//
// Bytes, GPT-2's 8 x 1024 tokens into 50304 x 768 in bf16: the clear writes
// V D s = 77.3 MB, the sums read N D s = 12.6 MB and write each distinct id's
// row again (at most 12.6 MB); keys, sort and partials (8 bytes a chunk and
// column: 1.6 MB) stay in L2: ~100 MB, ~36 us at 2.8 TB/s, the clear most of
// it. Writing each row once instead (a warp a row, its positions found by a
// search of the sorted keys) would save the second write of the hit rows but
// serialize a frequent id's whole sum in one warp. Launches: keys, the sort
// (1 up to 4096 positions, else 3 a key byte: 6 for int16), the clear, sums,
// carry.
#include <cstdint>
#include <cstdio>

#include "tinycuda/sort.h"
#include "../shared/embedding_check.h"
#include "../shared/embedding_plan.h"
#include "kit/index.cuh"
#include "kit/vec.cuh"

namespace {

constexpr unsigned kFull = 0xffffffffu;
constexpr int kThreads = 256;                             // the forward's and the keys' blocks
constexpr int kWarps = 4;                                 // warps a block of the sums and the carry
constexpr int kChunk = int(plan::kEmbeddingChunk);        // sorted positions a warp sums
constexpr int kBatch = 8;                                 // grad_out rows a lane loads before adding
static_assert(kChunk == 32, "a chunk is a warp: lane l holds its position l");

// ---------------------------------------------------------------------------
// forward

template <class T, int VEC>
__global__ void __launch_bounds__(kThreads)
gather_kernel(const int64_t* __restrict__ input, const T* __restrict__ weight, T* __restrict__ out, int64_t total,
              FastDiv per_row, int64_t v, int64_t d) {
  for (int64_t e = int64_t(blockIdx.x) * kThreads + threadIdx.x; e < total; e += int64_t(gridDim.x) * kThreads) {
    const int64_t i = per_row.div(e), col = (e - i * int64_t(per_row.d)) * VEC;
    const int64_t id = input[i];
    TC_DEVICE_REQUIRE(id >= 0 && id < v, "tinycuda::embedding: an index is out of range [0, num_embeddings)");
    if (id >= 0 && id < v) store_vec(out + i * d + col, load_vec<T, VEC>(weight + id * d + col));
  }
}

// ---------------------------------------------------------------------------
// backward

// The sort's keys are int16/int32/int64 bits: the sort orders a signed integer
// by its bits with the sign flipped, so an id stored as id ^ sign sorts as id.
template <class K>
__global__ void __launch_bounds__(kThreads)
keys_kernel(const int64_t* __restrict__ input, K* __restrict__ bits, int64_t n, int64_t v) {
  constexpr K kSign = K(K(1) << (8 * sizeof(K) - 1));
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < n; i += int64_t(gridDim.x) * kThreads) {
    const int64_t id = input[i];
    const bool ok = id >= 0 && id < v;
    TC_DEVICE_REQUIRE(ok, "tinycuda::embedding_backward: an index is out of range [0, num_embeddings)");
    bits[i] = K((ok ? K(id) : K(~K(0))) ^ kSign);
  }
}

// The sorted keys as ids (the width is uniform: one branch for the whole grid).
struct SortedIds {
  const void* bits;
  int width;  // bytes: 2, 4 or 8
  __device__ __forceinline__ uint64_t operator[](int64_t j) const {
    if (width == 2) return uint16_t(static_cast<const uint16_t*>(bits)[j] ^ 0x8000u);
    if (width == 4) return static_cast<const uint32_t*>(bits)[j] ^ 0x80000000u;
    return static_cast<const uint64_t*>(bits)[j] ^ (uint64_t(1) << 63);
  }
};

template <class T>
struct Sums {
  const T* grad_out;           // [n, d]
  T* grad_weight;              // [v, d]
  acc_t<T>* partials;          // [chunks][2][d]
  SortedIds ids;               // [n]
  const int64_t* perm;         // [n]: the position of each sorted id
  int64_t n, v, d, chunks;
  uint64_t padding;            // padding_idx, or ~0 (none)
  // an id whose row keeps its zeros: padding_idx, or the key of an index out of range
  __device__ __forceinline__ bool skipped(uint64_t id) const { return id >= uint64_t(v) || id == padding; }
};

template <class A, int VEC> __device__ __forceinline__ void clear(Vec<A, VEC>& a) {
#pragma unroll
  for (int k = 0; k < VEC; ++k) a.v[k] = A{};  // +0; A(0) is no __half under torch's NO_HALF_CONVERSIONS
}

template <class T, int VEC>
__device__ __forceinline__ void store_row(T* dst, const Vec<acc_t<T>, VEC>& a) {
  Vec<T, VEC> y;
#pragma unroll
  for (int k = 0; k < VEC; ++k) y.v[k] = from_acc<T>(a.v[k]);
  store_vec(dst, y);
}

template <class T, int VEC>
__global__ void __launch_bounds__(kWarps * 32) chunk_sums_kernel(const Sums<T> a) {
  using A = acc_t<T>;
  const int lane = threadIdx.x & 31;
  const int64_t c = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (c >= a.chunks) return;  // a whole warp: no block-wide sync follows
  const int64_t s = c * kChunk;
  const int len = int(a.n - s < kChunk ? a.n - s : kChunk);
  uint64_t id = ~uint64_t(0);
  int64_t row = 0;
  if (lane < len) id = a.ids[s + lane], row = a.perm[s + lane];
  const uint64_t first_id = __shfl_sync(kFull, id, 0), last_id = __shfl_sync(kFull, id, len - 1);
  const bool joins_before = s > 0 && a.ids[s - 1] == first_id;       // the chunk before holds the first id too
  const bool joins_after = s + len < a.n && a.ids[s + len] == last_id;  // a chunk after holds the last id too
  for (int64_t col0 = int64_t(blockIdx.y) * 32 * VEC; col0 < a.d; col0 += int64_t(gridDim.y) * 32 * VEC) {
    const int64_t col = col0 + int64_t(lane) * VEC;
    const bool active = col < a.d;  // D is a multiple of VEC: a lane's vector is whole or absent
    Vec<A, VEC> acc;
    clear(acc);
    int first = 0;  // where the current id's run began in the chunk
    for (int j0 = 0; j0 < len; j0 += kBatch) {
      Vec<T, VEC> x[kBatch];
      uint64_t ids[kBatch];
#pragma unroll
      for (int r = 0; r < kBatch; ++r) {
        const int j = (j0 + r) & 31;  // past len: the lane's ~0, a skipped id
        ids[r] = __shfl_sync(kFull, id, j);
        const int64_t rj = __shfl_sync(kFull, row, j);
        if (active && j0 + r < len && !a.skipped(ids[r])) x[r] = load_vec<T, VEC>(a.grad_out + rj * a.d + col);
        else clear(x[r]);
      }
#pragma unroll
      for (int r = 0; r < kBatch; ++r) {
        const int j = j0 + r;
        if (j >= len) break;  // uniform
#pragma unroll
        for (int k = 0; k < VEC; ++k) acc.v[k] += to_acc(x[r].v[k]);
        // the run ends at the chunk's end or where the next id differs (the batch's, or the next batch's first)
        const bool ends =
            j == len - 1 || (r + 1 < kBatch ? ids[r + 1] : __shfl_sync(kFull, id, (j + 1) & 31)) != ids[r];
        if (!ends) continue;
        if (active && !a.skipped(ids[r])) {
          const bool head = first == 0 && joins_before, tail = j == len - 1 && joins_after;
          if (head || tail) store_vec(a.partials + ((c * 2 + (head ? 0 : 1)) * a.d + col), acc);
          else store_row<T, VEC>(a.grad_weight + int64_t(ids[r]) * a.d + col, acc);
        }
        clear(acc);
        first = j + 1;
      }
    }
  }
}

template <class T, int VEC>
__global__ void __launch_bounds__(kWarps * 32) carry_kernel(const Sums<T> a) {
  using A = acc_t<T>;
  const int lane = threadIdx.x & 31;
  const int64_t c = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (c >= a.chunks) return;
  const int64_t s = c * kChunk, e = s + kChunk;
  if (e >= a.n) return;                                                 // the last chunk: nothing runs past it
  const uint64_t id = a.ids[e - 1];
  if (a.ids[e] != id || a.skipped(id)) return;                          // its last id ends in it
  if (s > 0 && a.ids[s] == id && a.ids[s - 1] == id) return;            // began before it: an earlier chunk's
  for (int64_t col0 = int64_t(blockIdx.y) * 32 * VEC; col0 < a.d; col0 += int64_t(gridDim.y) * 32 * VEC) {
    const int64_t col = col0 + int64_t(lane) * VEC;
    if (col >= a.d) continue;
    Vec<A, VEC> acc = load_vec<A, VEC>(a.partials + (c * 2 + 1) * a.d + col);
    for (int64_t next = c + 1;; ++next) {
      const Vec<A, VEC> y = load_vec<A, VEC>(a.partials + next * 2 * a.d + col);
#pragma unroll
      for (int k = 0; k < VEC; ++k) acc.v[k] += y.v[k];
      const int64_t end = (next + 1) * kChunk;
      if (end >= a.n || a.ids[end] != id) break;
    }
    store_row<T, VEC>(a.grad_weight + int64_t(id) * a.d + col, acc);
  }
}

// ---------------------------------------------------------------------------
// launchers

template <class T>
int vec_width(int64_t d, const void* p, const void* q) {
  constexpr int kVec = int(16 / sizeof(T));
  return d % kVec == 0 && aligned16(p) && aligned16(q) ? kVec : 1;
}

template <class T, int VEC>
tc_status launch_gather(const tc_embedding_params* p, cudaStream_t stream) {
  const int64_t per_row = p->embedding_dim / VEC, total = p->num_indices * per_row;
  gather_kernel<T, VEC><<<grid_1d(total, kThreads, 1 << 20), kThreads, 0, stream>>>(
      p->input, static_cast<const T*>(p->weight), static_cast<T*>(p->out), total, FastDiv(uint64_t(per_row)),
      p->num_embeddings, p->embedding_dim);
  return check_launch("embedding");
}

template <class K>
tc_status launch_keys(const tc_embedding_backward_params* p, void* bits, cudaStream_t stream) {
  keys_kernel<K><<<grid_1d(p->num_indices, kThreads, 1 << 20), kThreads, 0, stream>>>(
      p->input, static_cast<K*>(bits), p->num_indices, p->num_embeddings);
  return check_launch("embedding_backward");
}

template <class T, int VEC>
tc_status launch_sums(const Sums<T>& a, cudaStream_t stream) {
  const int64_t blocks = (a.chunks + kWarps - 1) / kWarps, slices = (a.d + 32 * VEC - 1) / (32 * VEC);
  TC_REQUIRE(blocks <= INT32_MAX, "embedding_backward: %lld positions, more than a grid holds", (long long)a.n);
  const dim3 grid(unsigned(blocks), unsigned(slices < 65535 ? slices : 65535));  // more slices: the kernels loop
  chunk_sums_kernel<T, VEC><<<grid, kWarps * 32, 0, stream>>>(a);
  TC_RETURN_IF_ERROR(check_launch("embedding_backward"));
  carry_kernel<T, VEC><<<grid, kWarps * 32, 0, stream>>>(a);
  return check_launch("embedding_backward");
}

}  // namespace

tc_status tc_embedding_cuda(const tc_embedding_params* p) {
  TC_RETURN_IF_ERROR(embedding_check(p));
  if (p->num_indices * p->embedding_dim == 0) return TC_OK;
  return dispatch_cuda(p->dtype, "embedding", [&](auto tag) -> tc_status {
    using T = decltype(tag);
    const cudaStream_t stream = as_stream(p->stream);
    if (vec_width<T>(p->embedding_dim, p->weight, p->out) > 1)
      return launch_gather<T, int(16 / sizeof(T))>(p, stream);
    return launch_gather<T, 1>(p, stream);
  });
}

tc_status tc_embedding_backward_cuda(const tc_embedding_backward_params* p) {
  TC_RETURN_IF_ERROR(embedding_check(p));
  const char* op = "embedding_backward";
  const int64_t n = p->num_indices, v = p->num_embeddings, d = p->embedding_dim;
  if (v * d == 0) return TC_OK;
  TC_REQUIRE(n <= int64_t(UINT32_MAX), "%s: more than 2^32 - 1 indices are not supported on CUDA, got %lld", op,
             (long long)n);
  return dispatch_cuda(p->dtype, op, [&](auto tag) -> tc_status {
    using T = decltype(tag);
    const cudaStream_t stream = as_stream(p->stream);
    const plan::EmbeddingBackward pl = plan::embedding_backward(n, v, d, sizeof(acc_t<T>));
    TC_REQUIRE(pl.total == 0 || (p->workspace && p->workspace_bytes >= pl.total),
               "%s: workspace of %zu bytes needed, %zu given", op, pl.total, p->workspace_bytes);
    char* ws = static_cast<char*>(p->workspace);
    if (pl.chunks) {
      void* keys = ws + pl.keys;
      TC_RETURN_IF_ERROR(pl.key_bytes == 2   ? launch_keys<uint16_t>(p, keys, stream)
                         : pl.key_bytes == 4 ? launch_keys<uint32_t>(p, keys, stream)
                                             : launch_keys<uint64_t>(p, keys, stream));
      const tc_sort_params sort{.dtype = pl.key_dtype, .rows = 1, .n = n, .k = n, .descending = 0, .x = keys,
                                .values = ws + pl.sorted, .indices = reinterpret_cast<int64_t*>(ws + pl.perm),
                                .workspace = pl.sort_bytes ? ws + pl.sort : nullptr,
                                .workspace_bytes = pl.sort_bytes, .stream = p->stream};
      if (const tc_status s = tc_sort_cuda(&sort); s != TC_OK) {
        char why[512];
        std::snprintf(why, sizeof(why), "%s", tc_last_error());
        return tc_fail(s, "%s: sorting the ids: %s", op, why);
      }
    }
    TC_RETURN_IF_ERROR(cuda_status(op, "cudaMemsetAsync",
                                   cudaMemsetAsync(p->grad_weight, 0, size_t(v * d) * sizeof(T), stream)));
    if (!pl.chunks) return TC_OK;
    const Sums<T> a{static_cast<const T*>(p->grad_out), static_cast<T*>(p->grad_weight),
                    reinterpret_cast<acc_t<T>*>(ws + pl.partials), SortedIds{ws + pl.sorted, int(pl.key_bytes)},
                    reinterpret_cast<const int64_t*>(ws + pl.perm), n, v, d, pl.chunks,
                    p->padding_idx < 0 ? ~uint64_t(0) : uint64_t(p->padding_idx)};
    // the vector path also stores VEC floats (doubles) at a time into the partials: 32-byte units for 16-bit T
    const bool ws_aligned = (reinterpret_cast<uintptr_t>(ws) & 31) == 0;
    if (ws_aligned && vec_width<T>(d, p->grad_out, p->grad_weight) > 1)
      return launch_sums<T, int(16 / sizeof(T))>(a, stream);
    return launch_sums<T, 1>(a, stream);
  });
}
