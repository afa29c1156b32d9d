// gelu: y = gelu(x), erf or tanh form as F.gelu; gelu_backward:
// grad_x = grad_y * gelu'(x) from the forward input. Math in gelu_math.h
// (shared with the CPU), in float with full-precision erff / expf / tanhf.
//
// Memory-bound: one pass of 16-byte vectors through launch_pointwise
// (pointwise.cuh), 2n * sizeof(T) bytes forward, 3n backward. The math is
// ~30 instructions per element forward (erff: a polynomial and an ex2), ~45
// backward (32 registers, full occupancy); 8192^2 bf16 forward is 268 MB,
// 90 us at 3.0 TB/s, against ~70 us of instruction issue (67M elements x 30
// / 32 lanes / 528 schedulers / 1.75 GHz) that the other warps' loads hide.
// A prototype of geglu's forward loop (the same math, 6 bytes per bf16
// element instead of 4) ran at 100% of copy bandwidth on an H100; with 1.5x
// the math per byte we expect ~95% here in bf16, ~100% in fp32.
#include "../shared/act_check.h"
#include "../shared/gelu_math.h"
#include "kit/pointwise.cuh"

// ---------------------------------------------------------------------------
// launchers

tc_status tc_gelu_cuda(const tc_gelu_params* p) {
  TC_RETURN_IF_ERROR(gelu_check(p));
  return with_gelu(p->approximate, [&](auto act) {
    return launch_pointwise<false>("gelu", p->dtype, p->n, p->x, nullptr, p->y, p->stream,
                                   GeluFn<decltype(act)>{});
  });
}

tc_status tc_gelu_backward_cuda(const tc_gelu_backward_params* p) {
  TC_RETURN_IF_ERROR(gelu_check(p));
  return with_gelu(p->approximate, [&](auto act) {
    return launch_pointwise<true>("gelu_backward", p->dtype, p->n, p->grad_y, p->x, p->grad_x,
                                  p->stream, GeluBackwardFn<decltype(act)>{});
  });
}
