// adamw and multi_tensor_l2norm on the CPU: a loop per tensor, threaded over
// ranges of a tensor's elements; the norm sums kNormChunk-element chunks left
// to right, then the chunks in order (CUDA's chunks, each summed by a tree
// there: the order is fixed by the shapes, not the thread count).
#include <type_traits>
#include <vector>

#include "../shared/adamw_math.h"
#include "kit/cpu_utils.h"
#include "kit/parallel.h"

tc_status tc_adamw_cpu(const tc_adamw_params* p) {
  TC_RETURN_IF_ERROR(adamw_check(p));
  return dispatch_cpu(p->dtype, "adamw_", [&](auto tag) -> tc_status {
    using T = decltype(tag);
    using A = acc_t<T>;
    const AdamwCoefs<A> c = adamw_coefs<A>(p);
    const A clip = p->grad_norm ? clip_coef(*static_cast<const A*>(p->grad_norm), A(p->max_grad_norm)) : A(1);
    for (int64_t t = 0; t < p->count; ++t) {
      const int64_t n = p->numel[t];
      T* w = static_cast<T*>(p->params[t]);
      const T* g = static_cast<const T*>(p->grads[t]);
      const int64_t threads = threads_for(n, 8 * n);
      // the state in T, or (master weights: 16-bit T) in float beside a float copy of the parameter
      auto step = [&](auto* m, auto* v, float* master) {
        return run_threads(threads, [&](int64_t k) {
          const int64_t lo = n * k / threads, hi = n * (k + 1) / threads;
          for (int64_t i = lo; i < hi; ++i) {
            A pi = master ? A(master[i]) : A(to_acc(w[i])), mi = A(to_acc(m[i])), vi = A(to_acc(v[i]));
            adamw_update(pi, A(to_acc(g[i])) * clip, mi, vi, c);
            if (master) master[i] = float(pi);
            w[i] = from_acc<T>(pi);
            m[i] = from_acc<std::remove_pointer_t<decltype(m)>>(mi), v[i] = from_acc<std::remove_pointer_t<decltype(v)>>(vi);
          }
        });
      };
      const bool ok = p->master ? step(static_cast<float*>(p->exp_avg[t]), static_cast<float*>(p->exp_avg_sq[t]),
                                       static_cast<float*>(p->master[t]))
                                : step(static_cast<T*>(p->exp_avg[t]), static_cast<T*>(p->exp_avg_sq[t]), nullptr);
      if (!ok) return tc_fail(TC_ERR_INTERNAL, "adamw_: a CPU worker thread failed");
    }
    return TC_OK;
  });
}

tc_status tc_multi_tensor_l2norm_cpu(const tc_multi_tensor_l2norm_params* p) {
  TC_RETURN_IF_ERROR(l2norm_check(p));
  return dispatch_cpu(p->dtype, "multi_tensor_l2norm", [&](auto tag) -> tc_status {
    using T = decltype(tag);
    using A = acc_t<T>;
    std::vector<const T*> chunk_ptr;
    std::vector<int64_t> chunk_len;
    for (int64_t t = 0; t < p->count; ++t)
      for (int64_t i = 0; i < p->numel[t]; i += kNormChunk) {
        chunk_ptr.push_back(static_cast<const T*>(p->tensors[t]) + i);
        chunk_len.push_back(std::min(kNormChunk, p->numel[t] - i));
      }
    const int64_t chunks = int64_t(chunk_ptr.size());
    std::vector<A> partial(size_t(chunks), A(0));
    const int64_t threads = threads_for(chunks, chunks * kNormChunk);
    const bool ok = run_threads(threads, [&](int64_t k) {
      for (int64_t j = chunks * k / threads; j < chunks * (k + 1) / threads; ++j) {
        A s = 0;
        for (int64_t i = 0; i < chunk_len[j]; ++i) {
          const A x = to_acc(chunk_ptr[j][i]);
          s += x * x;
        }
        partial[j] = s;
      }
    });
    if (!ok) return tc_fail(TC_ERR_INTERNAL, "multi_tensor_l2norm: a CPU worker thread failed");
    A total = 0;
    for (A s : partial) total += s;
    *static_cast<A*>(p->norm) = std::sqrt(total);
    return TC_OK;
  });
}
