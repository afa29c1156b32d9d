// The CPU's vector math: exp, expm1, log, log1p on [0, 1], tanh, sigmoid and
// softplus of a float as branch-free polynomials, so that a host loop of them
// vectorizes. libm's expf / tanhf / log1pf are calls, one an element, which
// keep a loop scalar: sigmoid over 2^22 fp32 elements took 5x torch's time
// (SLEEF's vector kernels, 8 or 16 floats an instruction), softplus 12x.
// Every special case is a select (one a statement: a chain of them in one
// expression left gcc a branch, and the loop scalar), so gcc vectorizes a loop
// of them (SSE2's 4 lanes in the baseline build, AVX2's 8 and AVX-512's 16 in
// cpu/kit's TC_CPU_CLONES copies).
//
// exp, log: Cephes' expf and logf (Moshier): range reduction to |r| <= ln2 / 2
// (exp) or a mantissa in [sqrt(1/2), sqrt(2)) (log), then a degree-6 (degree-9)
// polynomial. 2^n is applied in two halves, so results from FLT_MAX down to the
// subnormals round once, as libm's. expm1: the same reduction, 2^n (e^r - 1) +
// (2^n - 1), so that no 1 is lost where e^x is near 1. tanh: Cephes' odd
// polynomial below |x| = 0.625, 1 - 2 / (e^2|x| + 1) above. log1p_unit: 2
// atanh(y / (2 + y)) for y in [0, 1] (a softplus' or log-sigmoid's log1p of
// e^-|x|), one divide and seven multiply-adds.
//
// Error against float64 (glibc's double functions), the largest over all 2^32
// floats (scripts/poly_math_ulp.cpp; tests/test_cpu_math.py checks a sample
// through the ops), in units in the last place of the result:
//   exp 0.99, expm1 1.64, log 0.83, log1p_unit (on [0, 1]) 1.97, tanh 1.33,
//   sigmoid (x >= -88.72) 2.48, softplus 2.80
// Torch's float32 CPU ops over test_cpu_math's sample: exp 0.56, log 0.52,
// tanh 0.56 (SLEEF's u10 kernels), and its composites sigmoid 2.08, softplus
// 1.50 (ours there: 2.08, 2.42).
//
// Edges, as libm's: NaN in, NaN out; exp(-inf) = 0, exp(+inf) = +inf, overflow
// from x > 88.72; log(0) = -inf, log(x < 0) = NaN, log(+inf) = +inf; tanh(+-inf)
// = +-1.
//
// The generic forms at the end (vmath::exp<A> ...) are what the shared *_math.h
// functors call: these polynomials for float on the host; double, and the
// device (one element a thread already), keep the library's std::exp / expf.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "internal.h"

namespace poly {

TC_HD inline float from_bits(uint32_t b) {
  float f;
  memcpy(&f, &b, 4);
  return f;
}
TC_HD inline uint32_t bits(float f) {
  uint32_t b;
  memcpy(&b, &f, 4);
  return b;
}

// x = n ln2 + r, |r| <= ln2 / 2 (x clamped to [-104, 88.8]: every result past those rounds to 0 or inf), and 2^n as
// the two factors 2^(n/2) and 2^(n - n/2), each a normal float for n in [-150, 128]
struct Reduced {
  float r, s1, s2;
  int32_t n;
};
TC_HD inline Reduced reduce_exp(float x) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23: t + kMagic rounds t to an integer, held in the low bits
  float c = x > 88.8f ? 88.8f : x;
  c = c < -104.0f ? -104.0f : c;  // NaN passes both
  const float t = c * 1.44269504088896341f + kMagic, n = t - kMagic;
  Reduced q;
  q.r = (c - n * 0.693359375f) - n * -2.12194440e-4f;  // ln 2 in two parts: n * 0.693359375 is exact
  q.n = int32_t(bits(t) - bits(kMagic));
  const int32_t h = q.n >> 1;
  q.s1 = from_bits(uint32_t(h + 127) << 23);
  q.s2 = from_bits(uint32_t(q.n - h + 127) << 23);
  return q;
}

// e^r - 1 - r over |r| <= ln2 / 2, Cephes' expf minimax: r^2 (1/2 + r/6 + ...)
TC_HD inline float expm1_tail(float r) {
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return p * r * r;
}

TC_HD inline float exp(float x) {
  const Reduced q = reduce_exp(x);
  return ((expm1_tail(q.r) + q.r + 1.0f) * q.s1) * q.s2;  // the first product exact, the second the one rounding
}

TC_HD inline float expm1(float x) {
  const Reduced q = reduce_exp(x);
  const float m = expm1_tail(q.r) + q.r;  // e^r - 1
  const float s = q.s1 * q.s2;           // 2^n: exact up to n = 127 (the small branch's range)
  const float small = s * m + (s - 1.0f);
  const float large = ((m + 1.0f) * q.s1) * q.s2;  // e^x: the 1 is below half an ulp from n = 25 on
  const float y = q.n > 24 ? large : small;
  return x == 0.0f ? x : y;  // -0 keeps its sign (the reduction's r is +0)
}

TC_HD inline float log(float x) {
  const bool tiny = x < 1.17549435e-38f;  // subnormal (or <= 0): scaled by 2^23 first
  const float s = tiny ? x * 8388608.0f : x;
  const uint32_t b = bits(s);
  float e = float(int32_t(b >> 23 & 0xff) - 126);
  e = tiny ? e - 23.0f : e;
  float m = from_bits((b & 0x807fffffu) | 0x3f000000u);  // s = m 2^e, m in [0.5, 1)
  const bool low = m < 0.707106781186547524f;
  e = low ? e - 1.0f : e;
  m = low ? m + m - 1.0f : m - 1.0f;  // the mantissa in [sqrt(1/2), sqrt(2)), minus 1
  const float z = m * m;
  float p = 7.0376836292e-2f;
  p = p * m - 1.1514610310e-1f;
  p = p * m + 1.1676998740e-1f;
  p = p * m - 1.2420140846e-1f;
  p = p * m + 1.4249322787e-1f;
  p = p * m - 1.6668057665e-1f;
  p = p * m + 2.0000714765e-1f;
  p = p * m - 2.4999993993e-1f;
  p = p * m + 3.3333331174e-1f;
  float y = p * m * z + e * -2.12194440e-4f - 0.5f * z;
  y = m + y + e * 0.693359375f;
  y = x == float(INFINITY) ? x : y;
  y = x == 0.0f ? -float(INFINITY) : y;
  y = x < 0.0f ? float(NAN) : y;
  y = x != x ? x : y;
  return y;
}

// log(1 + y) for y in [0, 1]: 2 atanh(s), s = y / (2 + y) in [0, 1/3], as an odd polynomial of degree 13 (its next
// term, s^15 2/15, is under 2^-28 of the sum); a NaN passes through the arithmetic
TC_HD inline float log1p_unit(float y) {
  const float s = y / (2.0f + y), z = s * s;
  float p = 2.0f / 13.0f;
  p = p * z + 2.0f / 11.0f;
  p = p * z + 2.0f / 9.0f;
  p = p * z + 2.0f / 7.0f;
  p = p * z + 2.0f / 5.0f;
  p = p * z + 2.0f / 3.0f;
  return 2.0f * s + s * z * p;  // the leading term apart: one rounding of it, not the polynomial's
}

TC_HD inline float tanh(float x) {  // of |x|, then x's sign (so -0 stays -0)
  const float a = from_bits(bits(x) & 0x7fffffffu), z = a * a;
  float p = -5.70498872745e-3f;  // Cephes' tanhf, |x| < 0.625: x + x^3 P(x^2)
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = p * z * a + a;
  const float large = 1.0f - 2.0f / (exp(a + a) + 1.0f);  // inf: e = inf, 1; NaN stays NaN
  const float t = a < 0.625f ? small : large;
  return from_bits(bits(t) | (bits(x) & 0x80000000u));
}

// log(1 + e^x) = max(x, 0) + log(1 + e^-|x|)
TC_HD inline float softplus(float x) {
  const float m = x > 0.0f ? x : 0.0f, a = x < 0.0f ? -x : x;
  return m + log1p_unit(exp(-a));
}

}  // namespace poly

// The shared functors' math in the accumulator type A: poly's for float on the host, the library's otherwise.
namespace vmath {

#ifdef __CUDA_ARCH__
template <class A> constexpr bool kPoly = false;
#else
template <class A> constexpr bool kPoly = std::is_same_v<A, float>;
#endif

#define TC_VMATH_FORM(name, library)           \
  template <class A> TC_HD inline A name(A x) { \
    if constexpr (kPoly<A>) return poly::name(x); \
    else return library;                        \
  }
TC_VMATH_FORM(exp, std::exp(x))
TC_VMATH_FORM(expm1, std::expm1(x))
TC_VMATH_FORM(log, std::log(x))
TC_VMATH_FORM(tanh, std::tanh(x))
TC_VMATH_FORM(softplus, std::log1p(std::exp(x)))  // log(1 + e^x), as ATen's softplus writes it
TC_VMATH_FORM(log1p_unit, std::log1p(x))          // log(1 + y) for y in [0, 1]
#undef TC_VMATH_FORM

template <class A> TC_HD inline A sigmoid(A x) { return A(1) / (A(1) + exp(-x)); }

}  // namespace vmath
