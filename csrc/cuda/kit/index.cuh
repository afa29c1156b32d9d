// Where element i of a row-major walk lies in a strided tensor, without the
// divide instruction.
//
// Finding an element's coordinates takes a division a dim, and a 64-bit
// integer division on the GPU is a software routine of ~70 instructions: the
// reduce backward spent them on every element and wrote 1 GiB at 0.9 TB/s.
// FastDiv divides by a run-time constant with one multiply-high, an add and a
// shift (Granlund and Montgomery, 1994): for d >= 1, s = ceil(log2 d) and
// m = floor(2^64 (2^s - d) / d) + 1, n / d = (umulhi(n, m) + n) >> s for every
// 0 <= n < 2^63 (t + n cannot overflow: t <= n). d = 1 gives m = 1, s = 0.
#pragma once
#include <cstdint>

#include "../../shared/elementwise_check.h"

struct FastDiv {
  uint64_t d = 1, m = 1;
  unsigned s = 0;
  FastDiv() = default;
  explicit FastDiv(uint64_t divisor) : d(divisor) {
    if (d == 0) return;  // a dim of size 0: the walk has no element to place
    while ((uint64_t(1) << s) < d) ++s;
    m = uint64_t((static_cast<unsigned __int128>((uint64_t(1) << s) - d) << 64) / d) + 1;
  }
  __device__ __forceinline__ int64_t div(int64_t n) const {
    return int64_t((__umul64hi(uint64_t(n), m) + uint64_t(n)) >> s);
  }
};

// A StridedLayout<1> (shared/elementwise_check.h, collapsed) ready for the
// device: offset(i) is the operand's offset of element i of the row-major walk
// over its sizes.
struct Walk {
  int ndim = 0;
  FastDiv size[8];
  int64_t stride[8] = {};
  Walk() = default;
  explicit Walk(const StridedLayout<1>& l) : ndim(l.ndim) {
    for (int d = 0; d < l.ndim; ++d) size[d] = FastDiv(uint64_t(l.sizes[d])), stride[d] = l.strides[0][d];
  }
  __device__ __forceinline__ int64_t offset(int64_t i) const {
    int64_t off = 0;
    for (int d = ndim - 1; d > 0; --d) {
      const int64_t q = size[d].div(i);
      off += (i - q * int64_t(size[d].d)) * stride[d];
      i = q;
    }
    return ndim ? off + i * stride[0] : 0;
  }
};
