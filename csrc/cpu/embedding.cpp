// embedding on the CPU (tinycuda/embedding.h).
//
// Forward: every index is checked first (an error names the first bad
// position, nothing is written), then each output row is a copy of its
// weight row (threads split the rows).
//
// Backward: a counting sort of the positions by id (stable: each id's
// positions stay in increasing order), then each id's row of grad_weight is
// the sum of its grad_out rows in that order, in a float (double) row buffer
// rounded once; rows of ids no position names, and padding_idx's, are zeros.
// Threads split the ids; the order of every sum is fixed by input alone, so
// the result does not depend on the thread count. The sort costs O(N + V)
// and 8 (N + V + 1) bytes.
#include <algorithm>
#include <cstring>
#include <new>
#include <vector>

#include "../shared/embedding_check.h"
#include "kit/cpu_utils.h"
#include "kit/parallel.h"

namespace {

// The first position of input[0, n) whose index is outside [0, v), or -1.
int64_t first_out_of_range(const int64_t* input, int64_t n, int64_t v) {
  for (int64_t i = 0; i < n; ++i)
    if (input[i] < 0 || input[i] >= v) return i;
  return -1;
}

tc_status out_of_range(const char* op, const int64_t* input, int64_t i, int64_t v) {
  return tc_fail(TC_ERR_INVALID_ARGUMENT,
                 "%s: index %lld at position %lld of input (flattened) is out of range [0, num_embeddings = %lld)",
                 op, (long long)input[i], (long long)i, (long long)v);
}

}  // namespace

tc_status tc_embedding_cpu(const tc_embedding_params* p) {
  TC_RETURN_IF_ERROR(embedding_check(p));
  const int64_t n = p->num_indices, v = p->num_embeddings, d = p->embedding_dim;
  if (const int64_t bad = first_out_of_range(p->input, n, v); bad >= 0)
    return out_of_range("embedding", p->input, bad, v);
  if (n * d == 0) return TC_OK;
  return dispatch_cpu(p->dtype, "embedding", [&](auto tag) -> tc_status {
    using T = decltype(tag);
    const T* w = static_cast<const T*>(p->weight);
    T* out = static_cast<T*>(p->out);
    const int64_t threads = threads_for(n, n * d);
    const bool ok = run_threads(threads, [&](int64_t t) {
      for (int64_t i = n * t / threads; i < n * (t + 1) / threads; ++i)
        std::memcpy(out + i * d, w + p->input[i] * d, size_t(d) * sizeof(T));
    });
    return ok ? TC_OK : tc_fail(TC_ERR_INTERNAL, "embedding: a CPU worker failed");
  });
}

tc_status tc_embedding_backward_cpu(const tc_embedding_backward_params* p) {
  TC_RETURN_IF_ERROR(embedding_check(p));
  const char* op = "embedding_backward";
  const int64_t n = p->num_indices, v = p->num_embeddings, d = p->embedding_dim;
  if (const int64_t bad = first_out_of_range(p->input, n, v); bad >= 0) return out_of_range(op, p->input, bad, v);
  if (v * d == 0) return TC_OK;
  return dispatch_cpu(p->dtype, op, [&](auto tag) -> tc_status {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* g = static_cast<const T*>(p->grad_out);
    T* gw = static_cast<T*>(p->grad_weight);
    // start[id] .. start[id + 1]: id's positions in order[], increasing
    std::vector<int64_t> start, order;
    try {
      start.assign(size_t(v) + 1, 0);
      order.resize(size_t(n));
    } catch (const std::bad_alloc&) {
      return tc_fail(TC_ERR_INTERNAL, "embedding_backward: out of memory for the sort of %lld positions by %lld ids",
                     (long long)n, (long long)v);
    }
    for (int64_t i = 0; i < n; ++i) ++start[size_t(p->input[i]) + 1];
    for (int64_t id = 0; id < v; ++id) start[size_t(id) + 1] += start[size_t(id)];
    for (int64_t i = 0; i < n; ++i) order[size_t(start[size_t(p->input[i])]++)] = i;
    for (int64_t id = v; id > 0; --id) start[size_t(id)] = start[size_t(id) - 1];  // the placement moved each start
    start[0] = 0;                                                                  // to the next id's: back one
    const int64_t threads = threads_for(v, (n + v) * d);
    const bool ok = run_threads(threads, [&](int64_t t) {
      std::vector<A> acc(static_cast<size_t>(d));
      for (int64_t id = v * t / threads; id < v * (t + 1) / threads; ++id) {
        T* row = gw + id * d;
        const int64_t a = start[size_t(id)], b = start[size_t(id) + 1];
        if (a == b || id == p->padding_idx) {
          std::memset(static_cast<void*>(row), 0, size_t(d) * sizeof(T));
          continue;
        }
        std::fill(acc.begin(), acc.end(), A(0));
        for (int64_t j = a; j < b; ++j) {
          const T* src = g + order[size_t(j)] * d;
          for (int64_t c = 0; c < d; ++c) acc[size_t(c)] += to_acc(src[c]);
        }
        for (int64_t c = 0; c < d; ++c) row[c] = from_acc<T>(acc[size_t(c)]);
      }
    });
    return ok ? TC_OK : tc_fail(TC_ERR_INTERNAL, "embedding_backward: a CPU worker failed (out of memory?)");
  });
}
