// sort, argsort, topk, sort_backward: torch layer. The core sorts the rows of
// a contiguous [rows, n]: the sorted dim is moved last (a copy unless it is
// last and x contiguous) and the results moved back (contiguous). A 0-dim x is
// one row of one element and gives 0-dim results.
#include "tinycuda/sort.h"
#include "torch_utils.h"

namespace {
using namespace tc_torch;

// x's dtype: every one the core sorts (topk: not bool, as torch.topk)
void check_x(const char* op, const at::Tensor& x, bool bool_ok) {
  TC_CHECK(x.defined(), op, "x is undefined");
  switch (x.scalar_type()) {
    case at::kFloat: case at::kHalf: case at::kBFloat16: case at::kDouble:
    case at::kChar: case at::kShort: case at::kInt: case at::kLong: case at::kByte:
      return;
    case at::kBool:
      if (bool_ok) return;
      fail(op, "x must not be bool (as torch.topk)");
    default:
      fail(op, fmt("x must be float32, float16, bfloat16, float64, int8, int16, int32, int64, uint8 or bool, got %s",
                   dtype_str(x)));
  }
}

int64_t wrap_dim(const char* op, const at::Tensor& t, int64_t dim) {
  const int64_t nd = std::max<int64_t>(t.dim(), 1);
  TC_CHECK(dim >= -nd && dim < nd, op, "dim %lld is out of range for a tensor of %lld dims", (long long)dim,
           (long long)t.dim());
  return t.dim() == 0 ? 0 : (dim + nd) % nd;
}

// t with dim d last, contiguous; a 0-dim tensor as one element
at::Tensor last(const at::Tensor& t, int64_t d) {
  return (t.dim() == 0 ? t.reshape({1}) : t.movedim(d, -1)).contiguous();
}

at::Tensor back(const at::Tensor& t, const at::Tensor& like, int64_t d) {
  return like.dim() == 0 ? t.reshape({}) : t.movedim(-1, d).contiguous();
}

// the first k of each sorted row along dim: (values, indices); values undefined when not wanted (argsort)
std::tuple<at::Tensor, at::Tensor> run(const char* op, const at::Tensor& x, int64_t k, int64_t dim,
                                       bool descending, bool want_values) {
  const int64_t d = wrap_dim(op, x, dim);
  const at::Tensor xc = last(x, d);
  const int64_t n = xc.size(-1);
  std::vector<int64_t> shape = xc.sizes().vec();
  shape.back() = k;
  at::Tensor values = want_values ? at::empty(shape, xc.options()) : at::Tensor();
  at::Tensor indices = at::empty(shape, xc.options().dtype(at::kLong));
  call_with_workspace(op, xc, tc_sort_cpu, tc_sort_cuda, tc_sort_workspace_size,
                      tc_sort_params{.rows = n ? xc.numel() / n : 0, .n = n, .k = k, .descending = descending,
                                     .x = xc.data_ptr(), .values = want_values ? values.data_ptr() : nullptr,
                                     .indices = indices.data_ptr<int64_t>()});
  return {want_values ? back(values, x, d) : values, back(indices, x, d)};
}

std::tuple<at::Tensor, at::Tensor> sort(const at::Tensor& x, int64_t dim, bool descending, bool stable) {
  (void)stable;  // the sort is always stable, which stable=False allows
  check_x("sort", x, true);
  const int64_t n = x.dim() ? x.size(wrap_dim("sort", x, dim)) : 1;
  return run("sort", x, n, dim, descending, true);
}

at::Tensor argsort(const at::Tensor& x, int64_t dim, bool descending, bool stable) {
  (void)stable;
  check_x("argsort", x, true);
  const int64_t n = x.dim() ? x.size(wrap_dim("argsort", x, dim)) : 1;
  return std::get<1>(run("argsort", x, n, dim, descending, false));
}

std::tuple<at::Tensor, at::Tensor> topk(const at::Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  (void)sorted;  // always sorted, which sorted=False allows
  const char* op = "topk";
  check_x(op, x, false);
  const int64_t d = wrap_dim(op, x, dim), n = x.dim() ? x.size(d) : 1;
  TC_CHECK(k >= 0 && k <= n, op, "k must be in [0, %lld] (the size of dim %lld), got %lld", (long long)n,
           (long long)d, (long long)k);
  if (x.dim() == 0) return run(op, x, 1, dim, largest, true);  // as torch: a 0-dim x is its own top 0 or 1
  return run(op, x, k, dim, largest, true);
}

at::Tensor sort_backward(const at::Tensor& grad_values, const at::Tensor& indices, int64_t dim, int64_t n) {
  const char* op = "sort_backward";
  check_args(op, {{"grad_values", grad_values}});
  TC_CHECK(indices.defined() && indices.scalar_type() == at::kLong, op, "indices must be int64, got %s",
           indices.defined() ? dtype_str(indices) : "undefined");
  TC_CHECK(indices.device() == grad_values.device(), op, "indices is on %s but grad_values is on %s",
           indices.device().str().c_str(), grad_values.device().str().c_str());
  check_same_shape(op, {"indices", indices}, {"grad_values", grad_values});
  const int64_t d = wrap_dim(op, grad_values, dim);
  const at::Tensor g = last(grad_values, d), i = last(indices, d);
  const int64_t k = g.size(-1);
  TC_CHECK(n >= k && (grad_values.dim() || n == 1), op, "n must be >= %lld (the size of dim %lld of grad_values)%s, "
           "got %lld", (long long)k, (long long)d, grad_values.dim() ? "" : " and 1 for a 0-dim grad_values",
           (long long)n);
  std::vector<int64_t> shape = g.sizes().vec();
  shape.back() = n;
  at::Tensor gx = at::empty(shape, g.options());
  call(op, g, tc_sort_backward_cpu, tc_sort_backward_cuda,
       tc_sort_backward_params{.rows = n ? gx.numel() / n : 0, .n = n, .k = k, .grad_values = g.data_ptr(),
                               .indices = i.data_ptr<int64_t>(), .grad_x = gx.data_ptr()});
  return back(gx, grad_values, d);
}

template <class M>
void impls(M& m) {
  m.impl("sort", &sort);
  m.impl("argsort", &argsort);
  m.impl("topk", &topk);
  m.impl("sort_backward", &sort_backward);
}
}  // namespace

TORCH_LIBRARY_FRAGMENT(tinycuda, m) {
  m.def("sort(Tensor x, int dim=-1, bool descending=False, *, bool stable=False) -> (Tensor values, Tensor indices)");
  m.def("argsort(Tensor x, int dim=-1, bool descending=False, *, bool stable=False) -> Tensor");
  m.def("topk(Tensor x, int k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor values, Tensor indices)");
  m.def("sort_backward(Tensor grad_values, Tensor indices, int dim, int n) -> Tensor");
}

TC_REGISTER_IMPLS(impls)
