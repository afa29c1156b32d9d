// One vector type for every kernel: Vec<T, N>, N elements of T loaded or
// stored as one access (default: 16 bytes, one LDG.128 / STG.128, the widest
// a thread can make: 4 fp32, 8 fp16/bf16, 2 fp64). N = 1 is the scalar
// instance a kernel takes for misaligned buffers or odd widths.
//
// load_cs / store_cs are the streaming forms (evict-first): for data read or
// written once that should not push out lines other blocks will still read
// (cross_entropy's second pass). prefetch_l2 asks L2 for a range a block will
// read soon (the norms' backward: its next rows while it reduces these).
// load_cols / store_cols move VEC columns of a row as the accumulator type,
// and rows_vectorizable says whether a launcher may take the Vec path.
#pragma once
#include <initializer_list>

#include "cuda_utils.cuh"

template <class T, int N = int(16 / sizeof(T))>
struct alignas(N * sizeof(T)) Vec {
  static constexpr int size = N;
  T v[N];
};

template <class T, int N = int(16 / sizeof(T))>
__device__ __forceinline__ Vec<T, N> load_vec(const T* p) {
  return *reinterpret_cast<const Vec<T, N>*>(p);
}
template <class T, int N>
__device__ __forceinline__ void store_vec(T* p, const Vec<T, N>& v) {
  *reinterpret_cast<Vec<T, N>*>(p) = v;
}

// Streaming 16-byte access (ld/st.global.cs, evict-first) as four 32-bit
// words, one register each: cross_entropy holds its 16-bit rows so and
// converts a word (two elements) at a time. A Vec<__nv_bfloat16> there instead
// (loaded by load_vec, bit-cast to words) took the 256-thread bf16 kernel
// from 75 to 80 registers and the 1024-thread fp64 one from 232 to 256 bytes
// of spills (ptxas, sm_90a).
__device__ __forceinline__ uint4 load_cs(const void* p) { return __ldcs(static_cast<const uint4*>(p)); }
__device__ __forceinline__ void store_cs(void* p, uint4 w) { __stcs(static_cast<uint4*>(p), w); }

// Asks L2 for [p, p + bytes) and returns at once: a hint, no data comes back
// and nothing waits for it. One thread issues it for the whole range (one
// cp.async.bulk.prefetch, sm_90); p and bytes must be multiples of 16. Before
// sm_90 it does nothing.
__device__ __forceinline__ void prefetch_l2(const void* p, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(p), "r"(bytes));
#endif
}

// VEC columns of a row at column c, as the accumulator type (VEC 1: one):
// the row-tiled kernels' loads (scale_bias_relu, kit/colsum.cuh).
template <class T, int VEC>
__device__ __forceinline__ void load_cols(const T* p, int64_t c, acc_t<T> (&out)[VEC]) {
  if constexpr (VEC > 1) {
    Vec<T> v = load_vec(p + c);
#pragma unroll
    for (int j = 0; j < VEC; ++j) out[j] = to_acc(v.v[j]);
  } else {
    out[0] = to_acc(p[c]);
  }
}

template <class T, int VEC>
__device__ __forceinline__ void store_cols(T* p, int64_t c, const acc_t<T> (&in)[VEC]) {
  if constexpr (VEC > 1) {
    Vec<T> v;
#pragma unroll
    for (int j = 0; j < VEC; ++j) v.v[j] = from_acc<T>(in[j]);
    store_vec(p + c, v);
  } else {
    p[c] = from_acc<T>(in[0]);
  }
}

// Whether rows of `cols` elements of T at each of ptrs (NULL ones skipped)
// can move as Vec<T>: every row starts on the 16-byte grid.
template <class T>
inline bool rows_vectorizable(int64_t cols, std::initializer_list<const void*> ptrs) {
  if ((cols * int64_t(sizeof(T))) % 16 != 0) return false;
  for (const void* p : ptrs)
    if (!aligned16(p)) return false;  // aligned16(NULL) holds
  return true;
}
