// layer_norm / rms_norm on the CPU (RMS: no mean, no bias), shared by
// cpu/layer_norm.cpp and cpu/rms_norm.cpp. Row by row: two passes for the
// statistics (mean, then the centered sum of squares), one to write. The
// backward adds grad_weight / grad_bias per column over all rows (one stage:
// no workspace). Sums are in double: added one by one in float, 4096 values
// near 1000 give a mean ~1e-3 off (the CUDA kernels' tree of partial sums
// does not drift so); results and statistics are rounded to the accumulator
// type (float).
#pragma once
#include <vector>

#include "../shared/norm_plan.h"
#include "kit/cpu_utils.h"

template <bool RMS>
tc_status norm_forward_cpu(const norms::Forward& f) {
  TC_RETURN_IF_ERROR(norms::check(f));
  return dispatch_cpu(f.dtype, f.op, [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* w = static_cast<const T*>(f.weight);
    const T* b = static_cast<const T*>(f.bias);
    const double inv_n = f.cols ? 1.0 / double(f.cols) : 0.0;
    for (int64_t r = 0; r < f.rows; ++r) {
      const T* x = static_cast<const T*>(f.x) + r * f.cols;
      T* y = static_cast<T*>(f.y) + r * f.cols;
      if (f.add) {  // normalize the rounded sum, as rms_norm(x + residual) would
        const T* res = static_cast<const T*>(f.residual) + r * f.cols;
        T* sum = static_cast<T*>(f.sum) + r * f.cols;
        for (int64_t c = 0; c < f.cols; ++c) sum[c] = from_acc<T>(A(to_acc(x[c])) + A(to_acc(res[c])));
        x = sum;
      }
      double sum = 0, ss = 0;
      if (!RMS)
        for (int64_t c = 0; c < f.cols; ++c) sum += to_acc(x[c]);
      const A mean = A(sum * inv_n);
      for (int64_t c = 0; c < f.cols; ++c) {
        const A d = A(to_acc(x[c])) - mean;
        ss += d * d;
      }
      const A rstd = A(1) / std::sqrt(A(ss * inv_n) + A(f.eps));
      if (f.mean) static_cast<A*>(f.mean)[r] = mean;
      if (f.rstd) static_cast<A*>(f.rstd)[r] = rstd;
      for (int64_t c = 0; c < f.cols; ++c) {
        A v = (A(to_acc(x[c])) - mean) * rstd;
        if (w) v *= A(to_acc(w[c]));
        if (b) v += A(to_acc(b[c]));
        y[c] = from_acc<T>(v);
      }
    }
    return TC_OK;
  });
}

template <bool RMS>
tc_status norm_backward_cpu(const norms::Backward& p) {
  TC_RETURN_IF_ERROR(norms::check(p, RMS));
  return dispatch_cpu(p.dtype, p.op, [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* w = static_cast<const T*>(p.weight);
    T* gx = static_cast<T*>(p.grad_x);
    const T* gs = static_cast<const T*>(p.grad_sum);
    std::vector<double> dw(p.grad_weight ? p.cols : 0), db(p.grad_bias ? p.cols : 0);
    const double inv_n = p.cols ? 1.0 / double(p.cols) : 0.0;
    for (int64_t r = 0; r < p.rows; ++r) {
      const T* x = static_cast<const T*>(p.x) + r * p.cols;
      const T* g = static_cast<const T*>(p.grad_y) + r * p.cols;
      const A mean = RMS ? A(0) : static_cast<const A*>(p.mean)[r];
      const A rstd = static_cast<const A*>(p.rstd)[r];
      auto at = [&](int64_t c, A& xhat, A& gy, A& wg) {
        xhat = (A(to_acc(x[c])) - mean) * rstd;
        gy = to_acc(g[c]);
        wg = w ? gy * A(to_acc(w[c])) : gy;
      };
      double sum_wg = 0, sum_wgx = 0;
      A xhat, gy, wg;
      for (int64_t c = 0; c < p.cols; ++c) {
        at(c, xhat, gy, wg);
        sum_wg += wg;
        sum_wgx += wg * xhat;
        if (!dw.empty()) dw[c] += gy * xhat;
        if (!db.empty()) db[c] += gy;
      }
      if (!gx) continue;
      const A mean_wg = RMS ? A(0) : A(sum_wg * inv_n), mean_wgx = A(sum_wgx * inv_n);
      for (int64_t c = 0; c < p.cols; ++c) {
        at(c, xhat, gy, wg);
        const A add = gs ? A(to_acc(gs[r * p.cols + c])) : A(0);
        gx[r * p.cols + c] = from_acc<T>(rstd * (wg - mean_wg - xhat * mean_wgx) + add);
      }
    }
    T* gw = static_cast<T*>(p.grad_weight);
    T* gb = static_cast<T*>(p.grad_bias);
    for (size_t c = 0; c < dw.size(); ++c) gw[c] = from_acc<T>(A(dw[c]));
    for (size_t c = 0; c < db.size(); ++c) gb[c] = from_acc<T>(A(db[c]));
    return TC_OK;
  });
}
