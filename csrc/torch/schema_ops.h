// The torch layer of a family whose op list the core declares as schema
// strings (tc_reduce_schema, tc_scan_schema): each op's name, its backward's
// schema ("<name>_backward(Tensor grad_out, Tensor x, Tensor y, <the
// forward's arguments after x>)"), which op and direction a dispatcher handle
// is, and the registration of one boxed kernel behind every op of the list.
#pragma once
#include <ATen/ATen.h>
#include <ATen/core/stack.h>
#include <string>
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
  // "mean(Tensor x, int[1]? dim=None, ...) -> Tensor" ->
  // "mean_backward(Tensor grad_out, Tensor x, Tensor y, int[1]? dim=None, ...) -> Tensor"
  std::string backward_schema(int op) const {
    if (backward_) return backward_(op);
    const std::string s = schema_(op);
    return name(op) + "_backward(Tensor grad_out, Tensor x, Tensor y" + s.substr(s.find("Tensor x") + 8);
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
// x, args) or Backward(name, op, grad_out, x, y, args), one tensor back.
// Backward is nullptr for a family with no backward ops (triu's gradient is
// triu: its SchemaOps' differentiable says 0 for every op).
template <const SchemaOps& (*Ops)(), class Args,
          Args (*Read)(const c10::FunctionSchema&, c10::ArrayRef<c10::IValue>, size_t),
          at::Tensor (*Forward)(const char*, const SchemaOp&, const at::Tensor&, const Args&),
          at::Tensor (*Backward)(const char*, const SchemaOp&, const at::Tensor&, const at::Tensor&,
                                 const at::Tensor&, const Args&) = nullptr>
void schema_boxed(const c10::OperatorHandle& handle, torch::jit::Stack* stack) {
  const SchemaOp& e = Ops().find(handle);
  const std::string name = handle.schema().name().substr(10);  // after "tinycuda::"
  const size_t nargs = handle.schema().arguments().size(), ntensors = e.backward ? 3 : 1;
  auto args = torch::jit::last(*stack, nargs);
  const Args a = Read(handle.schema(), args, ntensors);
  at::Tensor out;
  if constexpr (Backward != nullptr)
    if (e.backward) out = Backward(name.c_str(), e, args[0].toTensor(), args[1].toTensor(), args[2].toTensor(), a);
  if (!e.backward) out = Forward(name.c_str(), e, args[0].toTensor(), a);
  torch::jit::drop(*stack, nargs);
  torch::jit::push(*stack, std::move(out));
}

}  // namespace tc_torch
