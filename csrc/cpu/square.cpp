// square on the CPU: y = x*x, grad_x = 2*x*grad_y, in the accumulator type.
#include "tinycuda/square.h"
#include "kit/cpu_utils.h"

tc_status tc_square_cpu(const tc_square_params* p) {
  TC_REQUIRE(p, "square: params is NULL");
  TC_REQUIRE(p->n >= 0, "square: n must be >= 0, got %lld", (long long)p->n);
  TC_REQUIRE(p->n == 0 || (p->x && p->y), "square: x or y is NULL");
  return dispatch_cpu(p->dtype, "square", [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(p->x);
    T* y = static_cast<T*>(p->y);
    for (int64_t i = 0; i < p->n; ++i) {
      auto v = to_acc(x[i]);
      y[i] = from_acc<T>(v * v);
    }
    return TC_OK;
  });
}

tc_status tc_square_backward_cpu(const tc_square_backward_params* p) {
  TC_REQUIRE(p, "square_backward: params is NULL");
  TC_REQUIRE(p->n >= 0, "square_backward: n must be >= 0, got %lld", (long long)p->n);
  TC_REQUIRE(p->n == 0 || (p->grad_y && p->x && p->grad_x), "square_backward: a pointer is NULL");
  return dispatch_cpu(p->dtype, "square_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* g = static_cast<const T*>(p->grad_y);
    const T* x = static_cast<const T*>(p->x);
    T* gx = static_cast<T*>(p->grad_x);
    for (int64_t i = 0; i < p->n; ++i) gx[i] = from_acc<T>(2 * to_acc(x[i]) * to_acc(g[i]));
    return TC_OK;
  });
}
