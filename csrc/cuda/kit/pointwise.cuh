// One launcher for the elementwise kernels (relu, square, gelu, glu forward):
// out[i] = f(a[i], b[i]) (unary: f(a[i], 0)), computed in the accumulator
// type, with the element functors of shared/*_math.h that the CPU loop
// (cpu/kit/pointwise.h) runs too. The caller checks the arguments.
//
// Memory-bound: each thread moves one 16-byte vector per operand (4 fp32,
// 8 fp16/bf16); n = 8192^2 fp32 is 65536 blocks of 256 threads, ~64 KB in
// flight per SM for a binary op, well past the ~14 KB Little's law asks for
// at 3 TB/s and ~600 ns latency. Misaligned buffers take a scalar instance.
#pragma once
#include <cstdint>
#include <type_traits>

#include "../../shared/elementwise_check.h"
#include "index.cuh"
#include "vec.cuh"

template <class T, int VEC, bool BINARY, class F>
__global__ void __launch_bounds__(256)
pointwise_kernel(int64_t n, const T* __restrict__ a, const T* __restrict__ b,
                 T* __restrict__ out, F f) {
  using A = acc_t<T>;
  const int64_t v = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if constexpr (VEC > 1) {
    if (v < n / VEC) {
      Vec<T> va = load_vec(a + v * VEC), vb, vo;
      if constexpr (BINARY) vb = load_vec(b + v * VEC);
#pragma unroll
      for (int j = 0; j < VEC; ++j)
        vo.v[j] = from_acc<T>(f(to_acc(va.v[j]), BINARY ? to_acc(vb.v[j]) : A(0)));
      store_vec(out + v * VEC, vo);
    }
    // the last n % VEC elements, one per thread of the first threads
    const int64_t t = (n / VEC) * VEC + v;
    if (v < n % VEC) out[t] = from_acc<T>(f(to_acc(a[t]), BINARY ? to_acc(b[t]) : A(0)));
  } else {
    if (v < n) out[v] = from_acc<T>(f(to_acc(a[v]), BINARY ? to_acc(b[v]) : A(0)));
  }
}

template <bool BINARY, class F>
tc_status launch_pointwise(const char* op, tc_dtype dtype, int64_t n, const void* a,
                           const void* b, void* out, void* stream, F f) {
  if (n == 0) return TC_OK;
  return dispatch_cuda(dtype, op, [&](auto tag) -> tc_status {
    using T = decltype(tag);
    constexpr int V = Vec<T>::size;
    const T* pa = static_cast<const T*>(a);
    const T* pb = static_cast<const T*>(b);
    T* po = static_cast<T*>(out);
    cudaStream_t s = as_stream(stream);
    if (aligned16(a) && aligned16(out) && (!BINARY || aligned16(b))) {
      const int64_t threads = n / V > n % V ? n / V : n % V;
      pointwise_kernel<T, V, BINARY><<<grid_1d(threads, 256), 256, 0, s>>>(n, pa, pb, po, f);
    } else {
      TC_REQUIRE(n / 256 < INT32_MAX, "%s: too many elements for the unaligned path", op);
      pointwise_kernel<T, 1, BINARY><<<grid_1d(n, 256, INT32_MAX), 256, 0, s>>>(n, pa, pb, po, f);
    }
    return check_launch(op);
  });
}

// ---------------------------------------------------------------------------
// The strided form: out[i] = f(in_0[off_0(i)], ...) for operands that are
// views (sliced, transposed, broadcast: shared/elementwise_check.h's
// StridedLayout, already collapsed to its fewest dims) or host scalars, into
// a contiguous out. Each thread owns one 16-byte vector of out (4 fp32, 8
// fp16/bf16). Two instances:
//   INNER_VEC: every operand steps by 1 or 0 along the inner dim, whose size
//     the vector divides, and sits on the 16-byte grid: one division per
//     thread finds the row, then one LDG.128 (or one broadcast load) per
//     operand and one STG.128 (bias adds, row scales, contiguous slices);
//   otherwise: the first element's coordinates by division, then a step along
//     the inner dim per element (a carry re-divides), scalar loads and stores.

template <int NARGS> struct StridedArg {  // StridedLayout<NARGS> by value, with the operands
  int ndim;
  FastDiv sizes[8];  // kit/index.cuh: a thread's coordinates without a divide instruction
  int64_t strides[NARGS][8];
  const void* p[NARGS];  // NULL: scalar[k]
  double scalar[NARGS];
};

template <int NARGS>
__device__ __forceinline__ void strided_offsets(const StridedArg<NARGS>& l, int64_t i, int64_t* idx,
                                                int64_t* off) {
  if (l.ndim == 1) {  // no division: contiguous and 1-D-strided operands
    idx[0] = i;
    for (int k = 0; k < NARGS; ++k) off[k] = i * l.strides[k][0];
    return;
  }
  for (int k = 0; k < NARGS; ++k) off[k] = 0;
  for (int d = l.ndim - 1; d >= 0; --d) {
    const int64_t q = l.sizes[d].div(i);
    idx[d] = i - q * int64_t(l.sizes[d].d), i = q;
    for (int k = 0; k < NARGS; ++k) off[k] += idx[d] * l.strides[k][d];
  }
}

template <int NARGS, class A, class F> __device__ __forceinline__ A apply_args(const F& f, const A* v) {
  if constexpr (NARGS == 1) return f(v[0], A(0));
  else if constexpr (NARGS == 2) return f(v[0], v[1]);
  else return f(v[0], v[1], v[2]);
}

// Operand k's element at off, in A: every operand holds T but the first,
// which may hold C0 (where's bool condition, one byte, read as 0 or 1).
template <class S, class A> __device__ __forceinline__ A load_as(const void* p, int64_t off) {
  const S v = static_cast<const S*>(p)[off];
  if constexpr (std::is_same_v<S, uint8_t>) return A(v != 0);
  else return to_acc(v);
}

template <class T, class C0, class A>
__device__ __forceinline__ A operand_at(const void* p, int k, int64_t off) {
  return k == 0 ? load_as<C0, A>(p, off) : load_as<T, A>(p, off);
}

template <class T, class C0, int NARGS, bool INNER_VEC, class F>
__global__ void __launch_bounds__(256)
strided_kernel(int64_t n, StridedArg<NARGS> l, T* __restrict__ out, bool vec_store, F f) {
  using A = acc_t<T>;
  constexpr int V = Vec<T>::size;
  const int64_t i0 = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) * V;
  if (i0 >= n) return;
  int64_t idx[8], off[NARGS];
  strided_offsets(l, i0, idx, off);
  Vec<T> o;
  if constexpr (INNER_VEC) {
    A v[NARGS][V];
#pragma unroll
    for (int k = 0; k < NARGS; ++k) {
      const void* p = l.p[k];
      if (p && l.strides[k][l.ndim - 1] == 1) {
        if (k == 0 && !std::is_same_v<C0, T>) {
          // a byte mask: V consecutive bytes, coalesced across the warp
#pragma unroll
          for (int j = 0; j < V; ++j) v[k][j] = load_as<C0, A>(p, off[k] + j);
        } else {
          const Vec<T> in = load_vec(static_cast<const T*>(p) + off[k]);
#pragma unroll
          for (int j = 0; j < V; ++j) v[k][j] = to_acc(in.v[j]);
        }
      } else {
        const A s = p ? operand_at<T, C0, A>(p, k, off[k]) : A(l.scalar[k]);
#pragma unroll
        for (int j = 0; j < V; ++j) v[k][j] = s;
      }
    }
#pragma unroll
    for (int j = 0; j < V; ++j) {
      A e[NARGS];
#pragma unroll
      for (int k = 0; k < NARGS; ++k) e[k] = v[k][j];
      o.v[j] = from_acc<T>(apply_args<NARGS>(f, e));
    }
    store_vec(out + i0, o);
  } else {
    const int inner = l.ndim - 1;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      if (i0 + j < n) {
        A e[NARGS];
#pragma unroll
        for (int k = 0; k < NARGS; ++k) e[k] = l.p[k] ? operand_at<T, C0, A>(l.p[k], k, off[k]) : A(l.scalar[k]);
        o.v[j] = from_acc<T>(apply_args<NARGS>(f, e));
        if (inner < 0) break;  // one element
        if (++idx[inner] < int64_t(l.sizes[inner].d)) {
#pragma unroll
          for (int k = 0; k < NARGS; ++k) off[k] += l.strides[k][inner];
        } else {
          strided_offsets(l, i0 + j + 1, idx, off);
        }
      }
    }
    if (vec_store && i0 + V <= n) {
      store_vec(out + i0, o);
    } else {
      for (int j = 0; j < V && i0 + j < n; ++j) out[i0 + j] = o.v[j];
    }
  }
}

// Launches strided_kernel over `layout` for operands `ptrs` (NULL: the
// matching scalar; the first of element type C0, the others of the output's
// type), picking the INNER_VEC instance where it applies.
template <int NARGS, class C0 = void, class F>
tc_status launch_strided(const char* op, tc_dtype dtype, const StridedLayout<NARGS>& layout,
                         const void* const (&ptrs)[NARGS], const double (&scalars)[NARGS], void* out, void* stream,
                         F f) {
  if (layout.n == 0) return TC_OK;
  StridedArg<NARGS> l{layout.ndim};
  for (int d = 0; d < layout.ndim; ++d) {
    l.sizes[d] = FastDiv(uint64_t(layout.sizes[d]));
    for (int k = 0; k < NARGS; ++k) l.strides[k][d] = layout.strides[k][d];
  }
  for (int k = 0; k < NARGS; ++k) l.p[k] = ptrs[k], l.scalar[k] = scalars[k];
  return dispatch_cuda(dtype, op, [&](auto tag) -> tc_status {
    using T = decltype(tag);
    using First = std::conditional_t<std::is_void_v<C0>, T, C0>;
    constexpr int V = Vec<T>::size;
    const int inner = layout.ndim - 1;
    bool inner_vec = inner >= 0 && layout.sizes[inner] % V == 0 && aligned16(out);
    for (int k = 0; k < NARGS && inner_vec; ++k) {
      if (!ptrs[k]) continue;
      const int64_t si = layout.strides[k][inner];
      // a T operand's vector is one 16-byte load; a byte mask's V bytes need no alignment
      const bool aligned = k == 0 && !std::is_same_v<First, T> ? true : aligned16(ptrs[k]);
      inner_vec = si == 0 || (si == 1 && aligned);
      for (int d = 0; d < inner && inner_vec; ++d) inner_vec = si == 0 || layout.strides[k][d] % V == 0;
    }
    const unsigned grid = grid_1d((layout.n + V - 1) / V, 256);
    T* po = static_cast<T*>(out);
    if (inner_vec)
      strided_kernel<T, First, NARGS, true><<<grid, 256, 0, as_stream(stream)>>>(layout.n, l, po, true, f);
    else
      strided_kernel<T, First, NARGS, false><<<grid, 256, 0, as_stream(stream)>>>(layout.n, l, po, aligned16(out),
                                                                                   f);
    return check_launch(op);
  });
}
