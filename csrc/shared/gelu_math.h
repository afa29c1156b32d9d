// The activations of the gelu and glu families, shared by the CPU and CUDA
// kernels, in the accumulator type A (float; double for double), written the
// way ATen writes them (ActivationGeluKernel.cu, ActivationSiluKernel.cu) so
// they agree with F.gelu / F.silu to rounding:
//   gelu, erf form   f(x)  = x Phi(x) = x/2 (1 + erf(x / sqrt(2)))
//                    f'(x) = Phi(x) + x phi(x),  phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
//   gelu, tanh form  f(x)  = x/2 (1 + t),  t = tanh(u),  u = sqrt(2/pi) (x + 0.044715 x^3)
//                    f'(x) = (1 + t)/2 + x/2 (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
//   silu             f(x)  = x / (1 + exp(-x)) = x s,  s = sigmoid(x)
//                    f'(x) = s (1 + x (1 - s))
// value() is f; value_grad() gives f and f' from one erf / tanh / exp, which
// is what a backward that recomputes the activation needs.
//
// std::erf / exp / tanh take the float or double overload on the host and
// nvcc's full-precision erff / expf / tanhf on the device (~2 ulp). The fast
// intrinsics (__expf, tanh.approx: ~2^-11 relative) would give up accuracy
// that torch's fp32 path has, to save issue slots that these memory-bound
// kernels have to spare (see csrc/cuda/glu.cu).
#pragma once
#include <cmath>

#include "tinycuda/gelu.h"
#include "tinycuda/glu.h"
#include "internal.h"
#include "poly_math.h"

struct Silu {  // exp: poly_math.h's (a polynomial for float on the host, so that the CPU's loop vectorizes)
  template <class A> TC_HD static A value(A x) { return x / (A(1) + vmath::exp(-x)); }
  template <class A> TC_HD static void value_grad(A x, A& f, A& df) {
    const A s = vmath::sigmoid(x);
    f = x * s;
    df = s * (A(1) + x * (A(1) - s));
  }
};

struct GeluErf {
  template <class A> TC_HD static A value(A x) {
    return x * A(0.5) * (A(1) + std::erf(x * A(M_SQRT1_2)));
  }
  template <class A> TC_HD static void value_grad(A x, A& f, A& df) {
    const A cdf = A(0.5) * (A(1) + std::erf(x * A(M_SQRT1_2)));
    const A pdf = std::exp(A(-0.5) * x * x) * A(M_2_SQRTPI * M_SQRT1_2 * 0.5);  // 1/sqrt(2 pi)
    f = x * cdf;
    df = cdf + x * pdf;
  }
};

struct GeluTanh {
  static constexpr double kBeta = M_SQRT2 * M_2_SQRTPI * 0.5;  // sqrt(2/pi)
  static constexpr double kKappa = 0.044715;
  template <class A> TC_HD static A value(A x) {
    const A inner = A(kBeta) * (x + A(kKappa) * x * x * x);
    return A(0.5) * x * (A(1) + std::tanh(inner));
  }
  template <class A> TC_HD static void value_grad(A x, A& f, A& df) {
    const A x2 = x * x;
    const A t = std::tanh(A(kBeta) * (x + A(kKappa) * x2 * x));
    f = A(0.5) * x * (A(1) + t);
    df = A(0.5) * (A(1) + t) + A(0.5) * x * (A(1) - t * t) * (A(kBeta) * (A(1) + A(3 * kKappa) * x2));
  }
};

// The element functions of the pointwise loops (cpu/kit/pointwise.h,
// cuda/kit/pointwise.cuh), Act one of the above.
template <class Act>
struct GeluFn {
  template <class A> TC_HD A operator()(A x, A) const { return Act::value(x); }
};

template <class Act>
struct GeluBackwardFn {
  template <class A> TC_HD A operator()(A g, A x) const {
    A f, df;
    Act::value_grad(x, f, df);
    return g * df;
  }
};

template <class Act>
struct GluFn {
  template <class A> TC_HD A operator()(A a, A b) const { return Act::value(a) * b; }
};

// Calls f(GeluErf{}) or f(GeluTanh{}) for a tc_gelu_approximate, and f(Act{})
// for a tc_glu_act (the callers check the codes first).
template <class F>
inline auto with_gelu(int approximate, F&& f) {
  return approximate == TC_GELU_TANH ? f(GeluTanh{}) : f(GeluErf{});
}

template <class F>
inline auto with_act(int act, F&& f) {
  if (act == TC_GLU_SILU) return f(Silu{});
  return with_gelu(act == TC_GLU_GELU_TANH ? TC_GELU_TANH : TC_GELU_NONE, f);
}
