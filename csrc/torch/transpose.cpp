// transpose family, torch layer: permute_copy(x, dims) and transpose_copy(x,
// dim0, dim1), torch's, each one call of the core's permute_copy with x read
// in place through its strides (a permuted, transposed or sliced view costs
// this one copy). x may hold any dtype (floating, integer, bool, complex:
// each 1, 2, 4, 8 or 16 bytes): a copy moves itemsize-byte words. y is a
// fresh contiguous tensor. `algo` (keyword-only, for tinycuda.variants)
// picks a teaching kernel on CUDA.
#include <algorithm>
#include <vector>

#include "tinycuda/transpose.h"
#include "torch_utils.h"

namespace {
using namespace tc_torch;

int64_t wrap(const char* op, const char* arg, int64_t dim, int64_t nd) {
  const int64_t lim = std::max<int64_t>(nd, 1);
  TC_CHECK(dim >= -lim && dim < lim, op, "%s %lld is out of range for a tensor of %lld dims", arg, (long long)dim,
           (long long)nd);
  return nd ? (dim + nd) % nd : 0;
}

// y = x.permute(order) made contiguous; order holds every dim of x once
at::Tensor permute(const char* op, const at::Tensor& x, const std::vector<int64_t>& order, int64_t algo) {
  std::vector<int64_t> sizes;
  for (int64_t d : order) sizes.push_back(x.size(d));
  at::Tensor y = empty_contiguous(sizes, x);
  if (y.numel() == 0) return y;
  tc_permute_copy_params p{.itemsize = size_t(x.element_size()), .x = x.data_ptr(), .y = y.data_ptr(),
                           .algo = tc_transpose_algo(algo)};
  for (int64_t d : order) {
    if (x.size(d) == 1) continue;  // steps nowhere: the core's 8 dims are for the others
    TC_CHECK(p.ndim < 8, op, "at most 8 dims of size > 1, got %lld",
             (long long)std::count_if(order.begin(), order.end(), [&](int64_t e) { return x.size(e) > 1; }));
    p.sizes[p.ndim] = x.size(d), p.x_strides[p.ndim++] = x.stride(d);
  }
  call(op, x, tc_permute_copy_cpu, tc_permute_copy_cuda, p);
  return y;
}

at::Tensor permute_copy(const at::Tensor& x, at::IntArrayRef dims, int64_t algo) {
  const char* op = "permute_copy";
  const int64_t nd = x.dim();
  TC_CHECK(int64_t(dims.size()) == nd, op, "dims must list each of x's %lld dims once, got %zu dims", (long long)nd,
           dims.size());
  std::vector<int64_t> order;
  std::vector<bool> seen(size_t(nd), false);
  for (size_t k = 0; k < dims.size(); ++k) {
    const int64_t d = wrap(op, "dims entry", dims[k], nd);
    TC_CHECK(!seen[size_t(d)], op, "dims repeats dim %lld", (long long)d);
    seen[size_t(d)] = true;
    order.push_back(d);
  }
  return permute(op, x, order, algo);
}

at::Tensor transpose_copy(const at::Tensor& x, int64_t dim0, int64_t dim1, int64_t algo) {
  const char* op = "transpose_copy";
  const int64_t nd = x.dim(), d0 = wrap(op, "dim0", dim0, nd), d1 = wrap(op, "dim1", dim1, nd);
  std::vector<int64_t> order;
  for (int64_t d = 0; d < nd; ++d) order.push_back(d == d0 ? d1 : d == d1 ? d0 : d);
  return permute(op, x, order, algo);
}

template <class M>
void impls(M& m) {
  m.impl("permute_copy", &permute_copy);
  m.impl("transpose_copy", &transpose_copy);
}
}  // namespace

TORCH_LIBRARY_FRAGMENT(tinycuda, m) {
  m.def("permute_copy(Tensor x, int[] dims, *, int algo=0) -> Tensor");
  m.def("transpose_copy(Tensor x, int dim0, int dim1, *, int algo=0) -> Tensor");
}

TC_REGISTER_IMPLS(impls)
