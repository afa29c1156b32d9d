// scale_bias_relu: y = relu(x * scale + bias), x [rows, cols], bias [cols].
// Backward from the saved output y: grad_x = grad_y * [y > 0] * scale and
// grad_bias = sum over rows of grad_y * [y > 0], fused in one pass.
//
// Forward: threadIdx.x walks 16-byte column vectors (4 fp32 / 8 fp16,bf16: a
// warp covers 512 contiguous bytes of a row), threadIdx.y and the block's
// rows walk rows, 4 rows in flight per thread. The bias vector is loaded once
// per thread, never per element. Blocks are up to 256 vectors wide. Bytes per
// fp32 element: 8 (read x, write y).
// Backward: kit/colsum.cuh's pass (grad_x and the bias partials in one read of
// grad_y and y: 12 bytes per fp32 element), then its fixed-order sum.
#include "../shared/reduce_plan.h"
#include "../shared/scale_bias_relu_check.h"
#include "kit/colsum.cuh"

namespace {
constexpr int kUnroll = 4;  // rows in flight per thread (forward)

// ---------------------------------------------------------------------------
// kernels

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
  load_cols<T, VEC>(bias, c, b);
  const int64_t band = int64_t(kUnroll) * blockDim.y;
  for (int64_t r = blockIdx.y * band + threadIdx.y; r < rows; r += int64_t(gridDim.y) * band) {
    A v[kUnroll][VEC];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (r + u * blockDim.y < rows) load_cols<T, VEC>(x + (r + u * blockDim.y) * cols, c, v[u]);
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

// The backward's element: grad_y [y > 0] is the bias term, times scale grad_x.
template <class A>
struct SbrBackward {
  A scale;
  __device__ __forceinline__ A operator()(A g, A y, A& term) const {
    term = y > A(0) ? g : A(0);
    return term * scale;
  }
};

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
    if (rows_vectorizable<T>(p->cols, {p->x, p->bias, p->y}))
      launch(std::integral_constant<int, Vec<T>::size>{});
    else
      launch(std::integral_constant<int, 1>{});
    return check_launch("scale_bias_relu");
  });
}

tc_status tc_scale_bias_relu_backward_cuda(const tc_scale_bias_relu_backward_params* p) {
  const char* op = "scale_bias_relu_backward";
  TC_RETURN_IF_ERROR(scale_bias_relu_check(p));
  const size_t need = tc_scale_bias_relu_backward_workspace_size(p);
  TC_REQUIRE(p->workspace_bytes >= need && (need == 0 || p->workspace),
             "%s: workspace of %zu bytes needed, %zu given", op, need, p->workspace_bytes);
  return dispatch_cuda(p->dtype, op, [&](auto tag) -> tc_status {
    using T = decltype(tag);
    return launch_colsum_backward<T>(op, p->rows, p->cols, static_cast<const T*>(p->grad_y),
                                     static_cast<const T*>(p->y), static_cast<T*>(p->grad_x),
                                     static_cast<T*>(p->grad_bias), p->workspace, as_stream(p->stream),
                                     SbrBackward<acc_t<T>>{acc_t<T>(p->scale)});
  });
}
