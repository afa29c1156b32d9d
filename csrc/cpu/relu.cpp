// relu on the CPU: the pointwise loop (kit/pointwise.h) with relu_math.h's
// functions; relu_mask packs [x > 0] into one bit per element as it goes.
#include "../shared/act_check.h"
#include "../shared/relu_math.h"
#include "kit/pointwise.h"

tc_status tc_relu_cpu(const tc_relu_params* p) {
  TC_RETURN_IF_ERROR(relu_check(p));
  return pointwise_cpu<false>("relu", p->dtype, p->n, p->x, nullptr, p->y, ReluFn{});
}

tc_status tc_relu_backward_cpu(const tc_relu_backward_params* p) {
  TC_RETURN_IF_ERROR(relu_check(p));
  return pointwise_cpu<true>("relu_backward", p->dtype, p->n, p->grad_y, p->x, p->grad_x,
                             ReluBackwardFn{});
}

tc_status tc_relu_mask_cpu(const tc_relu_mask_params* p) {
  TC_RETURN_IF_ERROR(relu_check(p));
  return dispatch_cpu(p->dtype, "relu_mask", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* x = static_cast<const T*>(p->x);
    T* y = static_cast<T*>(p->y);
    for (int64_t b = 0; b * 8 < p->n; ++b) {
      uint8_t bits = 0;
      for (int64_t i = b * 8; i < b * 8 + 8 && i < p->n; ++i) {
        const A v = to_acc(x[i]);
        bits |= uint8_t(v > 0) << (i - b * 8);
        y[i] = from_acc<T>(ReluFn{}(v, A(0)));
      }
      p->mask[b] = bits;
    }
    return TC_OK;
  });
}

tc_status tc_relu_mask_backward_cpu(const tc_relu_mask_backward_params* p) {
  TC_RETURN_IF_ERROR(relu_check(p));
  return dispatch_cpu(p->dtype, "relu_mask_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* g = static_cast<const T*>(p->grad_y);
    T* gx = static_cast<T*>(p->grad_x);
    for (int64_t i = 0; i < p->n; ++i)
      gx[i] = (p->mask[i / 8] >> (i % 8)) & 1 ? g[i] : from_acc<T>(0);
    return TC_OK;
  });
}
