// histogram family, torch layer: histc and bincount with torch's schemas,
// semantics and errors. Neither has a gradient: histc's result is not
// differentiable (no autograd kernel runs: the Autograd key falls through, as
// torch's histc leaves its result without grad_fn); bincount's has no formula
// (torch.library's fallback, as torch's NotImplemented grad_fn).
//
// histc: x float, any shape (made contiguous); min == max takes the data's
// range (the range pass, a device sync on CUDA, as torch's), widened by 1 each
// way where the data is one value (or empty), then torch's checks.
// bincount: x 1-D, any integer dtype (int64 to the core: others converted);
// weights 1-D as long as x, float32 kept and anything else converted to
// float64 (torch's rule, so float16 weights count in float64); the length
// max(max(x) + 1, minlength) from the range pass (a sync). An empty x gives
// int64 zeros of minlength, weights or not (torch's).
#include <algorithm>
#include <array>
#include <cmath>
#include <type_traits>

#include "tinycuda/histogram.h"
#include "torch_utils.h"

namespace {
using namespace tc_torch;

// [min(x), max(x)] on the host: the range pass into a tensor on x's device, copied back
template <class R>
std::array<R, 2> data_range(const char* op, const at::Tensor& x) {
  constexpr bool ints = std::is_same_v<R, int64_t>;
  at::Tensor out = at::empty({2}, x.options().dtype(ints ? at::kLong : at::kDouble));
  call_with_workspace(op, x, tc_histogram_range_cpu, tc_histogram_range_cuda, tc_histogram_range_workspace_size,
                      tc_histogram_range_params{.x_int64 = ints, .n = x.numel(), .x = x.data_ptr(),
                                                .out = out.data_ptr()});
  const at::Tensor host = out.cpu();
  return {host.data_ptr<R>()[0], host.data_ptr<R>()[1]};
}

at::Tensor histc(const at::Tensor& x0, int64_t bins, const at::Scalar& min, const at::Scalar& max) {
  const char* op = "histc";
  check_args(op, {{"x", x0}});
  TC_CHECK(bins > 0, op, "bins must be > 0, got %lld", (long long)bins);
  const at::Tensor x = x0.contiguous();
  double lo = min.toDouble(), hi = max.toDouble();
  if (lo == hi && x.numel() > 0) {
    const auto r = data_range<double>(op, x);
    lo = r[0], hi = r[1];
  }
  if (lo == hi) lo -= 1, hi += 1;
  auto shown = [](double v) { return std::isnan(v) ? std::fabs(v) : v; };  // "nan", never printf's "-nan"
  TC_CHECK(std::isfinite(lo) && std::isfinite(hi), op, "range of [%g, %g] is not finite", shown(lo), shown(hi));
  TC_CHECK(lo < hi, op, "max must be larger than min, got min %g and max %g", lo, hi);
  at::Tensor out = at::empty({bins}, x.options());
  call_with_workspace(op, x, tc_histc_cpu, tc_histc_cuda, tc_histc_workspace_size,
                      tc_histc_params{.n = x.numel(), .bins = bins, .min = lo, .max = hi, .x = x.data_ptr(),
                                      .out = out.data_ptr()});
  return out;
}

at::Tensor bincount(const at::Tensor& x0, const std::optional<at::Tensor>& weights, int64_t minlength) {
  const char* op = "bincount";
  TC_CHECK(x0.defined(), op, "x is undefined");
  TC_CHECK(at::isIntegralType(x0.scalar_type(), /*includeBool=*/false), op,
           "x must be an integer tensor (uint8, int8, int16, int32 or int64), got %s", dtype_str(x0));
  TC_CHECK(x0.dim() == 1, op, "x must be 1-D, got %lld dims", (long long)x0.dim());
  TC_CHECK(minlength >= 0, op, "minlength must be >= 0, got %lld", (long long)minlength);
  at::Tensor w;
  if (weights && weights->defined()) {
    TC_CHECK(weights->dim() == 1 && weights->size(0) == x0.size(0), op,
             "weights must be 1-D and as long as x (%lld), got shape %s", (long long)x0.size(0),
             shape_str(weights->sizes()).c_str());
    TC_CHECK(weights->device() == x0.device(), op, "weights is on %s but x is on %s",
             weights->device().str().c_str(), x0.device().str().c_str());
    w = (weights->scalar_type() == at::kFloat ? *weights : weights->to(at::kDouble)).contiguous();
  }
  const at::Tensor x = x0.to(at::kLong).contiguous();
  if (x.numel() == 0) return at::zeros({minlength}, x.options());
  const auto r = data_range<int64_t>(op, x);
  // CUDA checks here; the CPU kernel names the first negative element (bins >= 1 lets it run)
  if (x.is_cuda()) TC_CHECK(r[0] >= 0, op, "x must be non-negative, got %lld (its minimum)", (long long)r[0]);
  const int64_t bins = std::max({r[1] + 1, minlength, int64_t(1)});
  at::Tensor out = at::empty({bins}, w.defined() ? w.options() : x.options());
  call_with_workspace(op, w.defined() ? w : x, tc_bincount_cpu, tc_bincount_cuda, tc_bincount_workspace_size,
                      tc_bincount_params{.n = x.numel(), .bins = bins, .x = x.data_ptr<int64_t>(),
                                         .weights = w.defined() ? w.data_ptr() : nullptr, .out = out.data_ptr()});
  return out;
}

template <class M>
void impls(M& m) {
  m.impl("histc", &histc);
  m.impl("bincount", &bincount);
}
}  // namespace

TORCH_LIBRARY_FRAGMENT(tinycuda, m) {
  m.def("histc(Tensor x, int bins=100, Scalar min=0, Scalar max=0) -> Tensor");
  m.def("bincount(Tensor x, Tensor? weights=None, int minlength=0) -> Tensor");
}

TC_REGISTER_IMPLS(impls)

// histc's result has no gradient, as torch's: autograd passes the op through
TORCH_LIBRARY_IMPL(tinycuda, Autograd, m) { m.impl("histc", torch::CppFunction::makeFallthrough()); }
