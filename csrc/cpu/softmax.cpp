// softmax / log_softmax on the CPU: one online pass for (max, sum), one to
// write; backward: one pass for the row's dot product, one to write.
#include "../shared/softmax_check.h"
#include "../shared/softmax_math.h"
#include "kit/cpu_utils.h"

tc_status tc_softmax_cpu(const tc_softmax_params* p) {
  TC_RETURN_IF_ERROR(softmax_check(p));
  return dispatch_cpu(p->dtype, "softmax", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    for (int64_t r = 0; r < p->rows; ++r) {
      const T* x = static_cast<const T*>(p->x) + r * p->cols;
      T* y = static_cast<T*>(p->y) + r * p->cols;
      A m = -INFINITY, s = 0;
      for (int64_t c = 0; c < p->cols; ++c) online_add(m, s, A(to_acc(x[c])));
      online_finish(m, s);
      const A log_s = std::log(s), inv_s = A(1) / s;
      for (int64_t c = 0; c < p->cols; ++c) {
        const A v = A(to_acc(x[c])) - m;
        y[c] = from_acc<T>(p->log ? v - log_s : std::exp(v) * inv_s);
      }
    }
    return TC_OK;
  });
}

tc_status tc_softmax_backward_cpu(const tc_softmax_backward_params* p) {
  const char* op = "softmax_backward";
  TC_RETURN_IF_ERROR(softmax_check(p));
  return dispatch_cpu(p->dtype, op, [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    for (int64_t r = 0; r < p->rows; ++r) {
      const T* g = static_cast<const T*>(p->grad_y) + r * p->cols;
      const T* y = static_cast<const T*>(p->y) + r * p->cols;
      T* gx = static_cast<T*>(p->grad_x) + r * p->cols;
      A dot = 0;
      for (int64_t c = 0; c < p->cols; ++c) dot += p->log ? A(to_acc(g[c])) : A(to_acc(g[c])) * A(to_acc(y[c]));
      for (int64_t c = 0; c < p->cols; ++c) {
        const A gv = to_acc(g[c]), yv = to_acc(y[c]);
        gx[c] = from_acc<T>(p->log ? gv - std::exp(yv) * dot : yv * (gv - dot));
      }
    }
    return TC_OK;
  });
}
