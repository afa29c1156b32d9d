// The histogram family's checks and workspace sizes, shared by both devices
// and both doors.
#include <cmath>

#include "histogram_math.h"
#include "histogram_plan.h"

tc_status histc_check(const tc_histc_params* p) {
  TC_REQUIRE(p, "histc: params is NULL");
  TC_REQUIRE(p->n >= 0, "histc: n must be >= 0, got %lld", (long long)p->n);
  TC_REQUIRE(p->bins >= 1, "histc: bins must be >= 1, got %lld", (long long)p->bins);
  TC_REQUIRE(std::isfinite(p->min) && std::isfinite(p->max), "histc: range of [%g, %g] is not finite", p->min,
             p->max);
  TC_REQUIRE(p->min < p->max, "histc: max must be larger than min, got min %g and max %g", p->min, p->max);
  TC_REQUIRE(p->out && (p->n == 0 || p->x), "histc: x or out is NULL");
  return TC_OK;
}

tc_status bincount_check(const tc_bincount_params* p) {
  TC_REQUIRE(p, "bincount: params is NULL");
  TC_REQUIRE(p->n >= 0, "bincount: n must be >= 0, got %lld", (long long)p->n);
  TC_REQUIRE(p->bins >= (p->n > 0 ? 1 : 0), "bincount: bins must be >= 1 (every x_i in [0, bins)), got %lld",
             (long long)p->bins);
  TC_REQUIRE(!p->weights || p->dtype == TC_FLOAT32 || p->dtype == TC_FLOAT64,
             "bincount: weights must be float32 or float64, got dtype code %d", int(p->dtype));
  TC_REQUIRE((p->bins == 0 || p->out) && (p->n == 0 || p->x), "bincount: x or out is NULL");
  return TC_OK;
}

tc_status histogram_range_check(const tc_histogram_range_params* p) {
  TC_REQUIRE(p, "histogram_range: params is NULL");
  TC_REQUIRE(p->n >= 1, "histogram_range: n must be >= 1 (an empty x has no range), got %lld", (long long)p->n);
  TC_REQUIRE(p->x && p->out, "histogram_range: x or out is NULL");
  return TC_OK;
}

size_t tc_histc_workspace_size(const tc_histc_params* p) {
  if (histc_check(p) != TC_OK || p->n == 0) return 0;
  return plan::hist_workspace(plan::histogram(p->n, p->bins, 0), p->bins, 0);
}

size_t tc_bincount_workspace_size(const tc_bincount_params* p) {
  if (bincount_check(p) != TC_OK || p->n == 0) return 0;
  const size_t acc = bincount_acc_bytes(p);
  return plan::hist_workspace(plan::histogram(p->n, p->bins, acc), p->bins, acc);
}

size_t tc_histogram_range_workspace_size(const tc_histogram_range_params* p) {
  return histogram_range_check(p) == TC_OK ? size_t(plan::range_rows(p->n)) * 2 * 8 : 0;
}
