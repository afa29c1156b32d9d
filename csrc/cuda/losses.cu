// losses: torch.nn.functional's losses with their reductions (tinycuda/losses.h;
// the math, shared with the CPU, in shared/losses_math.h).
//
// The elementwise losses (every op but triplet_margin_loss) are one pass
// over the operands' broadcast shape, 256 threads a block striding over it:
//   forward, NONE        out[i] = f(operands at i)
//   forward, reductions  each thread sums its f, the block folds its 256 sums
//                        (kit/reduce.cuh block_reduce) into one partial; a
//                        second kernel, one block of 1024 threads, folds the
//                        partials (plan::loss_blocks of them, at most 1024: a
//                        function of the shape) in a fixed tree and divides by
//                        the count (MEAN) or batch (BATCHMEAN). One block
//                        writes the loss itself.
//   backward             every gradient of an element from one read of its
//                        operands: grads[k][i] = g d f / d operand k, g read
//                        per element (NONE) or once, divided as above
// Operands are strided views (0 along a broadcast dim). Where every operand
// steps by 1 or 0 along the inner dim, whose size the vector divides (or
// there is one dim: its last n % V elements go one a thread), and sits on the
// 16-byte grid, a thread takes 16-byte vectors (4 fp32, 8 fp16/bf16): one
// LDG.128 a stride-1 operand (one load a broadcast one: bce's pos_weight over
// the last dim), one STG.128 an output; its coordinates from one FastDiv
// walk a vector (kit/pointwise.cuh strided_offsets; none for one dim).
// Otherwise one element a thread, scalar loads through the strides.
//
// Bytes: mse_loss's forward of 2^26 fp32 reads 2 x 256 MB and writes 4 KB of
// partials; its backward reads 512 MB and writes 512 MB (both gradients).
// With 1024 blocks of 256 threads (8 an SM, the H200's 132 SMs full), each
// thread has two 16-byte loads in flight: 64 KB an SM, twice the ~30 KB that
// Little's law asks for at 4.8 TB/s and ~800 ns.
//
// triplet_margin_loss: G threads a row (a warp up to 4096 elements, else the
// block; plan::loss_row_group), 16-byte vectors where the rows allow: the
// three distances' sums folded across the row (kit/reduce.cuh row_reduce),
// the row's loss, then the block's rows as above. Its backward folds the row
// again and writes the three gradients of each element in a second walk of
// it (a row of 4096 fp32 is 48 KB: from L1/L2).
//
// No atomics: every sum's order is fixed by the shape, so results are
// bit-identical run to run.
#include <algorithm>
#include <initializer_list>

#include "../shared/losses_math.h"
#include "../shared/losses_plan.h"
#include "kit/pointwise.cuh"
#include "kit/reduce.cuh"
#include "kit/vec.cuh"

namespace {

constexpr int kThreads = plan::kLossThreads;

template <class T> struct Grads {
  T* p[4];
};

// operand k's value at off; 1 for an optional operand not given
template <class T> __device__ __forceinline__ acc_t<T> operand(const void* p, int64_t off) {
  return p ? to_acc(static_cast<const T*>(p)[off]) : acc_t<T>(1);
}

// the N operands of element i
template <class T, int N>
__device__ __forceinline__ void element(const StridedArg<N>& l, int64_t i, acc_t<T> (&e)[N]) {
  int64_t idx[8], off[N];
  strided_offsets(l, i, idx, off);
#pragma unroll
  for (int k = 0; k < N; ++k) e[k] = operand<T>(l.p[k], off[k]);
}

// the N operands of the V elements from i0 (the vector path): a stride-1 operand by one 16-byte load, one
// constant along the inner dim (a broadcast, or not given) by one value
template <class T, int N, int V>
__device__ __forceinline__ void elements(const StridedArg<N>& l, int64_t i0, acc_t<T> (&e)[N][V]) {
  int64_t idx[8], off[N];
  strided_offsets(l, i0, idx, off);
  const int inner = l.ndim - 1;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    if (l.p[k] && l.strides[k][inner] == 1) {
      const Vec<T, V> x = load_vec<T, V>(static_cast<const T*>(l.p[k]) + off[k]);
#pragma unroll
      for (int j = 0; j < V; ++j) e[k][j] = to_acc(x.v[j]);
    } else {
      const acc_t<T> s = operand<T>(l.p[k], off[k]);
#pragma unroll
      for (int j = 0; j < V; ++j) e[k][j] = s;
    }
  }
}

// the block's sum into its partial, or (one block) the loss
template <class T>
__device__ __forceinline__ void block_out(acc_t<T> acc, acc_t<T> divisor, T* out, acc_t<T>* partial) {
  using A = acc_t<T>;
  __shared__ A scratch[32];
  acc = block_reduce(acc, Sum{}, A(0), scratch, kThreads / 32);
  if (threadIdx.x != 0) return;
  if (gridDim.x == 1) out[0] = from_acc<T>(acc / divisor);
  else partial[blockIdx.x] = acc;
}

// The grid's walk over the n elements: vec(i0, e) for each vector of V from i0 (the vector path, e[k][j] operand
// k's value at element i0 + j), then one(i, x) for each element left (a single dim's last n % V; every element off
// the vector path), the threads striding by the grid
template <class T, int N, class Vector, class One>
__device__ __forceinline__ void walk(int64_t n, const StridedArg<N>& l, bool vec, Vector&& vector, One&& one) {
  constexpr int V = Vec<T>::size;
  const int64_t step = int64_t(gridDim.x) * kThreads, t = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  int64_t scalar_from = 0;
  if (vec) {
    const int64_t nv = n / V;
    for (int64_t v = t; v < nv; v += step) {
      acc_t<T> e[N][V];
      elements<T, N, V>(l, v * V, e);
      vector(v * V, e);
    }
    scalar_from = nv * V;
  }
  for (int64_t i = scalar_from + t; i < n; i += step) {
    acc_t<T> x[N];
    element<T, N>(l, i, x);
    one(i, x);
  }
}

// ---------------------------------------------------------------------------
// kernels

template <int OP, int KIND, class T>
__global__ void __launch_bounds__(kThreads)
loss_kernel(int64_t n, const StridedArg<LossMath<OP>::kOperands> l, const LossCtx<acc_t<T>> c, bool vec,
            bool reduce, acc_t<T> divisor, T* __restrict__ out, acc_t<T>* __restrict__ partial) {
  using A = acc_t<T>;
  using M = LossMath<OP>;
  constexpr int N = M::kOperands, V = Vec<T>::size;
  A acc = 0;
  walk<T>(n, l, vec, [&](int64_t i0, const A (&e)[N][V]) {
    Vec<T, V> y;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      A x[N];
#pragma unroll
      for (int k = 0; k < N; ++k) x[k] = e[k][j];
      const A f = M::template f<KIND>(x, c);
      if (reduce) acc += f;
      else y.v[j] = from_acc<T>(f);
    }
    if (!reduce) store_vec(out + i0, y);
  }, [&](int64_t i, const A (&x)[N]) {
    const A f = M::template f<KIND>(x, c);
    if (reduce) acc += f;
    else out[i] = from_acc<T>(f);
  });
  if (reduce) block_out<T>(acc, divisor, out, partial);
}

template <int OP, int KIND, class T>
__global__ void __launch_bounds__(kThreads)
loss_backward_kernel(int64_t n, const StridedArg<LossMath<OP>::kOperands> l, const LossCtx<acc_t<T>> c, bool vec,
                     const T* __restrict__ g, bool none, acc_t<T> divisor, const Grads<T> grads) {
  using A = acc_t<T>;
  using M = LossMath<OP>;
  constexpr int N = M::kOperands, V = Vec<T>::size;
  const A g0 = none ? A(0) : to_acc(g[0]) / divisor;
  walk<T>(n, l, vec, [&](int64_t i0, const A (&e)[N][V]) {
    Vec<T, V> gv, d[N];
    if (none) gv = load_vec<T, V>(g + i0);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      A x[N], dx[N];
#pragma unroll
      for (int k = 0; k < N; ++k) x[k] = e[k][j];
      M::template df<KIND>(none ? to_acc(gv.v[j]) : g0, x, c, dx);
#pragma unroll
      for (int k = 0; k < N; ++k) d[k].v[j] = from_acc<T>(dx[k]);
    }
#pragma unroll
    for (int k = 0; k < N; ++k)
      if (grads.p[k]) store_vec(grads.p[k] + i0, d[k]);
  }, [&](int64_t i, const A (&x)[N]) {
    A dx[N];
    M::template df<KIND>(none ? to_acc(g[i]) : g0, x, c, dx);
#pragma unroll
    for (int k = 0; k < N; ++k)
      if (grads.p[k]) grads.p[k][i] = from_acc<T>(dx[k]);
  });
}

// the loss from the blocks' partial sums: one block of 1024 threads, a partial each (at most 1024)
template <class T>
__global__ void __launch_bounds__(1024)
loss_finish_kernel(const acc_t<T>* __restrict__ partial, int64_t count, acc_t<T> divisor, T* __restrict__ out) {
  using A = acc_t<T>;
  __shared__ A scratch[32];
  A s = threadIdx.x < count ? partial[threadIdx.x] : A(0);
  s = block_reduce(s, Sum{}, A(0), scratch, 32);
  if (threadIdx.x == 0) out[0] = from_acc<T>(s / divisor);
}

// triplet_margin_loss: the three distances' sums of row r (G threads: lane j takes elements j, j + G, ... or
// vectors j, j + G, ...), folded across the G threads; rows past the last fold nothing
template <int KIND, int G, class T>
__device__ __forceinline__ typename TripletMath<KIND, acc_t<T>>::Sums
triplet_sums(const T* a, const T* p, const T* n, int64_t r, int64_t rows, int64_t cols, bool vec,
             const LossCtx<acc_t<T>>& c, acc_t<T>* scratch) {
  using A = acc_t<T>;
  using TM = TripletMath<KIND, A>;
  constexpr int V = Vec<T>::size;
  const int lane = threadIdx.x % G;
  typename TM::Sums s = TM::init();
  if (r < rows) {
    const int64_t base = r * cols;
    if (vec) {
      for (int64_t j = int64_t(lane) * V; j < cols; j += int64_t(G) * V) {
        const Vec<T, V> x = load_vec<T, V>(a + base + j), y = load_vec<T, V>(p + base + j),
                        z = load_vec<T, V>(n + base + j);
#pragma unroll
        for (int u = 0; u < V; ++u) TM::add(s, to_acc(x.v[u]), to_acc(y.v[u]), to_acc(z.v[u]), c);
      }
    } else {
      for (int64_t j = lane; j < cols; j += G) TM::add(s, to_acc(a[base + j]), to_acc(p[base + j]), to_acc(n[base + j]), c);
    }
  }
  constexpr int kBlock = G == kThreads ? kThreads : 0;
  s.ap = row_reduce<G, kBlock>(s.ap, Sum{}, scratch);
  s.an = row_reduce<G, kBlock>(s.an, Sum{}, scratch);
  s.pn = row_reduce<G, kBlock>(s.pn, Sum{}, scratch);
  return s;
}

// the row loop runs over the block's rows together (a block a row: G = 256's row_reduce has barriers)
template <int KIND, class T, int G>
__global__ void __launch_bounds__(kThreads)
triplet_kernel(int64_t rows, int64_t cols, const T* __restrict__ a, const T* __restrict__ p, const T* __restrict__ n,
               const LossCtx<acc_t<T>> c, bool swap, bool vec, bool reduce, acc_t<T> divisor, T* __restrict__ out,
               acc_t<T>* __restrict__ partial) {
  using A = acc_t<T>;
  using TM = TripletMath<KIND, A>;
  constexpr int kRows = kThreads / G;
  __shared__ A scratch[32];
  A acc = 0;
  for (int64_t r0 = int64_t(blockIdx.x) * kRows; r0 < rows; r0 += int64_t(gridDim.x) * kRows) {
    const int64_t r = r0 + threadIdx.x / G;
    const auto row = TM::row(triplet_sums<KIND, G>(a, p, n, r, rows, cols, vec, c, scratch), swap, c);
    if (threadIdx.x % G == 0 && r < rows) {
      if (reduce) acc += row.loss;
      else out[r] = from_acc<T>(row.loss);
    }
  }
  if (reduce) block_out<T>(acc, divisor, out, partial);
}

template <int KIND, class T, int G>
__global__ void __launch_bounds__(kThreads)
triplet_backward_kernel(int64_t rows, int64_t cols, const T* __restrict__ a, const T* __restrict__ p,
                        const T* __restrict__ n, const LossCtx<acc_t<T>> c, bool swap, bool vec,
                        const T* __restrict__ g, bool none, acc_t<T> divisor, const Grads<T> grads) {
  using A = acc_t<T>;
  using TM = TripletMath<KIND, A>;
  constexpr int kRows = kThreads / G, V = Vec<T>::size;
  __shared__ A scratch[32];
  const int lane = threadIdx.x % G;
  const A g0 = none ? A(0) : to_acc(g[0]) / divisor;
  for (int64_t r0 = int64_t(blockIdx.x) * kRows; r0 < rows; r0 += int64_t(gridDim.x) * kRows) {
    const int64_t r = r0 + threadIdx.x / G;
    const auto row = TM::row(triplet_sums<KIND, G>(a, p, n, r, rows, cols, vec, c, scratch), swap, c);
    if (r >= rows) continue;
    const A gr = row.active ? (none ? A(to_acc(g[r])) : g0) : A(0);
    const int64_t base = r * cols;
    if (vec) {
      for (int64_t j = int64_t(lane) * V; j < cols; j += int64_t(G) * V) {
        const Vec<T, V> x = load_vec<T, V>(a + base + j), y = load_vec<T, V>(p + base + j),
                        z = load_vec<T, V>(n + base + j);
        Vec<T, V> d[3];
#pragma unroll
        for (int u = 0; u < V; ++u) {
          A dx[3];
          TM::df(gr, to_acc(x.v[u]), to_acc(y.v[u]), to_acc(z.v[u]), row, c, dx);
#pragma unroll
          for (int k = 0; k < 3; ++k) d[k].v[u] = from_acc<T>(dx[k]);
        }
#pragma unroll
        for (int k = 0; k < 3; ++k)
          if (grads.p[k]) store_vec(grads.p[k] + base + j, d[k]);
      }
    } else {
      for (int64_t j = base + lane; j < base + cols; j += G) {
        A dx[3];
        TM::df(gr, to_acc(a[j]), to_acc(p[j]), to_acc(n[j]), row, c, dx);
#pragma unroll
        for (int k = 0; k < 3; ++k)
          if (grads.p[k]) grads.p[k][j] = from_acc<T>(dx[k]);
      }
    }
  }
}

// ---------------------------------------------------------------------------
// launchers

// The vector path: a dim at least, the inner one's size a multiple of V (or the only dim), every operand
// stepping by 1 (on the 16-byte grid, its outer strides multiples of V) or 0 along it, and `outputs` on the grid
bool vector_path(const StridedLayout<4>& l, const tc_loss_params* p, int operands, int v,
                 std::initializer_list<const void*> outputs) {
  if (l.ndim < 1 || (l.ndim > 1 && l.sizes[l.ndim - 1] % v)) return false;
  const int inner = l.ndim - 1;
  for (int k = 0; k < operands; ++k) {
    if (!p->operands[k] || l.strides[k][inner] == 0) continue;
    if (l.strides[k][inner] != 1 || !aligned16(p->operands[k])) return false;
    for (int d = 0; d < inner; ++d)
      if (l.strides[k][d] % v) return false;
  }
  for (const void* o : outputs)
    if (o && !aligned16(o)) return false;
  return true;
}

template <int N> StridedArg<N> device_layout(const StridedLayout<4>& sl, const tc_loss_params* p) {
  StridedArg<N> l{sl.ndim};
  for (int d = 0; d < sl.ndim; ++d) {
    l.sizes[d] = FastDiv(uint64_t(sl.sizes[d]));
    for (int k = 0; k < N; ++k) l.strides[k][d] = sl.strides[k][d];
  }
  for (int k = 0; k < N; ++k) l.p[k] = p->operands[k], l.scalar[k] = 1.0;
  return l;
}

// The reductions' second stage, where there are several blocks
template <class T>
tc_status finish(const char* name, int64_t blocks, const tc_loss_params* p, acc_t<T> divisor, cudaStream_t stream) {
  if (blocks == 1) return TC_OK;
  loss_finish_kernel<T><<<1, 1024, 0, stream>>>(static_cast<const acc_t<T>*>(p->workspace), blocks, divisor,
                                                static_cast<T*>(p->out));
  return check_launch(name);
}

template <class T> tc_status workspace_check(const char* name, const tc_loss_params* p, int64_t blocks) {
  const size_t need = blocks > 1 ? size_t(blocks) * sizeof(acc_t<T>) : 0;
  TC_REQUIRE(p->workspace_bytes >= need && (need == 0 || p->workspace), "%s: workspace of %zu bytes needed, %zu given",
             name, need, p->workspace_bytes);
  return TC_OK;
}

template <int OP, int KIND, class T>
tc_status launch_loss(const char* name, const tc_loss_params* p, bool backward, cudaStream_t stream) {
  using A = acc_t<T>;
  constexpr int N = LossMath<OP>::kOperands, V = Vec<T>::size;
  const StridedLayout<4> sl = loss_layout(p);
  const StridedArg<N> l = device_layout<N>(sl, p);
  const LossCtx<A> c = loss_ctx<A>(p);
  const bool none = p->reduction == TC_LOSS_REDUCTION_NONE;
  const A divisor = A(loss_divisor(p));
  const int64_t n = sl.n;
  if (backward) {
    if (n == 0) return TC_OK;
    const Grads<T> grads{{static_cast<T*>(p->grads[0]), static_cast<T*>(p->grads[1]), static_cast<T*>(p->grads[2]),
                          static_cast<T*>(p->grads[3])}};
    const bool vec = vector_path(sl, p, N, V, {none ? p->grad_out : nullptr, p->grads[0], p->grads[1], p->grads[2],
                                               p->grads[3]});
    const unsigned grid = grid_1d(vec ? std::max(n / V, n % V) : n, kThreads, 1 << 20);
    loss_backward_kernel<OP, KIND, T><<<grid, kThreads, 0, stream>>>(n, l, c, vec, static_cast<const T*>(p->grad_out), none,
                                                               divisor, grads);
    return check_launch(name);
  }
  T* out = static_cast<T*>(p->out);
  const bool vec = vector_path(sl, p, N, V, {none ? p->out : nullptr});
  if (none) {
    loss_kernel<OP, KIND, T><<<grid_1d(vec ? std::max(n / V, n % V) : n, kThreads, 1 << 20), kThreads, 0, stream>>>(
        n, l, c, vec, false, divisor, out, nullptr);
    return check_launch(name);
  }
  const int64_t blocks = plan::loss_blocks(n);
  TC_RETURN_IF_ERROR(workspace_check<T>(name, p, blocks));
  loss_kernel<OP, KIND, T><<<unsigned(blocks), kThreads, 0, stream>>>(n, l, c, vec, true, divisor, out,
                                                                static_cast<A*>(p->workspace));
  TC_RETURN_IF_ERROR(check_launch(name));
  return finish<T>(name, blocks, p, divisor, stream);
}

template <int KIND, class T, int G>
tc_status launch_triplet(const char* name, const tc_loss_params* p, bool backward, cudaStream_t stream) {
  using A = acc_t<T>;
  constexpr int V = Vec<T>::size;
  const LossRows rc = loss_rows(p);
  const LossCtx<A> c = loss_ctx<A>(p);
  const T *a = static_cast<const T*>(p->operands[0]), *pp = static_cast<const T*>(p->operands[1]),
          *nn = static_cast<const T*>(p->operands[2]);
  const bool none = p->reduction == TC_LOSS_REDUCTION_NONE, swap = p->swap != 0;
  const A divisor = A(loss_divisor(p));
  const int64_t blocks = plan::loss_row_blocks(rc.rows, rc.cols);
  bool vec = rc.cols % V == 0 && aligned16(a) && aligned16(pp) && aligned16(nn);
  if (backward) {
    if (rc.rows * rc.cols == 0) return TC_OK;
    for (int k = 0; k < 3; ++k) vec = vec && (!p->grads[k] || aligned16(p->grads[k]));
    const Grads<T> grads{{static_cast<T*>(p->grads[0]), static_cast<T*>(p->grads[1]), static_cast<T*>(p->grads[2]),
                          nullptr}};
    triplet_backward_kernel<KIND, T, G><<<unsigned(blocks), kThreads, 0, stream>>>(
        rc.rows, rc.cols, a, pp, nn, c, swap, vec, static_cast<const T*>(p->grad_out), none, divisor, grads);
    return check_launch(name);
  }
  if (!none) TC_RETURN_IF_ERROR(workspace_check<T>(name, p, blocks));
  triplet_kernel<KIND, T, G><<<unsigned(blocks), kThreads, 0, stream>>>(
      rc.rows, rc.cols, a, pp, nn, c, swap, vec, !none, divisor, static_cast<T*>(p->out), static_cast<A*>(p->workspace));
  TC_RETURN_IF_ERROR(check_launch(name));
  return none ? TC_OK : finish<T>(name, blocks, p, divisor, stream);
}

template <bool BACKWARD> tc_status run(const tc_loss_params* p) {
  const char* name = nullptr;
  if (const tc_status s = loss_begin(p, BACKWARD, &name); s != TC_OK || !name) return s;
  cudaStream_t stream = as_stream(p->stream);
  return dispatch_cuda(p->dtype, name, [&](auto tag) -> tc_status {
    using T = decltype(tag);
    return dispatch_loss_kernel<acc_t<T>>(p, [&](auto k, auto kind) -> tc_status {
      constexpr int OP = decltype(k)::value, KIND = decltype(kind)::value;
      if constexpr (OP == TC_LOSS_TRIPLET_MARGIN_LOSS)
        return plan::loss_row_group(loss_rows(p).cols) == 32 ? launch_triplet<KIND, T, 32>(name, p, BACKWARD, stream)
                                                             : launch_triplet<KIND, T, kThreads>(name, p, BACKWARD, stream);
      else
        return launch_loss<OP, KIND, T>(name, p, BACKWARD, stream);
    });
  });
}

}  // namespace

tc_status tc_loss_cuda(const tc_loss_params* p) { return run<false>(p); }
tc_status tc_loss_backward_cuda(const tc_loss_params* p) { return run<true>(p); }
