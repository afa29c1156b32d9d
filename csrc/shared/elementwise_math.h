// The unary ops of the elementwise family (tinycuda/elementwise.h), shared
// by the CPU loop and the CUDA kernels: UnaryMath<OP>::f(x, a, b) is the
// forward, ::df(g, s, a, b) the backward (g the incoming gradient, s the
// saved x, or y where kReadsOutput), both in the accumulator type A (float;
// double for double). a, b are the op's float arguments in schema order.
// Written the way ATen writes them (UnaryOps, Activation*Kernel.cu), so they
// agree with torch to rounding: expm1 in elu, log1p in softplus and mish.
//
// Comparisons, not std::min/max, pick the clamped value: on the device those
// become fminf/fmaxf, which drop a NaN, and torch keeps it. exp, expm1, log,
// tanh and log1p are poly_math.h's vmath:: forms: on the host, float's are
// polynomials a loop vectorizes (sigmoid over 2^22 fp32: 5x torch's time with
// libm's calls); double and the device keep the library's.
#pragma once
#include <cmath>
#include <type_traits>

#include "tinycuda/elementwise.h"
#include "gelu_math.h"  // Silu
#include "internal.h"
#include "poly_math.h"

template <int OP> struct UnaryMath;

template <> struct UnaryMath<TC_UNARY_SIGMOID> {
  static constexpr bool kReadsOutput = true;
  template <class A> TC_HD static A f(A x, A, A) { return vmath::sigmoid(x); }
  template <class A> TC_HD static A df(A g, A y, A, A) { return g * y * (A(1) - y); }
};

template <> struct UnaryMath<TC_UNARY_TANH> {
  static constexpr bool kReadsOutput = true;
  template <class A> TC_HD static A f(A x, A, A) { return vmath::tanh(x); }
  template <class A> TC_HD static A df(A g, A y, A, A) { return g * (A(1) - y * y); }
};

template <> struct UnaryMath<TC_UNARY_SILU> {
  static constexpr bool kReadsOutput = false;
  template <class A> TC_HD static A f(A x, A, A) { return Silu::value(x); }
  template <class A> TC_HD static A df(A g, A x, A, A) {
    A f, d;
    Silu::value_grad(x, f, d);
    return g * d;
  }
};

template <> struct UnaryMath<TC_UNARY_MISH> {  // x tanh(softplus(x)); exp(x) = inf gives t = 1
  static constexpr bool kReadsOutput = false;
  template <class A> TC_HD static A f(A x, A, A) { return x * vmath::tanh(vmath::softplus(x)); }
  template <class A> TC_HD static A df(A g, A x, A, A) {
    const A t = vmath::tanh(vmath::softplus(x));
    return g * (t + x * vmath::sigmoid(x) * (A(1) - t * t));
  }
};

template <> struct UnaryMath<TC_UNARY_LEAKY_RELU> {  // a: negative_slope
  static constexpr bool kReadsOutput = false;
  template <class A> TC_HD static A f(A x, A a, A) { return x > A(0) ? x : x * a; }
  template <class A> TC_HD static A df(A g, A x, A a, A) { return x > A(0) ? g : g * a; }
};

// elu and selu: x > 0 ? s x : s a (e^x - 1), with s = 1 (elu) or selu's scale.
// The test is x <= 0 for the negative branch, as ATen's: a NaN x takes the
// positive one, so its gradient is g s, not NaN.
template <class A> TC_HD inline A elu_of(A x, A a, A s) { return x <= A(0) ? s * a * vmath::expm1(x) : s * x; }
template <class A> TC_HD inline A elu_grad(A g, A x, A a, A s) { return x <= A(0) ? g * s * a * vmath::exp(x) : g * s; }

template <> struct UnaryMath<TC_UNARY_ELU> {  // a: alpha
  static constexpr bool kReadsOutput = false;
  template <class A> TC_HD static A f(A x, A a, A) { return elu_of(x, a, A(1)); }
  template <class A> TC_HD static A df(A g, A x, A a, A) { return elu_grad(g, x, a, A(1)); }
};

template <> struct UnaryMath<TC_UNARY_SELU> {  // torch's constants (Klambauer et al. 2017)
  static constexpr bool kReadsOutput = false;
  static constexpr double kAlpha = 1.6732632423543772848170429916717;
  static constexpr double kScale = 1.0507009873554804934193349852946;
  template <class A> TC_HD static A f(A x, A, A) { return elu_of(x, A(kAlpha), A(kScale)); }
  template <class A> TC_HD static A df(A g, A x, A, A) { return elu_grad(g, x, A(kAlpha), A(kScale)); }
};

template <> struct UnaryMath<TC_UNARY_SOFTPLUS> {  // a: beta, b: threshold (linear above it)
  static constexpr bool kReadsOutput = false;
  template <class A> TC_HD static A f(A x, A a, A b) { return x * a > b ? x : vmath::softplus(x * a) / a; }
  template <class A> TC_HD static A df(A g, A x, A a, A b) {
    const A z = vmath::exp(x * a);
    return x * a > b ? g : g * z / (z + A(1));
  }
};

template <> struct UnaryMath<TC_UNARY_SOFTSIGN> {
  static constexpr bool kReadsOutput = false;
  template <class A> TC_HD static A f(A x, A, A) { return x / (A(1) + std::abs(x)); }
  template <class A> TC_HD static A df(A g, A x, A, A) {
    const A d = A(1) + std::abs(x);
    return g / (d * d);
  }
};

// clamp to [lo, hi] keeping NaN; lo > hi gives hi, as torch's min(max(x, lo), hi)
template <class A> TC_HD inline A clamp_of(A x, A lo, A hi) {
  if (x != x) return x;
  const A m = x < lo ? lo : x;
  return m > hi ? hi : m;
}

template <> struct UnaryMath<TC_UNARY_HARDSIGMOID> {
  static constexpr bool kReadsOutput = false;
  template <class A> TC_HD static A f(A x, A, A) { return clamp_of(x + A(3), A(0), A(6)) / A(6); }
  template <class A> TC_HD static A df(A g, A x, A, A) { return x > A(-3) && x < A(3) ? g / A(6) : A(0); }
};

template <> struct UnaryMath<TC_UNARY_HARDTANH> {  // a: min_val, b: max_val; zero gradient at the bounds
  static constexpr bool kReadsOutput = false;
  template <class A> TC_HD static A f(A x, A a, A b) { return clamp_of(x, a, b); }
  template <class A> TC_HD static A df(A g, A x, A a, A b) { return x <= a || x >= b ? A(0) : g; }
};

template <> struct UnaryMath<TC_UNARY_CLAMP> {  // a: min, b: max; gradient kept at the bounds
  static constexpr bool kReadsOutput = false;
  template <class A> TC_HD static A f(A x, A a, A b) { return clamp_of(x, a, b); }
  template <class A> TC_HD static A df(A g, A x, A a, A b) { return x >= a && x <= b ? g : A(0); }
};

template <> struct UnaryMath<TC_UNARY_EXP> {
  static constexpr bool kReadsOutput = true;
  template <class A> TC_HD static A f(A x, A, A) { return vmath::exp(x); }
  template <class A> TC_HD static A df(A g, A y, A, A) { return g * y; }
};

template <> struct UnaryMath<TC_UNARY_LOG> {
  static constexpr bool kReadsOutput = false;
  template <class A> TC_HD static A f(A x, A, A) { return vmath::log(x); }
  template <class A> TC_HD static A df(A g, A x, A, A) { return g / x; }
};

template <> struct UnaryMath<TC_UNARY_ABS> {  // gradient g sign(x): 0 at 0 and for NaN, as torch's sgn
  static constexpr bool kReadsOutput = false;
  template <class A> TC_HD static A f(A x, A, A) { return std::abs(x); }
  template <class A> TC_HD static A df(A g, A x, A, A) { return g * A(int(x > A(0)) - int(x < A(0))); }
};

template <> struct UnaryMath<TC_UNARY_NEG> {
  static constexpr bool kReadsOutput = false;
  template <class A> TC_HD static A f(A x, A, A) { return -x; }
  template <class A> TC_HD static A df(A g, A, A, A) { return -g; }
};

template <> struct UnaryMath<TC_UNARY_SQRT> {
  static constexpr bool kReadsOutput = true;
  template <class A> TC_HD static A f(A x, A, A) { return std::sqrt(x); }
  template <class A> TC_HD static A df(A g, A y, A, A) { return g / (A(2) * y); }
};

template <> struct UnaryMath<TC_UNARY_RSQRT> {
  static constexpr bool kReadsOutput = true;
  template <class A> TC_HD static A f(A x, A, A) { return A(1) / std::sqrt(x); }
  template <class A> TC_HD static A df(A g, A y, A, A) { return A(-0.5) * g * y * y * y; }
};

// The functors the pointwise loops call, f(a, b) in the accumulator type A
// (cpu/kit/pointwise.h, cuda/kit/pointwise.cuh): the forward ignores b. The
// op's arguments are rounded to A, as torch rounds them to its opmath type.
template <int OP> struct UnaryFn {
  double a, b;
  template <class A> TC_HD A operator()(A x, A) const { return UnaryMath<OP>::f(x, A(a), A(b)); }
};
template <int OP> struct UnaryGradFn {
  double a, b;
  template <class A> TC_HD A operator()(A g, A s) const { return UnaryMath<OP>::df(g, s, A(a), A(b)); }
};

// Calls f(std::integral_constant<int, OP>{}) for a runtime op; the caller has
// checked that op < TC_UNARY_COUNT.
template <class F> tc_status dispatch_unary(int op, F&& f) {
  using std::integral_constant;
  switch (op) {
#define TC_UNARY_CASE(N) \
  case N: return f(integral_constant<int, N>{});
    TC_UNARY_CASE(0) TC_UNARY_CASE(1) TC_UNARY_CASE(2) TC_UNARY_CASE(3) TC_UNARY_CASE(4) TC_UNARY_CASE(5)
    TC_UNARY_CASE(6) TC_UNARY_CASE(7) TC_UNARY_CASE(8) TC_UNARY_CASE(9) TC_UNARY_CASE(10) TC_UNARY_CASE(11)
    TC_UNARY_CASE(12) TC_UNARY_CASE(13) TC_UNARY_CASE(14) TC_UNARY_CASE(15) TC_UNARY_CASE(16) TC_UNARY_CASE(17)
#undef TC_UNARY_CASE
  }
  static_assert(TC_UNARY_COUNT == 18, "a new unary op needs its case above");
  return tc_fail(TC_ERR_INTERNAL, "unary: op %d has no kernel", op);
}

// ---------------------------------------------------------------------------
// binary ops: BinaryMath<OP>::f(a, b, alpha) and the two partials times the
// incoming gradient, da(g, a, b, alpha), db(g, a, b, alpha), as ATen's
// derivatives.yaml writes them

template <int OP> struct BinaryMath;

// kConstant: a bit per operand (1: a, 2: b) whose partial does not depend on
// a or b, so that da(1, 0, 0, alpha) is that constant (tc_binary_constant_partial).
template <> struct BinaryMath<TC_BINARY_ADD> {
  static constexpr int kConstant = 3;
  template <class A> TC_HD static A f(A a, A b, A al) { return a + al * b; }
  template <class A> TC_HD static A da(A g, A, A, A) { return g; }
  template <class A> TC_HD static A db(A g, A, A, A al) { return g * al; }
};

template <> struct BinaryMath<TC_BINARY_SUB> {
  static constexpr int kConstant = 3;
  template <class A> TC_HD static A f(A a, A b, A al) { return a - al * b; }
  template <class A> TC_HD static A da(A g, A, A, A) { return g; }
  template <class A> TC_HD static A db(A g, A, A, A al) { return -g * al; }
};

template <> struct BinaryMath<TC_BINARY_MUL> {
  static constexpr int kConstant = 0;
  template <class A> TC_HD static A f(A a, A b, A) { return a * b; }
  template <class A> TC_HD static A da(A g, A, A b, A) { return g * b; }
  template <class A> TC_HD static A db(A g, A a, A, A) { return g * a; }
};

template <> struct BinaryMath<TC_BINARY_DIV> {
  static constexpr int kConstant = 0;
  template <class A> TC_HD static A f(A a, A b, A) { return a / b; }
  template <class A> TC_HD static A da(A g, A, A b, A) { return g / b; }
  template <class A> TC_HD static A db(A g, A a, A b, A) { return -g * a / (b * b); }
};

// NaN wins; equal operands share the gradient (where(a == b, g / 2, g), zeroed on the losing side)
template <> struct BinaryMath<TC_BINARY_MAXIMUM> {
  static constexpr int kConstant = 0;
  template <class A> TC_HD static A f(A a, A b, A) { return a != a ? a : (b != b ? b : (a > b ? a : b)); }
  template <class A> TC_HD static A da(A g, A a, A b, A) { return a == b ? g / A(2) : (a < b ? A(0) : g); }
  template <class A> TC_HD static A db(A g, A a, A b, A) { return a == b ? g / A(2) : (a > b ? A(0) : g); }
};

template <> struct BinaryMath<TC_BINARY_MINIMUM> {
  static constexpr int kConstant = 0;
  template <class A> TC_HD static A f(A a, A b, A) { return a != a ? a : (b != b ? b : (a < b ? a : b)); }
  template <class A> TC_HD static A da(A g, A a, A b, A) { return a == b ? g / A(2) : (a > b ? A(0) : g); }
  template <class A> TC_HD static A db(A g, A a, A b, A) { return a == b ? g / A(2) : (a < b ? A(0) : g); }
};

template <> struct BinaryMath<TC_BINARY_POW> {
  static constexpr int kConstant = 0;
  template <class A> TC_HD static A f(A a, A b, A) { return std::pow(a, b); }
  template <class A> TC_HD static A da(A g, A a, A b, A) { return b == A(0) ? A(0) : g * b * std::pow(a, b - A(1)); }
  template <class A> TC_HD static A db(A g, A a, A b, A) {
    return a == A(0) && b >= A(0) ? A(0) : g * std::pow(a, b) * std::log(a);
  }
};

// f(a, b) for the strided loops; the gradient functors take (g, a, b)
template <int OP> struct BinaryFn {
  double alpha;
  template <class A> TC_HD A operator()(A a, A b) const { return BinaryMath<OP>::f(a, b, A(alpha)); }
};
template <int OP, int WHICH> struct BinaryGradFn {  // WHICH 0: d/da, 1: d/db
  double alpha;
  template <class A> TC_HD A operator()(A g, A a, A b) const {
    return WHICH == 0 ? BinaryMath<OP>::da(g, a, b, A(alpha)) : BinaryMath<OP>::db(g, a, b, A(alpha));
  }
};

// where: c is the condition, 0 or 1
struct WhereFn {
  template <class A> TC_HD A operator()(A c, A a, A b) const { return c != A(0) ? a : b; }
};

template <class F> tc_status dispatch_binary(int op, F&& f) {
  using std::integral_constant;
  switch (op) {
    case 0: return f(integral_constant<int, 0>{});
    case 1: return f(integral_constant<int, 1>{});
    case 2: return f(integral_constant<int, 2>{});
    case 3: return f(integral_constant<int, 3>{});
    case 4: return f(integral_constant<int, 4>{});
    case 5: return f(integral_constant<int, 5>{});
    case 6: return f(integral_constant<int, 6>{});
  }
  static_assert(TC_BINARY_COUNT == 7, "a new binary op needs its case above");
  return tc_fail(TC_ERR_INTERNAL, "binary: op %d has no kernel", op);
}
