// relu: y = max(x, 0) (NaN passes through, as in torch);
// relu_backward: grad_x = grad_y * [x > 0].
// Both are one pass of 16-byte vectors through launch_pointwise (pointwise.cuh):
// 8 bytes moved per fp32 element forward, 12 backward.
//
// relu_mask / relu_mask_backward, the training pair: each thread owns 8
// elements and one byte of the bitmask (32 bytes of fp32 in two 16-byte
// loads, or one for 16-bit types). Forward moves 8 + 1/8 bytes per fp32
// element, backward 8 + 1/8 instead of 12: torch.compile's backward reads a
// 1-byte bool mask (9 bytes) and was 1.3x faster than relu_backward at 8192^2.
#include "../shared/act_check.h"
#include "../shared/relu_math.h"
#include "kit/pointwise.cuh"

// ---------------------------------------------------------------------------
// bitmask kernels: thread b owns elements [8b, 8b + 8) and mask byte b

template <class T, bool VEC>
__global__ void __launch_bounds__(256)
relu_mask_kernel(int64_t n, const T* __restrict__ x, T* __restrict__ y, uint8_t* __restrict__ mask) {
  using A = acc_t<T>;
  const int64_t b = blockIdx.x * int64_t(blockDim.x) + threadIdx.x, i0 = b * 8;
  if (i0 >= n) return;
  A v[8];
  const bool full = VEC && i0 + 8 <= n;
  if (full) {
    constexpr int V = Vec<T>::size;
#pragma unroll
    for (int k = 0; k < 8 / V; ++k) {
      Vec<T> in = load_vec(x + i0 + k * V);
#pragma unroll
      for (int j = 0; j < V; ++j) v[k * V + j] = to_acc(in.v[j]);
    }
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = i0 + j < n ? to_acc(x[i0 + j]) : A(0);
  }
  uint8_t bits = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    bits |= uint8_t(v[j] > A(0)) << j;
    v[j] = ReluFn{}(v[j], A(0));
  }
  if (full) {
    constexpr int V = Vec<T>::size;
#pragma unroll
    for (int k = 0; k < 8 / V; ++k) {
      Vec<T> out;
#pragma unroll
      for (int j = 0; j < V; ++j) out.v[j] = from_acc<T>(v[k * V + j]);
      store_vec(y + i0 + k * V, out);
    }
  } else {
    for (int j = 0; j < 8 && i0 + j < n; ++j) y[i0 + j] = from_acc<T>(v[j]);
  }
  mask[b] = bits;
}

template <class T, bool VEC>
__global__ void __launch_bounds__(256)
relu_mask_backward_kernel(int64_t n, const T* __restrict__ g, const uint8_t* __restrict__ mask,
                          T* __restrict__ gx) {
  const int64_t b = blockIdx.x * int64_t(blockDim.x) + threadIdx.x, i0 = b * 8;
  if (i0 >= n) return;
  const uint8_t bits = mask[b];
  const T zero = from_acc<T>(acc_t<T>(0));
  if (VEC && i0 + 8 <= n) {
    constexpr int V = Vec<T>::size;
#pragma unroll
    for (int k = 0; k < 8 / V; ++k) {
      Vec<T> v = load_vec(g + i0 + k * V);
#pragma unroll
      for (int j = 0; j < V; ++j) v.v[j] = (bits >> (k * V + j)) & 1 ? v.v[j] : zero;
      store_vec(gx + i0 + k * V, v);
    }
  } else {
    for (int j = 0; j < 8 && i0 + j < n; ++j) gx[i0 + j] = (bits >> j) & 1 ? g[i0 + j] : zero;
  }
}

// ---------------------------------------------------------------------------
// launchers

tc_status tc_relu_cuda(const tc_relu_params* p) {
  TC_RETURN_IF_ERROR(relu_check(p));
  return launch_pointwise<false>("relu", p->dtype, p->n, p->x, nullptr, p->y, p->stream, ReluFn{});
}

tc_status tc_relu_backward_cuda(const tc_relu_backward_params* p) {
  TC_RETURN_IF_ERROR(relu_check(p));
  return launch_pointwise<true>("relu_backward", p->dtype, p->n, p->grad_y, p->x, p->grad_x,
                                p->stream, ReluBackwardFn{});
}

tc_status tc_relu_mask_cuda(const tc_relu_mask_params* p) {
  TC_RETURN_IF_ERROR(relu_check(p));
  if (p->n == 0) return TC_OK;
  return dispatch_cuda(p->dtype, "relu_mask", [&](auto tag) -> tc_status {
    using T = decltype(tag);
    const unsigned grid = grid_1d((p->n + 7) / 8, 256);
    const T* x = static_cast<const T*>(p->x);
    T* y = static_cast<T*>(p->y);
    if (aligned16(x) && aligned16(y))
      relu_mask_kernel<T, true><<<grid, 256, 0, as_stream(p->stream)>>>(p->n, x, y, p->mask);
    else
      relu_mask_kernel<T, false><<<grid, 256, 0, as_stream(p->stream)>>>(p->n, x, y, p->mask);
    return check_launch("relu_mask");
  });
}

tc_status tc_relu_mask_backward_cuda(const tc_relu_mask_backward_params* p) {
  TC_RETURN_IF_ERROR(relu_check(p));
  if (p->n == 0) return TC_OK;
  return dispatch_cuda(p->dtype, "relu_mask_backward", [&](auto tag) -> tc_status {
    using T = decltype(tag);
    const unsigned grid = grid_1d((p->n + 7) / 8, 256);
    const T* g = static_cast<const T*>(p->grad_y);
    T* gx = static_cast<T*>(p->grad_x);
    if (aligned16(g) && aligned16(gx))
      relu_mask_backward_kernel<T, true><<<grid, 256, 0, as_stream(p->stream)>>>(p->n, g, p->mask, gx);
    else
      relu_mask_backward_kernel<T, false><<<grid, 256, 0, as_stream(p->stream)>>>(p->n, g, p->mask, gx);
    return check_launch("relu_mask_backward");
  });
}
