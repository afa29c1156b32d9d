// embedding, embedding_backward: torch layer. input: int64 indices of any
// shape (made contiguous); weight [num_embeddings, embedding_dim] (made
// contiguous); out: input.shape + [embedding_dim]. The backward takes
// grad_out of that shape and returns grad_weight [num_embeddings,
// embedding_dim]. padding_idx: None, or in [-num_embeddings, num_embeddings),
// a negative one counted from the end (torch's rule); the forward checks it
// and reads nothing of it (torch's forward copies the padding row like any).
#include <optional>
#include <vector>

#include "tinycuda/embedding.h"
#include "torch_utils.h"

namespace {
using namespace tc_torch;

void check_input(const char* op, const at::Tensor& input, Arg on) {
  TC_CHECK(input.defined() && input.scalar_type() == at::kLong, op, "input must be int64 indices, got %s",
           input.defined() ? dtype_str(input) : "undefined");
  TC_CHECK(input.device() == on.t.device(), op, "input is on %s but %s is on %s", input.device().str().c_str(),
           on.name, on.t.device().str().c_str());
}

// padding_idx as the core takes it: in [0, num_embeddings), or -1 for none
int64_t padding(const char* op, std::optional<int64_t> padding_idx, int64_t num_embeddings) {
  if (!padding_idx) return -1;
  const int64_t p = *padding_idx;
  TC_CHECK(p >= -num_embeddings && p < num_embeddings, op,
           "padding_idx must be in [-num_embeddings, num_embeddings) = [%lld, %lld), got %lld",
           (long long)-num_embeddings, (long long)num_embeddings, (long long)p);
  return p < 0 ? p + num_embeddings : p;
}

at::Tensor embedding(const at::Tensor& input, const at::Tensor& weight, std::optional<int64_t> padding_idx) {
  const char* op = "embedding";
  check_args(op, {{"weight", weight}});
  TC_CHECK(weight.dim() == 2, op, "weight must be 2-D [num_embeddings, embedding_dim], got shape %s",
           shape_str(weight.sizes()).c_str());
  check_input(op, input, {"weight", weight});
  padding(op, padding_idx, weight.size(0));
  const at::Tensor ic = input.contiguous(), wc = weight.contiguous();
  std::vector<int64_t> shape = input.sizes().vec();
  shape.push_back(weight.size(1));
  at::Tensor out = empty_contiguous(shape, wc);
  call(op, wc, tc_embedding_cpu, tc_embedding_cuda,
       tc_embedding_params{.num_indices = ic.numel(), .num_embeddings = wc.size(0), .embedding_dim = wc.size(1),
                           .input = ic.const_data_ptr<int64_t>(), .weight = wc.const_data_ptr(),
                           .out = out.data_ptr()});
  return out;
}

at::Tensor embedding_backward(const at::Tensor& grad_out, const at::Tensor& input, int64_t num_embeddings,
                              std::optional<int64_t> padding_idx) {
  const char* op = "embedding_backward";
  check_args(op, {{"grad_out", grad_out}});
  check_input(op, input, {"grad_out", grad_out});
  TC_CHECK(num_embeddings >= 0, op, "num_embeddings must be >= 0, got %lld", (long long)num_embeddings);
  TC_CHECK(grad_out.dim() == input.dim() + 1 && grad_out.sizes().slice(0, input.dim()) == input.sizes(), op,
           "grad_out must have shape input.shape + [embedding_dim] = %s + [D], got %s",
           shape_str(input.sizes()).c_str(), shape_str(grad_out.sizes()).c_str());
  const int64_t pad = padding(op, padding_idx, num_embeddings);
  const at::Tensor gc = grad_out.contiguous(), ic = input.contiguous();
  const int64_t dim = grad_out.size(-1);
  at::Tensor grad_weight = empty_contiguous({num_embeddings, dim}, gc);
  call_with_workspace(op, gc, tc_embedding_backward_cpu, tc_embedding_backward_cuda,
                      tc_embedding_backward_workspace_size,
                      tc_embedding_backward_params{.num_indices = ic.numel(), .num_embeddings = num_embeddings,
                                                   .embedding_dim = dim, .padding_idx = pad,
                                                   .grad_out = gc.const_data_ptr(),
                                                   .input = ic.const_data_ptr<int64_t>(),
                                                   .grad_weight = grad_weight.data_ptr()});
  return grad_weight;
}

template <class M>
void impls(M& m) {
  m.impl("embedding", &embedding);
  m.impl("embedding_backward", &embedding_backward);
}
}  // namespace

TORCH_LIBRARY_FRAGMENT(tinycuda, m) {
  m.def("embedding(Tensor input, Tensor weight, int? padding_idx=None) -> Tensor");
  m.def("embedding_backward(Tensor grad_out, Tensor input, int num_embeddings, int? padding_idx=None) -> Tensor");
}

TC_REGISTER_IMPLS(impls)
