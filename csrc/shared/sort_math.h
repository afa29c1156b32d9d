// The sort family's keys (tinycuda/sort.h), shared by the CPU and CUDA
// kernels: every dtype is sorted as the unsigned integer of its width, B,
// whose order is torch's order of the elements.
//
//   unsigned (uint8, bool)  key = bits
//   signed                  key = bits ^ sign           (-128 -> 0x00, 127 -> 0xff)
//   float                   key = ~bits if negative, bits | sign if not;
//                           -0.0 -> the key of 0.0 (sign), every NaN -> ~0, the
//                           largest (+inf's is below it: 0xff800000 for fp32)
//   descending              the complement of that key
//
// So an ascending stable sort of the keys is torch's stable order, either way.
// The keys are sorted and the elements' bits are moved, never their values:
// no float arithmetic, and B alone (the width) picks the kernel, which the
// dtypes of one width share (kind, inf and descending are run-time fields).
//
// The bits follow back from the key (bits()) for every element but a float
// zero or NaN, whose sign or payload the key drops (invertible()): the
// kernels that hold keys read those few from x by their index.
#pragma once
#include <cstdint>

#include "internal.h"
#include "tinycuda/sort.h"

enum SortKeyKind { kUnsignedKey, kSignedKey, kFloatKey };

template <class B>
struct KeyMap {
  using Bits = B;
  static constexpr B kSign = B(B(1) << (8 * sizeof(B) - 1));
  static constexpr B kOnes = B(~B(0));
  int kind;         // SortKeyKind
  B inf;            // a float's +inf bits
  bool descending;

  TC_HD B key(B bits) const {
    B k;
    if (kind == kUnsignedKey) {
      k = bits;
    } else if (kind == kSignedKey) {
      k = B(bits ^ kSign);
    } else {
      const B mag = B(bits & B(~kSign));
      k = mag > inf ? kOnes : mag == 0 ? kSign : (bits & kSign) ? B(~bits) : B(bits | kSign);
    }
    return descending ? B(~k) : k;
  }
  TC_HD bool invertible(B k) const {
    if (kind != kFloatKey) return true;
    if (descending) k = B(~k);
    return k != kSign && k != kOnes;
  }
  TC_HD B bits(B k) const {
    if (descending) k = B(~k);
    if (kind == kUnsignedKey) return k;
    if (kind == kSignedKey) return B(k ^ kSign);
    return (k & kSign) ? B(k & B(~kSign)) : B(~k);
  }
};

// f(KeyMap<B>{...}) for the dtype; TC_ERR_UNSUPPORTED_DTYPE for an unknown one.
template <class F>
tc_status dispatch_sort(tc_dtype dtype, bool descending, const char* op, F&& f) {
  switch (dtype) {
    case TC_FLOAT32: return f(KeyMap<uint32_t>{kFloatKey, 0x7f800000u, descending});
    case TC_FLOAT64: return f(KeyMap<uint64_t>{kFloatKey, 0x7ff0000000000000ull, descending});
    case TC_FLOAT16: return f(KeyMap<uint16_t>{kFloatKey, 0x7c00, descending});
    case TC_BFLOAT16: return f(KeyMap<uint16_t>{kFloatKey, 0x7f80, descending});
    case TC_INT8: return f(KeyMap<uint8_t>{kSignedKey, 0, descending});
    case TC_INT16: return f(KeyMap<uint16_t>{kSignedKey, 0, descending});
    case TC_INT32: return f(KeyMap<uint32_t>{kSignedKey, 0, descending});
    case TC_INT64: return f(KeyMap<uint64_t>{kSignedKey, 0, descending});
    case TC_UINT8:
    case TC_BOOL: return f(KeyMap<uint8_t>{kUnsignedKey, 0, descending});
  }
  return tc_fail(TC_ERR_UNSUPPORTED_DTYPE, "%s: unsupported dtype code %d", op, int(dtype));
}

// f(B{}) with B the unsigned type of a float dtype's width (sort_backward moves gradients' bits)
template <class F>
tc_status dispatch_float_bits(tc_dtype dtype, const char* op, F&& f) {
  switch (dtype) {
    case TC_FLOAT32: return f(uint32_t{});
    case TC_FLOAT64: return f(uint64_t{});
    case TC_FLOAT16:
    case TC_BFLOAT16: return f(uint16_t{});
    default: break;
  }
  return tc_fail(TC_ERR_UNSUPPORTED_DTYPE, "%s: grad_values must be float32, float16, bfloat16 or float64, got dtype "
                 "code %d", op, int(dtype));
}

// The checks both devices run (shared/sort.cpp).
tc_status sort_check(const tc_sort_params* p);
tc_status sort_check(const tc_sort_backward_params* p);
