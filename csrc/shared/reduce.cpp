// The reduce family's op list (each op's torch schema: the one place its
// name, arguments and defaults are written), its checks and its workspace
// sizes, shared by both devices and both doors.
#include <array>
#include <string>

#include "reduce_math.h"
#include "reduce_plan.h"

namespace {
const char* const kSchemas[TC_REDUCE_COUNT] = {
    "mean(Tensor x, int[1]? dim=None, bool keepdim=False) -> Tensor",
    "amax(Tensor x, int[1] dim=[], bool keepdim=False) -> Tensor",
    "amin(Tensor x, int[1] dim=[], bool keepdim=False) -> Tensor",
    "logsumexp(Tensor x, int[1] dim, bool keepdim=False) -> Tensor",
    "var(Tensor x, int[1]? dim=None, *, float correction=1.0, bool keepdim=False) -> Tensor",
    "std(Tensor x, int[1]? dim=None, *, float correction=1.0, bool keepdim=False) -> Tensor",
    "vector_norm(Tensor x, float ord=2.0, int[1]? dim=None, bool keepdim=False) -> Tensor",
    "argmax(Tensor x, int? dim=None, bool keepdim=False) -> Tensor",
    "argmin(Tensor x, int? dim=None, bool keepdim=False) -> Tensor",
    "prod(Tensor x, int? dim=None, bool keepdim=False) -> Tensor",
    "sum(Tensor x, int[1]? dim=None, bool keepdim=False) -> Tensor",
    "max(Tensor x, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
    "min(Tensor x, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
};

size_t align256(size_t b) { return (b + 255) / 256 * 256; }

template <class A> size_t state_bytes(int op) {
  size_t b = 0;
  auto size = [&](auto k) {
    b = sizeof(typename ReduceMath<decltype(k)::value, A>::State);
    return TC_OK;
  };
  if (op >= TC_REDUCE_COUNT) dispatch_aux(op, size);  // the backward's own reductions
  else dispatch_reduce(op, size);
  return b;
}

size_t state_size(tc_dtype dtype, int op) {
  return dtype == TC_FLOAT64 ? state_bytes<double>(op) : state_bytes<float>(op);
}

size_t partial_bytes(tc_dtype dtype, int op, const ReduceLayout& l) {
  const plan::Reduce r = plan::reduce(l.outputs(), l.slice(), l.columns());
  return r.splits > 1 ? size_t(r.splits * l.outputs()) * state_size(dtype, op) : 0;
}

tc_status layout_check(const char* name, int ndim, const int64_t* sizes, unsigned mask) {
  int64_t n = 0;
  TC_RETURN_IF_ERROR(shape_check(name, ndim, sizes, &n));
  TC_REQUIRE(ndim == 8 || (mask >> ndim) == 0u, "%s: reduce_mask 0x%x names dims past ndim (%d)", name, mask, ndim);
  return TC_OK;
}

tc_status op_check(const char* fn, int op) {
  TC_REQUIRE(op >= 0 && op < TC_REDUCE_COUNT, "%s: op must be in [0, %d), got %d", fn, TC_REDUCE_COUNT, op);
  return TC_OK;
}
}  // namespace

const char* tc_reduce_schema(int op) { return op >= 0 && op < TC_REDUCE_COUNT ? kSchemas[op] : nullptr; }

int tc_reduce_differentiable(int op) {
  if (op < 0 || op >= TC_REDUCE_COUNT) return -1;
  return op == TC_REDUCE_ARGMAX || op == TC_REDUCE_ARGMIN ? 0 : 1;
}

const char* reduce_name(int op, bool backward) {
  static const auto names = [] {  // built once, before any thread can ask
    std::array<std::array<std::string, TC_REDUCE_COUNT>, 2> n;
    for (int k = 0; k < TC_REDUCE_COUNT; ++k) {
      const std::string schema = kSchemas[k];
      n[0][k] = schema.substr(0, schema.find('('));
      n[1][k] = n[0][k] + "_backward";
    }
    return n;
  }();
  if (op < 0 || op >= TC_REDUCE_COUNT) return backward ? "reduce_backward" : "reduce";
  return names[backward][op].c_str();
}

tc_status reduce_check(const tc_reduce_params* p) {
  TC_REQUIRE(p, "reduce: params is NULL");
  TC_RETURN_IF_ERROR(op_check("reduce", p->op));
  const char* name = reduce_name(p->op);
  TC_RETURN_IF_ERROR(layout_check(name, p->ndim, p->sizes, p->reduce_mask));
  const ReduceLayout l = reduce_layout(p);
  const bool no_identity = p->op == TC_REDUCE_AMAX || p->op == TC_REDUCE_AMIN || reduce_indexes(p->op) ||
                           (p->op == TC_REDUCE_VECTOR_NORM && (p->scalar == INFINITY || p->scalar == -INFINITY));
  // torch's rule: a reduced dim of size 0 is refused even where no output is left ([0, 0] over dim 1)
  TC_REQUIRE(!no_identity || l.slice() > 0,
             "%s: cannot reduce an empty slice (the reduced dims hold no element), the op has no identity", name);
  TC_REQUIRE(p->op != TC_REDUCE_VECTOR_NORM || p->scalar == p->scalar, "%s: ord is NaN", name);
  TC_REQUIRE(l.outputs() == 0 || p->y, "%s: y is NULL", name);
  TC_REQUIRE(l.outputs() == 0 || !reduce_value_index(p->op) || p->indices, "%s: indices is NULL", name);
  TC_REQUIRE(l.outputs() * l.slice() == 0 || p->x, "%s: x is NULL", name);
  return TC_OK;
}

tc_status reduce_check(const tc_reduce_backward_params* p) {
  TC_REQUIRE(p, "reduce_backward: params is NULL");
  TC_RETURN_IF_ERROR(op_check("reduce_backward", p->op));
  const char* name = reduce_name(p->op, true);
  TC_REQUIRE(tc_reduce_differentiable(p->op), "%s: %s has no gradient", name, reduce_name(p->op));
  TC_RETURN_IF_ERROR(layout_check(name, p->ndim, p->sizes, p->reduce_mask));
  int64_t n = 0;
  shape_check(name, p->ndim, p->sizes, &n);
  if (reduce_value_index(p->op))
    TC_REQUIRE(n == 0 || (p->grad_y && p->indices && p->grad_x), "%s: grad_y, indices or grad_x is NULL", name);
  else
    TC_REQUIRE(n == 0 || (p->grad_y && p->x && p->y && p->grad_x), "%s: grad_y, x, y or grad_x is NULL", name);
  return TC_OK;
}

ReduceLayout reduce_backward_layout(const tc_reduce_backward_params* p) {
  int64_t strides[8];
  int64_t s = 1;
  for (int d = p->ndim - 1; d >= 0; --d) strides[d] = s, s *= p->sizes[d];
  return reduce_layout(p->ndim, p->sizes, strides, p->reduce_mask, false);  // x contiguous: in memory order
}

StridedLayout<1> reduce_grad_layout(const tc_reduce_backward_params* p) {
  int64_t ystr[8];
  int64_t s = 1;
  for (int d = p->ndim - 1; d >= 0; --d) {
    const bool reduced = p->reduce_mask >> d & 1u;
    ystr[d] = reduced ? 0 : s;
    if (!reduced) s *= p->sizes[d];
  }
  const int64_t* strides[1] = {ystr};
  return coalesce<1>(p->ndim, p->sizes, strides);
}

size_t tc_reduce_workspace_size(const tc_reduce_params* p) {
  if (reduce_check(p) != TC_OK) return 0;
  return partial_bytes(p->dtype, p->op, reduce_layout(p));
}

// [aux states, one an output, 256-aligned][the aux reduction's partial states]
size_t tc_reduce_backward_workspace_size(const tc_reduce_backward_params* p) {
  if (reduce_check(p) != TC_OK) return 0;
  const int aux = reduce_aux_op(p->op, p->scalar);
  if (aux < 0) return 0;
  const ReduceLayout l = reduce_backward_layout(p);
  return reduce_aux_bytes(p->dtype, aux, l.outputs()) + partial_bytes(p->dtype, aux, l);
}

int reduce_aux_op(int op, double scalar) {
  switch (op) {
    case TC_REDUCE_VAR: case TC_REDUCE_STD: return TC_REDUCE_MEAN;
    case TC_REDUCE_AMAX: case TC_REDUCE_AMIN: return kReduceCountEq;
    case TC_REDUCE_PROD: return kReduceProdNonzero;
    case TC_REDUCE_VECTOR_NORM: return scalar == INFINITY || scalar == -INFINITY ? kReduceCountAbsEq : -1;
  }
  return -1;
}

size_t reduce_aux_bytes(tc_dtype dtype, int op, int64_t outputs) {
  return align256(size_t(outputs) * state_size(dtype, op));
}
