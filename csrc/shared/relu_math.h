// The element functions of relu, shared by the CPU loop (cpu/kit/pointwise.h)
// and CUDA's pointwise_kernel (cuda/kit/pointwise.cuh), in the accumulator
// type: f(a, b), b unused by the forward.
#pragma once
#include "internal.h"

struct ReluFn {  // NaN passes through, as in torch
  template <class A> TC_HD A operator()(A x, A) const { return x > A(0) || x != x ? x : A(0); }
};
struct ReluBackwardFn {
  template <class A> TC_HD A operator()(A g, A x) const { return x > A(0) ? g : A(0); }
};
