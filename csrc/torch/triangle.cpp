// triangle family, torch layer: one schema per op, as the core's
// tc_triangle_schema() writes it, behind one boxed kernel that finds the op
// by its name and diagonal by its. No backward ops: the gradient of triu is
// triu of grad_out (tinycuda/ops/triangle.py). A new op is a line in the
// core's list; nothing here names one.
//
// x: any dtype (its elements move by size), at least 2 dims, made contiguous
// and seen as [batch, rows, cols] over its last two dims; y is a fresh
// contiguous tensor of x's shape and dtype.
#include <string>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include "tinycuda/triangle.h"
#include "schema_ops.h"
#include "torch_utils.h"

namespace {
using namespace tc_torch;

const SchemaOps& ops() {
  static const SchemaOps list(tc_triangle_schema, TC_TRIANGLE_COUNT, [](int) { return 0; });
  return list;
}

struct Args {
  int64_t diagonal = 0;
};

Args read_args(const c10::FunctionSchema&, c10::ArrayRef<c10::IValue> args, size_t first) {
  return {args[first].toInt()};
}

at::Tensor forward(const char* op, const SchemaOp& e, const at::Tensor& x0, const Args& a) {
  TC_CHECK(x0.defined(), op, "x is undefined");
  TC_CHECK(x0.dim() >= 2, op, "x must have at least 2 dims, got %lld", (long long)x0.dim());
  const at::Tensor x = x0.contiguous();
  at::Tensor y = empty_contiguous(x0.sizes(), x);
  int64_t batch = 1;
  for (int64_t d = 0; d < x.dim() - 2; ++d) batch *= x.size(d);
  call(op, x, tc_triangle_cpu, tc_triangle_cuda,
       tc_triangle_params{.op = tc_triangle_op(e.op), .batch = batch, .rows = x.size(-2), .cols = x.size(-1), .diagonal = a.diagonal, .elem_bytes = int(x.element_size()),
                          .x = x.data_ptr(), .y = y.data_ptr()});
  return y;
}

template <class M>
void impls(M& m) {
  ops().impl<&schema_boxed<&ops, Args, &read_args, &forward>>(m);
}
}  // namespace

TORCH_LIBRARY_FRAGMENT(tinycuda, m) { ops().define(m); }

TC_REGISTER_IMPLS(impls)
