// The elementwise family's op lists: each unary and binary op's torch schema (the one
// place its name, arguments and defaults are written) and which value its
// backward reads. Both doors build their functions from these.
#include <string>

#include "elementwise_check.h"
#include "elementwise_math.h"

namespace {
const char* const kUnarySchemas[TC_UNARY_COUNT] = {
    "sigmoid(Tensor x) -> Tensor",
    "tanh(Tensor x) -> Tensor",
    "silu(Tensor x) -> Tensor",
    "mish(Tensor x) -> Tensor",
    "leaky_relu(Tensor x, float negative_slope=0.01) -> Tensor",
    "elu(Tensor x, float alpha=1.0) -> Tensor",
    "selu(Tensor x) -> Tensor",
    "softplus(Tensor x, float beta=1.0, float threshold=20.0) -> Tensor",
    "softsign(Tensor x) -> Tensor",
    "hardsigmoid(Tensor x) -> Tensor",
    "hardtanh(Tensor x, float min_val=-1.0, float max_val=1.0) -> Tensor",
    "clamp(Tensor x, float? min=None, float? max=None) -> Tensor",
    "exp(Tensor x) -> Tensor",
    "log(Tensor x) -> Tensor",
    "abs(Tensor x) -> Tensor",
    "neg(Tensor x) -> Tensor",
    "sqrt(Tensor x) -> Tensor",
    "rsqrt(Tensor x) -> Tensor",
};

const char* const kBinarySchemas[TC_BINARY_COUNT] = {
    "add(Tensor a, Tensor b, *, float alpha=1.0) -> Tensor",
    "sub(Tensor a, Tensor b, *, float alpha=1.0) -> Tensor",
    "mul(Tensor a, Tensor b) -> Tensor",
    "div(Tensor a, Tensor b) -> Tensor",
    "maximum(Tensor a, Tensor b) -> Tensor",
    "minimum(Tensor a, Tensor b) -> Tensor",
    "pow(Tensor a, Tensor b) -> Tensor",
};
}  // namespace

const char* tc_binary_schema(int op) { return op >= 0 && op < TC_BINARY_COUNT ? kBinarySchemas[op] : nullptr; }

int tc_binary_constant_partial(int op, int which, double alpha, double* c) {
  if (op < 0 || op >= TC_BINARY_COUNT || (which != 0 && which != 1)) return -1;
  int constant = 0;
  dispatch_binary(op, [&](auto k) {
    using M = BinaryMath<decltype(k)::value>;
    constant = (M::kConstant >> which) & 1;
    if (constant && c) *c = which == 0 ? M::da(1.0, 0.0, 0.0, alpha) : M::db(1.0, 0.0, 0.0, alpha);
    return TC_OK;
  });
  return constant;
}

const char* tc_unary_schema(int op) { return op >= 0 && op < TC_UNARY_COUNT ? kUnarySchemas[op] : nullptr; }

int tc_unary_backward_reads_output(int op) {
  if (op < 0 || op >= TC_UNARY_COUNT) return -1;
  int reads = -1;
  dispatch_unary(op, [&](auto k) {
    reads = UnaryMath<decltype(k)::value>::kReadsOutput;
    return TC_OK;
  });
  return reads;
}

namespace {
// "<name>" and "<name>_backward" of each schema, cut once
template <int N> struct Names {
  std::string n[N][2];
  explicit Names(const char* const* schemas) {
    for (int i = 0; i < N; ++i) {
      const std::string s = schemas[i];
      n[i][0] = s.substr(0, s.find('('));
      n[i][1] = n[i][0] + "_backward";
    }
  }
};
}  // namespace

const char* binary_name(int op, bool backward) {
  static const Names<TC_BINARY_COUNT> names(kBinarySchemas);
  return op >= 0 && op < TC_BINARY_COUNT ? names.n[op][backward].c_str() : "binary";
}

const char* unary_name(int op, bool backward) {
  static const Names<TC_UNARY_COUNT> names(kUnarySchemas);
  return op >= 0 && op < TC_UNARY_COUNT ? names.n[op][backward].c_str() : "unary";
}
