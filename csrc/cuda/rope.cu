// rope: q and k rotated by their tokens' cos/sin rows (tinycuda/rope.h), in
// one launch for both; the backward (transpose) and the in-place form are
// the same kernel. Per pair (x0, x1) at positions (i0, i1) of a head:
//   o0 = x0 cos[i0] - x1 sin[i0],  o1 = x1 cos[i1] + x0 sin[i1]
// (rope_math.h; the backward swaps and negates the two sines once per row).
//
// Launch: a block of (bx, by, bz) threads does bz tokens; thread x owns
// chunk x of a head: V pairs, the two V-element vectors that hold them
// (rotate half: [xV, xV + V) and the same h = D/2 further; interleaved: the
// 2V elements from 2xV, pairs adjacent); y steps over the token's Hq + Hk
// heads, q's then k's. A thread loads its chunk's cos and sin once per token
// (4 vectors, held as floats) and reuses them for every head it does, so
// cos/sin cost one read per token, not per head. V = 16 bytes of T when every
// pointer is 16-byte aligned, every stride a multiple of V and D a multiple
// of 2V (D = 128: 8 threads a head in 16-bit types); else V = 1 (scalar).
// by is the fewest head lanes that do the heads in the same number of rounds
// as 256 / bx lanes (40 heads, bx = 8: 20 lanes of 2 heads, not 32 lanes of
// which 8 do a second), bz tokens fill the block up to 256 threads.
//
// Memory-bound: reads q and k and writes them once, plus one cos and sin row
// per token ([1, S, D] tables stay in L2). LLaMA-3 8B's shape, B 4, S 4096,
// Hq 32, Hk 8, D 128, bf16: 2 x 168 MB + 2 MB = 338 MB, 113 us at 3.0 TB/s;
// the backward moves the same bytes. ptxas (sm_90a): 32 to 74 registers (bf16
// rotate half, 16-byte vectors, the most: cos, sin and a head's chunk held as
// floats), no spills.
//
// Position ids are read on the device only: one outside [0, table_rows)
// stops the kernel with a device-side assert (TC_DEVICE_REQUIRE) and its
// token is skipped, so nothing is read out of bounds.
#include <algorithm>

#include "../shared/rope_check.h"
#include "../shared/rope_math.h"
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

template <bool INTERLEAVED, class T, int V>
__device__ __forceinline__ void split(Vec<T, V> a, Vec<T, V> b, acc_t<T> (&x0)[V], acc_t<T> (&x1)[V]) {
#pragma unroll
  for (int j = 0; j < V; ++j) {
    x0[j] = to_acc(INTERLEAVED ? run(a, b, 2 * j) : a.v[j]);
    x1[j] = to_acc(INTERLEAVED ? run(a, b, 2 * j + 1) : b.v[j]);
  }
}

template <bool INTERLEAVED, class T, int V>
__device__ __forceinline__ void merge(const acc_t<T> (&o0)[V], const acc_t<T> (&o1)[V], Vec<T, V>& a,
                                      Vec<T, V>& b) {
#pragma unroll
  for (int j = 0; j < V; ++j) {
    (INTERLEAVED ? run(a, b, 2 * j) : a.v[j]) = from_acc<T>(o0[j]);
    (INTERLEAVED ? run(a, b, 2 * j + 1) : b.v[j]) = from_acc<T>(o1[j]);
  }
}

// No __restrict__ on x and o: in place they are one buffer (each thread
// reads its two vectors before it writes them, and no other thread touches them).
template <class T, int V, bool INTERLEAVED>
__global__ void __launch_bounds__(kThreads) rope_kernel(const tc_rope_params p) {
  using A = acc_t<T>;
  const int64_t D = p.head_dim, chunks = D / 2 / V, tokens = p.batch * p.seqlen;
  const int64_t heads = p.heads_q + p.heads_k;
  const T* cos = static_cast<const T*>(p.cos);
  const T* sin = static_cast<const T*>(p.sin);
  for (int64_t t = int64_t(blockIdx.x) * blockDim.z + threadIdx.z; t < tokens; t += int64_t(gridDim.x) * blockDim.z) {
    const int64_t b = t / p.seqlen, s = t - b * p.seqlen;
    int64_t row = s;
    if (p.position_ids) {
      row = p.position_ids[b * p.pos_stride_b + s];
      const bool ok = row >= 0 && row < p.table_rows;
      TC_DEVICE_REQUIRE(ok, "tinycuda::rope: position id out of range [0, P)");
      if (!ok) continue;
    }
    const int64_t cs = b * p.cs_stride_b + row * D;
    for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
      // the chunk's two vectors: element offsets in the head
      const int64_t e0 = INTERLEAVED ? 2 * c * V : c * V, e1 = INTERLEAVED ? e0 + V : e0 + D / 2;
      A c0[V], c1[V], s0[V], s1[V];
      split<INTERLEAVED>(load_vec<T, V>(cos + cs + e0), load_vec<T, V>(cos + cs + e1), c0, c1);
      split<INTERLEAVED>(load_vec<T, V>(sin + cs + e0), load_vec<T, V>(sin + cs + e1), s0, s1);
      if (p.transpose) {
#pragma unroll
        for (int j = 0; j < V; ++j) rope_transpose_sin(s0[j], s1[j]);
      }
      for (int64_t head = threadIdx.y; head < heads; head += blockDim.y) {
        const bool is_q = head < p.heads_q;
        const int64_t h = is_q ? head : head - p.heads_q;
        // strides picked field by field: indexing the parameter arrays through a
        // pointer would copy the parameters to local memory
        const T* x = static_cast<const T*>(is_q ? p.q : p.k) + b * (is_q ? p.q_stride[0] : p.k_stride[0]) +
                     h * (is_q ? p.q_stride[1] : p.k_stride[1]) + s * (is_q ? p.q_stride[2] : p.k_stride[2]);
        T* o = static_cast<T*>(is_q ? p.q_out : p.k_out) + b * (is_q ? p.q_out_stride[0] : p.k_out_stride[0]) +
               h * (is_q ? p.q_out_stride[1] : p.k_out_stride[1]) + s * (is_q ? p.q_out_stride[2] : p.k_out_stride[2]);
        A x0[V], x1[V], o0[V], o1[V];
        split<INTERLEAVED>(load_vec<T, V>(x + e0), load_vec<T, V>(x + e1), x0, x1);
#pragma unroll
        for (int j = 0; j < V; ++j) rope_pair<A>(x0[j], x1[j], c0[j], c1[j], s0[j], s1[j], o0[j], o1[j]);
        Vec<T, V> a, bv;
        merge<INTERLEAVED>(o0, o1, a, bv);
        store_vec(o + e0, a);
        store_vec(o + e1, bv);
      }
    }
  }
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
  const int64_t chunks = p.head_dim / 2 / V, heads = p.heads_q + p.heads_k, tokens = p.batch * p.seqlen;
  const int bx = int(std::min<int64_t>(chunks, kThreads));
  const int64_t lanes = std::min<int64_t>(heads, kThreads / bx);
  const int64_t rounds = (heads + lanes - 1) / lanes;
  const int by = int((heads + rounds - 1) / rounds);
  const int bz = int(std::clamp<int64_t>(kThreads / (bx * by), 1, std::min<int64_t>(64, tokens)));
  const dim3 block(bx, by, bz);
  const unsigned grid = grid_1d(tokens, bz);
  cudaStream_t s = as_stream(p.stream);
  if (p.interleaved)
    rope_kernel<T, V, true><<<grid, block, 0, s>>>(p);
  else
    rope_kernel<T, V, false><<<grid, block, 0, s>>>(p);
  return check_launch(op);
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
