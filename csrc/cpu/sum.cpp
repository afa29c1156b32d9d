// sum on the CPU. Accumulates in double for every dtype: a sequential float
// sum over 2^20 terms drifts by ~1e-4 relative, double keeps it at rounding.
#include <vector>

#include "../shared/reduce_plan.h"
#include "../shared/sum_check.h"
#include "kit/cpu_utils.h"


// Sizes the CUDA path's partial sums (the CPU path needs none); it lives here
// because this file is built in every configuration.
size_t tc_sum_workspace_size(const tc_sum_params* p) {
  return p ? plan::sum_workspace(p->dtype, p->outer, p->reduce, p->inner) : 0;
}

tc_status tc_sum_cpu(const tc_sum_params* p) {
  TC_RETURN_IF_ERROR(sum_check(p));
  return dispatch_cpu(p->dtype, "sum", [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(p->x);
    T* y = static_cast<T*>(p->y);
    std::vector<double> acc(p->inner);
    for (int64_t o = 0; o < p->outer; ++o) {
      std::fill(acc.begin(), acc.end(), 0.0);
      const T* xo = x + o * p->reduce * p->inner;
      for (int64_t r = 0; r < p->reduce; ++r)
        for (int64_t i = 0; i < p->inner; ++i) acc[i] += double(to_acc(xo[r * p->inner + i]));
      for (int64_t i = 0; i < p->inner; ++i) y[o * p->inner + i] = from_acc<T>(acc_t<T>(acc[i]));
    }
    return TC_OK;
  });
}

tc_status tc_sum_backward_cpu(const tc_sum_backward_params* p) {
  TC_RETURN_IF_ERROR(sum_check(p));
  return dispatch_cpu(p->dtype, "sum_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* g = static_cast<const T*>(p->grad_y);
    T* gx = static_cast<T*>(p->grad_x);
    for (int64_t o = 0; o < p->outer; ++o)
      for (int64_t r = 0; r < p->reduce; ++r)
        for (int64_t i = 0; i < p->inner; ++i)
          gx[(o * p->reduce + r) * p->inner + i] = g[o * p->inner + i];
    return TC_OK;
  });
}
