// The scan family's op list (each op's torch schema: the one place its name,
// arguments and defaults are written), its checks and its workspace sizes,
// shared by both devices and both doors.
#include <array>
#include <string>

#include "scan_math.h"
#include "scan_plan.h"

namespace {
const char* const kSchemas[TC_SCAN_COUNT] = {
    "cumsum(Tensor x, int dim, *, bool reverse=False, bool exclusive=False) -> Tensor",
    "cumprod(Tensor x, int dim, *, bool reverse=False, bool exclusive=False) -> Tensor",
    "logcumsumexp(Tensor x, int dim, *, bool reverse=False, bool exclusive=False) -> Tensor",
};

tc_status op_check(const char* fn, int op) {
  TC_REQUIRE(op >= 0 && op < TC_SCAN_COUNT, "%s: op must be in [0, %d), got %d", fn, TC_SCAN_COUNT, op);
  return TC_OK;
}

tc_status shape_check(const char* name, int64_t outer, int64_t n, int64_t inner) {
  TC_REQUIRE(outer >= 0 && n >= 0 && inner >= 0, "%s: outer, n and inner must be >= 0, got %lld, %lld, %lld", name,
             (long long)outer, (long long)n, (long long)inner);
  return TC_OK;
}

template <class P> size_t workspace(const P* p, bool backward) {
  const size_t state = scan_state_bytes(p->dtype, p->op, backward);
  return plan::scan_workspace(plan::scan(p->outer, p->n, p->inner, state), state).total;
}
}  // namespace

const char* tc_scan_schema(int op) { return op >= 0 && op < TC_SCAN_COUNT ? kSchemas[op] : nullptr; }

const char* scan_name(int op, bool backward) {
  static const auto names = [] {  // built once, before any thread can ask
    std::array<std::array<std::string, TC_SCAN_COUNT>, 2> n;
    for (int k = 0; k < TC_SCAN_COUNT; ++k) {
      const std::string schema = kSchemas[k];
      n[0][k] = schema.substr(0, schema.find('('));
      n[1][k] = n[0][k] + "_backward";
    }
    return n;
  }();
  if (op < 0 || op >= TC_SCAN_COUNT) return backward ? "scan_backward" : "scan";
  return names[backward][op].c_str();
}

tc_status scan_check(const tc_scan_params* p) {
  TC_REQUIRE(p, "scan: params is NULL");
  TC_RETURN_IF_ERROR(op_check("scan", p->op));
  const char* name = scan_name(p->op);
  TC_RETURN_IF_ERROR(shape_check(name, p->outer, p->n, p->inner));
  TC_REQUIRE(p->outer * p->n * p->inner == 0 || (p->x && p->y), "%s: x or y is NULL", name);
  return TC_OK;
}

tc_status scan_check(const tc_scan_backward_params* p) {
  TC_REQUIRE(p, "scan_backward: params is NULL");
  TC_RETURN_IF_ERROR(op_check("scan_backward", p->op));
  const char* name = scan_name(p->op, true);
  TC_RETURN_IF_ERROR(shape_check(name, p->outer, p->n, p->inner));
  TC_REQUIRE(p->outer * p->n * p->inner == 0 || (p->grad_y && p->x && p->y && p->grad_x),
             "%s: grad_y, x, y or grad_x is NULL", name);
  return TC_OK;
}

size_t scan_state_bytes(tc_dtype dtype, int op, bool backward) {
  size_t b = 0;
  auto size = [&](auto problem) {
    b = sizeof(typename decltype(problem)::State);
    return TC_OK;
  };
  if (dtype == TC_FLOAT64) dispatch_scan<double>(op, backward, size);
  else dispatch_scan<float>(op, backward, size);
  return b;
}

size_t tc_scan_workspace_size(const tc_scan_params* p) {
  return scan_check(p) == TC_OK ? workspace(p, false) : 0;
}

size_t tc_scan_backward_workspace_size(const tc_scan_backward_params* p) {
  return scan_check(p) == TC_OK ? workspace(p, true) : 0;
}
