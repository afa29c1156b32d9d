// sum, sum_backward: torch layer. Maps (shape, dim) to the core's
// [outer, reduce, inner] view; dim=None sums everything.
#include "tinycuda/sum.h"
#include "torch_utils.h"

namespace {
using namespace tc_torch;

struct View {
  int64_t outer = 1, reduce = 1, inner = 1;
  std::vector<int64_t> out_shape;
};

View view_of(const char* op, at::IntArrayRef shape, std::optional<int64_t> dim, bool keepdim) {
  View v;
  const int64_t nd = int64_t(shape.size());
  if (!dim) {
    for (int64_t s : shape) v.reduce *= s;
    if (keepdim) v.out_shape.assign(size_t(nd), 1);
    return v;
  }
  const int64_t lim = std::max<int64_t>(nd, 1);  // a 0-dim tensor accepts dim 0 and -1
  TC_CHECK(*dim >= -lim && *dim < lim, op, "dim %lld is out of range for a tensor of %lld dims",
           (long long)*dim, (long long)nd);
  const int64_t d = nd == 0 ? 0 : (*dim + nd) % nd;
  for (int64_t i = 0; i < nd; ++i) {
    if (i < d) v.outer *= shape[size_t(i)];
    else if (i == d) v.reduce = shape[size_t(i)];
    else v.inner *= shape[size_t(i)];
    if (i != d) v.out_shape.push_back(shape[size_t(i)]);
    else if (keepdim) v.out_shape.push_back(1);
  }
  return v;
}

at::Tensor sum(const at::Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  check_args("sum", {{"x", x}});
  const View v = view_of("sum", x.sizes(), dim, keepdim);
  const at::Tensor xc = x.contiguous();
  at::Tensor y = empty_contiguous(v.out_shape, xc);
  call_with_workspace("sum", xc, tc_sum_cpu, tc_sum_cuda, tc_sum_workspace_size,
                      tc_sum_params{.outer = v.outer, .reduce = v.reduce, .inner = v.inner, .x = xc.data_ptr(),
                                    .y = y.data_ptr()});
  return y;
}

at::Tensor sum_backward(const at::Tensor& grad_out, at::IntArrayRef input_shape,
                        std::optional<int64_t> dim, bool keepdim) {
  check_args("sum_backward", {{"grad_out", grad_out}});
  const View v = view_of("sum_backward", input_shape, dim, keepdim);
  TC_CHECK(grad_out.sizes() == at::IntArrayRef(v.out_shape), "sum_backward",
           "grad_out must have shape %s, got %s", shape_str(v.out_shape).c_str(),
           shape_str(grad_out.sizes()).c_str());
  const at::Tensor gc = grad_out.contiguous();
  at::Tensor gx = empty_contiguous(input_shape, gc);
  call("sum_backward", gc, tc_sum_backward_cpu, tc_sum_backward_cuda,
       tc_sum_backward_params{.outer = v.outer, .reduce = v.reduce, .inner = v.inner, .grad_y = gc.data_ptr(),
                              .grad_x = gx.data_ptr()});
  return gx;
}

template <class M>
void impls(M& m) {
  m.impl("sum", &sum);
  m.impl("sum_backward", &sum_backward);
}
}  // namespace

TORCH_LIBRARY_FRAGMENT(tinycuda, m) {
  m.def("sum(Tensor x, int? dim=None, bool keepdim=False) -> Tensor");
  m.def("sum_backward(Tensor grad_out, SymInt[] input_shape, int? dim, bool keepdim) -> Tensor");
}

TC_REGISTER_IMPLS(impls)
