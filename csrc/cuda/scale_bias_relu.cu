// scale_bias_relu: y = relu(x * scale + bias), x [rows, cols], bias [cols].
// Backward from the saved output y: grad_x = grad_y * [y > 0] * scale and
// grad_bias = sum over rows of grad_y * [y > 0], fused in one pass.
//
// threadIdx.x walks 16-byte column vectors (4 fp32 / 8 fp16,bf16: a warp
// covers 512 contiguous bytes of a row), threadIdx.y and the block's rows walk
// rows, 4 rows in flight per thread. The bias vector is loaded once per
// thread, never per element. Forward blocks are up to 256 vectors wide;
// backward blocks are 32 x 8, so a shared-memory pass can fold 8 rows.
// Bytes per fp32 element: 8 forward (read x, write y), 12 backward (read
// grad_y and y, write grad_x); bias and partials are < 0.1% at 8192^2.
//
// grad_bias: each block reduces its row slice over threadIdx.y in shared
// memory and writes one partial per column; sum_partials_kernel
// (kit/reduce.cuh) adds the slices in order (plan::column_chunks slices: 32
// at 8192^2), so the result is deterministic.
#include "../shared/reduce_plan.h"
#include "../shared/scale_bias_relu_check.h"
#include "kit/reduce.cuh"
#include "kit/vec.cuh"

namespace {
constexpr int kUnroll = 4;  // rows in flight per thread
constexpr int kRows = plan::kBlockRows;

// ---------------------------------------------------------------------------
// kernels

template <class T, int VEC>
__device__ __forceinline__ void load_cols(const T* p, int64_t c, int64_t cols, acc_t<T> (&out)[VEC]) {
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

// Block (BX, BY) = (min(256, columns in 16-byte vectors), 256 / BX) owns a
// band of kUnroll * BY consecutive rows over BX vectors: for wide rows a block
// streams 4 consecutive rows of 4 KB each. (The first version walked rows
// gridDim.y * 8 apart in 32 x 8 blocks: 95% of copy bandwidth at 8192^2 fp32
// against torch.compile's 98%, from scattered 512-byte pieces.)
template <class T, int VEC>
__global__ void __launch_bounds__(256)
sbr_forward_kernel(const T* __restrict__ x, const T* __restrict__ bias, T* __restrict__ y,
                   int64_t rows, int64_t cols, acc_t<T> scale) {
  using A = acc_t<T>;
  const int64_t c = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) * VEC;
  if (c >= cols) return;
  A b[VEC];
  load_cols<T, VEC>(bias, c, cols, b);
  const int64_t band = int64_t(kUnroll) * blockDim.y;
  for (int64_t r = blockIdx.y * band + threadIdx.y; r < rows; r += int64_t(gridDim.y) * band) {
    A v[kUnroll][VEC];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (r + u * blockDim.y < rows) load_cols<T, VEC>(x + (r + u * blockDim.y) * cols, c, cols, v[u]);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (r + u * blockDim.y >= rows) break;
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        A z = v[u][j] * scale + b[j];
        v[u][j] = z > A(0) || z != z ? z : A(0);
      }
      store_cols<T, VEC>(y + (r + u * blockDim.y) * cols, c, v[u]);
    }
  }
}

// Block (bx, by): columns [bx*32*VEC, +32*VEC), rows [by*len, (by+1)*len).
template <class T, int VEC>
__global__ void __launch_bounds__(256)
sbr_backward_kernel(const T* __restrict__ g, const T* __restrict__ y, T* __restrict__ gx,
                    acc_t<T>* __restrict__ partial, T* __restrict__ gb, int64_t rows, int64_t cols,
                    acc_t<T> scale) {
  using A = acc_t<T>;
  __shared__ A tile[kRows][32 * VEC + 1];
  const int64_t c = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) * VEC;
  const int64_t len = plan::ceil_div(rows, gridDim.y);
  const int64_t r0 = blockIdx.y * len, r1 = min(rows, r0 + len);
  A acc[VEC] = {};
  if (c < cols) {
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kUnroll * kRows) {
      A gv[kUnroll][VEC], yv[kUnroll][VEC];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (r + u * kRows < r1) {
          load_cols<T, VEC>(g + (r + u * kRows) * cols, c, cols, gv[u]);
          load_cols<T, VEC>(y + (r + u * kRows) * cols, c, cols, yv[u]);
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (r + u * kRows >= r1) break;
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          gv[u][j] = yv[u][j] > A(0) ? gv[u][j] : A(0);
          acc[j] += gv[u][j];
          gv[u][j] *= scale;
        }
        if (gx) store_cols<T, VEC>(gx + (r + u * kRows) * cols, c, gv[u]);
      }
    }
  }
  if (!partial && !gb) return;  // uniform across the grid
#pragma unroll
  for (int j = 0; j < VEC; ++j) tile[threadIdx.y][threadIdx.x * VEC + j] = acc[j];
  __syncthreads();
  if (threadIdx.y != 0 || c >= cols) return;
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    A s = 0;
#pragma unroll
    for (int k = 0; k < kRows; ++k) s += tile[k][threadIdx.x * VEC + j];
    if (partial) partial[blockIdx.y * cols + c + j] = s;
    else gb[c + j] = from_acc<T>(s);
  }
}

bool vectorizable(int64_t cols, size_t elem, std::initializer_list<const void*> ptrs) {
  if ((cols * int64_t(elem)) % 16 != 0) return false;
  for (const void* p : ptrs)
    if (p && !aligned16(p)) return false;
  return true;
}
}  // namespace

// ---------------------------------------------------------------------------
// launchers

tc_status tc_scale_bias_relu_cuda(const tc_scale_bias_relu_params* p) {
  TC_RETURN_IF_ERROR(scale_bias_relu_check(p));
  if (p->rows == 0 || p->cols == 0) return TC_OK;
  return dispatch_cuda(p->dtype, "scale_bias_relu", [&](auto tag) -> tc_status {
    using T = decltype(tag);
    auto launch = [&](auto vec) {
      constexpr int V = decltype(vec)::value;
      const int64_t cols_vec = plan::ceil_div(p->cols, V);
      int bx = 32;
      while (bx < 256 && bx < cols_vec) bx *= 2;
      const int by = 256 / bx;
      const int64_t gx = plan::ceil_div(cols_vec, bx);
      const int64_t gy = plan::clamp64(plan::ceil_div(p->rows, int64_t(kUnroll) * by), 1, 65535);
      sbr_forward_kernel<T, V><<<dim3(unsigned(gx), unsigned(gy)), dim3(bx, by), 0,
                                 as_stream(p->stream)>>>(
          static_cast<const T*>(p->x), static_cast<const T*>(p->bias), static_cast<T*>(p->y),
          p->rows, p->cols, acc_t<T>(p->scale));
    };
    if (vectorizable(p->cols, sizeof(T), {p->x, p->bias, p->y}))
      launch(std::integral_constant<int, Vec<T>::size>{});
    else
      launch(std::integral_constant<int, 1>{});
    return check_launch("scale_bias_relu");
  });
}

tc_status tc_scale_bias_relu_backward_cuda(const tc_scale_bias_relu_backward_params* p) {
  const char* op = "scale_bias_relu_backward";
  TC_RETURN_IF_ERROR(scale_bias_relu_check(p));
  if (p->cols == 0 || (!p->grad_x && !p->grad_bias)) return TC_OK;
  if (p->rows == 0) {  // grad_bias of no rows is zero
    if (p->grad_bias && cudaMemsetAsync(p->grad_bias, 0, p->cols * tc_dtype_size(p->dtype),
                                        as_stream(p->stream)) != cudaSuccess)
      return tc_fail(TC_ERR_CUDA, "%s: cudaMemsetAsync failed", op);
    return TC_OK;
  }
  const size_t need = tc_scale_bias_relu_backward_workspace_size(p);
  TC_REQUIRE(p->workspace_bytes >= need && (need == 0 || p->workspace),
             "%s: workspace of %zu bytes needed, %zu given", op, need, p->workspace_bytes);
  const int64_t chunks = p->grad_bias ? plan::column_chunks(p->rows, p->cols)
                                      : plan::clamp64(plan::ceil_div(p->rows, 64), 1, 1024);
  cudaStream_t stream = as_stream(p->stream);
  return dispatch_cuda(p->dtype, op, [&](auto tag) -> tc_status {
    using T = decltype(tag);
    using A = acc_t<T>;
    A* partial = p->grad_bias && chunks > 1 ? static_cast<A*>(p->workspace) : nullptr;
    T* gb = p->grad_bias && chunks == 1 ? static_cast<T*>(p->grad_bias) : nullptr;
    auto launch = [&](auto vec) {
      constexpr int V = decltype(vec)::value;
      dim3 grid(unsigned(plan::ceil_div(p->cols, 32 * V)), unsigned(chunks));
      sbr_backward_kernel<T, V><<<grid, dim3(32, kRows), 0, stream>>>(
          static_cast<const T*>(p->grad_y), static_cast<const T*>(p->y),
          static_cast<T*>(p->grad_x), partial, gb, p->rows, p->cols, A(p->scale));
    };
    if (vectorizable(p->cols, sizeof(T), {p->grad_y, p->y, p->grad_x}))
      launch(std::integral_constant<int, Vec<T>::size>{});
    else
      launch(std::integral_constant<int, 1>{});
    TC_RETURN_IF_ERROR(check_launch(op));
    if (!partial) return TC_OK;
    return launch_sum_partials<T, 1>(op, partial, chunks, p->cols, static_cast<T*>(p->grad_bias), nullptr,
                                     stream);
  });
}
