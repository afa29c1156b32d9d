// scale_bias_relu on the CPU: row by row; grad_bias accumulated per column in
// the accumulator type across all rows (one stage: no workspace needed).
#include <vector>

#include "../shared/scale_bias_relu_check.h"
#include "../shared/reduce_plan.h"
#include "kit/cpu_utils.h"

tc_status tc_scale_bias_relu_cpu(const tc_scale_bias_relu_params* p) {
  TC_RETURN_IF_ERROR(scale_bias_relu_check(p));
  return dispatch_cpu(p->dtype, "scale_bias_relu", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* x = static_cast<const T*>(p->x);
    const T* b = static_cast<const T*>(p->bias);
    T* y = static_cast<T*>(p->y);
    const A s = A(p->scale);
    for (int64_t r = 0; r < p->rows; ++r) {
      for (int64_t c = 0; c < p->cols; ++c) {
        A v = to_acc(x[r * p->cols + c]) * s + to_acc(b[c]);
        y[r * p->cols + c] = from_acc<T>(v > 0 || v != v ? v : A(0));
      }
    }
    return TC_OK;
  });
}

// Sizes the CUDA path's per-slice bias partials (the CPU path needs none).
size_t tc_scale_bias_relu_backward_workspace_size(const tc_scale_bias_relu_backward_params* p) {
  return p && p->grad_bias ? plan::column_partials_bytes(p->rows, p->cols, p->dtype) : 0;
}

tc_status tc_scale_bias_relu_backward_cpu(const tc_scale_bias_relu_backward_params* p) {
  TC_RETURN_IF_ERROR(scale_bias_relu_check(p));
  return dispatch_cpu(p->dtype, "scale_bias_relu_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* g = static_cast<const T*>(p->grad_y);
    const T* y = static_cast<const T*>(p->y);
    T* gx = static_cast<T*>(p->grad_x);
    T* gb = static_cast<T*>(p->grad_bias);
    const A s = A(p->scale);
    std::vector<A> colsum(gb ? p->cols : 0, A(0));
    for (int64_t r = 0; r < p->rows; ++r) {
      for (int64_t c = 0; c < p->cols; ++c) {
        int64_t i = r * p->cols + c;
        A masked = to_acc(y[i]) > 0 ? to_acc(g[i]) : A(0);
        if (gx) gx[i] = from_acc<T>(masked * s);
        if (gb) colsum[c] += masked;
      }
    }
    if (gb)
      for (int64_t c = 0; c < p->cols; ++c) gb[c] = from_acc<T>(colsum[c]);
    return TC_OK;
  });
}
