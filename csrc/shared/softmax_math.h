// The online (max, sum) update shared by the CPU and CUDA softmax kernels:
// one pass over a row gives m = max(x) and s = sum(exp(x - m)), rescaling s
// whenever m grows (Milakov & Gimelshein, 2018). The guards keep -inf
// entries at exp(-inf) = 0 instead of exp(-inf - -inf) = NaN; NaN and +inf
// still poison s, so those rows come out NaN as in torch.
#pragma once
#include <cmath>

#include "internal.h"

template <class A>
TC_HD inline void online_add(A& m, A& s, A x) {
  if (x > m) {
    s = s * exp(m - x) + A(1);  // m = -inf: exp(-inf) = 0 keeps s (0, or NaN once NaN was seen)
    m = x;
  } else if (x != -INFINITY) {
    s += exp(x - m);
  }
}

template <class A>
TC_HD inline void online_merge(A& m, A& s, A m2, A s2) {
  const A mn = m > m2 ? m : m2;
  const A a = m == -INFINITY ? s * A(0) : s * exp(m - mn);  // s * 0 keeps a NaN
  const A b = m2 == -INFINITY ? s2 * A(0) : s2 * exp(m2 - mn);
  m = (m != m || m2 != m2) ? A(NAN) : mn;
  s = a + b;
}

// A row whose max is +inf (or NaN) has no finite normalizer: all NaN, as in torch.
template <class A>
TC_HD inline void online_finish(A m, A& s) {
  if (!(m < A(INFINITY)) && m != -INFINITY) s = A(NAN);
}
