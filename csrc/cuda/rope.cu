// rope: q and k rotated by their tokens' cos/sin rows (tinycuda/rope.h), in
// one launch for both; the backward (transpose) and the in-place form are
// the same kernel. Per pair (x0, x1) at positions (i0, i1) of a head:
//   o0 = x0 cos[i0] - x1 sin[i0],  o1 = x1 cos[i1] + x0 sin[i1]
// (rope_math.h; the backward swaps and negates the two sines once per row).
//
// Launch: one thread a (token, head, chunk): chunk c of a head is V pairs,
// the two V-element vectors that hold them (rotate half: [cV, cV + V) and the
// same h = D/2 further; interleaved: the 2V elements from 2cV, pairs
// adjacent). A token's (head, chunk) pairs are its lanes: a block is (bx
// lanes, by tokens), 64 threads; the grid is (token tiles, lane tiles). Each thread loads its
// token's cos and sin vectors itself: the other heads of the token read the
// same 4 vectors, so they come from L1 or L2, and no thread holds them (as
// floats, 32 registers at V = 8) across a loop. V = 16 bytes of T when every
// pointer is 16-byte aligned, every stride a multiple of V and D a multiple
// of 2V (D = 128: 8 chunks a head in 16-bit types); else V = 1 (scalar).
//
// Memory-bound: reads q and k and writes them once, plus one cos and sin row
// per token ([1, S, D] tables stay in L2). LLaMA-3 8B's shape, B 4, S 4096,
// Hq 32, Hk 8, D 128, bf16: 2 x 168 MB + 2 MB = 338 MB, 113 us at 3.0 TB/s;
// the backward moves the same bytes: H100, 123.6 us (2.72 TB/s; a device
// copy of the bytes 118.4, torch.compile 122.1, the walk before 164.3). Why
// this walk (scripts/rope_walks.cu, H200, 4x4096x32x32 bf16 forward, us; a
// device copy of the bytes: 134):
//   a block a token, every head of it, cos/sin held across the heads: 268
//     (74 registers; a thread's next head waits on its last store)
//   the same with 2 or 4 heads' loads issued before any store: 146, 172
//     (78 and 123 registers)
//   one (token, head, chunk) a thread, 48 registers: 139, and 139 for a plain
//     copy through the same walk: the transpose of a [B, S, H, D] projection
//     to contiguous [B, H, S, D] output costs ~3%, the rotation nothing
// so the earlier guess (head-major layouts, 256-byte runs 1 MB apart) was
// wrong: the copy reaches 96% of a device copy in every layout; registers
// and each thread's chain of dependent loads were the cost.
//
// Position ids are read on the device only: one outside [0, table_rows)
// stops the kernel with a device-side assert (TC_DEVICE_REQUIRE) and its
// token is skipped, so nothing is read out of bounds.
#include <algorithm>

#include "../shared/rope_check.h"
#include "../shared/rope_math.h"
#include "kit/index.cuh"
#include "kit/vec.cuh"

namespace {

constexpr int kThreads = 256;

// The pairs of a chunk from its two vectors: rotate half pairs element j of
// the first with element j of the second; interleaved pairs elements 2j and
// 2j + 1 of the two read as one run of 2V (element k: a's k, or b's k - V).
template <class T, int V>
__device__ __forceinline__ T& run(Vec<T, V>& a, Vec<T, V>& b, int k) {
  return k < V ? a.v[k < V ? k : 0] : b.v[k < V ? 0 : k - V];
}

// Element k (0 or 1) of pair j of a chunk: rotate half's (a[j], b[j]), interleaved's
// (run[2j], run[2j + 1]). Read one element at a time where the math needs it, a
// chunk's 64 bf16 held as 32 floats took the kernel from 64 to 80 registers.
template <bool INTERLEAVED, class T, int V>
__device__ __forceinline__ T& elem(Vec<T, V>& a, Vec<T, V>& b, int j, int k) {
  return INTERLEAVED ? run(a, b, 2 * j + k) : (k ? b.v[j] : a.v[j]);
}

// Chunk c of token t's head `head` (q's heads, then k's).
template <class T, int V, bool INTERLEAVED>
__device__ __forceinline__ void rotate(const tc_rope_params& p, const FastDiv& seqlen, int64_t t, int64_t head,
                                       int64_t c) {
  using A = acc_t<T>;
  const int64_t D = p.head_dim;
  const int64_t b = seqlen.div(t), s = t - b * p.seqlen;
  int64_t row = s;
  if (p.position_ids) {
    row = p.position_ids[b * p.pos_stride_b + s];
    const bool ok = row >= 0 && row < p.table_rows;
    TC_DEVICE_REQUIRE(ok, "tinycuda::rope: position id out of range [0, P)");
    if (!ok) return;
  }
  const bool is_q = head < p.heads_q;
  const int64_t h = is_q ? head : head - p.heads_q;
  // strides picked field by field: indexing the parameter arrays through a
  // pointer would copy the parameters to local memory
  const T* x = static_cast<const T*>(is_q ? p.q : p.k) + b * (is_q ? p.q_stride[0] : p.k_stride[0]) +
               h * (is_q ? p.q_stride[1] : p.k_stride[1]) + s * (is_q ? p.q_stride[2] : p.k_stride[2]);
  T* o = static_cast<T*>(is_q ? p.q_out : p.k_out) + b * (is_q ? p.q_out_stride[0] : p.k_out_stride[0]) +
         h * (is_q ? p.q_out_stride[1] : p.k_out_stride[1]) + s * (is_q ? p.q_out_stride[2] : p.k_out_stride[2]);
  const T* cos = static_cast<const T*>(p.cos) + b * p.cs_stride_b + row * D;
  const T* sin = static_cast<const T*>(p.sin) + b * p.cs_stride_b + row * D;
  // the chunk's two vectors: element offsets in the head
  const int64_t e0 = INTERLEAVED ? 2 * c * V : c * V, e1 = INTERLEAVED ? e0 + V : e0 + D / 2;
  // x first: its loads are the ones from DRAM
  Vec<T, V> xa = load_vec<T, V>(x + e0), xb = load_vec<T, V>(x + e1);
  Vec<T, V> ca = load_vec<T, V>(cos + e0), cb = load_vec<T, V>(cos + e1);
  Vec<T, V> sa = load_vec<T, V>(sin + e0), sb = load_vec<T, V>(sin + e1);
  Vec<T, V> a, bv;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    A s0 = to_acc(elem<INTERLEAVED>(sa, sb, j, 0)), s1 = to_acc(elem<INTERLEAVED>(sa, sb, j, 1)), o0, o1;
    if (p.transpose) rope_transpose_sin(s0, s1);
    rope_pair<A>(to_acc(elem<INTERLEAVED>(xa, xb, j, 0)), to_acc(elem<INTERLEAVED>(xa, xb, j, 1)),
                 to_acc(elem<INTERLEAVED>(ca, cb, j, 0)), to_acc(elem<INTERLEAVED>(ca, cb, j, 1)), s0, s1, o0, o1);
    elem<INTERLEAVED>(a, bv, j, 0) = from_acc<T>(o0);
    elem<INTERLEAVED>(a, bv, j, 1) = from_acc<T>(o1);
  }
  store_vec(o + e0, a);
  store_vec(o + e1, bv);
}

// No __restrict__ on x and o: in place they are one buffer (each thread
// reads its two vectors before it writes them, and no other thread touches them).
template <class T, int V, bool INTERLEAVED>
__global__ void __launch_bounds__(kThreads) rope_kernel(const tc_rope_params p, const FastDiv seqlen,
                                                        const FastDiv chunks, int64_t t0, int64_t lane0) {
  // no loop in here: a grid-stride loop over tokens, heads or chunks took the
  // bf16 kernel from 40 to 80 registers (ptxas, sm_90a); the launcher
  // covers sizes past the grid's limits with more launches instead. The
  // token's batch and the lane's head by FastDiv, not a 64-bit divide (~70
  // instructions before every thread's first load; H100 time unchanged
  // within 1% at the bench shapes, so the loads' latency hid them)
  const int64_t t = t0 + int64_t(blockIdx.x) * blockDim.y + threadIdx.y;
  const int64_t lane = lane0 + int64_t(blockIdx.y) * blockDim.x + threadIdx.x, head = chunks.div(lane);
  if (t < p.batch * p.seqlen && head < p.heads_q + p.heads_k)
    rotate<T, V, INTERLEAVED>(p, seqlen, t, head, lane - head * int64_t(chunks.d));
}

// Whether the 16-byte path applies: aligned buffers, strides and a head
// of whole chunk pairs.
template <int V>
bool vectorizable(const tc_rope_params& p) {
  bool ok = p.head_dim % (2 * V) == 0 && p.cs_stride_b % V == 0 && aligned16(p.cos) && aligned16(p.sin);
  if (p.heads_q) ok = ok && aligned16(p.q) && aligned16(p.q_out);
  if (p.heads_k) ok = ok && aligned16(p.k) && aligned16(p.k_out);
  for (int i = 0; i < 3; ++i) {
    if (p.heads_q) ok = ok && p.q_stride[i] % V == 0 && p.q_out_stride[i] % V == 0;
    if (p.heads_k) ok = ok && p.k_stride[i] % V == 0 && p.k_out_stride[i] % V == 0;
  }
  return ok;
}

template <class T, int V>
tc_status launch(const char* op, const tc_rope_params& p) {
  // lanes: a token's (head, chunk) pairs, one thread each
  const int64_t lanes = (p.heads_q + p.heads_k) * (p.head_dim / 2 / V), tokens = p.batch * p.seqlen;
  // 64 threads (8 heads of 8 chunks at D = 128 in 16-bit types): 1-2% faster
  // than 128 or 256 at every shape of rope_walks.cu
  const int bx = int(std::min<int64_t>(lanes, 64)), by = int(std::clamp<int64_t>(64 / bx, 1, tokens));
  const int64_t max_x = int64_t(INT32_MAX) * by, max_y = int64_t(65535) * bx;
  cudaStream_t s = as_stream(p.stream);
  auto kernel = p.interleaved ? rope_kernel<T, V, true> : rope_kernel<T, V, false>;
  for (int64_t t0 = 0; t0 < tokens; t0 += max_x)
    for (int64_t l0 = 0; l0 < lanes; l0 += max_y) {
      const dim3 grid(grid_1d(std::min(tokens - t0, max_x), by), grid_1d(std::min(lanes - l0, max_y), bx));
      kernel<<<grid, dim3(bx, by), 0, s>>>(p, FastDiv(uint64_t(p.seqlen)), FastDiv(uint64_t(p.head_dim / 2 / V)), t0,
                                           l0);
      TC_RETURN_IF_ERROR(check_launch(op));
    }
  return TC_OK;
}

}  // namespace

// ---------------------------------------------------------------------------
// launcher

tc_status tc_rope_cuda(const tc_rope_params* p) {
  TC_RETURN_IF_ERROR(rope_check(p));
  const char* op = rope_op(p);
  if (p->batch == 0 || p->seqlen == 0 || p->head_dim == 0 || p->heads_q + p->heads_k == 0) return TC_OK;
  return dispatch_cuda(p->dtype, op, [&](auto tag) -> tc_status {
    using T = decltype(tag);
    constexpr int V = Vec<T>::size;
    return vectorizable<V>(*p) ? launch<T, V>(op, *p) : launch<T, 1>(op, *p);
  });
}
