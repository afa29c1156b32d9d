// elementwise family, torch layer: one schema per unary op, as the core's
// tc_unary_schema() writes it, plus "<name>_backward(Tensor grad_out,
// Tensor x|y, <the same floats>)", and one boxed kernel behind all of them
// that finds the op by its name. So a new op is a line in the core's list
// (csrc/shared/elementwise.cpp), and nothing here names it.
//
// The forward reads x in place, strides and all (up to 8 dims; more are
// copied contiguous first); y is a fresh contiguous tensor.
#include <cmath>
#include <string>
#include <unordered_map>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include "tinycuda/elementwise.h"
#include "torch_utils.h"

namespace {
using namespace tc_torch;

std::string schema_name(int op) {
  const std::string s = tc_unary_schema(op);
  return s.substr(0, s.find('('));
}

// "sigmoid(Tensor x) -> Tensor" -> "sigmoid_backward(Tensor grad_out, Tensor y) -> Tensor"
std::string backward_schema(int op) {
  const std::string s = tc_unary_schema(op), name = schema_name(op);
  const std::string saved = tc_unary_backward_reads_output(op) ? "Tensor y" : "Tensor x";
  return name + "_backward(Tensor grad_out, " + saved + s.substr(s.find("Tensor x") + 8);
}

struct Unary {
  int op;
  bool backward;
};

const Unary& find_op(const c10::OperatorHandle& handle) {
  static const auto ops = [] {
    std::unordered_map<std::string, Unary> m;
    for (int op = 0; op < TC_UNARY_COUNT; ++op) {
      m["tinycuda::" + schema_name(op)] = {op, false};
      m["tinycuda::" + schema_name(op) + "_backward"] = {op, true};
    }
    return m;
  }();
  return ops.at(handle.schema().name());
}

// The op's float arguments, in schema order; a missing (None) bound is
// -inf for the first and +inf for the second (clamp's min, max).
void scalars(const char* op, c10::ArrayRef<c10::IValue> args, double out[2]) {
  out[0] = -INFINITY, out[1] = INFINITY;
  int given = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].isNone()) continue;
    out[i] = args[i].toDouble();
    ++given;
  }
  // only clamp's arguments are optional: both missing is torch's error
  TC_CHECK(given > 0 || args.size() == 0 || !args[0].isNone(), op, "at least one of min and max must be given");
}

at::Tensor forward(const char* op, const Unary& u, const at::Tensor& x0, const double s[2]) {
  check_args(op, {{"x", x0}});
  const at::Tensor x = x0.dim() > 8 ? x0.contiguous() : x0;
  at::Tensor y = empty_contiguous(x0.sizes(), x0);
  tc_unary_params p{.op = tc_unary_op(u.op), .alpha = s[0], .beta = s[1], .ndim = int(x.dim() > 8 ? 1 : x.dim()),
                    .x = x.data_ptr(), .y = y.data_ptr()};
  if (x.dim() > 8) {
    p.sizes[0] = x.numel(), p.x_strides[0] = 1;
  } else {
    for (int d = 0; d < p.ndim; ++d) p.sizes[d] = x.size(d), p.x_strides[d] = x.stride(d);
  }
  call(op, x, tc_unary_cpu, tc_unary_cuda, p);
  return y;
}

at::Tensor backward(const char* op, const Unary& u, const at::Tensor& grad_out, const at::Tensor& saved,
                    const double s[2]) {
  const char* saved_name = tc_unary_backward_reads_output(u.op) ? "y" : "x";
  check_args(op, {{"grad_out", grad_out}, {saved_name, saved}});
  check_same_shape(op, {"grad_out", grad_out}, {saved_name, saved});
  const at::Tensor g = grad_out.contiguous(), sc = saved.contiguous();
  at::Tensor gx = empty_contiguous(sc.sizes(), sc);
  call(op, sc, tc_unary_backward_cpu, tc_unary_backward_cuda,
       tc_unary_backward_params{.op = tc_unary_op(u.op), .alpha = s[0], .beta = s[1], .n = sc.numel(),
                                .grad_y = g.data_ptr(), .saved = sc.data_ptr(), .grad_x = gx.data_ptr()});
  return gx;
}

// The kernel of every unary op and its backward: (x, floats...) or
// (grad_out, saved, floats...) off the stack, one tensor back.
void unary_boxed(const c10::OperatorHandle& handle, torch::jit::Stack* stack) {
  const Unary& u = find_op(handle);
  const std::string name = handle.schema().name().substr(10);  // after "tinycuda::"
  const size_t nargs = handle.schema().arguments().size(), ntensors = u.backward ? 2 : 1;
  auto args = torch::jit::last(*stack, nargs);
  double s[2];
  scalars(name.c_str(), args.slice(ntensors), s);
  at::Tensor out = u.backward ? backward(name.c_str(), u, args[0].toTensor(), args[1].toTensor(), s)
                              : forward(name.c_str(), u, args[0].toTensor(), s);
  torch::jit::drop(*stack, nargs);
  torch::jit::push(*stack, std::move(out));
}

template <class M>
void impls(M& m) {
  for (int op = 0; op < TC_UNARY_COUNT; ++op) {
    m.impl(schema_name(op).c_str(), torch::CppFunction::makeFromBoxedFunction<&unary_boxed>());
    m.impl((schema_name(op) + "_backward").c_str(), torch::CppFunction::makeFromBoxedFunction<&unary_boxed>());
  }
}
}  // namespace

TORCH_LIBRARY_FRAGMENT(tinycuda, m) {
  for (int op = 0; op < TC_UNARY_COUNT; ++op) {
    m.def(tc_unary_schema(op));
    m.def(backward_schema(op).c_str());
  }
}

TC_REGISTER_IMPLS(impls)
