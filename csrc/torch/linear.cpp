// linear, linear_backward: torch layer. x is [..., K], weight [N, K],
// bias [N]; the core sees x as [M, K] with M the product of the batch dims.
#include "tinycuda/linear.h"
#include "matmul_args.h"

namespace {
using namespace tc_torch;

// Rows of the [M, K] view: the product of x's batch dims.
int64_t rows_of(const at::Tensor& x) {
  int64_t m = 1;
  for (int64_t i = 0; i + 1 < x.dim(); ++i) m *= x.size(i);
  return m;
}

void check_linear(const char* op, const at::Tensor& x, const at::Tensor& weight) {
  TC_CHECK(weight.dim() == 2, op, "weight must be 2-D [out, in], got shape %s",
           shape_str(weight.sizes()).c_str());
  TC_CHECK(x.dim() >= 1, op, "x must have at least 1 dim");
  TC_CHECK(x.size(-1) == weight.size(1), op, "x's last dim (%lld) must equal weight's in_features (%lld)",
           (long long)x.size(-1), (long long)weight.size(1));
}

// y = act(x @ weight^T + bias); with `pre` also P = x @ weight^T + bias.
at::Tensor linear_into(const char* op, const at::Tensor& x, const at::Tensor& weight,
                       const std::optional<at::Tensor>& bias, int activation, at::Tensor* pre, int64_t algo) {
  if (bias) check_args(op, {{"x", x}, {"weight", weight}, {"bias", *bias}});
  else check_args(op, {{"x", x}, {"weight", weight}});
  check_linear(op, x, weight);
  const int64_t K = weight.size(1), N = weight.size(0);
  TC_CHECK(!bias || (bias->dim() == 1 && bias->size(0) == N), op,
           "bias must have shape [%lld] (weight's out_features), got %s", (long long)N,
           shape_str(bias->sizes()).c_str());
  const at::Tensor xc = x.contiguous(), wc = weight.contiguous();
  const at::Tensor bc = bias ? bias->contiguous() : at::Tensor();
  std::vector<int64_t> out_shape(x.sizes().begin(), x.sizes().end() - 1);
  out_shape.push_back(N);
  at::Tensor y = empty_contiguous(out_shape, xc);
  if (pre) *pre = empty_contiguous(out_shape, xc);
  const int64_t M = rows_of(xc);
  call(op, xc, tc_linear_cpu, tc_linear_cuda,
       tc_linear_params{.M = M, .N = N, .K = K, .x = xc.data_ptr(), .weight = wc.data_ptr(),
                        .bias = bc.defined() ? bc.data_ptr() : nullptr, .activation = activation,
                        .y = y.data_ptr(), .pre = pre ? pre->data_ptr() : nullptr, .algo = gemm_algo_of(op, algo)});
  return y;
}

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                  int64_t algo) {
  return linear_into("linear", x, weight, bias, TC_ACT_NONE, nullptr, algo);
}

int activation_code(const char* op, c10::string_view activation, bool none_ok = false) {
  if (none_ok && activation == "none") return TC_ACT_NONE;
  if (activation == "relu") return TC_ACT_RELU;
  if (activation == "gelu") return TC_ACT_GELU;
  if (activation == "gelu_tanh") return TC_ACT_GELU_TANH;
  fail(op, fmt("activation must be %s'relu', 'gelu' or 'gelu_tanh', got '%s'", none_ok ? "'none', " : "",
               std::string(activation).c_str()));
}

// (y, P): P is [0] unless save_pre (autograd asks for it when a gradient is needed).
std::tuple<at::Tensor, at::Tensor> linear_act(const at::Tensor& x, const at::Tensor& weight,
                                              const std::optional<at::Tensor>& bias, c10::string_view activation,
                                              bool save_pre, int64_t algo) {
  const char* op = "linear_act";
  const int act = activation_code(op, activation);
  at::Tensor pre;
  at::Tensor y = linear_into(op, x, weight, bias, act, save_pre ? &pre : nullptr, algo);
  if (!save_pre) pre = empty_contiguous({0}, y);
  return {y, pre};
}

// With an activation, grad_out is the gradient of act(P) and pre is P
// (linear_act's backward): the products and the bias read grad_P.
std::tuple<at::Tensor, at::Tensor, at::Tensor> linear_backward(const at::Tensor& grad_out,
                                                               const at::Tensor& x,
                                                               const at::Tensor& weight,
                                                               std::array<bool, 3> mask,
                                                               const std::optional<at::Tensor>& pre,
                                                               c10::string_view activation, int64_t algo) {
  const char* op = "linear_backward";
  const int act = activation_code(op, activation, /*none_ok=*/true);
  TC_CHECK((act == TC_ACT_NONE) == !pre.has_value(), op,
           "pre (the forward's P) is given with an activation, and only then");
  if (pre) check_args(op, {{"grad_out", grad_out}, {"x", x}, {"weight", weight}, {"pre", *pre}});
  else check_args(op, {{"grad_out", grad_out}, {"x", x}, {"weight", weight}});
  check_linear(op, x, weight);
  const int64_t K = weight.size(1), N = weight.size(0);
  std::vector<int64_t> out_shape(x.sizes().begin(), x.sizes().end() - 1);
  out_shape.push_back(N);
  TC_CHECK(grad_out.sizes() == at::IntArrayRef(out_shape), op, "grad_out must have shape %s, got %s",
           shape_str(out_shape).c_str(), shape_str(grad_out.sizes()).c_str());
  TC_CHECK(!pre || pre->sizes() == grad_out.sizes(), op, "pre must have grad_out's shape %s, got %s",
           shape_str(grad_out.sizes()).c_str(), shape_str(pre->sizes()).c_str());
  const at::Tensor gc = grad_out.contiguous(), xc = x.contiguous(), wc = weight.contiguous();
  const at::Tensor pc = pre ? pre->contiguous() : at::Tensor();
  const int64_t M = rows_of(xc);
  at::Tensor gx = empty_contiguous(mask[0] ? xc.sizes() : at::IntArrayRef{0}, xc);
  at::Tensor gw = empty_contiguous(mask[1] ? wc.sizes() : at::IntArrayRef{0}, xc);
  at::Tensor gb = empty_contiguous({mask[2] ? N : 0}, xc);
  call_with_workspace(op, xc, tc_linear_backward_cpu, tc_linear_backward_cuda, tc_linear_backward_workspace_size,
                      tc_linear_backward_params{.M = M, .N = N, .K = K, .grad_y = gc.data_ptr(),
                                                .pre = pc.defined() ? pc.data_ptr() : nullptr, .activation = act,
                                                .x = xc.data_ptr(),
                                                .weight = wc.data_ptr(),
                                                .grad_x = mask[0] ? gx.data_ptr() : nullptr,
                                                .grad_weight = mask[1] ? gw.data_ptr() : nullptr,
                                                .grad_bias = mask[2] ? gb.data_ptr() : nullptr,
                                                .algo = gemm_algo_of(op, algo)});
  return {gx, gw, gb};
}

template <class M>
void impls(M& m) {
  m.impl("linear", &linear);
  m.impl("linear_act", &linear_act);
  m.impl("linear_backward", &linear_backward);
}
}  // namespace

TORCH_LIBRARY_FRAGMENT(tinycuda, m) {
  m.def("linear(Tensor x, Tensor weight, Tensor? bias=None, *, int algo=0) -> Tensor");
  m.def("linear_act(Tensor x, Tensor weight, Tensor? bias, str activation, *, bool save_pre=False, int algo=0) "
        "-> (Tensor, Tensor)");
  m.def("linear_backward(Tensor grad_out, Tensor x, Tensor weight, bool[3] output_mask, *, Tensor? pre=None, "
        "str activation=\"none\", int algo=0) -> (Tensor, Tensor, Tensor)");
}

TC_REGISTER_IMPLS(impls)
