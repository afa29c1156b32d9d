// softmax, log_softmax, softmax_backward: torch layer. The core works on the
// last dim; another dim is moved there (a copy) and the result moved back
// and made contiguous, so outputs are always contiguous.
#include "tinycuda/softmax.h"
#include "torch_utils.h"

namespace {
using namespace tc_torch;

int64_t wrap_dim(const char* op, const at::Tensor& t, int64_t dim) {
  const int64_t nd = std::max<int64_t>(t.dim(), 1);
  TC_CHECK(dim >= -nd && dim < nd, op, "dim %lld is out of range for a tensor of %lld dims",
           (long long)dim, (long long)t.dim());
  return t.dim() == 0 ? 0 : (dim + nd) % nd;
}

// `t` with `dim` last, contiguous; a 0-dim tensor is one row of one column.
at::Tensor last(const at::Tensor& t, int64_t dim) {
  return (t.dim() == 0 ? t.reshape({1}) : t.movedim(dim, -1)).contiguous();
}

at::Tensor back(const at::Tensor& t, const at::Tensor& like, int64_t dim) {
  return like.dim() == 0 ? t.reshape({}) : t.movedim(-1, dim).contiguous();
}

at::Tensor forward(const char* op, const at::Tensor& x, int64_t dim, int log, int64_t algo) {
  check_args(op, {{"x", x}});
  TC_CHECK(algo >= TC_SOFTMAX_AUTO && algo <= TC_SOFTMAX_REGISTERS, op,
           "algo must be 0 (auto), 1 (online) or 2 (registers), got %lld", (long long)algo);
  const int64_t d = wrap_dim(op, x, dim);
  const at::Tensor xc = last(x, d);
  at::Tensor y = empty_contiguous(xc.sizes(), xc);
  const int64_t cols = xc.size(-1), rows = cols ? xc.numel() / cols : 0;
  call(op, xc, tc_softmax_cpu, tc_softmax_cuda,
       tc_softmax_params{.rows = rows, .cols = cols, .log = log, .x = xc.data_ptr(), .y = y.data_ptr(),
                         .algo = tc_softmax_algo(algo)});
  return back(y, x, d);
}

at::Tensor softmax(const at::Tensor& x, int64_t dim, int64_t algo) { return forward("softmax", x, dim, 0, algo); }
at::Tensor log_softmax(const at::Tensor& x, int64_t dim, int64_t algo) {
  return forward("log_softmax", x, dim, 1, algo);
}

at::Tensor softmax_backward(const at::Tensor& grad_out, const at::Tensor& out, int64_t dim, bool log) {
  const char* op = "softmax_backward";
  check_args(op, {{"grad_out", grad_out}, {"out", out}});
  check_same_shape(op, {"grad_out", grad_out}, {"out", out});
  const int64_t d = wrap_dim(op, out, dim);
  const at::Tensor gc = last(grad_out, d), yc = last(out, d);
  at::Tensor gx = empty_contiguous(yc.sizes(), yc);
  const int64_t cols = yc.size(-1), rows = cols ? yc.numel() / cols : 0;
  call(op, yc, tc_softmax_backward_cpu, tc_softmax_backward_cuda,
       tc_softmax_backward_params{.rows = rows, .cols = cols, .log = log ? 1 : 0, .grad_y = gc.data_ptr(),
                                  .y = yc.data_ptr(), .grad_x = gx.data_ptr()});
  return back(gx, out, d);
}

template <class M>
void impls(M& m) {
  m.impl("softmax", &softmax);
  m.impl("log_softmax", &log_softmax);
  m.impl("softmax_backward", &softmax_backward);
}
}  // namespace

TORCH_LIBRARY_FRAGMENT(tinycuda, m) {
  m.def("softmax(Tensor x, int dim=-1, *, int algo=0) -> Tensor");
  m.def("log_softmax(Tensor x, int dim=-1, *, int algo=0) -> Tensor");
  m.def("softmax_backward(Tensor grad_out, Tensor out, int dim, bool log) -> Tensor");
}

TC_REGISTER_IMPLS(impls)
