// How the CUDA embedding backward lays out its workspace (cuda/embedding.cu),
// shared with tc_embedding_backward_workspace_size (shared/embedding.cpp),
// which must agree with it and needs no device.
//
// The ids become sort keys of the narrowest integer dtype that holds every id
// and one more value, the key of an index out of range (which sorts last):
// int16 up to 65535 ids (GPT-2's 50304: two radix passes of the sort instead
// of eight), int32 up to 2^32 - 1, else int64. Regions, each 256-byte aligned:
//   keys      [N] key dtype        the ids as keys (the sort's x)
//   sorted    [N] key dtype        the keys in order (the sort's values)
//   perm      [N] int64            their positions (the sort's indices)
//   sort      the sort's own scratch (tc_sort_workspace_size; none up to 4096)
//   partials  [chunks][2][D] float (double for float64): a chunk's sums of the
//             ids it shares with the chunk before (slot 0) or only with those
//             after (slot 1)
#pragma once
#include <cstddef>
#include <cstdint>

#include "tinycuda/sort.h"

namespace plan {

constexpr int64_t kEmbeddingChunk = 32;  // sorted positions a warp sums, one a lane

struct EmbeddingBackward {
  tc_dtype key_dtype = TC_INT16;
  size_t key_bytes = 2;
  int64_t chunks = 0;  // 0: no sort and no sums (no index, or grad_weight empty)
  size_t keys = 0, sorted = 0, perm = 0, sort = 0, sort_bytes = 0, partials = 0, total = 0;
};

inline EmbeddingBackward embedding_backward(int64_t n, int64_t v, int64_t d, size_t acc_bytes) {
  EmbeddingBackward b;
  if (v > int64_t(0xffffffffLL)) b.key_dtype = TC_INT64, b.key_bytes = 8;
  else if (v > 0xffff) b.key_dtype = TC_INT32, b.key_bytes = 4;
  if (n == 0 || v * d == 0) return b;
  b.chunks = (n + kEmbeddingChunk - 1) / kEmbeddingChunk;
  size_t at = 0;
  auto take = [&](size_t bytes) {
    const size_t off = at;
    at += (bytes + 255) / 256 * 256;
    return off;
  };
  b.keys = take(size_t(n) * b.key_bytes);
  b.sorted = take(size_t(n) * b.key_bytes);
  b.perm = take(size_t(n) * 8);
  // the size query reads no memory: its pointers only say which outputs are wanted (values and indices)
  static const int64_t given = 0;
  const tc_sort_params q{.dtype = b.key_dtype, .rows = 1, .n = n, .k = n, .descending = 0, .x = &given,
                         .values = const_cast<int64_t*>(&given), .indices = const_cast<int64_t*>(&given)};
  b.sort_bytes = tc_sort_workspace_size(&q);
  b.sort = take(b.sort_bytes);
  b.partials = take(size_t(b.chunks) * 2 * size_t(d) * acc_bytes);
  b.total = at;
  return b;
}

}  // namespace plan
