// layer_norm / rms_norm / add_rms_norm on the CPU (RMS: no mean, no bias;
// add: x + residual first, written out), shared by cpu/layer_norm.cpp,
// cpu/rms_norm.cpp and cpu/add_rms_norm.cpp. Row by row: two passes for the
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

// v rounded to T and back (identity for float and double)
template <class T>
acc_t<T> rounded(acc_t<T> v) {
  return acc_t<T>(to_acc(from_acc<T>(v)));
}

// rms_norm's factor at column c: offset + w[c], rounded to T unless casting
// is GEMMA (rms_norm.h)
template <class T>
acc_t<T> weight_at(const T* w, int64_t c, double offset, int casting) {
  const acc_t<T> v = acc_t<T>(to_acc(w[c])) + acc_t<T>(offset);
  return casting == TC_RMS_CAST_GEMMA ? v : rounded<T>(v);
}

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
      const A r0 = A(1) / std::sqrt(A(ss * inv_n) + A(f.eps));
      const A rstd = f.casting == TC_RMS_CAST_NONE ? rounded<T>(r0) : r0;
      if (f.mean) static_cast<A*>(f.mean)[r] = mean;
      if (f.rstd) static_cast<A*>(f.rstd)[r] = rstd;
      for (int64_t c = 0; c < f.cols; ++c) {
        A v = (A(to_acc(x[c])) - mean) * rstd;
        if (f.casting != TC_RMS_CAST_GEMMA) v = rounded<T>(v);
        if (w) v *= weight_at(w, c, f.offset, f.casting);
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
        wg = w ? gy * weight_at(w, c, p.offset, p.casting) : gy;
        if (p.casting != TC_RMS_CAST_GEMMA) wg = rounded<T>(wg);
      };
      double sum_wg = 0, sum_wgx = 0;
      A xhat, gy, wg;
      for (int64_t c = 0; c < p.cols; ++c) {
        at(c, xhat, gy, wg);
        sum_wg += wg;
        sum_wgx += wg * xhat;
        if (!dw.empty()) dw[c] += gy * (p.casting == TC_RMS_CAST_GEMMA ? xhat : rounded<T>(xhat));
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
