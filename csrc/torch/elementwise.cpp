// elementwise family, torch layer: one schema per op, as the core's
// tc_unary_schema() / tc_binary_schema() write it, plus its backward's
// ("<name>_backward(Tensor grad_out, Tensor x|y, <the same floats>)";
// "<name>_backward(Tensor grad_out, Tensor a, Tensor b, bool[2] output_mask,
// <the same floats>) -> (Tensor, Tensor)"), and one boxed kernel per kind
// behind all of them that finds the op by its name. So a new op is a line in
// the core's list (csrc/shared/elementwise.cpp), and nothing here names it.
//
// Operands are read in place, strides and all (a unary op's x of more than 8
// dims is copied contiguous first); outputs are fresh contiguous tensors.
// Binary ops broadcast and promote as torch does: a 0-dim CPU tensor beside
// a larger or CUDA one is a host scalar (how tinycuda.add(x, 2.0) arrives), and an
// operand of another float dtype than the result is converted first (a copy).
#include <cmath>
#include <string>
#include <unordered_map>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include "python_methods.h"
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

struct Entry {  // an op of the core's list, and whether this schema is its backward
  int op;
  bool backward;
};

const Entry& find_op(const c10::OperatorHandle& handle) {
  static const auto ops = [] {
    std::unordered_map<std::string, Entry> m;
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

at::Tensor forward(const char* op, const Entry& u, const at::Tensor& x0, const double s[2]) {
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

at::Tensor backward(const char* op, const Entry& u, const at::Tensor& grad_out, const at::Tensor& saved,
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
  const Entry& u = find_op(handle);
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

// ---------------------------------------------------------------------------
// binary ops

std::string binary_schema_name(int op) {
  const std::string s = tc_binary_schema(op);
  return s.substr(0, s.find('('));
}

// "add(Tensor a, Tensor b, *, float alpha=1.0) -> Tensor" ->
// "add_backward(Tensor grad_out, Tensor a, Tensor b, bool[2] output_mask, *, float alpha=1.0) -> (Tensor, Tensor)"
std::string binary_backward_schema(int op) {
  const std::string s = tc_binary_schema(op), name = binary_schema_name(op);
  const size_t b = s.find("Tensor b") + 8, close = s.rfind(')');
  return name + "_backward(Tensor grad_out, Tensor a, Tensor b, bool[2] output_mask" + s.substr(b, close - b) +
         ") -> (Tensor, Tensor)";
}

const Entry* find_binary(const std::string& name) {  // {op, backward}
  static const auto ops = [] {
    std::unordered_map<std::string, Entry> m;
    for (int op = 0; op < TC_BINARY_COUNT; ++op) {
      m["tinycuda::" + binary_schema_name(op)] = {op, false};
      m["tinycuda::" + binary_schema_name(op) + "_backward"] = {op, true};
    }
    return m;
  }();
  auto it = ops.find(name);
  return it == ops.end() ? nullptr : &it->second;
}

// One operand as the core takes it: a strided view of the output's shape
// (stride 0 along broadcast dims), or a host scalar.
struct Operand {
  at::Tensor t;  // undefined: scalar
  double scalar = 0;
  int64_t strides[8] = {};
};

// A 0-dim CPU tensor beside one that is not: read as a number in double, as
// torch reads it beside a CUDA tensor (and as a Python number arrives), so
// x + 0.1 adds 0.1 in the compute type, not its rounding to x's dtype.
bool host_scalar(const at::Tensor& t, const at::Tensor& other) {
  return t.dim() == 0 && t.is_cpu() && !(other.dim() == 0 && other.is_cpu());
}

struct Broadcast {
  at::ScalarType dtype;
  std::vector<int64_t> sizes;
  Operand a, b;
  const at::Tensor* on;  // a tensor operand: the device and the dtype the core runs in
};

// The broadcast of the named tensors' shapes (right-aligned, torch's rule), at most 8 dims.
std::vector<int64_t> broadcast_shape(const char* op, std::initializer_list<std::pair<const char*, const at::Tensor*>> ts) {
  int64_t nd = 0;
  for (auto& [name, t] : ts) nd = std::max(nd, t->dim());
  TC_CHECK(nd <= 8, op, "at most 8 dims, got %lld", (long long)nd);
  std::vector<int64_t> sizes(nd, 1);
  bool ok = true;
  for (auto& [name, t] : ts)
    for (int64_t d = 0; d < t->dim(); ++d) {
      int64_t& s = sizes[d + nd - t->dim()];
      ok = ok && (t->size(d) == s || t->size(d) == 1 || s == 1);
      if (s == 1) s = t->size(d);
    }
  if (!ok) {  // "a has shape [3] and b has shape [4]"
    std::string shapes;
    size_t i = 0;
    for (auto& [name, t] : ts) {
      if (i++) shapes += i == ts.size() ? " and " : ", ";
      shapes += std::string(name) + " has shape " + shape_str(t->sizes());
    }
    TC_CHECK(false, op, "%s, which do not broadcast", shapes.c_str());
  }
  return sizes;
}

// t's element strides in the broadcast shape of nd dims: 0 along a broadcast dim
void broadcast_strides(const at::Tensor& t, int64_t nd, int64_t* strides) {
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t dt = d - (nd - t.dim());
    strides[d] = dt >= 0 && t.size(dt) != 1 ? t.stride(dt) : 0;
  }
}

Broadcast broadcast(const char* op, const at::Tensor& a, const at::Tensor& b,
                    const at::Tensor* condition = nullptr) {
  TC_CHECK(a.defined() && b.defined(), op, "a and b must be defined");
  Broadcast r;
  r.dtype = at::result_type(a, b);
  TC_CHECK(r.dtype == at::kFloat || r.dtype == at::kHalf || r.dtype == at::kBFloat16 || r.dtype == at::kDouble, op,
           "the result dtype %s (of a %s and b %s) is not supported: float32, float16, bfloat16 or float64",
           c10::toString(r.dtype), dtype_str(a), dtype_str(b));
  const bool a_scalar = host_scalar(a, b), b_scalar = host_scalar(b, a);
  TC_CHECK(a_scalar || b_scalar || a.device() == b.device(), op, "b is on %s but a is on %s",
           b.device().str().c_str(), a.device().str().c_str());
  r.sizes = condition ? broadcast_shape(op, {{"condition", condition}, {"a", &a}, {"b", &b}})
                      : broadcast_shape(op, {{"a", &a}, {"b", &b}});
  const int64_t nd = r.sizes.size();
  auto operand = [&](const at::Tensor& t, bool scalar, Operand& o) {
    if (scalar) {
      o.scalar = t.item<double>();
      return;
    }
    o.t = t.scalar_type() == r.dtype ? t : t.to(r.dtype);
    broadcast_strides(o.t, nd, o.strides);
  };
  operand(a, a_scalar, r.a);
  operand(b, b_scalar, r.b);
  r.on = r.a.t.defined() ? &r.a.t : &r.b.t;
  return r;
}

template <class P> void fill_operands(P& p, int op, const Broadcast& r) {
  p.op = tc_binary_op(op), p.ndim = int(r.sizes.size());
  for (size_t d = 0; d < r.sizes.size(); ++d)
    p.sizes[d] = r.sizes[d], p.a_strides[d] = r.a.strides[d], p.b_strides[d] = r.b.strides[d];
  p.a = r.a.t.defined() ? r.a.t.data_ptr() : nullptr, p.a_scalar = r.a.scalar;
  p.b = r.b.t.defined() ? r.b.t.data_ptr() : nullptr, p.b_scalar = r.b.scalar;
}

at::Tensor binary_forward(const char* op, int code, const at::Tensor& a, const at::Tensor& b, double alpha) {
  const Broadcast r = broadcast(op, a, b);
  at::Tensor out = at::empty(r.sizes, r.on->options());
  tc_binary_params p{.alpha = alpha, .out = out.data_ptr()};
  fill_operands(p, code, r);
  call(op, *r.on, tc_binary_cpu, tc_binary_cuda, p);
  return out;
}

std::tuple<at::Tensor, at::Tensor> binary_backward(const char* op, int code, const at::Tensor& grad_out,
                                                   const at::Tensor& a, const at::Tensor& b,
                                                   c10::List<bool> mask, double alpha) {
  const Broadcast r = broadcast(op, a, b);
  check_args(op, {{"grad_out", grad_out}});
  TC_CHECK(grad_out.sizes() == at::IntArrayRef(r.sizes), op, "grad_out has shape %s but a and b broadcast to %s",
           shape_str(grad_out.sizes()).c_str(), shape_str(r.sizes).c_str());
  TC_CHECK(grad_out.scalar_type() == r.dtype && grad_out.device() == r.on->device(), op,
           "grad_out (%s on %s) must match the result (%s on %s)", dtype_str(grad_out),
           grad_out.device().str().c_str(), c10::toString(r.dtype), r.on->device().str().c_str());
  const at::Tensor g = grad_out.contiguous();
  at::Tensor ga = at::empty(mask[0] ? r.sizes : std::vector<int64_t>{0}, g.options());
  at::Tensor gb = at::empty(mask[1] ? r.sizes : std::vector<int64_t>{0}, g.options());
  tc_binary_backward_params p{.alpha = alpha, .grad_out = g.data_ptr(), .grad_a = mask[0] ? ga.data_ptr() : nullptr,
                              .grad_b = mask[1] ? gb.data_ptr() : nullptr};
  fill_operands(p, code, r);
  call(op, g, tc_binary_backward_cpu, tc_binary_backward_cuda, p);
  return {ga, gb};
}

// (a, b, floats...) or (grad_out, a, b, output_mask, floats...) off the stack
void binary_boxed(const c10::OperatorHandle& handle, torch::jit::Stack* stack) {
  const Entry& u = *find_binary(handle.schema().name());
  const std::string name = handle.schema().name().substr(10);
  const size_t nargs = handle.schema().arguments().size();
  auto args = torch::jit::last(*stack, nargs);
  const size_t nfixed = u.backward ? 4 : 2;
  const double alpha = nargs > nfixed ? args[nfixed].toDouble() : 1.0;
  if (u.backward) {
    auto [ga, gb] = binary_backward(name.c_str(), u.op, args[0].toTensor(), args[1].toTensor(), args[2].toTensor(),
                                    args[3].toBoolList(), alpha);
    torch::jit::drop(*stack, nargs);
    torch::jit::push(*stack, std::move(ga), std::move(gb));
  } else {
    at::Tensor out = binary_forward(name.c_str(), u.op, args[0].toTensor(), args[1].toTensor(), alpha);
    torch::jit::drop(*stack, nargs);
    torch::jit::push(*stack, std::move(out));
  }
}

// where(condition, a, b): a and b as a binary op's; condition a bool tensor on
// their device (a 0-dim CPU one moves there: torch takes it too).
at::Tensor where(const at::Tensor& condition, const at::Tensor& a, const at::Tensor& b) {
  TC_CHECK(condition.defined(), "where", "condition must be defined");
  TC_CHECK(condition.scalar_type() == at::kBool, "where", "condition must be bool, got %s", dtype_str(condition));
  const Broadcast r = broadcast("where", a, b, &condition);
  const at::Tensor c = condition.dim() == 0 && condition.is_cpu() ? condition.to(r.on->device()) : condition;
  TC_CHECK(c.device() == r.on->device(), "where", "condition is on %s but a and b are on %s",
           c.device().str().c_str(), r.on->device().str().c_str());
  at::Tensor out = at::empty(r.sizes, r.on->options());
  tc_where_params p{.ndim = int(r.sizes.size()), .condition = c.data_ptr(), .out = out.data_ptr()};
  broadcast_strides(c, p.ndim, p.condition_strides);
  for (int d = 0; d < p.ndim; ++d)
    p.sizes[d] = r.sizes[d], p.a_strides[d] = r.a.strides[d], p.b_strides[d] = r.b.strides[d];
  p.a = r.a.t.defined() ? r.a.t.data_ptr() : nullptr, p.a_scalar = r.a.scalar;
  p.b = r.b.t.defined() ? r.b.t.data_ptr() : nullptr, p.b_scalar = r.b.scalar;
  call("where", *r.on, tc_where_cpu, tc_where_cuda, p);
  return out;
}

// tinycuda._C.binary_constant_partial(op, which, alpha): the constant c of
// tc_binary_constant_partial, or None; the autograd formula then scales (or
// passes on) the incoming gradient instead of running <name>_backward.
PyObject* py_binary_constant_partial(PyObject*, PyObject* args) {
  int op, which;
  double alpha, c = 0;
  if (!PyArg_ParseTuple(args, "iid", &op, &which, &alpha)) return nullptr;
  if (tc_binary_constant_partial(op, which, alpha, &c) != 1) Py_RETURN_NONE;
  return PyFloat_FromDouble(c);
}
const tc_torch::PythonMethod kConstantPartial({"binary_constant_partial", py_binary_constant_partial, METH_VARARGS,
                                               "binary_constant_partial(op, which, alpha) -> float or None"});

template <class M>
void impls(M& m) {
  m.impl("where", &where);
  for (int op = 0; op < TC_BINARY_COUNT; ++op) {
    m.impl(binary_schema_name(op).c_str(), torch::CppFunction::makeFromBoxedFunction<&binary_boxed>());
    m.impl((binary_schema_name(op) + "_backward").c_str(),
           torch::CppFunction::makeFromBoxedFunction<&binary_boxed>());
  }
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
  for (int op = 0; op < TC_BINARY_COUNT; ++op) {
    m.def(tc_binary_schema(op));
    m.def(binary_backward_schema(op).c_str());
  }
  m.def("where(Tensor condition, Tensor a, Tensor b) -> Tensor");
}

TC_REGISTER_IMPLS(impls)
