// flash_attention, flash_attention_backward: torch layer. q [B, Sq, Hq, D],
// k and v [B, Sk, Hkv, D], read in place with their strides when the head
// dim is contiguous (so torch's [B, H, S, D] layout, transposed, costs no
// copy); outputs are fresh contiguous tensors: o [B, Sq, Hq, D], lse
// [B, Hq, Sq] float32 (float64 for float64), the gradients like q, k, v.
// Variable lengths (cu_seqlens_q/k, int32 [B + 1], with max_seqlen_q/k):
// q [total_q, Hq, D], k and v [total_k, Hkv, D], packed; lse [B, Hq,
// max_seqlen_q]. Rows in no sequence come out 0 (o, gradients) and +inf
// (lse): the core leaves them unwritten.
// flash_attention_qkvpacked(_backward): qkv [B, S, 3, H, D], one projection's
// output viewed (FlashAttention's qkvpacked form), q, k and v its slices read
// in place; the backward writes the three gradients into one [B, S, 3, H, D]
// tensor, so autograd stacks nothing (a GPT's unbind of q, k, v otherwise
// costs a copy of the gradients: aten::cat, 0.6 ms of GPT-2 124M's step).
#include <array>
#include <cmath>

#include "tinycuda/flash_attention.h"
#include "torch_utils.h"

namespace {
using namespace tc_torch;

struct Shape {
  int64_t batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim;
};

Shape check_shapes(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  for (const Arg& a : {Arg{"q", q}, Arg{"k", k}, Arg{"v", v}})
    TC_CHECK(a.t.dim() == 4, op, "%s must be 4-D [batch, seqlen, heads, head_dim], got shape %s", a.name,
             shape_str(a.t.sizes()).c_str());
  check_same_shape(op, {"v", v}, {"k", k});
  TC_CHECK(q.size(0) == k.size(0), op, "q has batch %lld but k has batch %lld", (long long)q.size(0),
           (long long)k.size(0));
  TC_CHECK(q.size(3) == k.size(3), op, "q has head_dim %lld but k has head_dim %lld", (long long)q.size(3),
           (long long)k.size(3));
  TC_CHECK(q.size(3) > 0, op, "head_dim must be > 0");
  const int64_t hq = q.size(2), hkv = k.size(2);
  TC_CHECK(hkv > 0 ? hq % hkv == 0 : hq == 0, op,
           "q's heads (%lld) must be a multiple of k's and v's heads (%lld)", (long long)hq, (long long)hkv);
  return {q.size(0), q.size(1), k.size(1), hq, hkv, q.size(3)};
}

// The tensor itself when its head dim is contiguous, else a contiguous copy.
at::Tensor rows(const at::Tensor& t) { return t.size(3) <= 1 || t.stride(3) == 1 ? t : t.contiguous(); }

void strides(const at::Tensor& t, int64_t (&s)[3]) {
  for (int d = 0; d < 3; ++d) s[d] = t.stride(d);
}

tc_attention_algo algo_of(const char* op, int64_t algo) {
  TC_CHECK(algo >= TC_ATTENTION_AUTO && algo <= TC_ATTENTION_WGMMA, op,
           "algo must be 0 (auto), 1 (naive), 2 (mma) or 3 (wgmma), got %lld", (long long)algo);
  return tc_attention_algo(algo);
}

double resolve_scale(const Shape& s, std::optional<double> scale) {
  return scale ? *scale : s.head_dim > 0 ? 1.0 / std::sqrt(double(s.head_dim)) : 1.0;
}

// The packed batch of a varlen call (cu == nullptr: fixed lengths), its
// tensors as [1, total, heads, D] views for check_shapes and the strides.
struct Varlen {
  const int32_t* cu_q = nullptr;
  const int32_t* cu_k = nullptr;
  int64_t batch = 0, max_q = 0, max_k = 0, total_q = 0, total_k = 0;
};

Varlen varlen_of(const char* op, const at::Tensor& q, const std::optional<at::Tensor>& cu_q,
                 const std::optional<at::Tensor>& cu_k, int64_t max_q, int64_t max_k, at::Tensor (&keep)[2]) {
  TC_CHECK(cu_q.has_value() == cu_k.has_value(), op, "cu_seqlens_q and cu_seqlens_k must be given together");
  if (!cu_q) {
    TC_CHECK(max_q == -1 && max_k == -1, op, "max_seqlen_q and max_seqlen_k are read only with cu_seqlens_q/k");
    return {};
  }
  for (const Arg& a : {Arg{"cu_seqlens_q", *cu_q}, Arg{"cu_seqlens_k", *cu_k}}) {
    TC_CHECK(a.t.scalar_type() == at::kInt && a.t.dim() == 1 && a.t.numel() >= 1, op,
             "%s must be a 1-D int32 tensor of batch + 1 offsets, got %s %s", a.name, dtype_str(a.t),
             shape_str(a.t.sizes()).c_str());
    TC_CHECK(a.t.device() == q.device(), op, "%s is on %s but q is on %s", a.name, a.t.device().str().c_str(),
             q.device().str().c_str());
  }
  TC_CHECK(cu_q->numel() == cu_k->numel(), op, "cu_seqlens_q has %lld entries but cu_seqlens_k has %lld",
           (long long)cu_q->numel(), (long long)cu_k->numel());
  TC_CHECK(max_q >= 0 && max_k >= 0, op,
           "max_seqlen_q and max_seqlen_k (the longest sequences) must be given with cu_seqlens, got %lld, %lld",
           (long long)max_q, (long long)max_k);
  keep[0] = cu_q->contiguous(), keep[1] = cu_k->contiguous();
  return {keep[0].data_ptr<int32_t>(), keep[1].data_ptr<int32_t>(), cu_q->numel() - 1, max_q, max_k};
}

// q, k, v as the core reads them: 4-D views (varlen: [1, total, heads, D]),
// and the problem's shape.
struct Inputs {
  at::Tensor q, k, v;
  Shape s;
};

Inputs inputs(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, Varlen& vl) {
  if (!vl.cu_q) {
    const Shape s = check_shapes(op, q, k, v);  // first: rows() reads dim 3
    return {rows(q), rows(k), rows(v), s};
  }
  for (const Arg& a : {Arg{"q", q}, Arg{"k", k}, Arg{"v", v}})
    TC_CHECK(a.t.dim() == 3, op, "%s must be 3-D [total, heads, head_dim] with cu_seqlens, got shape %s", a.name,
             shape_str(a.t.sizes()).c_str());
  Shape s = check_shapes(op, q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0));
  vl.total_q = s.seqlen_q, vl.total_k = s.seqlen_k;
  s.batch = vl.batch, s.seqlen_q = vl.max_q, s.seqlen_k = vl.max_k;
  return {rows(q.unsqueeze(0)), rows(k.unsqueeze(0)), rows(v.unsqueeze(0)), s};
}

// An output like t (varlen: zeros, its rows in no sequence stay 0) and its 4-D view.
std::pair<at::Tensor, at::Tensor> output(const at::Tensor& t, const Varlen& vl) {
  if (!vl.cu_q) {
    at::Tensor o = empty_contiguous(t.sizes(), t);
    return {o, o};
  }
  at::Tensor o = at::zeros(t.sizes(), t.options());
  return {o, o.unsqueeze(0)};
}

template <class P>
void set_varlen(P& p, const Varlen& vl) {
  p.cu_seqlens_q = vl.cu_q, p.cu_seqlens_k = vl.cu_k, p.total_q = vl.total_q, p.total_k = vl.total_k;
}

std::tuple<at::Tensor, at::Tensor> forward(const char* op, const at::Tensor& q_, const at::Tensor& k_,
                                           const at::Tensor& v_, bool causal, std::optional<double> scale,
                                           int64_t window_left, int64_t window_right, double softcap, bool top_left,
                                           const std::optional<at::Tensor>& cu_seqlens_q,
                                           const std::optional<at::Tensor>& cu_seqlens_k, int64_t max_seqlen_q,
                                           int64_t max_seqlen_k, int64_t algo) {
  at::Tensor keep[2];
  Varlen vl = varlen_of(op, q_, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, keep);
  const auto [q, k, v, s] = inputs(op, q_, k_, v_, vl);
  const auto [o, o4] = output(q_, vl);
  const auto lse_opts = q.options().dtype(q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat);
  at::Tensor lse = vl.cu_q ? at::full({s.batch, s.heads_q, s.seqlen_q}, INFINITY, lse_opts)
                           : at::empty({s.batch, s.heads_q, s.seqlen_q}, lse_opts);
  tc_flash_attention_params p{.batch = s.batch, .seqlen_q = s.seqlen_q, .seqlen_k = s.seqlen_k,
                              .heads_q = s.heads_q, .heads_kv = s.heads_kv, .head_dim = s.head_dim,
                              .q = q.data_ptr(), .k = k.data_ptr(), .v = v.data_ptr(), .o = o4.data_ptr(),
                              .lse = lse.data_ptr(), .scale = resolve_scale(s, scale), .softcap = softcap,
                              .causal = causal, .top_left = top_left, .window_left = window_left,
                              .window_right = window_right, .algo = algo_of(op, algo)};
  set_varlen(p, vl);
  strides(q, p.q_stride), strides(k, p.k_stride), strides(v, p.v_stride), strides(o4, p.o_stride);
  // CUDA's split-KV path (a few query rows) merges per-split partials from a workspace; 0 bytes otherwise
  call_with_workspace(op, q, tc_flash_attention_cpu, tc_flash_attention_cuda, tc_flash_attention_workspace_size, p);
  return {o, lse};
}

// into: the three gradients' 4-D tensors, given (qkvpacked: slices of one
// tensor), or null (fresh tensors like q, k and v).
std::tuple<at::Tensor, at::Tensor, at::Tensor> backward(
    const char* op, const at::Tensor& grad_out_, const at::Tensor& q_, const at::Tensor& k_, const at::Tensor& v_,
    const at::Tensor& out_, const at::Tensor& lse_, bool causal, std::optional<double> scale, int64_t window_left,
    int64_t window_right, double softcap, bool top_left, const std::optional<at::Tensor>& cu_seqlens_q,
    const std::optional<at::Tensor>& cu_seqlens_k, int64_t max_seqlen_q, int64_t max_seqlen_k, int64_t algo,
    bool deterministic, const std::array<at::Tensor, 3>* into = nullptr) {
  at::Tensor keep[2];
  Varlen vl = varlen_of(op, q_, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, keep);
  const auto [q, k, v, s] = inputs(op, q_, k_, v_, vl);
  check_same_shape(op, {"out", out_}, {"q", q_});
  check_same_shape(op, {"grad_out", grad_out_}, {"q", q_});
  const auto acc = q_.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  TC_CHECK(lse_.scalar_type() == acc && lse_.device() == q_.device(), op,
           "lse must be a %s tensor on %s, got %s on %s", c10::toString(acc), q_.device().str().c_str(),
           dtype_str(lse_), lse_.device().str().c_str());
  TC_CHECK(lse_.sizes() == at::IntArrayRef({s.batch, s.heads_q, s.seqlen_q}), op,
           "lse must have shape [%lld, %lld, %lld], got %s", (long long)s.batch, (long long)s.heads_q,
           (long long)s.seqlen_q, shape_str(lse_.sizes()).c_str());
  const at::Tensor o = rows(vl.cu_q ? out_.unsqueeze(0) : out_), g = rows(vl.cu_q ? grad_out_.unsqueeze(0) : grad_out_);
  const at::Tensor lse = lse_.contiguous();
  const auto [gq, gq4] = into ? std::pair{(*into)[0], (*into)[0]} : output(q_, vl);
  const auto [gk, gk4] = into ? std::pair{(*into)[1], (*into)[1]} : output(k_, vl);
  const auto [gv, gv4] = into ? std::pair{(*into)[2], (*into)[2]} : output(v_, vl);
  tc_flash_attention_backward_params p{
      .batch = s.batch, .seqlen_q = s.seqlen_q, .seqlen_k = s.seqlen_k, .heads_q = s.heads_q,
      .heads_kv = s.heads_kv, .head_dim = s.head_dim, .q = q.data_ptr(), .k = k.data_ptr(), .v = v.data_ptr(),
      .o = o.data_ptr(), .lse = lse.data_ptr(), .grad_o = g.data_ptr(), .grad_q = gq4.data_ptr(),
      .grad_k = gk4.data_ptr(), .grad_v = gv4.data_ptr(), .scale = resolve_scale(s, scale), .softcap = softcap,
      .causal = causal, .top_left = top_left, .window_left = window_left, .window_right = window_right,
      .algo = algo_of(op, algo), .deterministic = deterministic};  // workspace, stream: call_with_workspace
  set_varlen(p, vl);
  strides(q, p.q_stride), strides(k, p.k_stride), strides(v, p.v_stride), strides(o, p.o_stride);
  strides(g, p.grad_o_stride), strides(gq4, p.grad_q_stride), strides(gk4, p.grad_k_stride),
      strides(gv4, p.grad_v_stride);
  call_with_workspace(op, q, tc_flash_attention_backward_cpu, tc_flash_attention_backward_cuda,
                      tc_flash_attention_backward_workspace_size, p);
  return {gq, gk, gv};
}

std::tuple<at::Tensor, at::Tensor> flash_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                   bool causal, std::optional<double> scale, int64_t window_left,
                                                   int64_t window_right, double softcap, bool top_left,
                                                   const std::optional<at::Tensor>& cu_seqlens_q,
                                                   const std::optional<at::Tensor>& cu_seqlens_k,
                                                   int64_t max_seqlen_q, int64_t max_seqlen_k, int64_t algo,
                                                   bool /*deterministic: the backward's*/) {
  const char* op = "flash_attention";
  check_args(op, {{"q", q}, {"k", k}, {"v", v}});
  return forward(op, q, k, v, causal, scale, window_left, window_right, softcap, top_left, cu_seqlens_q,
                 cu_seqlens_k, max_seqlen_q, max_seqlen_k, algo);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> flash_attention_backward(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
    const at::Tensor& lse, bool causal, std::optional<double> scale, int64_t window_left, int64_t window_right,
    double softcap, bool top_left, const std::optional<at::Tensor>& cu_seqlens_q,
    const std::optional<at::Tensor>& cu_seqlens_k, int64_t max_seqlen_q, int64_t max_seqlen_k, int64_t algo,
    bool deterministic) {
  const char* op = "flash_attention_backward";
  check_args(op, {{"grad_out", grad_out}, {"q", q}, {"k", k}, {"v", v}, {"out", out}});
  return backward(op, grad_out, q, k, v, out, lse, causal, scale, window_left, window_right, softcap, top_left,
                  cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, algo, deterministic);
}

// q, k and v: qkv's slices along dim 2.
std::array<at::Tensor, 3> unpack(const char* op, const at::Tensor& qkv) {
  TC_CHECK(qkv.dim() == 5 && qkv.size(2) == 3, op, "qkv must be 5-D [batch, seqlen, 3, heads, head_dim], got shape %s",
           shape_str(qkv.sizes()).c_str());
  return {qkv.select(2, 0), qkv.select(2, 1), qkv.select(2, 2)};
}

std::tuple<at::Tensor, at::Tensor> flash_attention_qkvpacked(const at::Tensor& qkv, bool causal,
                                                             std::optional<double> scale, int64_t window_left,
                                                             int64_t window_right, double softcap, bool top_left,
                                                             int64_t algo, bool /*deterministic: the backward's*/) {
  const char* op = "flash_attention_qkvpacked";
  check_args(op, {{"qkv", qkv}});
  const auto [q, k, v] = unpack(op, qkv);
  return forward(op, q, k, v, causal, scale, window_left, window_right, softcap, top_left, std::nullopt,
                 std::nullopt, -1, -1, algo);
}

at::Tensor flash_attention_qkvpacked_backward(const at::Tensor& grad_out, const at::Tensor& qkv, const at::Tensor& out,
                                              const at::Tensor& lse, bool causal, std::optional<double> scale,
                                              int64_t window_left, int64_t window_right, double softcap,
                                              bool top_left, int64_t algo, bool deterministic) {
  const char* op = "flash_attention_qkvpacked_backward";
  check_args(op, {{"grad_out", grad_out}, {"qkv", qkv}, {"out", out}});
  const auto [q, k, v] = unpack(op, qkv);
  at::Tensor grad = empty_contiguous(qkv.sizes(), qkv);
  const std::array<at::Tensor, 3> into = unpack(op, grad);
  backward(op, grad_out, q, k, v, out, lse, causal, scale, window_left, window_right, softcap, top_left,
           std::nullopt, std::nullopt, -1, -1, algo, deterministic, &into);
  return grad;
}

template <class M>
void impls(M& m) {
  m.impl("flash_attention", &flash_attention);
  m.impl("flash_attention_backward", &flash_attention_backward);
  m.impl("flash_attention_qkvpacked", &flash_attention_qkvpacked);
  m.impl("flash_attention_qkvpacked_backward", &flash_attention_qkvpacked_backward);
}
}  // namespace

// The options every form takes, in this order: one spelling with the defaults (the forwards'), one without (the
// backwards', which autograd calls with the forward's values).
#define TC_ATTENTION_OPTIONS \
  "bool causal=False, float? scale=None, int window_left=-1, int window_right=-1, float softcap=0.0, bool top_left=False"
#define TC_ATTENTION_OPTIONS_GIVEN \
  "bool causal, float? scale, int window_left, int window_right, float softcap, bool top_left"
// Keyword-only, every form: the CUDA kernels' variant (tc_attention_algo), and whether the backward must give the
// same bits every run (the forwards take it so that autograd can hand it to their backward).
#define TC_ATTENTION_KW "int algo=0, bool deterministic=False"

TORCH_LIBRARY_FRAGMENT(tinycuda, m) {
  m.def("flash_attention(Tensor q, Tensor k, Tensor v, " TC_ATTENTION_OPTIONS ", Tensor? cu_seqlens_q=None, "
        "Tensor? cu_seqlens_k=None, int max_seqlen_q=-1, int max_seqlen_k=-1, *, " TC_ATTENTION_KW ") -> (Tensor, Tensor)");
  m.def("flash_attention_backward(Tensor grad_out, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, "
        TC_ATTENTION_OPTIONS_GIVEN ", Tensor? cu_seqlens_q=None, Tensor? cu_seqlens_k=None, int max_seqlen_q=-1, "
        "int max_seqlen_k=-1, *, " TC_ATTENTION_KW ") -> (Tensor, Tensor, Tensor)");
  m.def("flash_attention_qkvpacked(Tensor qkv, " TC_ATTENTION_OPTIONS ", *, " TC_ATTENTION_KW ") -> (Tensor, Tensor)");
  m.def("flash_attention_qkvpacked_backward(Tensor grad_out, Tensor qkv, Tensor out, Tensor lse, "
        TC_ATTENTION_OPTIONS_GIVEN ", *, " TC_ATTENTION_KW ") -> Tensor");
}

TC_REGISTER_IMPLS(impls)
