// swiglu / geglu: y = act(a) * b, act = silu or gelu (erf or tanh form);
// backward in one pass from the forward inputs, the activation recomputed:
// grad_a = grad_y * b * act'(a), grad_b = grad_y * act(a). Math in
// gelu_math.h (shared with the CPU), in float with full-precision expf /
// erff / tanhf.
//
// Memory-bound: forward reads a, b and writes y (3n * sizeof(T) bytes), one
// pass of 16-byte vectors through launch_pointwise (pointwise.cuh); backward
// reads grad_y, a, b and writes grad_a, grad_b (5n * sizeof(T)): each thread
// owns one 16-byte vector of every operand, 48 bytes of loads in flight.
// 8192 x 14336 bf16 forward is 705 MB: 235 us at 3.0 TB/s copy bandwidth,
// against ~100 us of instruction issue (117M elements x ~26 instructions for
// expf and a correctly rounded division / 32 lanes / 528 schedulers / 1.75
// GHz) that other warps' loads hide (30-40 registers: 6-8 blocks per SM).
// A standalone prototype of these loops (same math, one vector per operand
// per thread) ran at 3.00 TB/s on an H100 whose copy ran at 3.01, forward
// (silu, gelu erf and tanh) and backward alike; two vectors per thread gained
// nothing.
#include <algorithm>

#include "../shared/act_check.h"
#include "../shared/gelu_math.h"
#include "tinycuda/glu.h"
#include "kit/pointwise.cuh"

namespace {

// ---------------------------------------------------------------------------
// backward kernel (forward: GluFn, gelu_math.h, through launch_pointwise)

template <class Act, class T>
__device__ __forceinline__ void glu_grad(T g, T a, T b, T& ga, T& gb) {
  using A = acc_t<T>;
  A f, df;
  Act::value_grad(A(to_acc(a)), f, df);
  const A gv = to_acc(g);
  ga = from_acc<T>(gv * A(to_acc(b)) * df);
  gb = from_acc<T>(gv * f);
}

// Thread v owns vector v of each operand; the last n % VEC
// elements go one per thread to the first threads (VEC = 1: misaligned buffers)

template <class T, int VEC, class Act>
__global__ void __launch_bounds__(256)
glu_backward_kernel(int64_t n, const T* __restrict__ g, const T* __restrict__ a,
                    const T* __restrict__ b, T* __restrict__ ga, T* __restrict__ gb) {
  const int64_t v = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (v < n / VEC) {
    const int64_t i = v * VEC;
    if constexpr (VEC > 1) {
      const Vec<T> vg = load_vec(g + i), va = load_vec(a + i), vb = load_vec(b + i);
      Vec<T> oa, ob;
#pragma unroll
      for (int j = 0; j < VEC; ++j) glu_grad<Act>(vg.v[j], va.v[j], vb.v[j], oa.v[j], ob.v[j]);
      store_vec(ga + i, oa);
      store_vec(gb + i, ob);
    } else {
      glu_grad<Act>(g[i], a[i], b[i], ga[i], gb[i]);
    }
  }
  const int64_t t = (n / VEC) * VEC + v;
  if (v < n % VEC) glu_grad<Act>(g[t], a[t], b[t], ga[t], gb[t]);
}

}  // namespace

// ---------------------------------------------------------------------------
// launchers

tc_status tc_glu_cuda(const tc_glu_params* p) {
  TC_RETURN_IF_ERROR(glu_check(p));
  return with_act(p->act, [&](auto act) {
    return launch_pointwise<true>("glu", p->dtype, p->n, p->a, p->b, p->y, p->stream,
                                  GluFn<decltype(act)>{});
  });
}

tc_status tc_glu_backward_cuda(const tc_glu_backward_params* p) {
  const char* op = "glu_backward";
  TC_RETURN_IF_ERROR(glu_check(p));
  if (p->n == 0) return TC_OK;
  return dispatch_cuda(p->dtype, op, [&](auto tag) -> tc_status {
    using T = decltype(tag);
    constexpr int V = Vec<T>::size;
    const T* g = static_cast<const T*>(p->grad_y);
    const T* a = static_cast<const T*>(p->a);
    const T* b = static_cast<const T*>(p->b);
    T* ga = static_cast<T*>(p->grad_a);
    T* gb = static_cast<T*>(p->grad_b);
    const bool vec = aligned16(g) && aligned16(a) && aligned16(b) && aligned16(ga) && aligned16(gb);
    const int64_t threads = vec ? std::max(p->n / V, p->n % V) : p->n;
    TC_REQUIRE(threads / 256 < INT32_MAX, "%s: too many elements (%lld)", op, (long long)p->n);
    const unsigned grid = grid_1d(threads, 256);
    cudaStream_t s = as_stream(p->stream);
    with_act(p->act, [&](auto act) {
      using Act = decltype(act);
      if (vec)
        glu_backward_kernel<T, V, Act><<<grid, 256, 0, s>>>(p->n, g, a, b, ga, gb);
      else
        glu_backward_kernel<T, 1, Act><<<grid, 256, 0, s>>>(p->n, g, a, b, ga, gb);
      return 0;
    });
    return check_launch(op);
  });
}
