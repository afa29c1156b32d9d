// The torch layer of a family whose op list the core declares as schema
// strings (tc_reduce_schema, tc_scan_schema): each op's name, its backward's
// schema ("<name>_backward(Tensor grad_out, Tensor x, Tensor y, <the
// forward's arguments after x>) -> Tensor"; for a forward of several outputs,
// max's "-> (Tensor values, Tensor indices)", the last output in y's place and
// grad_out the first's), which op and direction a dispatcher handle is, and
// the registration of one boxed kernel behind every op of the list.
#pragma once
#include <ATen/core/Tensor.h>
#include <ATen/core/stack.h>
#include <string>
#include <type_traits>
#include <unordered_map>

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

namespace tc_torch {

struct SchemaOp {
  int op;
  bool backward;
};

class SchemaOps {
 public:
  // differentiable(op) == 1: the op has a backward (NULL: every op has one); backward(op): its schema (NULL:
  // backward_schema's "<name>_backward(Tensor grad_out, Tensor x, Tensor y, ...)")
  SchemaOps(const char* (*schema)(int), int count, int (*differentiable)(int) = nullptr,
            std::string (*backward)(int) = nullptr)
      : schema_(schema), count_(count), differentiable_(differentiable), backward_(backward) {
    for (int op = 0; op < count; ++op) {
      ops_["tinycuda::" + name(op)] = {op, false};
      if (has_backward(op)) ops_["tinycuda::" + name(op) + "_backward"] = {op, true};
    }
  }

  std::string name(int op) const {
    const std::string s = schema_(op);
    return s.substr(0, s.find('('));
  }
  bool has_backward(int op) const { return !differentiable_ || differentiable_(op) == 1; }
  // the tensors the forward returns: 1 for "-> Tensor", 2 for "-> (Tensor values, Tensor indices)"
  int outputs(int op) const {
    const std::string s = schema_(op);
    int n = 0;
    for (size_t at = s.find("Tensor", s.rfind(") -> ")); at != std::string::npos; at = s.find("Tensor", at + 6)) ++n;
    return n;
  }
  // "mean(Tensor x, int[1]? dim=None, ...) -> Tensor" ->
  // "mean_backward(Tensor grad_out, Tensor x, Tensor y, int[1]? dim=None, ...) -> Tensor";
  // "max(Tensor x, int dim, ...) -> (Tensor values, Tensor indices)" ->
  // "max_backward(Tensor grad_out, Tensor x, Tensor indices, int dim, ...) -> Tensor"
  std::string backward_schema(int op) const {
    if (backward_) return backward_(op);
    const std::string s = schema_(op);
    const size_t x = s.find("Tensor x") + 8, close = s.rfind(") -> "), last = s.rfind("Tensor ");
    const std::string saved = last > close ? s.substr(last + 7, s.find_first_of(",)", last) - last - 7) : "y";
    return name(op) + "_backward(Tensor grad_out, Tensor x, Tensor " + saved + s.substr(x, close - x) + ") -> Tensor";
  }
  const SchemaOp& find(const c10::OperatorHandle& handle) const { return ops_.at(handle.schema().name()); }

  void define(torch::Library& m) const {
    for (int op = 0; op < count_; ++op) {
      m.def(schema_(op));
      if (has_backward(op)) m.def(backward_schema(op).c_str());
    }
  }
  template <void (*Kernel)(const c10::OperatorHandle&, torch::jit::Stack*)>
  void impl(torch::Library& m) const {
    for (int op = 0; op < count_; ++op) {
      m.impl(name(op).c_str(), torch::CppFunction::makeFromBoxedFunction<Kernel>());
      if (has_backward(op))
        m.impl((name(op) + "_backward").c_str(), torch::CppFunction::makeFromBoxedFunction<Kernel>());
    }
  }

 private:
  const char* (*schema_)(int);
  int count_;
  int (*differentiable_)(int);
  std::string (*backward_)(int);
  std::unordered_map<std::string, SchemaOp> ops_;
};

// The one boxed kernel of a family: the op and direction from the handle's
// name, the arguments after the tensors read by Read, then Forward(name, op,
// x, args) or Backward(name, op, grad_out, x, y, args), one tensor back (a
// Forward of a family with several-output ops returns std::vector<at::Tensor>,
// its op's outputs in schema order). Backward is nullptr for a family with no
// backward ops (triu's gradient is triu: its SchemaOps' differentiable says 0
// for every op).
template <const SchemaOps& (*Ops)(), class Args,
          Args (*Read)(const c10::FunctionSchema&, c10::ArrayRef<c10::IValue>, size_t),
          auto Forward,  // at::Tensor or std::vector<at::Tensor> (*)(const char*, const SchemaOp&, x, const Args&)
          at::Tensor (*Backward)(const char*, const SchemaOp&, const at::Tensor&, const at::Tensor&,
                                 const at::Tensor&, const Args&) = nullptr>
void schema_boxed(const c10::OperatorHandle& handle, torch::jit::Stack* stack) {
  const SchemaOp& e = Ops().find(handle);
  const std::string name = handle.schema().name().substr(10);  // after "tinycuda::"
  const size_t nargs = handle.schema().arguments().size(), ntensors = e.backward ? 3 : 1;
  auto args = torch::jit::last(*stack, nargs);
  const Args a = Read(handle.schema(), args, ntensors);
  if constexpr (Backward != nullptr) {
    if (e.backward) {
      at::Tensor grad = Backward(name.c_str(), e, args[0].toTensor(), args[1].toTensor(), args[2].toTensor(), a);
      torch::jit::drop(*stack, nargs);
      torch::jit::push(*stack, std::move(grad));
      return;
    }
  }
  auto out = Forward(name.c_str(), e, args[0].toTensor(), a);
  torch::jit::drop(*stack, nargs);
  if constexpr (std::is_same_v<decltype(out), at::Tensor>) {
    torch::jit::push(*stack, std::move(out));
  } else {
    for (at::Tensor& t : out) torch::jit::push(*stack, std::move(t));
  }
}

}  // namespace tc_torch
