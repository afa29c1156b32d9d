// cross_entropy on the CPU: per row one online pass for (max, sum of exp,
// sum of logits), then one pass writing the gradient (times the row's
// grad_loss, when given, before it is rounded; grad_in_place: only the rows
// whose grad_loss is not 1). Statistics in double
// for every dtype (a sequential float sum over 128K classes drifts by ~1e-5
// relative). Targets are checked before anything is written. Token accuracy
// (opt-in) tracks the row's argmax in the statistics pass, a loop of its own
// so that the plain loop stays as it was.
#include <cmath>

#include "tinycuda/cross_entropy.h"
#include "../shared/cross_entropy_math.h"
#include "../shared/softmax_math.h"
#include "kit/cpu_utils.h"

// Sizes the CUDA path's workspace (the CPU path needs none), and the chunk of
// a chunked caller; they live here because this file is built in every
// configuration.
size_t tc_cross_entropy_workspace_size(const tc_cross_entropy_params* p) {
  return p ? ce::workspace_bytes(*p) : 0;
}

int64_t tc_fused_linear_cross_entropy_chunk(int64_t tokens, int64_t hidden, int64_t classes,
                                            int64_t accum_bytes) {
  const int64_t h = hidden > 0 ? hidden : 1, factor = (classes + h - 1) / h;
  const int64_t want = factor > 0 ? (tokens + factor - 1) / factor : tokens;
  int64_t chunk = accum_bytes >= 4 ? 1024 : 512;
  while (chunk < want) chunk *= 2;
  return chunk < tokens ? chunk : (tokens > 1 ? tokens : 1);
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
    const T* w = static_cast<const T*>(p->weight);  // NULL: every class weighs 1
    const T* grad_loss = static_cast<const T*>(p->grad_loss);
    const double n_valid = p->n_valid ? double(*p->n_valid) : double(count);
    const bool mean = p->reduction == TC_REDUCTION_MEAN;
    // with weights: Wsum (all classes) and, for MEAN, W (the divisor of the weighted terms)
    double wsum = 0, w_valid = 0;
    if (w) {
      for (int64_t c = 0; c < cols; ++c) wsum += double(to_acc(w[c]));
      if (mean && p->target_weight_sum)
        w_valid = double(*static_cast<const A*>(p->target_weight_sum));
      else if (mean)
        for (int64_t r = 0; r < rows; ++r)
          if (p->target[r] != p->ignore_index) w_valid += double(to_acc(w[p->target[r]]));
    }
    const double scale = mean ? 1.0 / (w ? w_valid : n_valid) : 1.0, scale_z = mean ? 1.0 / n_valid : 1.0;
    const double eps = p->label_smoothing, smooth = eps / double(cols), cap = p->softcap;
    const double zs = p->lse_square_scale;
    const bool accuracy = ce::wants_accuracy(*p);
    double total = 0, total_z = 0;
    int64_t n_correct = 0;
    for (int64_t r = 0; r < rows; ++r) {
      // grad_in_place: the row holds the gradient for grad_loss = 1 already, which is this row's exactly
      // when its grad_loss is 1 (scale * 1.0 is scale); nothing else is written
      if (p->grad_in_place && to_acc(grad_loss[p->grad_loss_per_row ? r : 0]) == A(1)) continue;
      const int64_t t = p->target[r];
      const T* x = static_cast<const T*>(p->logits) + r * cols;
      T* g = p->grad_logits ? static_cast<T*>(p->grad_logits) + r * cols : nullptr;
      double loss = 0, z = 0;
      bool correct = false;
      auto logit = [&](int64_t c) { return ce::capped(double(to_acc(x[c])), cap); };
      if (t == p->ignore_index) {
        if (g)
          for (int64_t c = 0; c < cols; ++c) g[c] = from_acc<T>(A(0));
      } else {
        // sum_x: with weights and smoothing sum_c w_c x_c (a 0 weight times an
        // infinite logit is NaN then, as torch's sum of w_c log p_c)
        const bool wx = w && eps > 0;
        double m = -INFINITY, s = 0, sum_x = 0;
        auto add = [&](int64_t c) {
          const double v = logit(c);
          online_add(m, s, v);
          sum_x += wx ? double(to_acc(w[c])) * v : v;
        };
        if (accuracy) {  // the raw logits' argmax (cross_entropy.h), from (-inf, cols): the first element wins
          ce::Argmax<double, int64_t> best{-INFINITY, cols};
          for (int64_t c = 0; c < cols; ++c) {
            best = ce::argmax_merge(best, {double(to_acc(x[c])), c});
            add(c);
          }
          correct = best.i == t;
        } else {
          for (int64_t c = 0; c < cols; ++c) add(c);
        }
        online_finish(m, s);
        // read before the gradient loop: g may be x itself
        const double wt = w ? double(to_acc(w[t])) : 1.0;
        loss = w ? ce::row_loss_weighted(m, std::log(s), logit(t), sum_x, wt, wsum, eps, cols)
                 : ce::row_loss(m, std::log(s), logit(t), sum_x, eps, cols);
        const double lse = m + std::log(s);
        if (zs > 0) z = zs * lse * lse;  // (0 * inf would be NaN)
        // the row's upstream gradient, in the scale factors: the gradient is rounded once
        const double gl = p->grad_loss ? double(to_acc(grad_loss[p->grad_loss_per_row ? r : 0])) : 1.0;
        const double sg = scale * gl, sg_z = scale_z * gl;
        if (g && !w) {
          const double inv_s = (zs > 0 ? 1.0 + 2.0 * zs * lse : 1.0) / s;
          for (int64_t c = 0; c < cols; ++c) {
            const double xc = logit(c), prob = std::exp(xc - m) * inv_s;
            g[c] = from_acc<T>(A((prob - (c == t ? 1.0 - eps : 0.0) - smooth) * sg * ce::cap_slope(xc, cap)));
          }
        } else if (g) {
          // p ((1-eps) w_t + eps/V Wsum) sg + p 2 zs lse sg_z - (1-eps) w_t sg [c == t] - eps/V w_c sg,
          // sg = scale * grad_loss
          const double inv_s = (((1.0 - eps) * wt + smooth * wsum) * sg + (zs > 0 ? 2.0 * zs * lse * sg_z : 0.0)) / s;
          const double at_target = (1.0 - eps) * wt * sg, bias = smooth * sg;
          for (int64_t c = 0; c < cols; ++c) {
            const double xc = logit(c), prob = std::exp(xc - m) * inv_s;
            const double gc = prob - (c == t ? at_target : 0.0) - (eps > 0 ? bias * double(to_acc(w[c])) : 0.0);
            g[c] = from_acc<T>(A(gc * ce::cap_slope(xc, cap)));
          }
        }
      }
      const double row = loss + z;
      if (p->z_loss && p->reduction == TC_REDUCTION_NONE) static_cast<T*>(p->z_loss)[r] = from_acc<T>(A(z));
      if (p->row_z) static_cast<A*>(p->row_z)[r] = A(z);
      total_z += z;
      if (p->row_loss) static_cast<A*>(p->row_loss)[r] = A(row);
      if (p->loss && p->reduction == TC_REDUCTION_NONE) static_cast<T*>(p->loss)[r] = from_acc<T>(A(row));
      total += w ? loss : row;  // with weights the z terms apart (MEAN divides them by n_valid)
      n_correct += correct;
      if (p->row_correct) p->row_correct[r] = correct ? 1.0f : 0.0f;
      if (p->token_accuracy && p->reduction == TC_REDUCTION_NONE) p->token_accuracy[r] = correct ? 1.0f : 0.0f;
    }
    const double div = mean ? n_valid : 1.0;
    const double reduced = !w     ? total / div
                           : mean ? total / w_valid + (zs > 0 ? total_z / n_valid : 0.0)
                                  : total + total_z;
    if (p->loss && p->reduction != TC_REDUCTION_NONE) *static_cast<T*>(p->loss) = from_acc<T>(A(reduced));
    if (p->z_loss && p->reduction != TC_REDUCTION_NONE) *static_cast<T*>(p->z_loss) = from_acc<T>(A(total_z / div));
    // SUM and MEAN alike: the fraction correct (0 / 0: NaN)
    if (ce::reduces_accuracy(*p)) *p->token_accuracy = float(double(n_correct) / n_valid);
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
