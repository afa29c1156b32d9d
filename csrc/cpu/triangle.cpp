// triangle family, CPU: triu and tril (tinycuda/triangle.h). A row is three
// runs of bytes, whatever the dtype: zeros, x's kept columns (memcpy), zeros.
// Threads take whole rows.
#include <cstring>

#include "kit/parallel.h"
#include "../shared/triangle_check.h"

tc_status tc_triangle_cpu(const tc_triangle_params* p) {
  TC_RETURN_IF_ERROR(triangle_check(p));
  const int64_t rows = p->batch * p->rows, cols = p->cols, e = p->elem_bytes;
  if (rows * cols == 0) return TC_OK;
  const bool triu = p->op == TC_TRIANGLE_TRIU;
  const int64_t diagonal = triangle_diagonal(p), threads = threads_for(rows, rows * cols * e / 4);
  const char* x = static_cast<const char*>(p->x);
  char* y = static_cast<char*>(p->y);
  const bool ok = run_threads(threads, [&](int64_t t) {
    for (int64_t r = rows * t / threads; r < rows * (t + 1) / threads; ++r) {
      const KeptColumns k = kept_columns(triu, r % p->rows, cols, diagonal);
      char* row = y + r * cols * e;
      std::memset(row, 0, size_t(k.begin * e));
      std::memcpy(row + k.begin * e, x + (r * cols + k.begin) * e, size_t((k.end - k.begin) * e));
      std::memset(row + k.end * e, 0, size_t((cols - k.end) * e));
    }
  });
  return ok ? TC_OK : tc_fail(TC_ERR_INTERNAL, "%s: a CPU worker failed", triangle_name(p->op));
}
