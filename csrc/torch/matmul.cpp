// matmul: torch layer. a [M, K] or [Ba, M, K], b [K, N] or [Bb, K, N] (bmm's
// shapes, a batch of 1 broadcasting against the other's; tinycuda.matmul
// reduces torch.matmul's other shapes to these), with any strides: the core
// reads the operands where they lie, so a transposed view costs no copy.
#include "matmul_args.h"

namespace {
using namespace tc_torch;

at::Tensor matmul(const at::Tensor& a, const at::Tensor& b, int64_t algo) {
  const char* op = "matmul";
  check_args(op, {{"a", a}, {"b", b}});
  TC_CHECK(a.dim() == 2 || a.dim() == 3, op, "a must be 2-D [M, K] or 3-D [batch, M, K], got shape %s",
           shape_str(a.sizes()).c_str());
  TC_CHECK(b.dim() == 2 || b.dim() == 3, op, "b must be 2-D [K, N] or 3-D [batch, K, N], got shape %s",
           shape_str(b.sizes()).c_str());
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  TC_CHECK(b.size(-2) == K, op, "a's last dim (%lld) must equal b's second to last (%lld): shapes %s and %s",
           (long long)K, (long long)b.size(-2), shape_str(a.sizes()).c_str(), shape_str(b.sizes()).c_str());
  const int64_t ba = a.dim() == 3 ? a.size(0) : 1, bb = b.dim() == 3 ? b.size(0) : 1;
  TC_CHECK(ba == bb || ba == 1 || bb == 1, op, "batch sizes %lld and %lld do not broadcast", (long long)ba,
           (long long)bb);
  const int64_t batch = ba == 1 ? bb : ba;
  at::Tensor c = a.dim() == 2 && b.dim() == 2 ? empty_contiguous({M, N}, a) : empty_contiguous({batch, M, N}, a);
  // a batch of 1 (or none) is read again for every batch: stride 0
  const int64_t sa = ba > 1 ? a.stride(0) : 0, sb = bb > 1 ? b.stride(0) : 0;
  call_with_workspace(op, a, tc_matmul_cpu, tc_matmul_cuda, tc_matmul_workspace_size,
       tc_matmul_params{.batch = batch, .M = M, .N = N, .K = K, .a = a.data_ptr(),
                        .a_stride = {sa, a.stride(-2), a.stride(-1)}, .b = b.data_ptr(),
                        .b_stride = {sb, b.stride(-2), b.stride(-1)}, .c = c.data_ptr(),
                        .algo = gemm_algo_of(op, algo)});
  return c;
}

template <class M>
void impls(M& m) {
  m.impl("matmul", &matmul);
}
}  // namespace

TORCH_LIBRARY_FRAGMENT(tinycuda, m) { m.def("matmul(Tensor a, Tensor b, *, int algo=0) -> Tensor"); }

TC_REGISTER_IMPLS(impls)
