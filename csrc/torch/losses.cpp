// losses family, torch layer: one schema per op, as the core's
// tc_loss_schema() writes it (torch.nn.functional's signature), plus its
// backward's ("<name>_backward(Tensor grad_out, <the same arguments>,
// bool[K] output_mask) -> (Tensor grad_<operand>, ...)", one gradient for
// each of the K operands tc_loss_grads names), and one boxed kernel behind
// all of them that finds the op by its name and its arguments by theirs. A
// new op is a line in the core's list; nothing here names one.
//
// The tensor arguments are the core's operands in schema order, read in
// place through their strides (0 along a broadcast dim; triplet_margin_loss's
// copied contiguous). Their shapes agree as tc_loss_shape says, in the words
// of torch.nn.functional's checks; the result and the gradients are fresh
// contiguous tensors, a gradient at the broadcast shape (the autograd formula
// sums it to its operand's). size_average or reduce given: torch's legacy
// reduction.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include "python_methods.h"
#include "schema_ops.h"
#include "tinycuda/losses.h"
#include "torch_utils.h"

namespace {
using namespace tc_torch;

// "mse_loss(Tensor input, Tensor target, ...) -> Tensor" -> "mse_loss_backward(Tensor grad_out, Tensor input,
// Tensor target, ..., bool[2] output_mask=[True, True]) -> (Tensor grad_input, Tensor grad_target)"
std::string backward_schema(int op) {
  const std::string s = tc_loss_schema(op);
  const size_t open = s.find('('), close = s.find(')');
  const std::string args = s.substr(open + 1, close - open - 1);
  std::string mask, returns;
  int k = 0;
  for (size_t a = 0; a < args.size(); a = std::min(args.find(", ", a), args.size()) + 2) {
    if (args.compare(a, 6, "Tensor") != 0) continue;
    const size_t name = args.find(' ', a) + 1, end = args.find_first_of("=,", name);
    if (tc_loss_grads(op) >> k++ & 1) {
      mask += std::string(mask.empty() ? "" : ", ") + "True";
      returns += std::string(returns.empty() ? "" : ", ") + "Tensor grad_" + args.substr(name, end - name);
    }
  }
  const int grads = int(std::count(mask.begin(), mask.end(), 'T'));
  return s.substr(0, open) + "_backward(Tensor grad_out, " + args + ", bool[" + std::to_string(grads) +
         "] output_mask=[" + mask + "]) -> (" + returns + ")";
}

const SchemaOps& ops() {
  static const SchemaOps list(tc_loss_schema, TC_LOSS_COUNT, nullptr, backward_schema);
  return list;
}

// The arguments, by name: the tensors (undefined where an optional one is None) and the options
struct Args {
  std::vector<std::string> names;
  std::vector<at::Tensor> tensors;
  std::optional<bool> size_average, reduce;
  std::string reduction = "mean";
  double beta = 0, delta = 0, margin = 0, p = 0, eps = 0;
  bool swap = false, log_target = false;
  std::vector<bool> output_mask;
};

Args read_args(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args, size_t first) {
  Args a;
  for (size_t i = first; i < args.size(); ++i) {
    const c10::Argument& arg = schema.arguments()[i];
    const std::string& name = arg.name();
    const c10::IValue& v = args[i];
    const c10::TypePtr type = arg.type()->kind() == c10::TypeKind::OptionalType
                                  ? arg.type()->castRaw<c10::OptionalType>()->getElementType()
                                  : arg.type();
    if (type->kind() == c10::TypeKind::TensorType) {
      a.names.push_back(name);
      a.tensors.push_back(v.isNone() ? at::Tensor() : v.toTensor());
    } else if (name == "size_average" || name == "reduce") {
      (name == "reduce" ? a.reduce : a.size_average) = v.isNone() ? std::nullopt : std::optional<bool>(v.toBool());
    } else if (name == "reduction") {
      a.reduction = v.toStringRef();
    } else if (name == "output_mask") {
      for (bool b : v.toBoolList()) a.output_mask.push_back(b);
    } else if (name == "swap" || name == "log_target") {
      (name == "swap" ? a.swap : a.log_target) = v.toBool();
    } else {
      double& field = name == "beta" ? a.beta : name == "delta" ? a.delta : name == "margin" ? a.margin
                      : name == "p" ? a.p : a.eps;
      field = v.toDouble();
    }
  }
  return a;
}

// The reduction: torch's legacy one where size_average or reduce is given, else reduction's, as the core names it
tc_loss_reduction reduction_of(const char* op, int index, const std::string& reduction,
                               std::optional<bool> size_average, std::optional<bool> reduce) {
  std::string name = reduction;
  if (size_average.has_value() || reduce.has_value()) {
    TC_CHECK(reduction != "batchmean", op, "reduction='batchmean' cannot go with size_average or reduce (torch "
             "divides their legacy reduction by the batch): give reduction alone");
    const bool mean = size_average.value_or(true), sum = reduce.value_or(true);
    name = mean && sum ? "mean" : sum ? "sum" : "none";
  }
  tc_loss_reduction r;
  if (tc_loss_parse_reduction(index, name.c_str(), &r) != TC_OK) {
    const std::string what = tc_last_error();  // "<the op's name>: ..."
    fail(op, what.substr(what.find(": ") + 2));
  }
  return r;
}

// The operands' broadcast shape and each one's strides in it, checked as tc_loss_shape says
struct Shape {
  std::vector<int64_t> sizes;
  int64_t strides[4][8] = {};
};

std::string shapes_str(const Args& a) {
  std::string s;
  for (size_t k = 0; k < a.tensors.size(); ++k)
    if (a.tensors[k].defined())
      s += std::string(s.empty() ? "" : ", ") + a.names[k] + " has shape " + shape_str(a.tensors[k].sizes());
  return s;
}

Shape broadcast(const char* op, int index, const Args& a) {
  const at::Tensor& input = a.tensors[0];
  const int rule = tc_loss_shape(index);
  int64_t nd = 0;
  for (size_t k = 0; k < a.tensors.size(); ++k) {
    const at::Tensor& t = a.tensors[k];
    if (!t.defined()) continue;
    nd = std::max<int64_t>(nd, t.dim());
    if (rule == TC_LOSS_SHAPE_SAME_NDIM || rule == TC_LOSS_SHAPE_ROWS)
      TC_CHECK(t.dim() == input.dim(), op, "every tensor must have as many dims as %s: %s", a.names[0].c_str(),
               shapes_str(a).c_str());
    if (rule == TC_LOSS_SHAPE_ROWS || (rule == TC_LOSS_SHAPE_TARGET_AS_INPUT && k == 1))
      TC_CHECK(t.sizes() == input.sizes(), op, "%s must have %s's shape %s, got %s", a.names[k].c_str(),
               a.names[0].c_str(), shape_str(input.sizes()).c_str(), shape_str(t.sizes()).c_str());
    if (rule == TC_LOSS_SHAPE_TARGET_AS_INPUT && k > 1) {  // torch scales the loss in place: input's shape stays
      bool fits = t.dim() <= input.dim();
      for (int64_t d = 1; d <= t.dim() && fits; ++d) fits = t.size(-d) == 1 || t.size(-d) == input.size(-d);
      TC_CHECK(fits, op, "%s has shape %s, which does not broadcast to %s's shape %s", a.names[k].c_str(),
               shape_str(t.sizes()).c_str(), a.names[0].c_str(), shape_str(input.sizes()).c_str());
    }
  }
  TC_CHECK(nd <= 8, op, "at most 8 dims, got %lld", (long long)nd);
  Shape s;
  s.sizes.assign(size_t(nd), 1);
  for (const at::Tensor& t : a.tensors) {
    if (!t.defined()) continue;
    for (int64_t d = nd - t.dim(); d < nd; ++d) {
      const int64_t n = t.size(d - (nd - t.dim())), o = s.sizes[size_t(d)];
      TC_CHECK(n == o || n == 1 || o == 1, op, "%s, which do not broadcast", shapes_str(a).c_str());
      if (o == 1) s.sizes[size_t(d)] = n;
    }
  }
  for (size_t k = 0; k < a.tensors.size(); ++k) {
    const at::Tensor& t = a.tensors[k];
    if (!t.defined()) continue;
    for (int64_t d = nd - t.dim(); d < nd; ++d) {
      const int64_t td = d - (nd - t.dim());
      s.strides[k][d] = t.size(td) == 1 ? 0 : t.stride(td);
    }
  }
  return s;
}

// Checks the arguments, makes the params of both directions (NULL out and grads)
struct Call {
  tc_loss_params p{};
  Args a;  // the tensors, triplet_margin_loss's contiguous
  Shape s;
  std::vector<int64_t> out_shape;
  const at::Tensor& like() const { return a.tensors[0]; }
};

Call prepare(const char* op, const SchemaOp& e, Args a) {
  const at::Tensor& input = a.tensors[0];
  for (size_t k = 0; k < a.tensors.size(); ++k)
    if (a.tensors[k].defined()) check_args(op, {{a.names[0].c_str(), input}, {a.names[k].c_str(), a.tensors[k]}});
  const int rule = tc_loss_shape(e.op);
  if (rule == TC_LOSS_SHAPE_ROWS)
    for (at::Tensor& t : a.tensors) t = t.contiguous();
  Call c;
  c.s = broadcast(op, e.op, a);
  c.out_shape = c.s.sizes;
  if (rule == TC_LOSS_SHAPE_ROWS && !c.out_shape.empty()) c.out_shape.pop_back();
  c.p = tc_loss_params{.op = tc_loss_op(e.op),
                       .reduction = reduction_of(op, e.op, a.reduction, a.size_average, a.reduce),
                       .beta = a.beta, .delta = a.delta, .margin = a.margin, .p = a.p, .eps = a.eps,
                       .swap = a.swap, .log_target = a.log_target, .batch = input.dim() ? input.size(0) : 1,
                       .ndim = int(c.s.sizes.size())};
  if (c.p.reduction != TC_LOSS_REDUCTION_NONE) c.out_shape.clear();
  for (int d = 0; d < c.p.ndim; ++d) c.p.sizes[d] = c.s.sizes[size_t(d)];
  for (size_t k = 0; k < a.tensors.size() && k < 4; ++k) {
    c.p.operands[k] = a.tensors[k].defined() ? a.tensors[k].data_ptr() : nullptr;
    for (int d = 0; d < c.p.ndim; ++d) c.p.strides[k][d] = c.s.strides[k][d];
  }
  c.a = std::move(a);
  return c;
}

at::Tensor forward(const char* op, const SchemaOp& e, Args a) {
  Call c = prepare(op, e, std::move(a));
  at::Tensor out = empty_contiguous(c.out_shape, c.like());
  c.p.out = out.data_ptr();
  call_with_workspace(op, c.like(), tc_loss_cpu, tc_loss_cuda, tc_loss_workspace_size, c.p);
  return out;
}

std::vector<at::Tensor> backward(const char* op, const SchemaOp& e, const at::Tensor& grad_out, Args a) {
  Call c = prepare(op, e, std::move(a));
  const at::Tensor& like = c.like();
  check_args(op, {{c.a.names[0].c_str(), like}, {"grad_out", grad_out}});
  TC_CHECK(grad_out.sizes() == at::IntArrayRef(c.out_shape), op, "grad_out must have shape %s, got %s",
           shape_str(c.out_shape).c_str(), shape_str(grad_out.sizes()).c_str());
  const int grads = tc_loss_grads(e.op);
  const int wanted = __builtin_popcount(unsigned(grads));
  TC_CHECK(int(c.a.output_mask.size()) == wanted, op, "output_mask must have %d entries, got %zu", wanted,
           c.a.output_mask.size());
  const at::Tensor g = grad_out.contiguous();
  c.p.grad_out = g.data_ptr();
  std::vector<at::Tensor> out;
  for (int k = 0, m = 0; k < int(c.a.tensors.size()); ++k) {
    if (!(grads >> k & 1)) continue;
    const bool want = c.a.output_mask[size_t(m++)];
    out.push_back(empty_contiguous(want ? at::IntArrayRef(c.s.sizes) : at::IntArrayRef{0}, like));
    c.p.grads[k] = want ? out.back().data_ptr() : nullptr;
  }
  call(op, like, tc_loss_backward_cpu, tc_loss_backward_cuda, c.p);
  return out;
}

// The kernel of every op and its backward: the arguments by name off the stack, one tensor back (the loss) or
// one a gradient
void boxed(const c10::OperatorHandle& handle, torch::jit::Stack* stack) {
  const SchemaOp& e = ops().find(handle);
  const std::string name = handle.schema().name().substr(10);  // after "tinycuda::"
  const size_t nargs = handle.schema().arguments().size();
  auto args = torch::jit::last(*stack, nargs);
  Args a = read_args(handle.schema(), args, e.backward ? 1 : 0);
  if (!e.backward) {
    at::Tensor out = forward(name.c_str(), e, std::move(a));
    torch::jit::drop(*stack, nargs);
    torch::jit::push(*stack, std::move(out));
    return;
  }
  std::vector<at::Tensor> grads = backward(name.c_str(), e, args[0].toTensor(), std::move(a));
  torch::jit::drop(*stack, nargs);
  for (at::Tensor& g : grads) torch::jit::push(*stack, std::move(g));
}

// tinycuda._C.loss_shape(op): tc_loss_shape, the rule the fake kernels check the shapes by
PyObject* py_loss_shape(PyObject*, PyObject* args) {
  int op;
  if (!PyArg_ParseTuple(args, "i", &op)) return nullptr;
  return PyLong_FromLong(tc_loss_shape(op));
}
const PythonMethod kLossShape({"loss_shape", py_loss_shape, METH_VARARGS, "loss_shape(op) -> tc_loss_shape_rule"});

// tinycuda._C.loss_reduction(name, op, reduction, size_average, reduce): the reduction's tc_loss_reduction, as
// the kernel takes it (legacy arguments included), or the kernel's error
PyObject* py_loss_reduction(PyObject*, PyObject* args) {
  const char *name, *reduction;
  int op;
  PyObject *size_average, *reduce;
  if (!PyArg_ParseTuple(args, "sisOO", &name, &op, &reduction, &size_average, &reduce)) return nullptr;
  auto flag = [](PyObject* v) { return v == Py_None ? std::nullopt : std::optional<bool>(PyObject_IsTrue(v) == 1); };
  try {
    return PyLong_FromLong(reduction_of(name, op, reduction, flag(size_average), flag(reduce)));
  } catch (const c10::Error& err) {
    PyErr_SetString(PyExc_RuntimeError, err.what_without_backtrace());
    return nullptr;
  }
}
const PythonMethod kLossReduction({"loss_reduction", py_loss_reduction, METH_VARARGS,
                                   "loss_reduction(name, op, reduction, size_average, reduce) -> tc_loss_reduction"});

template <class M>
void impls(M& m) {
  ops().impl<&boxed>(m);
}
}  // namespace

TORCH_LIBRARY_FRAGMENT(tinycuda, m) { ops().define(m); }

TC_REGISTER_IMPLS(impls)
