// The element functions of square, shared by the CPU loop
// (cpu/kit/pointwise.h) and CUDA's pointwise_kernel (cuda/kit/pointwise.cuh).
#pragma once
#include "internal.h"

struct SquareFn {
  template <class A> TC_HD A operator()(A x, A) const { return x * x; }
};
struct SquareBackwardFn {
  template <class A> TC_HD A operator()(A x, A g) const { return A(2) * x * g; }
};
