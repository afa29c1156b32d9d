// CPU side of the core: 16-bit float storage types and their conversions.
//
// The torch extension hands us at::Half / at::BFloat16 buffers as void*; both
// are plain 16-bit patterns, so the core reads them through these PODs and
// converts with round-to-nearest-even, matching torch bit for bit.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "../../shared/internal.h"

// The hot loops (pointwise maps, the losses' tiles) are compiled three times,
// for baseline x86-64 (SSE2: 4 floats an instruction), AVX2 (8) and AVX-512F
// (16), and the loader picks one by the CPU (GCC's target_clones, since GCC 6:
// an ifunc resolver; clang's takes no templates, so it builds the baseline).
// AVX-512F has FMA instructions: the build's -ffp-contract=off keeps a * b + c
// two roundings in every copy, so all three compute the same bits
// (scripts/poly_math_ulp.cpp checks it for poly_math.h). poly_math.h's
// tanh over 2^22 floats, one thread of a Xeon VM: 18.6 / 9.3 / 6.5 ms (libm's
// tanhf 97). The copies cost compile time: cpu/elementwise.cpp 63 -> 89 s,
// cpu/losses.cpp 60 -> 74 s (gcc 12, one core; AVX2 and baseline alone: 78, 60).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TC_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TC_CPU_CLONES
#endif

struct Half16 { uint16_t bits; };
struct BFloat16 { uint16_t bits; };

inline float bits_to_float(uint32_t b) { float f; std::memcpy(&f, &b, 4); return f; }
inline uint32_t float_to_bits(float f) { uint32_t b; std::memcpy(&b, &f, 4); return b; }

inline float to_acc(float x) { return x; }
inline double to_acc(double x) { return x; }
inline float to_acc(BFloat16 x) { return bits_to_float(uint32_t(x.bits) << 16); }
inline float to_acc(Half16 x) {
  uint32_t sign = uint32_t(x.bits & 0x8000) << 16;
  uint32_t exp = (x.bits >> 10) & 0x1f, mant = x.bits & 0x3ff;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24
    float f = float(mant) * 5.9604644775390625e-08f;
    return sign ? -f : f;
  }
  if (exp == 0x1f) return bits_to_float(sign | 0x7f800000u | (mant << 13));
  return bits_to_float(sign | ((exp + 112) << 23) | (mant << 13));
}

template <class T> inline T from_acc(acc_t<T> v);
template <> inline float from_acc<float>(float v) { return v; }
template <> inline double from_acc<double>(double v) { return v; }
template <> inline BFloat16 from_acc<BFloat16>(float v) {
  uint32_t b = float_to_bits(v);
  if (std::isnan(v)) return BFloat16{uint16_t((b >> 16) | 0x40)};
  b += 0x7fff + ((b >> 16) & 1);  // round to nearest even
  return BFloat16{uint16_t(b >> 16)};
}
template <> inline Half16 from_acc<Half16>(float v) {
  uint32_t b = float_to_bits(v);
  uint16_t sign = uint16_t((b >> 16) & 0x8000);
  uint32_t a = b & 0x7fffffffu;
  if (a > 0x7f800000u) return Half16{uint16_t(sign | 0x7e00)};  // NaN
  if (a >= 0x477ff000u) return Half16{uint16_t(sign | 0x7c00)};  // >= 65520: inf
  if (a < 0x38800000u) {  // below 2^-14: subnormal; count units of 2^-24
    float units = std::nearbyint(bits_to_float(a) * 16777216.0f);
    return Half16{uint16_t(sign | uint16_t(units))};
  }
  a += 0xfffu + ((a >> 13) & 1);  // round to nearest even, then rebias 127 -> 15
  return Half16{uint16_t(sign | ((a - 0x38000000u) >> 13))};
}

template <class F>
tc_status dispatch_cpu(tc_dtype dtype, const char* op, F&& f) {
  return dispatch_dtype<Half16, BFloat16>(dtype, op, static_cast<F&&>(f));
}
