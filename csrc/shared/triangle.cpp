// The triangle family's op list (each op's torch schema: the one place its
// name, arguments and defaults are written) and its checks, shared by both
// devices and both doors.
#include <array>
#include <string>

#include "triangle_check.h"

namespace {
const char* const kSchemas[TC_TRIANGLE_COUNT] = {
    "triu(Tensor x, int diagonal=0) -> Tensor",
    "tril(Tensor x, int diagonal=0) -> Tensor",
};
}  // namespace

const char* tc_triangle_schema(int op) { return op >= 0 && op < TC_TRIANGLE_COUNT ? kSchemas[op] : nullptr; }

const char* triangle_name(int op) {
  static const auto names = [] {  // built once, before any thread can ask
    std::array<std::string, TC_TRIANGLE_COUNT> n;
    for (int k = 0; k < TC_TRIANGLE_COUNT; ++k) n[k] = std::string(kSchemas[k]).substr(0, std::string(kSchemas[k]).find('('));
    return n;
  }();
  return op >= 0 && op < TC_TRIANGLE_COUNT ? names[op].c_str() : "triangle";
}

tc_status triangle_check(const tc_triangle_params* p) {
  TC_REQUIRE(p, "triangle: params is NULL");
  TC_REQUIRE(p->op >= 0 && p->op < TC_TRIANGLE_COUNT, "triangle: op must be in [0, %d), got %d", TC_TRIANGLE_COUNT,
             int(p->op));
  const char* name = triangle_name(p->op);
  TC_REQUIRE(p->batch >= 0 && p->rows >= 0 && p->cols >= 0, "%s: batch, rows and cols must be >= 0, got %lld, %lld, %lld",
             name, (long long)p->batch, (long long)p->rows, (long long)p->cols);
  const int e = p->elem_bytes;
  TC_REQUIRE(e == 1 || e == 2 || e == 4 || e == 8 || e == 16, "%s: elem_bytes must be 1, 2, 4, 8 or 16, got %d", name, e);
  TC_REQUIRE(p->batch * p->rows * p->cols == 0 || (p->x && p->y), "%s: x or y is NULL", name);
  return TC_OK;
}
