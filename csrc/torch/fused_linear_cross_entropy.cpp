// fused_linear_cross_entropy: cross_entropy(hidden @ weight.T + bias, target)
// and, with compute_grad, the gradients of hidden, weight and bias, without
// ever holding the [N, V] logits. No kernel of its own: per chunk of tokens
//   logits_c      = hidden_c @ weight.T (+ bias)       one reused [chunk, V] buffer
//   cross_entropy core, gradient written over logits_c  (scaled by the batch's n_valid)
//   grad_hidden_c = grad_c @ weight                      into grad_hidden's rows
//   grad_weight  += grad_c.T @ hidden_c                  beta = 0 on the first chunk
//   grad_bias    += grad_c summed over rows              in fp32, rounded once
// The chunk is tc_fused_linear_cross_entropy_chunk's: Liger's
// next_pow2(ceil(N / ceil(V / H))) tokens (a buffer of about N * H elements)
// but at least 512 (1024 for a float32 accumulator), where the grad_weight
// product stops being bound by grad_weight's reads and writes
// (cross_entropy.h): 512 x 128256 bf16 = 125
// MiB for N = 8192, H = 4096, V = 128256, and the extra memory is that plus the
// gradients themselves (grad_weight 1002 MiB, grad_hidden 64 MiB).
//
// FLOPs: 6 N H V (25.8 TFLOP at that shape, ~34 ms at 760 TFLOP/s); the
// cross-entropy kernel adds 2 chunk x V x s bytes per chunk, ~1.5 ms in all.
// Each chunk also streams weight twice (2 x 1.05 GB) and reads and writes
// grad_weight (2 x 1.05 GB): at 256 tokens a chunk the GEMMs sit at ~256
// FLOP/byte, the H100's ridge, so a larger chunk_size trades memory for time.
//
// grad_weight accumulates in accum_dtype: by default the weight's (as Liger:
// no memory beyond grad_weight itself, but one rounding per chunk, so with
// fp16/bf16 its error grows with the number of chunks: at 86 chunks it is
// past 3x the unchunked matmul's in 15 of 20 seeds); float32 keeps one
// [V, H] fp32 accumulator (2 GiB at V = 128256, H = 4096) and rounds once,
// as accurate as torch's single matmul at any chunking: the chunk's product
// goes straight into it (the core GEMM's c_float), the first chunk writing it
// and the others adding (accumulate), so it needs no zero fill.
// The three products run on tinycuda's GEMM (matmul.h), CPU and CUDA.
//
// Reduction 'none' cannot make its gradients in the forward (a per-row
// grad_loss cannot be applied to grad_weight after the rows were summed into
// it): its backward runs this again with row_scale = grad_loss, which scales
// each chunk's gradient rows (cross_entropy_backward's per-row kernel) before
// the two products: one more logits product than 'mean', no [N, V] buffer.
// softcap and lse_square_scale as cross_entropy's; return_z_loss adds the z
// terms up chunk by chunk (each chunk's share rounded to the dtype: for
// logging). ce_weight: cross_entropy's class weights [V] (named apart from
// the projection's weight); MEAN then divides by the batch's W = sum of
// ce_weight[t] over rows not ignored, given to every chunk as n_valid is (and
// with z-loss the z terms, unweighted, still by n_valid: cross_entropy.h).
// return_token_accuracy: each row's 1 / 0 from the core (row_correct), then
// 'none' returns them and 'mean'/'sum' their sum over the batch's count of
// rows not ignored (float32; NaN when there is none), as cross_entropy's.
#include <algorithm>

#include "cross_entropy_args.h"
#include "matmul_args.h"

namespace {
using namespace tc_torch;

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_linear_cross_entropy(
    const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& target,
    const c10::optional<at::Tensor>& bias, int64_t ignore_index, c10::string_view reduction,
    double label_smoothing, bool compute_grad, int64_t chunk_size, c10::optional<at::ScalarType> accum_dtype,
    double softcap, double lse_square_scale, bool return_z_loss, const c10::optional<at::Tensor>& row_scale,
    const c10::optional<at::Tensor>& ce_weight, bool return_token_accuracy) {
  const char* op = "fused_linear_cross_entropy";
  const bool has_bias = bias.has_value() && bias->defined();
  if (has_bias)
    check_args(op, {{"hidden", hidden}, {"weight", weight}, {"bias", *bias}});
  else
    check_args(op, {{"hidden", hidden}, {"weight", weight}});
  TC_CHECK(hidden.dim() == 2, op, "hidden must be 2-D [tokens, hidden], got %s",
           shape_str(hidden.sizes()).c_str());
  TC_CHECK(weight.dim() == 2 && weight.size(1) == hidden.size(1) && weight.size(0) >= 1, op,
           "weight must be 2-D [classes, %lld] (hidden's last dim) with at least one class, got %s",
           (long long)hidden.size(1), shape_str(weight.sizes()).c_str());
  TC_CHECK(!has_bias || (bias->dim() == 1 && bias->size(0) == weight.size(0)), op,
           "bias must have shape [%lld] (weight's rows), got %s", (long long)weight.size(0),
           shape_str(has_bias ? bias->sizes() : at::IntArrayRef{}).c_str());
  check_target(op, target, hidden, "hidden");
  const int red = parse_reduction(op, reduction);
  check_label_smoothing(op, label_smoothing);
  check_options(op, softcap, lse_square_scale);
  const bool scaled = row_scale.has_value() && row_scale->defined();
  TC_CHECK(!(compute_grad && red == TC_REDUCTION_NONE && !scaled), op,
           "reduction='none' makes its gradient from a per-row grad_loss, which must be given as row_scale "
           "(the autograd backward passes it)");
  if (scaled) {
    check_args(op, {{"hidden", hidden}, {"row_scale", *row_scale}});
    TC_CHECK(red == TC_REDUCTION_NONE && compute_grad, op,
             "row_scale is the per-row grad_loss of reduction='none' with compute_grad");
    TC_CHECK(row_scale->dim() == 1 && row_scale->size(0) == hidden.size(0), op,
             "row_scale must have shape [%lld] (hidden's rows), got %s", (long long)hidden.size(0),
             shape_str(row_scale->sizes()).c_str());
  }
  const at::Tensor cw = class_weight(op, ce_weight, "ce_weight", hidden, "hidden", weight.size(0));
  TC_CHECK(chunk_size >= 0, op, "chunk_size must be >= 0 (0: automatic), got %lld", (long long)chunk_size);

  const at::ScalarType wdt = weight.scalar_type(), grad_acc = accum_dtype.value_or(wdt);
  TC_CHECK(grad_acc == wdt || (grad_acc == at::kFloat && wdt != at::kDouble), op,
           "accum_dtype must be None, the weight's dtype (%s) or Float (wider than a half weight), got %s",
           c10::toString(wdt), c10::toString(grad_acc));

  const at::Tensor h = hidden.contiguous(), w = weight.contiguous(), t = target.contiguous();
  const at::Tensor b = has_bias ? bias->contiguous() : at::Tensor();
  const int64_t n = h.size(0), v = w.size(0);
  if (h.is_cpu()) check_target_range(op, t, ignore_index, v);
  const int64_t chunk =
      std::min(chunk_size > 0 ? chunk_size
                              : tc_fused_linear_cross_entropy_chunk(n, h.size(1), v,
                                                                    compute_grad ? c10::elementSize(grad_acc) : 0),
               std::max<int64_t>(n, 1));
  const auto acc = h.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;

  at::Tensor row_loss = at::empty({n}, h.options().dtype(acc));
  const at::Tensor n_valid = red == TC_REDUCTION_MEAN ? t.ne(ignore_index).sum() : at::Tensor();
  // MEAN with class weights: the batch's W (targets clamped for the gather: the core checks their range;
  // ignored rows zeroed by a fill, not a product, so an inf or NaN weight of an in-range ignore_index
  // stays out of W, as in torch's)
  const bool weighted = cw.defined(), mean = red == TC_REDUCTION_MEAN;
  const at::Tensor w_valid =
      weighted && mean
          ? cw.to(acc).index_select(0, t.clamp(0, v - 1)).masked_fill_(t.eq(ignore_index), 0).sum()
          : at::Tensor();
  // ... and each row's z term apart, which MEAN divides by n_valid, not W
  at::Tensor row_z = weighted && mean && lse_square_scale > 0 ? at::empty({n}, h.options().dtype(acc)) : at::Tensor();
  at::Tensor grad_hidden = empty_contiguous(compute_grad ? h.sizes() : at::IntArrayRef{0}, h);
  at::Tensor grad_weight = empty_contiguous(compute_grad ? w.sizes() : at::IntArrayRef{0}, w);
  // widen: the accumulator in float32 for a narrower weight (else grad_weight itself)
  const bool widen = compute_grad && grad_acc != wdt;
  at::Tensor grad_weight_acc = widen ? at::empty(w.sizes(), w.options().dtype(grad_acc)) : grad_weight;
  at::Tensor grad_bias_acc = compute_grad && has_bias ? at::zeros({v}, h.options().dtype(acc)) : at::Tensor();
  if (compute_grad && n == 0) grad_weight.zero_();

  const at::Tensor scale = scaled ? row_scale->contiguous() : at::Tensor();
  // z terms: per row for 'none', else each chunk's share (MEAN: already over n_valid) added up in fp32
  at::Tensor z_rows = return_z_loss && red == TC_REDUCTION_NONE ? at::empty({n}, h.options()) : at::Tensor();
  at::Tensor z_chunk = return_z_loss && red != TC_REDUCTION_NONE ? at::empty({}, h.options()) : at::Tensor();
  at::Tensor z_sum = z_chunk.defined() ? at::zeros({}, h.options().dtype(acc)) : at::Tensor();
  at::Tensor row_correct = return_token_accuracy ? at::empty({n}, h.options().dtype(at::kFloat)) : at::Tensor();
  at::Tensor buffer = at::empty({chunk, v}, h.options());
  for (int64_t s = 0; s < n; s += chunk) {
    const int64_t len = std::min(chunk, n - s);
    at::Tensor logits = buffer.narrow(0, 0, len);
    const at::Tensor hc = h.narrow(0, s, len);
    product(op, logits, hc, w.t(), b, false);
    call_with_workspace(
        op, logits, tc_cross_entropy_cpu, tc_cross_entropy_cuda, tc_cross_entropy_workspace_size,
        tc_cross_entropy_params{.rows = len, .cols = v, .ignore_index = ignore_index, .reduction = red,
                                .label_smoothing = label_smoothing, .softcap = softcap,
                                .lse_square_scale = lse_square_scale, .logits = logits.data_ptr(),
                                .target = t.const_data_ptr<int64_t>() + s,
                                .grad_logits = compute_grad ? logits.data_ptr() : nullptr,
                                .n_valid = n_valid.defined() ? n_valid.const_data_ptr<int64_t>() : nullptr,
                                .row_loss = row_loss.narrow(0, s, len).data_ptr(),
                                .z_loss = z_rows.defined()    ? z_rows.narrow(0, s, len).data_ptr()
                                          : z_chunk.defined() ? z_chunk.data_ptr()
                                                              : nullptr,
                                .weight = weighted ? cw.const_data_ptr() : nullptr,
                                .target_weight_sum = w_valid.defined() ? w_valid.const_data_ptr() : nullptr,
                                .row_z = row_z.defined() ? row_z.narrow(0, s, len).data_ptr() : nullptr,
                                .row_correct = row_correct.defined() ? row_correct.data_ptr<float>() + s : nullptr});
    if (z_sum.defined()) z_sum.add_(z_chunk);
    if (!compute_grad) continue;
    if (scaled)
      call(op, logits, tc_cross_entropy_backward_cpu, tc_cross_entropy_backward_cuda,
           tc_cross_entropy_backward_params{.rows = len, .cols = v, .per_row = 1, .grad_logits = logits.data_ptr(),
                                            .grad_loss = scale.narrow(0, s, len).data_ptr()});
    product(op, grad_hidden.narrow(0, s, len), logits, w, at::Tensor(), false);
    product(op, grad_weight_acc, logits.t(), hc, at::Tensor(), s > 0);
    if (has_bias) grad_bias_acc.add_(logits.sum(0, false, acc));
  }

  at::Tensor loss = red == TC_REDUCTION_NONE ? row_loss : row_loss.sum();
  if (mean && row_z.defined())
    loss = row_loss.sub(row_z).sum().div(w_valid).add(row_z.sum().div(n_valid));
  else if (mean)
    loss = loss.div(weighted ? w_valid : n_valid);
  loss = loss.to(h.scalar_type());
  if (widen && n > 0) grad_weight.copy_(grad_weight_acc);
  at::Tensor grad_bias = grad_bias_acc.defined() ? grad_bias_acc.to(h.scalar_type())
                                                 : empty_contiguous(at::IntArrayRef{0}, h);
  at::Tensor z_loss = z_rows.defined()  ? z_rows
                      : z_sum.defined() ? z_sum.to(h.scalar_type())
                                        : empty_contiguous(at::IntArrayRef{0}, h);
  at::Tensor accuracy = !row_correct.defined()         ? at::empty({0}, h.options().dtype(at::kFloat))
                        : red == TC_REDUCTION_NONE ? row_correct
                                                   : row_correct.sum().div(mean ? n_valid : t.ne(ignore_index).sum());
  return {loss, grad_hidden, grad_weight, grad_bias, z_loss, accuracy};
}

template <class M>
void impls(M& m) {
  m.impl("fused_linear_cross_entropy", &fused_linear_cross_entropy);
}
}  // namespace

TORCH_LIBRARY_FRAGMENT(tinycuda, m) {
  m.def("fused_linear_cross_entropy(Tensor hidden, Tensor weight, Tensor target, Tensor? bias=None, "
        "int ignore_index=-100, str reduction='mean', float label_smoothing=0.0, "
        "bool compute_grad=False, int chunk_size=0, ScalarType? accum_dtype=None, float softcap=0.0, "
        "float lse_square_scale=0.0, bool return_z_loss=False, Tensor? row_scale=None, Tensor? ce_weight=None, "
        "bool return_token_accuracy=False) -> (Tensor loss, Tensor grad_hidden, Tensor grad_weight, Tensor grad_bias, "
        "Tensor z_loss, Tensor token_accuracy)");
}

TC_REGISTER_IMPLS(impls)
