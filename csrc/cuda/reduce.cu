// reduce: y[o] = fold of x's slice o, over any set of dims (tinycuda/reduce.h;
// the per-op math, shared with the CPU, in shared/reduce_math.h).
//
// x's dims are split into the kept ones (o walks them, y contiguous) and the
// reduced ones (r walks a slice), each collapsed to the fewest dims
// (reduce_layout). plan::reduce (shared/reduce_plan.h) picks one of two shapes:
//
// rows      G threads fold a slice: G = 8 (32 slices a 256-thread block) for
//           slices of up to 64 elements, where a warp a slice would leave most
//           lanes idle and pay 5 shuffle levels a slice; G = 32 (a warp, 8
//           slices a block) under 2048; else G = 256 (a block).
//           Thread t takes elements t, t + G, ...; where the slice is one
//           stride-1 run at 16-byte aligned rows, 16-byte vectors, 4 in flight.
//           The G states fold in a fixed tree: warp shuffles (a struct state
//           moves as 32-bit words), then shared memory across warps. A long
//           slice is cut into `splits` segments (grid.y; ~1024 blocks in all),
//           whose states merge_kernel folds, one warp an output.
// columns   the kept dims end in a stride-1 dim and the reduced ones do not
//           (mean over dim 0): a 32 x 8 block owns 32 V adjacent outputs, V a
//           thread (one 16-byte vector of x: 4 fp32, 8 bf16), its 8 rows of
//           threads step through the slice, 4 steps in flight, so a warp reads
//           512 adjacent bytes; the 8 row states fold through shared memory.
//           A long slice is cut into `splits` chunks (grid.y), merged as above.
// Every fold runs in a fixed order, and equal argmax candidates keep the lower
// index, so results are bit-identical run to run (no atomics). max and min
// are argmax's and argmin's fold, the state (value, index) stored as both.
//
// Backward: one thread a 16-byte vector of x (contiguous), its outputs found
// through y's broadcast strides by a Walk (kit/index.cuh: no divide
// instruction); aux (var's mean, amax's tie counts) is a forward reduction
// into the workspace first. max's and min's: grad_x cleared, then a thread an
// output writes its g at the element its index names (x is not read).
#include <cstring>
#include <type_traits>

#include "../shared/reduce_math.h"
#include "../shared/reduce_plan.h"
#include "kit/cuda_utils.cuh"
#include "kit/index.cuh"
#include "kit/pdl.cuh"
#include "kit/vec.cuh"

namespace {

template <int OP, class A> using StateOf = typename ReduceMath<OP, A>::State;

// a struct state through a warp shuffle, one 32-bit word at a time
template <class S>
__device__ __forceinline__ S shfl_down_state(const S& s, int delta) {
  static_assert(sizeof(S) % 4 == 0, "a state is whole 32-bit words");
  unsigned w[sizeof(S) / 4];
  memcpy(w, &s, sizeof(S));
#pragma unroll
  for (int i = 0; i < int(sizeof(S) / 4); ++i) w[i] = __shfl_down_sync(0xffffffffu, w[i], delta);
  S r;
  memcpy(&r, w, sizeof(S));
  return r;
}

// the first lane of each group of W lanes (W = 8, 16 or 32) ends with the
// group folded (a fixed tree; every lane of the warp takes part)
template <class M, int W = 32, class S>
__device__ __forceinline__ S warp_fold(S s) {
#pragma unroll
  for (int d = W / 2; d > 0; d >>= 1) s = M::merge(s, shfl_down_state(s, d));
  return s;
}

// y[o] = the output of state s: an element of y (T), an index, or the state
// itself (the backward's aux, which reduce_grad reads unfinished); max's and
// min's index goes to indices[o] beside the value
template <class M, class T, class Out, class S, class C>
__device__ __forceinline__ void store(Out* y, int64_t* indices, int64_t o, const S& s, const C& c) {
  if constexpr (std::is_same_v<Out, S>) y[o] = s;
  else if constexpr (std::is_same_v<Out, T> && !std::is_same_v<T, acc_t<T>>) y[o] = from_acc<T>(M::finish(s, c));
  else y[o] = Out(M::finish(s, c));
  if constexpr (requires { s.i; })
    if (indices) indices[o] = s.i;
}

template <int OP, class T>
__device__ __forceinline__ acc_t<T> target_of(const T* target, int64_t o) {
  if constexpr (kNeedsTarget<OP>) return to_acc(target[o]);
  else return acc_t<T>(0);
}

// ---------------------------------------------------------------------------
// kernels

template <int OP, class T, class Out, int G, int VEC>
__global__ void __launch_bounds__(256)
reduce_rows_kernel(const ReduceLayout l, const Walk red, const ReduceCtx<acc_t<T>> c, const T* __restrict__ x,
                   int64_t splits, StateOf<OP, acc_t<T>>* __restrict__ partial, Out* __restrict__ y,
                   int64_t* __restrict__ indices, const T* __restrict__ target) {
  using A = acc_t<T>;
  using M = ReduceMath<OP, A>;
  using State = StateOf<OP, A>;
  constexpr int kSlices = 256 / G, kWarps = G / 32;
  __shared__ State warp_states[8];
  const int t = threadIdx.x % G, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t outputs = l.kept.n, n = l.red.n;
  const int64_t seg = plan::ceil_div(plan::ceil_div(n, splits), VEC) * VEC;
  const int64_t r0 = blockIdx.y * seg, r1 = min(n, r0 + seg);
  // uniform over the block: the G = 256 fold has barriers
  for (int64_t o0 = int64_t(blockIdx.x) * kSlices; o0 < outputs; o0 += int64_t(gridDim.x) * kSlices) {
    const int64_t o = o0 + threadIdx.x / G;
    State s = M::init(c, o < outputs ? target_of<OP>(target, o) : A(0));
    if (o < outputs) {
      const T* xo = x + layout_offset(l.kept, o);
      int64_t r = r0 + int64_t(t) * VEC;
      if constexpr (VEC > 1) {  // one stride-1 run: r0 and the rows 16-byte aligned
        constexpr int U = 4;
        const int64_t step = int64_t(G) * VEC;
        for (; r + (U - 1) * step + VEC <= r1; r += U * step) {
          Vec<T, VEC> v[U];
#pragma unroll
          for (int u = 0; u < U; ++u) v[u] = load_vec<T, VEC>(xo + r + u * step);
#pragma unroll
          for (int u = 0; u < U; ++u)
#pragma unroll
            for (int j = 0; j < VEC; ++j) M::add(s, to_acc(v[u].v[j]), r + u * step + j, c);
        }
        for (; r + VEC <= r1; r += step) {
          const Vec<T, VEC> v = load_vec<T, VEC>(xo + r);
#pragma unroll
          for (int j = 0; j < VEC; ++j) M::add(s, to_acc(v.v[j]), r + j, c);
        }
        // the tail, under VEC elements, at most one thread's
        for (int64_t k = r; k < r1 && k < r + VEC; ++k) M::add(s, to_acc(xo[k]), k, c);
      } else {
        for (; r < r1; r += G) M::add(s, to_acc(xo[red.offset(r)]), r, c);
      }
    }
    s = warp_fold<M, G < 32 ? G : 32>(s);
    if constexpr (kWarps > 1) {
      __syncthreads();  // warp_states may still be read by the previous slice
      if (lane == 0) warp_states[warp] = s;
      __syncthreads();
      if (warp == 0) {
        s = lane < kWarps ? warp_states[lane] : M::init(c, A(0));
        s = warp_fold<M>(s);
      }
    }
    if (t == 0 && o < outputs) {
      if (splits == 1) store<M, T>(y, indices, o, s, c);
      else partial[blockIdx.y * outputs + o] = s;
    }
  }
}

// V adjacent outputs a thread: one 16-byte vector of x a row step (V = 1
// where the layout is off the 16-byte grid). With one 4-byte load a step,
// mean over dim 0 of 16384^2 fp32 ran at 97% of copy, but var, logsumexp and
// argmax (longer adds: a division, two exps) at 31-36%: too few bytes in flight.
template <int OP, class T, class Out, int V>
__global__ void __launch_bounds__(256)
reduce_columns_kernel(const ReduceLayout l, const Walk red, const ReduceCtx<acc_t<T>> c, const T* __restrict__ x,
                      int64_t splits, StateOf<OP, acc_t<T>>* __restrict__ partial, Out* __restrict__ y,
                      int64_t* __restrict__ indices, const T* __restrict__ target) {
  pdl_start();
  using A = acc_t<T>;
  using M = ReduceMath<OP, A>;
  using State = StateOf<OP, A>;
  constexpr int W = plan::kColTile * V, R = plan::kBlockRows, U = 4;  // U row steps in flight
  __shared__ State tile[R][W];
  const int64_t outputs = l.kept.n, n = l.red.n;
  const int64_t block_o = int64_t(blockIdx.x) * W, o = block_o + threadIdx.x * V;  // V | outputs where V > 1
  const int64_t len = plan::ceil_div(n, splits), r0 = blockIdx.y * len, r1 = min(n, r0 + len);
  State s[V];
#pragma unroll
  for (int j = 0; j < V; ++j) s[j] = M::init(c, o < outputs ? target_of<OP>(target, o + j) : A(0));
  if (o < outputs) {
    const T* xo = x + layout_offset(l.kept, o);
    int64_t r = r0 + threadIdx.y;
    for (; r + (U - 1) * R < r1; r += U * R) {
      Vec<T, V> v[U];
#pragma unroll
      for (int u = 0; u < U; ++u) v[u] = load_vec<T, V>(xo + red.offset(r + u * R));
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int j = 0; j < V; ++j) M::add(s[j], to_acc(v[u].v[j]), r + u * R, c);
    }
    for (; r < r1; r += R) {
      const Vec<T, V> v = load_vec<T, V>(xo + red.offset(r));
#pragma unroll
      for (int j = 0; j < V; ++j) M::add(s[j], to_acc(v.v[j]), r, c);
    }
  }
#pragma unroll
  for (int j = 0; j < V; ++j) tile[threadIdx.y][threadIdx.x * V + j] = s[j];
  __syncthreads();
  // the R row states of each of the block's W outputs fold in row order, one thread an output
  for (int k = threadIdx.y * plan::kColTile + threadIdx.x; k < W; k += plan::kColTile * R) {
    if (block_o + k >= outputs) break;
    State t = tile[0][k];
#pragma unroll
    for (int i = 1; i < R; ++i) t = M::merge(t, tile[i][k]);
    if (splits == 1) store<M, T>(y, indices, block_o + k, t, c);
    else partial[blockIdx.y * outputs + block_o + k] = t;
  }
}

// one warp an output folds its `splits` partial states: lane k takes k, k + 32, ...
template <int OP, class T, class Out>
__global__ void __launch_bounds__(256)
merge_kernel(const StateOf<OP, acc_t<T>>* __restrict__ partial, int64_t splits, int64_t outputs,
             const ReduceCtx<acc_t<T>> c, Out* __restrict__ y, int64_t* __restrict__ indices) {
  pdl_start();
  using A = acc_t<T>;
  using M = ReduceMath<OP, A>;
  const int lane = threadIdx.x % 32;
  const int64_t o = int64_t(blockIdx.x) * 8 + threadIdx.x / 32;
  if (o >= outputs) return;  // a whole warp: the shuffles below see all 32 lanes
  auto s = lane < splits ? partial[lane * outputs + o] : M::init(c, A(0));
  for (int64_t k = lane + 32; k < splits; k += 32) s = M::merge(s, partial[k * outputs + o]);
  s = warp_fold<M>(s);
  if (lane == 0) store<M, T>(y, indices, o, s, c);
}

// V adjacent elements a thread (one 16-byte vector of x and grad_x, or V = 1):
// they share one output (STEP 0: the walk's inner dim is reduced) or take
// adjacent ones (STEP 1: it is kept), so one walk a vector finds them all.
template <int OP, class T, int V, int STEP>
__global__ void __launch_bounds__(256)
reduce_backward_kernel(const Walk w, const ReduceCtx<acc_t<T>> c, const T* __restrict__ g,
                       const T* __restrict__ x, const T* __restrict__ y,
                       const AuxState<OP, acc_t<T>>* __restrict__ aux, T* __restrict__ gx, int64_t total) {
  using A = acc_t<T>;
  using Aux = AuxState<OP, A>;
  const int64_t step = int64_t(gridDim.x) * blockDim.x * V;
  for (int64_t i = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) * V; i < total; i += step) {
    const int64_t o = w.offset(i);
    Vec<T, V> xv, out;
    if constexpr (V > 1) xv = load_vec<T, V>(x + i);  // mean's reads of x and y are dead code, dropped
    else xv.v[0] = x[i];
    A go = to_acc(g[o]), yo = to_acc(y[o]);
    Aux ao = aux ? aux[o] : Aux{};
#pragma unroll
    for (int j = 0; j < V; ++j) {
      if (STEP == 1 && j > 0) go = to_acc(g[o + j]), yo = to_acc(y[o + j]), ao = aux ? aux[o + j] : Aux{};
      out.v[j] = from_acc<T>(reduce_grad<OP>(go, to_acc(xv.v[j]), yo, ao, c));
    }
    if constexpr (V > 1) store_vec(gx + i, out);
    else gx[i] = out.v[0];
  }
}

// max's and min's gradient, after grad_x is cleared: one thread an output
// writes g[o] at its element, x's offset of (o, indices[o]) (x contiguous:
// the kept layout's offset of o plus the reduced layout's of the index, its
// row-major number in the slice). Slices are disjoint: no element is written
// twice. An index outside its slice (the C door's, or a direct call of the
// backward op) stops the kernel, named, as torch's scatter does, and is skipped.
template <int OP, class T>
__global__ void __launch_bounds__(256)
value_index_backward_kernel(const Walk kept, const Walk red, const T* __restrict__ g,
                            const int64_t* __restrict__ indices, int64_t n, int64_t outputs, T* __restrict__ gx) {
  constexpr const char* kBadIndex = OP == TC_REDUCE_MAX ? "tinycuda::max_backward: an index is outside its slice"
                                                        : "tinycuda::min_backward: an index is outside its slice";
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < outputs; o += int64_t(gridDim.x) * blockDim.x) {
    const int64_t k = indices[o];
    TC_DEVICE_REQUIRE(k >= 0 && k < n, kBadIndex);
    if (k >= 0 && k < n) gx[kept.offset(o) + red.offset(k)] = g[o];
  }
}

// ---------------------------------------------------------------------------
// launchers

template <int OP, class T, class Out>
tc_status launch_reduce(const char* name, const ReduceLayout& l, const ReduceCtx<acc_t<T>>& c, const T* x, Out* y,
                        int64_t* indices, const T* target, void* workspace, cudaStream_t stream) {
  using State = StateOf<OP, acc_t<T>>;
  const int64_t outputs = l.outputs(), n = l.slice();
  const plan::Reduce pl = plan::reduce(outputs, n, l.columns());
  State* partial = static_cast<State*>(workspace);
  const Walk red(l.red);
  if (pl.columns) {
    // the vector path: the kept inner dim (stride 1) holds a multiple of V, every other stride is a multiple of V
    // and x sits on the 16-byte grid, so each thread's V outputs are one aligned vector a row
    constexpr int V = Vec<T>::size;
    bool vec = aligned16(x) && l.kept.sizes[l.kept.ndim - 1] % V == 0;
    for (int d = 0; d < l.kept.ndim - 1; ++d) vec = vec && l.kept.strides[0][d] % V == 0;
    for (int d = 0; d < l.red.ndim; ++d) vec = vec && l.red.strides[0][d] % V == 0;
    const dim3 block(plan::kColTile, plan::kBlockRows);
    const tc_status st =
        vec ? launch_pdl(name, reduce_columns_kernel<OP, T, Out, V>, dim3(grid_1d(outputs, plan::kColTile * V),
                                                                        unsigned(pl.splits)),
                         block, 0, stream, l, red, c, x, pl.splits, partial, y, indices, target)
            : launch_pdl(name, reduce_columns_kernel<OP, T, Out, 1>, dim3(grid_1d(outputs, plan::kColTile),
                                                                        unsigned(pl.splits)),
                         block, 0, stream, l, red, c, x, pl.splits, partial, y, indices, target);
    TC_RETURN_IF_ERROR(st);
  } else {
    constexpr int V = Vec<T>::size;
    bool vec = l.red.ndim == 1 && l.red.strides[0][0] == 1 && aligned16(x);
    for (int d = 0; d < l.kept.ndim; ++d) vec = vec && (l.kept.strides[0][d] * int64_t(sizeof(T))) % 16 == 0;
    const int slices = 256 / pl.group;
    dim3 grid(grid_1d(outputs, slices, 1 << 20), unsigned(pl.splits));
    if (pl.group == 8 && vec)
      reduce_rows_kernel<OP, T, Out, 8, V><<<grid, 256, 0, stream>>>(l, red, c, x, pl.splits, partial, y,
                                                                     indices, target);
    else if (pl.group == 8)
      reduce_rows_kernel<OP, T, Out, 8, 1><<<grid, 256, 0, stream>>>(l, red, c, x, pl.splits, partial, y,
                                                                     indices, target);
    else if (pl.group == 32 && vec)
      reduce_rows_kernel<OP, T, Out, 32, V><<<grid, 256, 0, stream>>>(l, red, c, x, pl.splits, partial, y,
                                                                      indices, target);
    else if (pl.group == 32)
      reduce_rows_kernel<OP, T, Out, 32, 1><<<grid, 256, 0, stream>>>(l, red, c, x, pl.splits, partial, y,
                                                                      indices, target);
    else if (vec)
      reduce_rows_kernel<OP, T, Out, 256, V><<<grid, 256, 0, stream>>>(l, red, c, x, pl.splits, partial, y,
                                                                       indices, target);
    else
      reduce_rows_kernel<OP, T, Out, 256, 1><<<grid, 256, 0, stream>>>(l, red, c, x, pl.splits, partial, y,
                                                                       indices, target);
  }
  TC_RETURN_IF_ERROR(check_launch(name));
  if (pl.splits == 1) return TC_OK;
  return launch_pdl(name, merge_kernel<OP, T, Out>, grid_1d(outputs, 8), 256, 0, stream, partial, pl.splits, outputs, c,
                    y, indices);
}

// max's and min's backward: grad_x cleared on the stream (+0.0 is all zero
// bits), then the scatter. One pass over grad_x that compared each element's
// number with its output's index ran at 0.67x eager's fwd+bwd over 16384^2
// fp32 (H200): two walks a 16-byte vector; the memset writes at copy speed.
template <int OP, class T>
tc_status launch_value_index_backward(const char* name, const tc_reduce_backward_params* p, const ReduceLayout& l,
                                      cudaStream_t stream) {
  const int64_t outputs = l.outputs(), total = outputs * l.slice();
  TC_RETURN_IF_ERROR(cuda_status(name, "cudaMemsetAsync",
                                 cudaMemsetAsync(p->grad_x, 0, size_t(total) * sizeof(T), stream)));
  value_index_backward_kernel<OP, T><<<grid_1d(outputs, 256, 1 << 20), 256, 0, stream>>>(
      Walk(l.kept), Walk(l.red), static_cast<const T*>(p->grad_y), static_cast<const int64_t*>(p->indices),
      l.slice(), outputs, static_cast<T*>(p->grad_x));
  return check_launch(name);
}

}  // namespace

tc_status tc_reduce_cuda(const tc_reduce_params* p) {
  TC_RETURN_IF_ERROR(reduce_check(p));
  const char* name = reduce_name(p->op);
  const ReduceLayout l = reduce_layout(p);
  if (l.outputs() == 0) return TC_OK;
  const size_t need = tc_reduce_workspace_size(p);
  TC_REQUIRE(p->workspace_bytes >= need && (need == 0 || p->workspace),
             "%s: workspace of %zu bytes needed, %zu given", name, need, p->workspace_bytes);
  return dispatch_cuda(p->dtype, name, [&](auto tag) -> tc_status {
    using T = decltype(tag);
    const auto c = reduce_ctx<acc_t<T>>(p->op, p->scalar, l.slice());
    const T* x = static_cast<const T*>(p->x);
    return dispatch_forward(p->op, c.kind, [&](auto k) -> tc_status {
      constexpr int OP = decltype(k)::value;
      using Out = std::conditional_t<kArgOp<OP>, int64_t, T>;
      int64_t* indices = kValueIndex<OP> ? static_cast<int64_t*>(p->indices) : nullptr;  // unused by the others
      return launch_reduce<OP, T>(name, l, c, x, static_cast<Out*>(p->y), indices, x, p->workspace,
                                  as_stream(p->stream));
    });
  });
}

tc_status tc_reduce_backward_cuda(const tc_reduce_backward_params* p) {
  TC_RETURN_IF_ERROR(reduce_check(p));
  const char* name = reduce_name(p->op, true);
  const ReduceLayout l = reduce_backward_layout(p);
  const int64_t total = l.outputs() * l.slice();
  if (total == 0) return TC_OK;
  const size_t need = tc_reduce_backward_workspace_size(p);
  TC_REQUIRE(p->workspace_bytes >= need && (need == 0 || p->workspace),
             "%s: workspace of %zu bytes needed, %zu given", name, need, p->workspace_bytes);
  const StridedLayout<1> yl = reduce_grad_layout(p);
  const Walk w(yl);
  cudaStream_t stream = as_stream(p->stream);
  return dispatch_cuda(p->dtype, name, [&](auto tag) -> tc_status {
    using T = decltype(tag);
    using A = acc_t<T>;
    const auto c = reduce_ctx<A>(p->op, p->scalar, l.slice());
    const T *x = static_cast<const T*>(p->x), *y = static_cast<const T*>(p->y);
    return dispatch_reduce(p->op, [&](auto k) -> tc_status {
      constexpr int OP = decltype(k)::value;
      if constexpr (kValueIndex<OP>) {
        return launch_value_index_backward<OP, T>(name, p, l, stream);
      } else if constexpr (!kArgOp<OP>) {  // argmax, argmin: refused by reduce_check
        using Aux = AuxState<OP, A>;
        Aux* aux = nullptr;
        if (const int aux_op = reduce_aux_op(p->op, p->scalar); aux_op >= 0) {
          aux = static_cast<Aux*>(p->workspace);
          void* rest = static_cast<char*>(p->workspace) + reduce_aux_bytes(p->dtype, aux_op, l.outputs());
          TC_RETURN_IF_ERROR(dispatch_aux(aux_op, [&](auto a) -> tc_status {
            constexpr int AUX = decltype(a)::value;
            if constexpr (std::is_same_v<StateOf<AUX, A>, Aux>)
              return launch_reduce<AUX, T>(name, l, c, x, aux, nullptr, y, rest, stream);
            else return tc_fail(TC_ERR_INTERNAL, "%s: aux op %d does not fit", name, AUX);
          }));
        }
        const T* g = static_cast<const T*>(p->grad_y);
        T* gx = static_cast<T*>(p->grad_x);
        constexpr int V = Vec<T>::size;
        const int inner = yl.ndim - 1;
        if (inner >= 0 && yl.sizes[inner] % V == 0 && yl.strides[0][inner] <= 1 && aligned16(x) && aligned16(gx)) {
          const unsigned grid = grid_1d(total / V, 256, 1 << 20);
          if (yl.strides[0][inner] == 0)
            reduce_backward_kernel<OP, T, V, 0><<<grid, 256, 0, stream>>>(w, c, g, x, y, aux, gx, total);
          else
            reduce_backward_kernel<OP, T, V, 1><<<grid, 256, 0, stream>>>(w, c, g, x, y, aux, gx, total);
        } else {
          reduce_backward_kernel<OP, T, 1, 0><<<grid_1d(total, 256, 1 << 20), 256, 0, stream>>>(
              w, c, g, x, y, aux, gx, total);
        }
      }
      return check_launch(name);
    });
  });
}
