// adamw_, multi_tensor_l2norm: torch layer. Tensor lists of one dtype and
// device; the pointer and size arrays the core takes are built here (host
// memory: the CUDA launcher passes them as kernel arguments). adamw_ updates
// params, exp_avgs, exp_avg_sqs and masters (master weights, adamw.h) in place
// (contiguous, as torch.optim's state is) and returns nothing; grads may be any layout (made contiguous).
// The hyperparameters are positional: inductor's code for a mutating custom
// op passed keyword-only ones positionally ("takes 4 positional arguments").
#include <string>
#include <vector>

#include "tinycuda/adamw.h"
#include "torch_utils.h"

namespace {
using namespace tc_torch;

// Every tensor of every list: a float dtype, the first one's dtype and device,
// and (for the lists updated in place) contiguous.
void check_list(const char* op, const char* name, at::TensorList list, const at::Tensor& first, bool in_place) {
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string label = std::string(name) + "[" + std::to_string(i) + "]";
    check_args(op, {{"the first tensor", first}, {label.c_str(), list[i]}});
    TC_CHECK(!in_place || list[i].is_contiguous(), op, "%s must be contiguous (it is updated in place)",
             label.c_str());
  }
}

void adamw_(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
            double lr, double beta1, double beta2, double eps, double weight_decay, int64_t step,
            const std::optional<at::Tensor>& grad_norm, double max_grad_norm,
            std::optional<at::TensorList> masters_) {
  const char* op = "adamw_";
  const at::TensorList masters = masters_.value_or(at::TensorList{});
  const size_t n = params.size();
  TC_CHECK(grads.size() == n && exp_avgs.size() == n && exp_avg_sqs.size() == n, op,
           "params, grads, exp_avgs and exp_avg_sqs must have one tensor each alike, got %zu, %zu, %zu and %zu",
           n, grads.size(), exp_avgs.size(), exp_avg_sqs.size());
  TC_CHECK(masters.empty() || masters.size() == n, op,
           "masters must be empty or have one tensor a parameter, got %zu for %zu params", masters.size(), n);
  if (n == 0) return;
  const at::Tensor& first = params[0];
  check_list(op, "params", params, first, true);
  check_list(op, "grads", grads, first, false);
  // with master weights (adamw.h) the state is float32, as the masters are
  const bool with_masters = !masters.empty();
  if (with_masters) {
    TC_CHECK(first.scalar_type() == at::kHalf || first.scalar_type() == at::kBFloat16, op,
             "master weights go with float16 or bfloat16 params, got %s", dtype_str(first));
    TC_CHECK(masters[0].scalar_type() == at::kFloat, op, "masters[0] must be float32, got %s", dtype_str(masters[0]));
    check_list(op, "masters", masters, masters[0], true);
  }
  const at::Tensor& state = with_masters ? masters[0] : first;
  check_list(op, "exp_avgs", exp_avgs, state, true);
  check_list(op, "exp_avg_sqs", exp_avg_sqs, state, true);
  std::vector<at::Tensor> gc(n);
  std::vector<int64_t> numel(n);
  std::vector<void*> p(n), m(n), v(n), w(with_masters ? n : 0);
  std::vector<const void*> g(n);
  for (size_t i = 0; i < n; ++i) {
    numel[i] = params[i].numel();
    TC_CHECK(grads[i].sizes() == params[i].sizes() && exp_avgs[i].sizes() == params[i].sizes() &&
                 exp_avg_sqs[i].sizes() == params[i].sizes() &&
                 (!with_masters || masters[i].sizes() == params[i].sizes()),
             op, "grads[%zu], exp_avgs[%zu]%sexp_avg_sqs[%zu]%s must have params[%zu]'s shape %s", i, i,
             with_masters ? ", " : " and ", i, with_masters ? (" and masters[" + std::to_string(i) + "]").c_str() : "",
             i, shape_str(params[i].sizes()).c_str());
    gc[i] = grads[i].contiguous();
    p[i] = params[i].data_ptr(), g[i] = gc[i].data_ptr(), m[i] = exp_avgs[i].data_ptr(),
    v[i] = exp_avg_sqs[i].data_ptr();
    if (with_masters) w[i] = masters[i].data_ptr();
  }
  const void* norm = nullptr;
  if (grad_norm) {
    const auto acc = first.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
    TC_CHECK(grad_norm->numel() == 1 && grad_norm->scalar_type() == acc && grad_norm->device() == first.device(),
             op, "grad_norm must be one %s value on %s (multi_tensor_l2norm's result), got %s of %lld elements on %s",
             c10::toString(acc), first.device().str().c_str(), dtype_str(*grad_norm),
             (long long)grad_norm->numel(), grad_norm->device().str().c_str());
    norm = grad_norm->data_ptr();
  }
  call(op, first, tc_adamw_cpu, tc_adamw_cuda,
       tc_adamw_params{.count = int64_t(n), .numel = numel.data(), .params = p.data(), .grads = g.data(),
                       .exp_avg = m.data(), .exp_avg_sq = v.data(), .master = with_masters ? w.data() : nullptr,
                       .lr = lr, .beta1 = beta1, .beta2 = beta2,
                       .eps = eps, .weight_decay = weight_decay, .step = step, .grad_norm = norm,
                       .max_grad_norm = max_grad_norm});
}

at::Tensor multi_tensor_l2norm(at::TensorList tensors) {
  const char* op = "multi_tensor_l2norm";
  TC_CHECK(!tensors.empty(), op, "tensors must hold at least one tensor (its device and dtype are the result's)");
  const at::Tensor& first = tensors[0];
  check_list(op, "tensors", tensors, first, false);
  const size_t n = tensors.size();
  std::vector<at::Tensor> c(n);
  std::vector<int64_t> numel(n);
  std::vector<const void*> ptr(n);
  for (size_t i = 0; i < n; ++i) c[i] = tensors[i].contiguous(), numel[i] = c[i].numel(), ptr[i] = c[i].data_ptr();
  at::Tensor norm = at::empty({}, first.options().dtype(first.scalar_type() == at::kDouble ? at::kDouble : at::kFloat));
  call_with_workspace(op, first, tc_multi_tensor_l2norm_cpu, tc_multi_tensor_l2norm_cuda,
                      tc_multi_tensor_l2norm_workspace_size,
                      tc_multi_tensor_l2norm_params{.count = int64_t(n), .numel = numel.data(), .tensors = ptr.data(),
                                                    .norm = norm.data_ptr()});
  return norm;
}

template <class M>
void impls(M& m) {
  m.impl("adamw_", &adamw_);
  m.impl("multi_tensor_l2norm", &multi_tensor_l2norm);
}
}  // namespace

TORCH_LIBRARY_FRAGMENT(tinycuda, m) {
  m.def("adamw_(Tensor(a!)[] params, Tensor[] grads, Tensor(b!)[] exp_avgs, Tensor(c!)[] exp_avg_sqs, "
        "float lr, float beta1, float beta2, float eps, float weight_decay, int step, Tensor? grad_norm=None, "
        "float max_grad_norm=0., Tensor(d!)[]? masters=None) -> ()");
  m.def("multi_tensor_l2norm(Tensor[] tensors) -> Tensor");
}

TC_REGISTER_IMPLS(impls)
