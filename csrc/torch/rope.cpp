// rope, rope_backward, rope_ (in place): torch layer. q [B, Hq, S, D] and k
// [B, Hk, S, D] (unsqueeze_dim 1, Hugging Face's layout) or [B, S, H, D]
// (unsqueeze_dim 2), read in place with their strides when the head dim is
// contiguous (so a projection viewed [B, S, H, D] and transposed costs no
// copy). cos and sin: [S, D], [1, S, D] or [B, S, D]; with position_ids
// ([B, S], [1, S] or [S], int64) tables [P, D] or [1, P, D]; made contiguous.
// Outputs (and the backward's gradients) are fresh contiguous tensors of q's
// and k's shapes; rope_ writes q and k themselves.
#include <ATen/MemoryOverlap.h>

#include "tinycuda/rope.h"
#include "torch_utils.h"

namespace {
using namespace tc_torch;

// What the core reads besides q, k and the outputs: sizes, the tables and ids
// (contiguous, kept alive here), and which dims of q hold heads and tokens.
struct Plan {
  int64_t batch, seqlen, heads_q, heads_k, head_dim;
  int head_dim_of, seq_dim_of;
  at::Tensor cos, sin, pos;
  int64_t cs_stride_b, table_rows, pos_stride_b;
};

Plan plan(const char* op, Arg q, Arg k, const at::Tensor& cos, const at::Tensor& sin,
          const std::optional<at::Tensor>& position_ids, int64_t unsqueeze_dim) {
  check_args(op, {q, k, {"cos", cos}, {"sin", sin}});
  TC_CHECK(unsqueeze_dim == 1 || unsqueeze_dim == 2, op,
           "unsqueeze_dim must be 1 (q, k [B, H, S, D]) or 2 ([B, S, H, D]), got %lld", (long long)unsqueeze_dim);
  const char* layout = unsqueeze_dim == 1 ? "[B, H, S, D] (unsqueeze_dim=1)" : "[B, S, H, D] (unsqueeze_dim=2)";
  for (const Arg& a : {q, k})
    TC_CHECK(a.t.dim() == 4, op, "%s must be 4-D %s, got shape %s", a.name, layout, shape_str(a.t.sizes()).c_str());
  const int hd = unsqueeze_dim == 1 ? 1 : 2, sd = 3 - hd;
  const int64_t B = q.t.size(0), S = q.t.size(sd), D = q.t.size(3);
  TC_CHECK(k.t.size(0) == B && k.t.size(sd) == S && k.t.size(3) == D, op,
           "%s has shape %s but %s has shape %s: they must share batch, seqlen and head_dim (%s)", k.name,
           shape_str(k.t.sizes()).c_str(), q.name, shape_str(q.t.sizes()).c_str(), layout);
  TC_CHECK(D % 2 == 0, op, "head_dim D (the last dim of %s) must be even, got D = %lld", q.name, (long long)D);
  check_same_shape(op, {"sin", sin}, {"cos", cos});
  Plan p{B, S, q.t.size(hd), k.t.size(hd), D, hd, sd, cos.contiguous(), sin.contiguous(), {}, 0, S, 0};
  if (!position_ids) {
    const bool ok = (cos.dim() == 2 && cos.size(0) == S && cos.size(1) == D) ||
                    (cos.dim() == 3 && (cos.size(0) == 1 || cos.size(0) == B) && cos.size(1) == S && cos.size(2) == D);
    TC_CHECK(ok, op, "cos must have shape [S, D], [1, S, D] or [B, S, D] = [%lld, %lld, %lld], got %s",
             (long long)B, (long long)S, (long long)D, shape_str(cos.sizes()).c_str());
    p.cs_stride_b = cos.dim() == 3 && cos.size(0) > 1 ? S * D : 0;
    return p;
  }
  const at::Tensor& ids = *position_ids;
  TC_CHECK(ids.scalar_type() == at::kLong, op, "position_ids must be int64, got %s", dtype_str(ids));
  TC_CHECK(ids.device() == q.t.device(), op, "position_ids is on %s but %s is on %s", ids.device().str().c_str(),
           q.name, q.t.device().str().c_str());
  const bool ids_ok = (ids.dim() == 1 && ids.size(0) == S) ||
                      (ids.dim() == 2 && (ids.size(0) == 1 || ids.size(0) == B) && ids.size(1) == S);
  TC_CHECK(ids_ok, op, "position_ids must have shape [B, S], [1, S] or [S] = [%lld, %lld], got %s", (long long)B,
           (long long)S, shape_str(ids.sizes()).c_str());
  const bool table_ok =
      (cos.dim() == 2 && cos.size(1) == D) || (cos.dim() == 3 && cos.size(0) == 1 && cos.size(2) == D);
  TC_CHECK(table_ok, op, "with position_ids cos must be a table [P, D] or [1, P, D] (D = %lld), got %s", (long long)D,
           shape_str(cos.sizes()).c_str());
  p.pos = ids.contiguous();
  p.table_rows = cos.size(-2);
  p.pos_stride_b = ids.dim() == 2 && ids.size(0) > 1 ? S : 0;
  return p;
}

// The tensor itself when its head dim is contiguous, else a contiguous copy.
at::Tensor rows(const at::Tensor& t) { return t.size(3) <= 1 || t.stride(3) == 1 ? t : t.contiguous(); }

// Rotates q and k into q_out and k_out (q and k themselves: in place) on
// their device; `core` names the op in the core's errors.
void run(const char* core, const Plan& p, const at::Tensor& q, const at::Tensor& k, const at::Tensor& q_out,
         const at::Tensor& k_out, bool interleaved, bool transpose) {
  const int h = p.head_dim_of, s = p.seq_dim_of;
  call(core, q, tc_rope_cpu, tc_rope_cuda,
       tc_rope_params{.batch = p.batch, .seqlen = p.seqlen, .heads_q = p.heads_q, .heads_k = p.heads_k,
                      .head_dim = p.head_dim,
                      .q = q.data_ptr(), .q_stride = {q.stride(0), q.stride(h), q.stride(s)},
                      .k = k.data_ptr(), .k_stride = {k.stride(0), k.stride(h), k.stride(s)},
                      .q_out = q_out.data_ptr(), .q_out_stride = {q_out.stride(0), q_out.stride(h), q_out.stride(s)},
                      .k_out = k_out.data_ptr(), .k_out_stride = {k_out.stride(0), k_out.stride(h), k_out.stride(s)},
                      .cos = p.cos.data_ptr(), .sin = p.sin.data_ptr(), .cs_stride_b = p.cs_stride_b,
                      .table_rows = p.table_rows,
                      .position_ids = p.pos.defined() ? p.pos.data_ptr<int64_t>() : nullptr,
                      .pos_stride_b = p.pos_stride_b, .interleaved = interleaved, .transpose = transpose});
}

std::tuple<at::Tensor, at::Tensor> out_of_place(const char* op, Arg q, Arg k, const at::Tensor& cos,
                                                const at::Tensor& sin, const std::optional<at::Tensor>& position_ids,
                                                int64_t unsqueeze_dim, bool interleaved, bool transpose) {
  const Plan p = plan(op, q, k, cos, sin, position_ids, unsqueeze_dim);
  const at::Tensor qc = rows(q.t), kc = rows(k.t);
  at::Tensor q_out = empty_contiguous(qc.sizes(), qc), k_out = empty_contiguous(kc.sizes(), kc);
  run(op, p, qc, kc, q_out, k_out, interleaved, transpose);
  return {q_out, k_out};
}

std::tuple<at::Tensor, at::Tensor> rope(const at::Tensor& q, const at::Tensor& k, const at::Tensor& cos,
                                        const at::Tensor& sin, const std::optional<at::Tensor>& position_ids,
                                        int64_t unsqueeze_dim, bool interleaved) {
  return out_of_place("rope", {"q", q}, {"k", k}, cos, sin, position_ids, unsqueeze_dim, interleaved, false);
}

std::tuple<at::Tensor, at::Tensor> rope_backward(const at::Tensor& grad_q_out, const at::Tensor& grad_k_out,
                                                 const at::Tensor& cos, const at::Tensor& sin,
                                                 const std::optional<at::Tensor>& position_ids,
                                                 int64_t unsqueeze_dim, bool interleaved) {
  return out_of_place("rope_backward", {"grad_q_out", grad_q_out}, {"grad_k_out", grad_k_out}, cos, sin,
                      position_ids, unsqueeze_dim, interleaved, true);
}

// In place. q or k with a strided head dim is rotated in a contiguous copy,
// copied back. The core's errors (position ids) name rope, the op it runs.
void rope_(const at::Tensor& q, const at::Tensor& k, const at::Tensor& cos, const at::Tensor& sin,
           const std::optional<at::Tensor>& position_ids, int64_t unsqueeze_dim, bool interleaved) {
  const char* op = "rope_";
  const Plan p = plan(op, {"q", q}, {"k", k}, cos, sin, position_ids, unsqueeze_dim);
  at::assert_no_internal_overlap(q);
  at::assert_no_internal_overlap(k);
  at::assert_no_overlap(q, k);
  const at::Tensor qc = rows(q), kc = rows(k);
  run("rope", p, qc, kc, qc, kc, interleaved, false);
  if (!qc.is_same(q)) q.copy_(qc);
  if (!kc.is_same(k)) k.copy_(kc);
}

template <class M>
void impls(M& m) {
  m.impl("rope", &rope);
  m.impl("rope_backward", &rope_backward);
  m.impl("rope_", &rope_);
}
}  // namespace

TORCH_LIBRARY_FRAGMENT(tinycuda, m) {
  m.def("rope(Tensor q, Tensor k, Tensor cos, Tensor sin, Tensor? position_ids=None, int unsqueeze_dim=1, "
        "bool interleaved=False) -> (Tensor, Tensor)");
  m.def("rope_backward(Tensor grad_q_out, Tensor grad_k_out, Tensor cos, Tensor sin, Tensor? position_ids=None, "
        "int unsqueeze_dim=1, bool interleaved=False) -> (Tensor, Tensor)");
  m.def("rope_(Tensor(a!) q, Tensor(b!) k, Tensor cos, Tensor sin, Tensor? position_ids=None, int unsqueeze_dim=1, "
        "bool interleaved=False) -> ()");
}

TC_REGISTER_IMPLS(impls)
