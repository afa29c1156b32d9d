// The largest error of shared/poly_math.h's float functions against float64 (glibc's double functions, rounded
// to float), in ulps of the result, over the 2^32 floats (every g_step-th block of 65536 consecutive ones); also
// checks that the copy TC_CPU_CLONES picks on this CPU (AVX2, AVX-512F) gives the baseline's bits. The figures in
// poly_math.h's header come from this, over every float (about 14 min of CPU time; an argument N: every Nth block):
//   g++ -O3 -std=c++20 -fno-trapping-math -fno-math-errno -ffp-contract=off -fopenmp -Icsrc -Icsrc/include scripts/poly_math_ulp.cpp -o /tmp/ulp && /tmp/ulp
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cpu/kit/cpu_utils.h"
#include "shared/poly_math.h"

namespace {

constexpr int64_t kBlock = 1 << 16;
int64_t g_step = 1;  // every g_step-th block of floats (argv[1]; 1: all of them)

double ulp_of(double r) {  // the spacing of floats at |r| (subnormals: 2^-149)
  const int e = r == 0 ? -1000 : std::ilogb(r);
  return std::ldexp(1.0, (e < -126 ? -126 : e) - 23);
}

// the error of y against the reference r, in ulps; a result past the float range must be that infinity
double error(float y, double r) {
  if (std::isnan(r)) return std::isnan(y) ? 0 : INFINITY;
  const float r32 = float(r);
  if (std::isinf(r32) || std::isinf(y)) return y == r32 ? 0 : INFINITY;
  return std::fabs(double(y) - r) / ulp_of(r);
}

template <class F> TC_CPU_CLONES void apply(const float* x, float* y, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
}
template <class F> void apply_baseline(const float* x, float* y, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
}

// over x in [lo, hi] (every float there; the whole range by default)
template <class F, class R> void sweep(const char* name, F f, R ref, float lo = -INFINITY, float hi = INFINITY) {
  double worst = 0;
  float at = 0;
  int64_t mismatched = 0;
#pragma omp parallel
  {
    float x[kBlock], y[kBlock], yb[kBlock];
    double w = 0;
    float wx = 0;
    int64_t mm = 0;
#pragma omp for schedule(dynamic, 64)
    for (int64_t b = 0; b < (int64_t(1) << 32) / kBlock; b += g_step) {
      int64_t n = 0;
      for (int64_t j = 0; j < kBlock; ++j) {
        const float v = poly::from_bits(uint32_t(b * kBlock + j));
        if (v >= lo && v <= hi) x[n++] = v;
      }
      if (!n) continue;
      apply(x, y, n, f);
      apply_baseline(x, yb, n, f);
      for (int64_t j = 0; j < n; ++j) {
        mm += memcmp(&y[j], &yb[j], 4) != 0;
        const double e = error(y[j], ref(double(x[j])));
        if (e > w || e != e) w = e, wx = x[j];
      }
    }
#pragma omp critical
    {
      if (w > worst) worst = w, at = wx;
      mismatched += mm;
    }
  }
  std::printf("%-11s max %.3f ulp at %a (%.9g); the clone run here differs from the baseline on %lld\n", name, worst, at, at,
              (long long)mismatched);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) g_step = std::atoll(argv[1]);
  sweep("exp", [](float x) { return poly::exp(x); }, [](double x) { return std::exp(x); });
  sweep("expm1", [](float x) { return poly::expm1(x); }, [](double x) { return std::expm1(x); });
  sweep("log", [](float x) { return poly::log(x); }, [](double x) { return std::log(x); });
  sweep("log1p_unit", [](float x) { return poly::log1p_unit(x); }, [](double x) { return std::log1p(x); }, 0.0f, 1.0f);
  sweep("tanh", [](float x) { return poly::tanh(x); }, [](double x) { return std::tanh(x); });
  sweep("sigmoid", [](float x) { return vmath::sigmoid(x); }, [](double x) { return 1 / (1 + std::exp(-x)); },
        -88.72f);  // below, e^-x overflows: 0, where the result is a subnormal
  sweep("softplus", [](float x) { return poly::softplus(x); }, [](double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); });
}
