// relu on the CPU: one pass, converted through the accumulator type.
#include "tinycuda/relu.h"
#include "kit/cpu_utils.h"

tc_status tc_relu_cpu(const tc_relu_params* p) {
  TC_REQUIRE(p, "relu: params is NULL");
  TC_REQUIRE(p->n >= 0, "relu: n must be >= 0, got %lld", (long long)p->n);
  TC_REQUIRE(p->n == 0 || (p->x && p->y), "relu: x or y is NULL");
  return dispatch_cpu(p->dtype, "relu", [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(p->x);
    T* y = static_cast<T*>(p->y);
    for (int64_t i = 0; i < p->n; ++i) {
      auto v = to_acc(x[i]);
      y[i] = from_acc<T>(v > 0 || v != v ? v : decltype(v)(0));  // NaN passes, as in torch
    }
    return TC_OK;
  });
}

tc_status tc_relu_backward_cpu(const tc_relu_backward_params* p) {
  TC_REQUIRE(p, "relu_backward: params is NULL");
  TC_REQUIRE(p->n >= 0, "relu_backward: n must be >= 0, got %lld", (long long)p->n);
  TC_REQUIRE(p->n == 0 || (p->grad_y && p->x && p->grad_x), "relu_backward: a pointer is NULL");
  return dispatch_cpu(p->dtype, "relu_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* g = static_cast<const T*>(p->grad_y);
    const T* x = static_cast<const T*>(p->x);
    T* gx = static_cast<T*>(p->grad_x);
    for (int64_t i = 0; i < p->n; ++i) {
      auto v = to_acc(g[i]);
      gx[i] = from_acc<T>(to_acc(x[i]) > 0 ? v : decltype(v)(0));
    }
    return TC_OK;
  });
}

tc_status tc_relu_mask_cpu(const tc_relu_mask_params* p) {
  TC_REQUIRE(p, "relu_mask: params is NULL");
  TC_REQUIRE(p->n >= 0, "relu_mask: n must be >= 0, got %lld", (long long)p->n);
  TC_REQUIRE(p->n == 0 || (p->x && p->y && p->mask), "relu_mask: x, y or mask is NULL");
  return dispatch_cpu(p->dtype, "relu_mask", [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(p->x);
    T* y = static_cast<T*>(p->y);
    for (int64_t b = 0; b * 8 < p->n; ++b) {
      uint8_t bits = 0;
      for (int64_t i = b * 8; i < b * 8 + 8 && i < p->n; ++i) {
        auto v = to_acc(x[i]);
        bits |= uint8_t(v > 0) << (i - b * 8);
        y[i] = from_acc<T>(v > 0 || v != v ? v : decltype(v)(0));
      }
      p->mask[b] = bits;
    }
    return TC_OK;
  });
}

tc_status tc_relu_mask_backward_cpu(const tc_relu_mask_backward_params* p) {
  TC_REQUIRE(p, "relu_mask_backward: params is NULL");
  TC_REQUIRE(p->n >= 0, "relu_mask_backward: n must be >= 0, got %lld", (long long)p->n);
  TC_REQUIRE(p->n == 0 || (p->grad_y && p->mask && p->grad_x), "relu_mask_backward: a pointer is NULL");
  return dispatch_cpu(p->dtype, "relu_mask_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* g = static_cast<const T*>(p->grad_y);
    T* gx = static_cast<T*>(p->grad_x);
    for (int64_t i = 0; i < p->n; ++i)
      gx[i] = (p->mask[i / 8] >> (i % 8)) & 1 ? g[i] : from_acc<T>(0);
    return TC_OK;
  });
}
