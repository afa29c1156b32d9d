// The sort family's argument checks and its workspace size, shared by both
// devices and both doors.
#include "sort_math.h"
#include "sort_plan.h"

tc_status sort_check(const tc_sort_params* p) {
  TC_REQUIRE(p, "sort: params is NULL");
  TC_REQUIRE(p->rows >= 0 && p->n >= 0, "sort: rows and n must be >= 0, got %lld and %lld", (long long)p->rows,
             (long long)p->n);
  TC_REQUIRE(p->k >= 0 && p->k <= p->n, "sort: k must be in [0, n = %lld], got %lld", (long long)p->n,
             (long long)p->k);
  TC_REQUIRE(p->rows * p->k == 0 || (p->x && p->indices), "sort: x or indices is NULL");
  return TC_OK;
}

tc_status sort_check(const tc_sort_backward_params* p) {
  TC_REQUIRE(p, "sort_backward: params is NULL");
  TC_REQUIRE(p->rows >= 0 && p->n >= 0, "sort_backward: rows and n must be >= 0, got %lld and %lld",
             (long long)p->rows, (long long)p->n);
  TC_REQUIRE(p->k >= 0 && p->k <= p->n, "sort_backward: k must be in [0, n = %lld], got %lld", (long long)p->n,
             (long long)p->k);
  TC_REQUIRE(p->rows * p->n == 0 || p->grad_x, "sort_backward: grad_x is NULL");
  TC_REQUIRE(p->rows * p->k == 0 || (p->grad_values && p->indices), "sort_backward: grad_values or indices is NULL");
  return TC_OK;
}

size_t tc_sort_workspace_size(const tc_sort_params* p) {
  if (sort_check(p) != TC_OK) return 0;
  size_t bytes = 0;
  const tc_status s = dispatch_sort(p->dtype, false, "sort", [&](auto m) {
    bytes = plan::sort(p->rows, p->n, p->k, sizeof(typename decltype(m)::Bits), p->values != nullptr).total;
    return TC_OK;
  });
  return s == TC_OK ? bytes : 0;
}
