// The rotation of one pair of rope (tinycuda/rope.h), shared by the CPU loop
// and the CUDA kernel: pair (x0, x1) at positions (i0, i1) of the head, with
// cos and sin read at the same positions.
#pragma once
#include "internal.h"

// The backward's transposed rotation is the forward's with (sin[i0], sin[i1])
// replaced by (-sin[i1], -sin[i0]): one rotation for both, the sines swapped
// once per cos/sin row rather than a branch per element.
template <class A>
TC_HD inline void rope_transpose_sin(A& s0, A& s1) {
  const A t = s0;
  s0 = -s1;
  s1 = -t;
}

template <class A>
TC_HD inline void rope_pair(A x0, A x1, A c0, A c1, A s0, A s1, A& o0, A& o1) {
  o0 = x0 * c0 - x1 * s0;
  o1 = x1 * c1 + x0 * s1;
}
