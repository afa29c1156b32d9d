// cross_entropy on the CPU: per row one online pass for (max, sum of exp,
// sum of logits), then one pass writing the gradient. Statistics in double
// for every dtype (a sequential float sum over 128K classes drifts by ~1e-5
// relative). Targets are checked before anything is written.
#include <cmath>

#include "tinycuda/cross_entropy.h"
#include "../shared/cross_entropy_math.h"
#include "../shared/softmax_math.h"
#include "kit/cpu_utils.h"

// Sizes the CUDA path's workspace (the CPU path needs none); it lives here
// because this file is built in every configuration.
size_t tc_cross_entropy_workspace_size(const tc_cross_entropy_params* p) {
  return p ? ce::workspace_bytes(*p) : 0;
}

tc_status tc_cross_entropy_cpu(const tc_cross_entropy_params* p) {
  const char* op = "cross_entropy";
  TC_RETURN_IF_ERROR(ce::check(p, op));
  const int64_t rows = p->rows, cols = p->cols;
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = p->target[r];
    TC_REQUIRE(t == p->ignore_index || (t >= 0 && t < cols),
               "%s: target %lld at row %lld is out of range [0, %lld)", op, (long long)t,
               (long long)r, (long long)cols);
    count += t != p->ignore_index;
  }
  return dispatch_cpu(p->dtype, op, [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const double n_valid = p->n_valid ? double(*p->n_valid) : double(count);
    const double scale = p->reduction == TC_REDUCTION_MEAN ? 1.0 / n_valid : 1.0;
    const double eps = p->label_smoothing, smooth = eps / double(cols), cap = p->softcap;
    const double zs = p->lse_square_scale;
    double total = 0, total_z = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t t = p->target[r];
      const T* x = static_cast<const T*>(p->logits) + r * cols;
      T* g = p->grad_logits ? static_cast<T*>(p->grad_logits) + r * cols : nullptr;
      double loss = 0, z = 0;
      auto logit = [&](int64_t c) { return ce::capped(double(to_acc(x[c])), cap); };
      if (t == p->ignore_index) {
        if (g)
          for (int64_t c = 0; c < cols; ++c) g[c] = from_acc<T>(A(0));
      } else {
        double m = -INFINITY, s = 0, sum_x = 0;
        for (int64_t c = 0; c < cols; ++c) {
          const double v = logit(c);
          online_add(m, s, v);
          sum_x += v;
        }
        online_finish(m, s);
        // read before the gradient loop: g may be x itself
        loss = ce::row_loss(m, std::log(s), logit(t), sum_x, eps, cols);
        const double lse = m + std::log(s);
        if (zs > 0) z = zs * lse * lse;  // (0 * inf would be NaN)
        loss += z;
        if (g) {
          const double inv_s = (zs > 0 ? 1.0 + 2.0 * zs * lse : 1.0) / s;
          for (int64_t c = 0; c < cols; ++c) {
            const double xc = logit(c), prob = std::exp(xc - m) * inv_s;
            g[c] = from_acc<T>(A((prob - (c == t ? 1.0 - eps : 0.0) - smooth) * scale * ce::cap_slope(xc, cap)));
          }
        }
      }
      if (p->z_loss && p->reduction == TC_REDUCTION_NONE) static_cast<T*>(p->z_loss)[r] = from_acc<T>(A(z));
      total_z += z;
      if (p->row_loss) static_cast<A*>(p->row_loss)[r] = A(loss);
      if (p->loss && p->reduction == TC_REDUCTION_NONE) static_cast<T*>(p->loss)[r] = from_acc<T>(A(loss));
      total += loss;
    }
    const double div = p->reduction == TC_REDUCTION_MEAN ? n_valid : 1.0;
    if (p->loss && p->reduction != TC_REDUCTION_NONE) *static_cast<T*>(p->loss) = from_acc<T>(A(total / div));
    if (p->z_loss && p->reduction != TC_REDUCTION_NONE) *static_cast<T*>(p->z_loss) = from_acc<T>(A(total_z / div));
    return TC_OK;
  });
}

tc_status tc_cross_entropy_backward_cpu(const tc_cross_entropy_backward_params* p) {
  const char* op = "cross_entropy_backward";
  TC_RETURN_IF_ERROR(ce::check(p, op));
  if (p->rows * p->cols == 0) return TC_OK;
  return dispatch_cpu(p->dtype, op, [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    T* g = static_cast<T*>(p->grad_logits);
    const T* scale = static_cast<const T*>(p->grad_loss);
    for (int64_t r = 0; r < p->rows; ++r) {
      const A s = to_acc(scale[p->per_row ? r : 0]);
      if (s == A(1)) continue;
      for (int64_t c = 0; c < p->cols; ++c) g[r * p->cols + c] = from_acc<T>(A(to_acc(g[r * p->cols + c])) * s);
    }
    return TC_OK;
  });
}
