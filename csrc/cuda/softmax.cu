// softmax / log_softmax over the last dim of [rows, cols], and their backward.
//
// Rows of up to 1024 columns get one warp each (8 rows per 256-thread block,
// shuffles only); longer rows get a whole block. Forward: one online pass per
// row for (max, sum) -- each thread keeps its own pair, pairs merge through
// shuffles (and shared memory across warps) -- then one pass writing y: the
// row is read twice (the second time mostly from L2), y written once.
// Backward: one pass for sum(grad_y * y) (or sum(grad_y)), one to write.
// Loads are scalar and coalesced; 16-byte vectors and a register-resident
// row for short rows are the next steps toward the LLM issue's bandwidth
// targets, not taken yet.
#include "../softmax.h"
#include "../softmax_math.h"
#include "reduce.cuh"

namespace {

// ---------------------------------------------------------------------------
// reductions over the threads of one row

template <int WIDTH, class A>
__device__ __forceinline__ void merge_row(A& m, A& s, A* sm, A* ss) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const A m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
    online_merge(m, s, m2, s2);
  }
  if constexpr (WIDTH > 32) {
    const int warp = threadIdx.x / 32;
    __syncthreads();  // sm/ss may still be read from the previous row
    if (threadIdx.x % 32 == 0) sm[warp] = m, ss[warp] = s;
    __syncthreads();
    m = sm[0], s = ss[0];
    for (int w = 1; w < WIDTH / 32; ++w) online_merge(m, s, sm[w], ss[w]);
  }
}

template <int WIDTH, class A>
__device__ __forceinline__ A sum_row(A v, A* scratch) {
  v = warp_sum(v);
  if constexpr (WIDTH > 32) {
    __syncthreads();
    if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
    __syncthreads();
    v = 0;
    for (int w = 0; w < WIDTH / 32; ++w) v += scratch[w];
  }
  return v;
}

// ---------------------------------------------------------------------------
// kernels: WIDTH threads per row (32 or 256), 256 / WIDTH rows per block

template <class T, int WIDTH>
__global__ void __launch_bounds__(256)
softmax_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t cols, int log) {
  using A = acc_t<T>;
  __shared__ A sm[8], ss[8];
  constexpr int kRowsPerBlock = 256 / WIDTH;
  const int lane = threadIdx.x % WIDTH;
  // A block-wide row loop is uniform across the block (it has barriers).
  for (int64_t r = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / WIDTH; r < rows;
       r += int64_t(gridDim.x) * kRowsPerBlock) {
    const T* xr = x + r * cols;
    A m = -INFINITY, s = 0;
    for (int64_t c = lane; c < cols; c += WIDTH) online_add(m, s, A(to_acc(xr[c])));
    merge_row<WIDTH>(m, s, sm, ss);
    online_finish(m, s);
    const A log_s = ::log(s), inv_s = A(1) / s;
    T* yr = y + r * cols;
    for (int64_t c = lane; c < cols; c += WIDTH) {
      const A v = A(to_acc(xr[c])) - m;
      yr[c] = from_acc<T>(log ? v - log_s : ::exp(v) * inv_s);
    }
  }
}

template <class T, int WIDTH>
__global__ void __launch_bounds__(256)
softmax_backward_kernel(const T* __restrict__ g, const T* __restrict__ y, T* __restrict__ gx,
                        int64_t rows, int64_t cols, int log) {
  using A = acc_t<T>;
  __shared__ A scratch[8];
  constexpr int kRowsPerBlock = 256 / WIDTH;
  const int lane = threadIdx.x % WIDTH;
  for (int64_t r = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / WIDTH; r < rows;
       r += int64_t(gridDim.x) * kRowsPerBlock) {
    const T* gr = g + r * cols;
    const T* yr = y + r * cols;
    A dot = 0;
    for (int64_t c = lane; c < cols; c += WIDTH)
      dot += log ? A(to_acc(gr[c])) : A(to_acc(gr[c])) * A(to_acc(yr[c]));
    dot = sum_row<WIDTH>(dot, scratch);
    T* gxr = gx + r * cols;
    for (int64_t c = lane; c < cols; c += WIDTH) {
      const A gv = to_acc(gr[c]), yv = to_acc(yr[c]);
      gxr[c] = from_acc<T>(log ? gv - ::exp(yv) * dot : yv * (gv - dot));
    }
  }
}

// Rows up to 1024 columns: a warp each; longer: a block each.
template <class Launch>
tc_status by_row_length(int64_t rows, int64_t cols, Launch launch) {
  if (cols <= 1024) {
    launch(std::integral_constant<int, 32>{}, grid_1d(rows, 8));
  } else {
    launch(std::integral_constant<int, 256>{}, grid_1d(rows, 1));
  }
  return TC_OK;
}

}  // namespace

// ---------------------------------------------------------------------------
// launchers

tc_status tc_softmax_cuda(const tc_softmax_params* p) {
  TC_REQUIRE(p, "softmax: params is NULL");
  TC_REQUIRE(p->rows >= 0 && p->cols >= 0, "softmax: negative size");
  if (p->rows * p->cols == 0) return TC_OK;
  TC_REQUIRE(p->x && p->y, "softmax: x or y is NULL");
  return dispatch_cuda(p->dtype, "softmax", [&](auto tag) -> tc_status {
    using T = decltype(tag);
    by_row_length(p->rows, p->cols, [&](auto width, unsigned grid) {
      softmax_kernel<T, decltype(width)::value><<<grid, 256, 0, as_stream(p->stream)>>>(
          static_cast<const T*>(p->x), static_cast<T*>(p->y), p->rows, p->cols, p->log);
    });
    return check_launch("softmax");
  });
}

tc_status tc_softmax_backward_cuda(const tc_softmax_backward_params* p) {
  const char* op = "softmax_backward";
  TC_REQUIRE(p, "%s: params is NULL", op);
  TC_REQUIRE(p->rows >= 0 && p->cols >= 0, "%s: negative size", op);
  if (p->rows * p->cols == 0) return TC_OK;
  TC_REQUIRE(p->grad_y && p->y && p->grad_x, "%s: a pointer is NULL", op);
  return dispatch_cuda(p->dtype, op, [&](auto tag) -> tc_status {
    using T = decltype(tag);
    by_row_length(p->rows, p->cols, [&](auto width, unsigned grid) {
      softmax_backward_kernel<T, decltype(width)::value><<<grid, 256, 0, as_stream(p->stream)>>>(
          static_cast<const T*>(p->grad_y), static_cast<const T*>(p->y), static_cast<T*>(p->grad_x),
          p->rows, p->cols, p->log);
    });
    return check_launch(op);
  });
}
