// exp, log and log1p (on [0, 1]) of a float as branch-free polynomials, for host loops:
// libm's expf and log1pf are calls, one an element, which keep a loop from
// vectorizing (binary_cross_entropy_with_logits' CPU forward, e^-|x| and a
// log1p an element: 2.7x torch's time, whose SLEEF kernels run 8 floats at a
// time). exp and log are Cephes' expf and logf (Moshier): range reduction to
// |r| <= ln2 / 2 (exp) or a mantissa in [sqrt(1/2), sqrt(2)) (log), then a
// degree-6 (degree-8) polynomial, under 1 ulp against libm's over the float
// range; log1p_unit is 2 atanh(y / (2 + y)), under 2 ulp. Every special case
// is a select, so gcc vectorizes a loop of them (SSE2's 4 lanes in the
// baseline build). The CUDA kernels keep the device's own expf / logf /
// log1pf (a loop there is one element a thread already).
//
// Edges, as libm's: NaN in, NaN out; exp(-inf) = 0, exp(+inf) = +inf; log(0) =
// -inf, log(x < 0) = NaN, log(+inf) = +inf. Not libm's: exp flushes results
// below FLT_MIN (x < -87.34) to 0 and overflows from x > 88.376 (libm from
// 88.723), where 2^n would need the exponent 128.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

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

TC_HD inline float exp(float x) {
  constexpr float kHi = 88.3762626647949f, kLo = -87.3365478515625f;
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23: t + kMagic rounds t to an integer, held in the low bits
  float c = x > kHi ? kHi : x;
  c = c < kLo ? kLo : c;  // NaN passes both
  const float t = c * 1.44269504088896341f + kMagic, n = t - kMagic;
  const float r = (c - n * 0.693359375f) - n * -2.12194440e-4f;  // ln 2 in two parts: n * 0.693359375 is exact
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t k = int32_t(bits(t) - bits(kMagic));  // n as an integer, in [-126, 127]
  float e = p * from_bits(uint32_t(k + 127) << 23);
  // one select a statement: a chain of them in one expression left gcc a branch (no vectorized loop)
  e = x > kHi ? float(INFINITY) : e;
  e = x < kLo ? 0.0f : e;
  return e;
}

TC_HD inline float log(float x) {
  const bool tiny = x < 1.17549435e-38f;  // subnormal (or <= 0): scaled by 2^23 first
  const float s = tiny ? x * 8388608.0f : x;
  const uint32_t b = bits(s);
  float e = float(int32_t(b >> 23 & 0xff) - 126) - (tiny ? 23.0f : 0.0f);
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

// log(1 + y) for y in [0, 1] (a log-sigmoid's log1p(e^-|x|)): 2 atanh(s), s = y / (2 + y) in [0, 1/3], as an odd
// polynomial of degree 13 (its next term, s^15 2/15, is under 2^-28 of the sum): one divide and seven
// multiply-adds, no special case (a NaN passes through the arithmetic)
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

}  // namespace poly
