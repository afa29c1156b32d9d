// The losses family's op list (each op's torch schema: the one place its
// name, arguments and defaults are written), its reductions, its checks and
// its workspace sizes, shared by both devices and both doors.
#include <array>
#include <string>
#include <vector>

#include "losses_math.h"
#include "losses_plan.h"

namespace {
const char* const kSchemas[TC_LOSS_COUNT] = {
    "mse_loss(Tensor input, Tensor target, bool? size_average=None, bool? reduce=None, str reduction='mean', "
    "Tensor? weight=None) -> Tensor",
    "l1_loss(Tensor input, Tensor target, bool? size_average=None, bool? reduce=None, str reduction='mean', "
    "Tensor? weight=None) -> Tensor",
    "smooth_l1_loss(Tensor input, Tensor target, bool? size_average=None, bool? reduce=None, "
    "str reduction='mean', float beta=1.0) -> Tensor",
    "huber_loss(Tensor input, Tensor target, str reduction='mean', float delta=1.0, Tensor? weight=None) -> Tensor",
    "binary_cross_entropy_with_logits(Tensor input, Tensor target, Tensor? weight=None, bool? size_average=None, "
    "bool? reduce=None, str reduction='mean', Tensor? pos_weight=None) -> Tensor",
    "kl_div(Tensor input, Tensor target, bool? size_average=None, bool? reduce=None, str reduction='mean', "
    "bool log_target=False) -> Tensor",
    "margin_ranking_loss(Tensor input1, Tensor input2, Tensor target, float margin=0.0, bool? size_average=None, "
    "bool? reduce=None, str reduction='mean') -> Tensor",
    "hinge_embedding_loss(Tensor input, Tensor target, float margin=1.0, bool? size_average=None, "
    "bool? reduce=None, str reduction='mean') -> Tensor",
    "triplet_margin_loss(Tensor anchor, Tensor positive, Tensor negative, float margin=1.0, float p=2.0, "
    "float eps=1e-06, bool swap=False, bool? size_average=None, bool? reduce=None, str reduction='mean') -> Tensor",
};

// tc_loss_reduction's names, lower case
const char* const kReductions[TC_LOSS_REDUCTION_COUNT] = {"none", "mean", "sum", "batchmean"};

// What the checks need of a schema: the op's name and its tensor arguments (name, optional), in order
struct Signature {
  std::string name, backward;
  std::vector<std::pair<std::string, bool>> tensors;
};

const Signature& signature(int op) {
  static const auto all = [] {  // built once, before any thread can ask
    std::array<Signature, TC_LOSS_COUNT> s;
    for (int k = 0; k < TC_LOSS_COUNT; ++k) {
      const std::string schema = kSchemas[k];
      const size_t open = schema.find('('), close = schema.find(')');
      s[k].name = schema.substr(0, open);
      s[k].backward = s[k].name + "_backward";
      const std::string args = schema.substr(open + 1, close - open - 1);
      for (size_t a = 0; a < args.size();) {
        const size_t end = std::min(args.find(", ", a), args.size());
        const std::string arg = args.substr(a, end - a);
        const size_t space = arg.find(' '), eq = arg.find('=');
        if (arg.rfind("Tensor", 0) == 0)
          s[k].tensors.push_back({arg.substr(space + 1, eq == std::string::npos ? eq : eq - space - 1), arg[6] == '?'});
        a = end + 2;
      }
    }
    return s;
  }();
  return all[op];
}

tc_status op_check(const char* fn, int op) {
  TC_REQUIRE(op >= 0 && op < TC_LOSS_COUNT, "%s: op must be in [0, %d), got %d", fn, TC_LOSS_COUNT, op);
  return TC_OK;
}

tc_status reduction_error(int op, const char* got) {
  const bool batchmean = op == TC_LOSS_KL_DIV;
  return tc_fail(TC_ERR_INVALID_ARGUMENT, "%s: reduction must be 'none', 'mean'%s 'sum'%s, got '%s'",
                 signature(op).name.c_str(), batchmean ? "," : " or", batchmean ? " or 'batchmean'" : "", got);
}

// the op's own arguments: scalars in range, operands given or not as the math reads them
template <int OP> tc_status op_args_check(const tc_loss_params* p, const char* name, int64_t n) {
  using M = LossMath<OP>;
  if constexpr (OP == TC_LOSS_SMOOTH_L1_LOSS) TC_REQUIRE(p->beta >= 0, "%s: beta must be >= 0, got %g", name, p->beta);
  if constexpr (OP == TC_LOSS_HUBER_LOSS) TC_REQUIRE(p->delta > 0, "%s: delta must be > 0, got %g", name, p->delta);
  if constexpr (OP == TC_LOSS_TRIPLET_MARGIN_LOSS) {
    TC_REQUIRE(p->margin > 0, "%s: margin must be > 0, got %g", name, p->margin);
    TC_REQUIRE(std::isfinite(p->p), "%s: p must be finite (the +-inf norms' gradient is not implemented), got %g",
               name, p->p);
    int64_t s = 1;
    for (int d = p->ndim - 1; d >= 0 && n > 0; --d) {
      for (int k = 0; k < 3; ++k)
        TC_REQUIRE(p->sizes[d] == 1 || p->strides[k][d] == s, "%s: %s must be contiguous", name,
                   signature(OP).tensors[size_t(k)].first.c_str());
      s *= p->sizes[d];
    }
  }
  const auto& tensors = signature(OP).tensors;
  for (int k = 0; k < 4; ++k) {
    if (k >= int(tensors.size())) {
      TC_REQUIRE(!p->operands[k], "%s: operands[%d] must be NULL (the op has %zu tensor arguments)", name, k,
                 tensors.size());
    } else if (k >= M::kOperands) {
      TC_REQUIRE(!p->operands[k], "%s: %s is not supported (multiply the reduction='none' loss by it)", name,
                 tensors[size_t(k)].first.c_str());
    } else {
      TC_REQUIRE(n == 0 || tensors[size_t(k)].second || p->operands[k], "%s: %s is NULL", name,
                 tensors[size_t(k)].first.c_str());
    }
  }
  return TC_OK;
}
}  // namespace

const char* tc_loss_schema(int op) { return op >= 0 && op < TC_LOSS_COUNT ? kSchemas[op] : nullptr; }

int tc_loss_grads(int op) {
  int grads = -1;
  if (op >= 0 && op < TC_LOSS_COUNT) dispatch_loss(op, [&](auto k) { return grads = LossMath<decltype(k)::value>::kGrads, TC_OK; });
  return grads;
}

int tc_loss_shape(int op) {
  int shape = -1;
  if (op >= 0 && op < TC_LOSS_COUNT) dispatch_loss(op, [&](auto k) { return shape = LossMath<decltype(k)::value>::kShape, TC_OK; });
  return shape;
}

tc_status tc_loss_parse_reduction(int op, const char* name, tc_loss_reduction* reduction) {
  TC_RETURN_IF_ERROR(op_check("loss", op));
  TC_REQUIRE(name && reduction, "%s: name or reduction is NULL", signature(op).name.c_str());
  for (int r = 0; r < TC_LOSS_REDUCTION_COUNT; ++r) {
    if (std::string(name) != kReductions[r]) continue;
    if (r == TC_LOSS_REDUCTION_BATCHMEAN && op != TC_LOSS_KL_DIV) break;
    *reduction = tc_loss_reduction(r);
    return TC_OK;
  }
  return reduction_error(op, name);
}

const char* loss_name(int op, bool backward) {
  if (op < 0 || op >= TC_LOSS_COUNT) return backward ? "loss_backward" : "loss";
  return (backward ? signature(op).backward : signature(op).name).c_str();
}

int64_t loss_count(const tc_loss_params* p) {
  if (p->op == TC_LOSS_TRIPLET_MARGIN_LOSS) return loss_rows(p).rows;
  int64_t n = 1;
  for (int d = 0; d < p->ndim; ++d) n *= p->sizes[d];
  return n;
}

double loss_divisor(const tc_loss_params* p) {
  switch (p->reduction) {
    case TC_LOSS_REDUCTION_MEAN: return double(loss_count(p));
    case TC_LOSS_REDUCTION_BATCHMEAN: return double(p->batch);
    default: return 1.0;
  }
}

tc_status loss_check(const tc_loss_params* p, bool backward) {
  TC_REQUIRE(p, "loss%s: params is NULL", backward ? "_backward" : "");
  TC_RETURN_IF_ERROR(op_check(backward ? "loss_backward" : "loss", p->op));
  const char* name = loss_name(p->op, backward);
  TC_REQUIRE(p->reduction >= 0 && p->reduction < TC_LOSS_REDUCTION_COUNT, "%s: reduction must be in [0, %d), got %d",
             name, TC_LOSS_REDUCTION_COUNT, int(p->reduction));
  if (p->reduction == TC_LOSS_REDUCTION_BATCHMEAN && p->op != TC_LOSS_KL_DIV) return reduction_error(p->op, "batchmean");
  int64_t n = 0;
  TC_RETURN_IF_ERROR(shape_check(name, p->ndim, p->sizes, &n));
  TC_REQUIRE(p->batch >= 0, "%s: batch must be >= 0, got %lld", name, (long long)p->batch);
  TC_RETURN_IF_ERROR(dispatch_loss(p->op, [&](auto k) { return op_args_check<decltype(k)::value>(p, name, n); }));
  const bool none = p->reduction == TC_LOSS_REDUCTION_NONE, empty = loss_count(p) == 0;
  if (!backward) {
    TC_REQUIRE((none && empty) || p->out, "%s: out is NULL", name);
    return TC_OK;
  }
  TC_REQUIRE((none && empty) || p->grad_out, "%s: grad_out is NULL", name);
  const int grads = tc_loss_grads(p->op);
  for (int k = 0; k < 4; ++k)
    TC_REQUIRE(!p->grads[k] || grads >> k & 1, "%s: %s gets no gradient (grads[%d] must be NULL)", name,
               k < int(signature(p->op).tensors.size()) ? signature(p->op).tensors[size_t(k)].first.c_str() : "it", k);
  return TC_OK;
}

tc_status loss_begin(const tc_loss_params* p, bool backward, const char** name) {
  *name = nullptr;
  TC_RETURN_IF_ERROR(loss_check(p, backward));
  if (p->reduction != TC_LOSS_REDUCTION_NONE || loss_count(p) > 0) *name = loss_name(p->op, backward);
  return TC_OK;
}

size_t tc_loss_workspace_size(const tc_loss_params* p) {
  if (loss_check(p, false) != TC_OK || p->reduction == TC_LOSS_REDUCTION_NONE) return 0;
  int64_t blocks = 1;
  if (p->op == TC_LOSS_TRIPLET_MARGIN_LOSS) {
    const LossRows r = loss_rows(p);
    blocks = plan::loss_row_blocks(r.rows, r.cols);
  } else {
    blocks = plan::loss_blocks(loss_count(p));
  }
  return blocks > 1 ? size_t(blocks) * plan::acc_bytes(p->dtype) : 0;
}
