// scan family, torch layer: one schema per op, as the core's tc_scan_schema()
// writes it, plus its backward's ("<name>_backward(Tensor grad_out, Tensor x,
// Tensor y, <the same arguments>)"), and one boxed kernel behind all of them
// that finds the op by its name and its arguments by theirs (dim, reverse,
// exclusive). A new op is a line in the core's list; nothing here names one.
//
// x is made contiguous (a copy for a strided view) and seen as [outer, n,
// inner] around the scanned dim; y is a fresh contiguous tensor. A 0-dim x
// takes dim 0 and -1, as torch.cumsum.
#include <string>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include "tinycuda/scan.h"
#include "schema_ops.h"
#include "torch_utils.h"

namespace {
using namespace tc_torch;

const SchemaOps& ops() {
  static const SchemaOps list(tc_scan_schema, TC_SCAN_COUNT);
  return list;
}

// The arguments after the tensors, by name.
struct Args {
  int64_t dim = 0;
  bool reverse = false, exclusive = false;
};

Args read_args(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args, size_t first) {
  Args a;
  for (size_t i = first; i < args.size(); ++i) {
    const std::string& name = schema.arguments()[i].name();
    if (name == "dim") a.dim = args[i].toInt();
    else if (name == "reverse") a.reverse = args[i].toBool();
    else a.exclusive = args[i].toBool();
  }
  return a;
}

// [outer, n, inner] of x around dim
struct Shape {
  int64_t outer = 1, n = 1, inner = 1;
};

Shape around(const char* op, const at::Tensor& x, int64_t dim) {
  const int64_t nd = x.dim(), lim = std::max<int64_t>(nd, 1);
  TC_CHECK(dim >= -lim && dim < lim, op, "dim %lld is out of range for a tensor of %lld dims", (long long)dim,
           (long long)nd);
  Shape s;
  if (nd == 0) return s;
  const int64_t d = (dim + nd) % nd;
  for (int64_t k = 0; k < nd; ++k) (k < d ? s.outer : k == d ? s.n : s.inner) *= x.size(k);
  return s;
}

at::Tensor forward(const char* op, const SchemaOp& e, const at::Tensor& x0, const Args& a) {
  check_args(op, {{"x", x0}});
  const Shape s = around(op, x0, a.dim);
  const at::Tensor x = x0.contiguous();
  at::Tensor y = empty_contiguous(x0.sizes(), x);
  call_with_workspace(op, x, tc_scan_cpu, tc_scan_cuda, tc_scan_workspace_size,
                      tc_scan_params{.op = tc_scan_op(e.op), .reverse = a.reverse, .exclusive = a.exclusive,
                                     .outer = s.outer, .n = s.n, .inner = s.inner, .x = x.data_ptr(),
                                     .y = y.data_ptr()});
  return y;
}

at::Tensor backward(const char* op, const SchemaOp& e, const at::Tensor& grad_out, const at::Tensor& x0,
                    const at::Tensor& y0, const Args& a) {
  check_args(op, {{"grad_out", grad_out}, {"x", x0}, {"y", y0}});
  check_same_shape(op, {"grad_out", grad_out}, {"x", x0});
  check_same_shape(op, {"y", y0}, {"x", x0});
  const Shape s = around(op, x0, a.dim);
  const at::Tensor x = x0.contiguous(), g = grad_out.contiguous(), y = y0.contiguous();
  at::Tensor gx = empty_contiguous(x0.sizes(), x);
  call_with_workspace(op, x, tc_scan_backward_cpu, tc_scan_backward_cuda, tc_scan_backward_workspace_size,
                      tc_scan_backward_params{.op = tc_scan_op(e.op), .reverse = a.reverse,
                                              .exclusive = a.exclusive, .outer = s.outer, .n = s.n,
                                              .inner = s.inner, .grad_y = g.data_ptr(), .x = x.data_ptr(),
                                              .y = y.data_ptr(), .grad_x = gx.data_ptr()});
  return gx;
}

template <class M>
void impls(M& m) {
  ops().impl<&schema_boxed<&ops, Args, &read_args, &forward, &backward>>(m);
}
}  // namespace

TORCH_LIBRARY_FRAGMENT(tinycuda, m) { ops().define(m); }

TC_REGISTER_IMPLS(impls)
