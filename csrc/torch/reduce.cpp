// reduce family, torch layer: one schema per op, as the core's
// tc_reduce_schema() writes it, plus its backward's
// ("<name>_backward(Tensor grad_out, Tensor x, Tensor y, <the same arguments>)"),
// and one boxed kernel behind all of them that finds the op by its name and
// its arguments by theirs (dim, keepdim, and the op's float: correction,
// ord). A new op is a line in the core's list; nothing here names one.
//
// x is read in place, strides and all (more than 8 dims: copied contiguous
// and its neighbouring kept / reduced dims merged); y is a fresh contiguous
// tensor, int64 for argmax and argmin; an op of two outputs (max, min:
// "-> (Tensor values, Tensor indices)") writes y and int64 indices, and its
// backward takes the indices in y's place. dim None (or [], as torch.amax's
// default) reduces every dim.
#include <string>
#include <vector>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include "tinycuda/reduce.h"
#include "schema_ops.h"
#include "torch_utils.h"

namespace {
using namespace tc_torch;

const SchemaOps& ops() {
  static const SchemaOps list(tc_reduce_schema, TC_REDUCE_COUNT, tc_reduce_differentiable);
  return list;
}

// The arguments after the tensors, by name.
struct Args {
  std::vector<int64_t> dims;
  bool all = true;  // dim None or []
  bool keepdim = false;
  double scalar = 0;
};

Args read_args(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args, size_t first) {
  Args a;
  for (size_t i = first; i < args.size(); ++i) {
    const std::string& name = schema.arguments()[i].name();
    const c10::IValue& v = args[i];
    if (name == "dim") {
      if (v.isInt()) a.dims = {v.toInt()};
      else if (!v.isNone()) a.dims = v.toIntVector();
      a.all = a.dims.empty();
    } else if (name == "keepdim") {
      a.keepdim = v.toBool();
    } else {
      a.scalar = v.toDouble();  // correction or ord
    }
  }
  return a;
}

// The reduced dims as a mask over x's dims (a 0-dim x takes dim 0 and -1 and reduces nothing).
uint64_t reduce_mask(const char* op, int64_t nd, const Args& a) {
  if (a.all) return nd >= 64 ? ~uint64_t(0) : (uint64_t(1) << nd) - 1;
  uint64_t mask = 0;
  const int64_t lim = std::max<int64_t>(nd, 1);
  for (int64_t d : a.dims) {
    TC_CHECK(d >= -lim && d < lim, op, "dim %lld is out of range for a tensor of %lld dims", (long long)d,
             (long long)nd);
    if (nd == 0) continue;
    const int64_t w = (d + nd) % nd;
    TC_CHECK(!(mask >> w & 1), op, "dim %lld appears more than once in the list of dims", (long long)w);
    mask |= uint64_t(1) << w;
  }
  return mask;
}

std::vector<int64_t> out_shape(at::IntArrayRef shape, uint64_t mask, bool keepdim) {
  std::vector<int64_t> s;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!(mask >> d & 1)) s.push_back(shape[d]);
    else if (keepdim) s.push_back(1);
  }
  return s;
}

// x's shape as the core takes it: at most 8 dims. Past 8, x (then contiguous)
// merges each run of kept (reduced) dims into one.
struct Dims {
  int ndim = 0;
  int64_t sizes[8], strides[8];
  unsigned mask = 0;
};

Dims core_dims(const char* op, const at::Tensor& x, uint64_t mask) {
  Dims d;
  if (x.dim() <= 8) {
    d.ndim = int(x.dim()), d.mask = unsigned(mask);
    for (int k = 0; k < d.ndim; ++k) d.sizes[k] = x.size(k), d.strides[k] = x.stride(k);
    return d;
  }
  std::vector<int64_t> sizes;
  std::vector<bool> reduced;
  for (int64_t k = 0; k < x.dim(); ++k) {
    const bool r = mask >> k & 1;
    if (!sizes.empty() && reduced.back() == r) sizes.back() *= x.size(k);
    else sizes.push_back(x.size(k)), reduced.push_back(r);
  }
  TC_CHECK(sizes.size() <= 8, op, "x has %lld dims whose reduced and kept ones alternate %zu times; at most 8",
           (long long)x.dim(), sizes.size());
  d.ndim = int(sizes.size());
  int64_t s = 1;
  for (int k = d.ndim - 1; k >= 0; --k) {
    d.sizes[k] = sizes[size_t(k)], d.strides[k] = s, s *= sizes[size_t(k)];
    if (reduced[size_t(k)]) d.mask |= 1u << k;
  }
  return d;
}

std::vector<at::Tensor> forward(const char* op, const SchemaOp& e, const at::Tensor& x0, const Args& a) {
  check_args(op, {{"x", x0}});
  const uint64_t mask = reduce_mask(op, x0.dim(), a);
  const at::Tensor x = x0.dim() > 8 ? x0.contiguous() : x0;
  const Dims d = core_dims(op, x, mask);
  const bool index = tc_reduce_differentiable(e.op) == 0;
  const std::vector<int64_t> shape = out_shape(x0.sizes(), mask, a.keepdim);
  std::vector<at::Tensor> out{at::empty(shape, x0.options().dtype(index ? at::kLong : x0.scalar_type()))};
  if (ops().outputs(e.op) == 2) out.push_back(at::empty(shape, x0.options().dtype(at::kLong)));
  tc_reduce_params p{.op = tc_reduce_op(e.op), .scalar = a.scalar, .ndim = d.ndim, .reduce_mask = d.mask,
                     .x = x.data_ptr(), .y = out[0].data_ptr(),
                     .indices = out.size() == 2 ? out[1].data_ptr() : nullptr};
  for (int k = 0; k < d.ndim; ++k) p.sizes[k] = d.sizes[k], p.x_strides[k] = d.strides[k];
  call_with_workspace(op, x, tc_reduce_cpu, tc_reduce_cuda, tc_reduce_workspace_size, p);
  return out;
}

// y0: the forward's output, or (max, min) its indices, which the gradient reads instead of x and y
at::Tensor backward(const char* op, const SchemaOp& e, const at::Tensor& grad_out, const at::Tensor& x0,
                    const at::Tensor& y0, const Args& a) {
  const bool indices = ops().outputs(e.op) == 2;
  const char* saved = indices ? "indices" : "y";
  if (indices) {
    check_args(op, {{"grad_out", grad_out}, {"x", x0}});
    TC_CHECK(y0.scalar_type() == at::kLong, op, "indices must be int64, got %s", dtype_str(y0));
    TC_CHECK(y0.device() == x0.device(), op, "indices is on %s but x is on %s", y0.device().str().c_str(),
             x0.device().str().c_str());
  } else {
    check_args(op, {{"grad_out", grad_out}, {"x", x0}, {"y", y0}});
  }
  const uint64_t mask = reduce_mask(op, x0.dim(), a);
  const std::vector<int64_t> shape = out_shape(x0.sizes(), mask, a.keepdim);
  TC_CHECK(grad_out.sizes() == at::IntArrayRef(shape), op, "grad_out must have shape %s, got %s",
           shape_str(shape).c_str(), shape_str(grad_out.sizes()).c_str());
  TC_CHECK(y0.sizes() == at::IntArrayRef(shape), op, "%s must have shape %s, got %s", saved, shape_str(shape).c_str(),
           shape_str(y0.sizes()).c_str());
  // max's and min's gradient reads no x: no copy of a strided one
  const at::Tensor x = indices ? x0 : x0.contiguous(), g = grad_out.contiguous(), y = y0.contiguous();
  const Dims d = core_dims(op, x, mask);  // past 8 dims: its sizes alone
  at::Tensor gx = empty_contiguous(x0.sizes(), x);
  tc_reduce_backward_params p{.op = tc_reduce_op(e.op), .scalar = a.scalar, .ndim = d.ndim, .reduce_mask = d.mask,
                              .grad_y = g.data_ptr(), .x = indices ? nullptr : x.data_ptr(),
                              .y = indices ? nullptr : y.data_ptr(), .indices = indices ? y.data_ptr() : nullptr,
                              .grad_x = gx.data_ptr()};
  for (int k = 0; k < d.ndim; ++k) p.sizes[k] = d.sizes[k];
  call_with_workspace(op, x, tc_reduce_backward_cpu, tc_reduce_backward_cuda, tc_reduce_backward_workspace_size, p);
  return gx;
}

template <class M>
void impls(M& m) {
  ops().impl<&schema_boxed<&ops, Args, &read_args, &forward, &backward>>(m);
}
}  // namespace

TORCH_LIBRARY_FRAGMENT(tinycuda, m) { ops().define(m); }

TC_REGISTER_IMPLS(impls)
