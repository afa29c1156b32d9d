// Whether the CUDA forward takes its split-KV (flash-decoding) path, and how
// it cuts the keys (cuda/flash_attention.cu), shared with
// tc_flash_attention_workspace_size (cpu/flash_attention.cpp), which must
// agree with it. A pure function of the params: no device query, so the two
// agree without one, and the split count (hence the order of the combine's
// sums, hence the result's bits) is the same on every GPU.
//
// The rule. A decode step has seqlen_q = 1 (a few with speculative tokens),
// and the existing kernels launch one block per (batch, query head, 64 or 128
// query rows): GPT-2 small at batch 1 is 12 blocks on a 132-SM H100, each
// walking all seqlen_k keys alone, and a GQA group's query heads each read
// their K/V again. The bytes are what decode costs: per (b, kv head) K and V
// are 2 * seqlen_k * head_dim * itemsize (1024 keys, D = 64, bf16: 256 KiB)
// against seqlen_q * heads * D * 2 bytes of queries. So:
//  - seqlen_q <= 8: a block's 64/128-row tile would be 94 % or more padding,
//    and a split warp keeps up to kSplitRows rows (a GQA group's heads x
//    seqlen_q) in registers, reading each K/V row once for all of them;
//  - units = batch * heads_kv * row chunks (of kSplitRows rows) below
//    kSplitTargetWarps: splits = min(ceil(kSplitTargetWarps / units),
//    ceil(span / kSplitMinKeys), kSplitMaxSplits) must come to >= 2, else the
//    existing kernels already have the parallelism and the combine pass would
//    be pure overhead.
// kSplitTargetWarps = 2048: a split warp keeps kSplitUnroll = 8 keys of K and V
// in flight, 8 x 256 B = 2 KiB at D = 64 in bf16 (4 KiB at D = 128); H100's
// DRAM needs about 3.35 TB/s x ~0.8 us = 2.7 MB in flight, so ~1300-2600
// warps, 10-20 of the 64 warp slots of each of 132 SMs. kSplitMinKeys = 16
// (two rounds of 8 keys) bounds the fixed cost a warp pays (its q rows, its
// partial O and lse written: 65 floats a row at D = 64, against 16 x 256 B
// read). kSplitMaxSplits = 256 bounds the combine, which walks the splits in
// order. Examples (span = the visible keys, seqlen_k for a decode step):
//   B = 1,  H = 12,  Sk = 1024: units 12,  splits min(171, 64)  = 64,  768 warps of 16 keys
//   B = 1,  H = 12,  Sk = 8192: units 12,  splits min(171, 512) = 171, 2052 warps of 48 keys
//   B = 16, H = 12,  Sk = 1024: units 192, splits min(11, 64)   = 11,  2112 warps of 94 keys
//   B = 1,  12 q / 1 kv head (MQA), Sq = 1: 12 rows -> 2 chunks of 8, units 2, splits
//           min(1024, Sk / 16, 256): 64 at Sk = 1024, 256 from Sk = 4096
//   B = 256, H = 12: units 3072 >= 2048: 1 split, the existing kernels
// Workspace (floats): O_s [splits][batch * heads_q * seqlen_q][head_dim], then
// lse_s [splits][batch * heads_q * seqlen_q]; B = 1, H = 12, Sk = 1024, D = 64:
// 64 x 12 x 65 x 4 B = 200 KB, written and read once against 3 MB of K and V.
//
// What the split kernel takes (else AUTO runs the kernels it ran before):
// algo AUTO, fixed lengths (varlen falls back), fp16 / bf16 / fp32, head_dim
// 64 or 128 (a lane holds head_dim / 32 contiguous elements, loaded as one
// vector), q, k, v, o aligned to that vector and strides multiples of it.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "flash_attention_check.h"

namespace plan {

constexpr int64_t kSplitMaxQueries = 8;
constexpr int kSplitRows = 8;          // query rows (heads of a group x seqlen_q) a warp holds
constexpr int kSplitUnroll = 8;        // keys a warp has in flight
constexpr int64_t kSplitTargetWarps = 2048;
constexpr int64_t kSplitMinKeys = 16;
constexpr int64_t kSplitMaxSplits = 256;

struct AttentionSplit {
  int64_t splits = 0;      // 0: the path is not taken
  int64_t chunk = 0;       // keys a split (the last may have fewer)
  int64_t kv_lo = 0, kv_hi = 0;  // the keys any query row sees: [lo(0), hi(seqlen_q - 1))
  int rows = 0;            // rows a warp holds: the power of two >= group * seqlen_q, at most kSplitRows
  int64_t row_chunks = 0;  // ceil(group * seqlen_q / rows)
  int64_t units = 0;       // batch * heads_kv * row_chunks
  int64_t rows_total = 0;  // batch * heads_q * seqlen_q, lse's rows
  size_t o_bytes = 0, total = 0;  // the workspace: O_s, then lse_s at o_bytes
};

inline AttentionSplit attention_split(const tc_flash_attention_params* p) {
  AttentionSplit s;
  if (!p || p->algo != TC_ATTENTION_AUTO || p->cu_seqlens_q || p->cu_seqlens_k) return s;
  if (p->dtype != TC_FLOAT16 && p->dtype != TC_BFLOAT16 && p->dtype != TC_FLOAT32) return s;
  if (p->head_dim != 64 && p->head_dim != 128) return s;
  if (p->seqlen_q < 1 || p->seqlen_q > kSplitMaxQueries || p->batch < 1 || p->heads_kv < 1 ||
      p->heads_q < p->heads_kv || p->heads_q % p->heads_kv != 0)
    return s;
  // a lane's head_dim / 32 elements are one vector access
  const int64_t vec = p->head_dim / 32, itemsize = p->dtype == TC_FLOAT32 ? 4 : 2;
  const uintptr_t align = uintptr_t(vec * itemsize);
  for (const void* ptr : {static_cast<const void*>(p->q), static_cast<const void*>(p->k),
                          static_cast<const void*>(p->v), static_cast<const void*>(p->o)})
    if (!ptr || reinterpret_cast<uintptr_t>(ptr) % align) return s;
  for (int d = 0; d < 3; ++d)
    if (p->q_stride[d] % vec || p->k_stride[d] % vec || p->v_stride[d] % vec || p->o_stride[d] % vec) return s;
  // The bands are monotone in i: every row's keys lie in [lo(0), hi(seqlen_q - 1)).
  const AttentionMask mask = attention_mask(p);
  const int64_t lo = mask.lo(0), hi = mask.hi(p->seqlen_q - 1), span = hi - lo;
  if (span < 2 * kSplitMinKeys || span / kSplitMaxSplits >= INT32_MAX / 2) return s;  // chunks < 2^31: int offsets
  const int64_t group_rows = p->heads_q / p->heads_kv * p->seqlen_q;
  int rows = 1;
  while (rows < group_rows && rows < kSplitRows) rows *= 2;
  const int64_t row_chunks = (group_rows + rows - 1) / rows, units = p->batch * p->heads_kv * row_chunks;
  if (units >= kSplitTargetWarps) return s;
  int64_t splits = (kSplitTargetWarps + units - 1) / units;
  splits = std::min(splits, std::min((span + kSplitMinKeys - 1) / kSplitMinKeys, kSplitMaxSplits));
  if (splits < 2) return s;
  const int64_t chunk = (span + splits - 1) / splits;
  splits = (span + chunk - 1) / chunk;  // no empty split: every one has keys
  if (splits < 2) return s;
  s.splits = splits, s.chunk = chunk, s.kv_lo = lo, s.kv_hi = hi, s.rows = rows, s.row_chunks = row_chunks;
  s.units = units, s.rows_total = p->batch * p->heads_q * p->seqlen_q;
  s.o_bytes = size_t(splits * s.rows_total * p->head_dim) * sizeof(float);
  s.total = s.o_bytes + size_t(splits * s.rows_total) * sizeof(float);
  return s;
}

// How the CUDA backward's wgmma path gets dQ, and the workspace that takes:
// shared with tc_flash_attention_backward_workspace_size, like the split
// above, and like it a pure function of the params. Both paths below use the
// dS^T that dkv computes for every (key, query) pair of its band anyway, so
// that dq need not recompute S and dP (three products: S, dP, dQ):
//  - the dS path (head_dim <= 64, fixed lengths, up to kDsMaxBytes): dkv stores
//    dS^T, rounded to the input dtype as dQ += dS K consumes it, into the
//    workspace as dS^T [batch][heads_q][seqlen_k][pitch], and dq becomes
//    one product (dQ = dS K), summed in a fixed order. GPT-2 124M (B 16,
//    H 12, S 1024, D 64, causal) stores 402 MB a layer (half of it written:
//    the band), read once, against dq's two recomputed products
//    (BENCHMARKS, GPT step 9). It grows as S^2, so only up to kDsMaxBytes;
//    above it, or at head dims above 64 (the dS path's dq holds one
//    64-column box of K, and dkv at D = 128 is at its register limit), the
//    deterministic backward runs dq's three products.
//  - the accumulator path (where the dS path is not taken, without
//    `deterministic`; head_dim <= 128, varlen too): dkv also multiplies
//    dQ += dS K for its keys and adds the float32 tile into an accumulator
//    of float32 rows of 64 or 128 columns, one per query row in lse's order
//    ([batch][heads_q][seqlen_q]; packed: [heads_q][total_q]), which one pass
//    then scales into grad_q (FlashAttention-2/3's dQ). 5 products instead of
//    7; the adds' order varies run to run. H200, bf16, the backward alone:
//    4 x 32 heads x 4096, D = 64: 5.29 -> 4.75 ms; D = 128: 8.49 -> 8.39
//    (causal 4.66 -> 4.16). Where the dS path fits it is the faster one
//    (GPT-2's layer: 0.344 against 0.356 ms, first run), so it stays.
// Devices that run no wgmma backward leave the bytes unused: the query asks
// no device, as the split's does not.
constexpr size_t kDsMaxBytes = size_t(512) << 20;

struct AttentionDq {
  int64_t pitch = 0;      // the dS path: seqlen_q rounded up to 8 (TMA's 16-byte rows); 0: not taken
  int64_t acc_dim = 0;    // the accumulator path: its columns (head_dim rounded up to 64 or 128); 0: not taken
  size_t offset = 0;      // of dS^T or the accumulator in the workspace, after delta's rows (256-byte aligned)
  size_t total = 0;       // the backward's workspace: delta, then dS^T or the accumulator
};

inline AttentionDq attention_dq(const tc_flash_attention_backward_params* p) {
  AttentionDq d;
  if (!p) return d;
  const size_t acc = p->dtype == TC_FLOAT64 ? sizeof(double) : sizeof(float);
  d.total = size_t(std::max<int64_t>(p->batch * p->heads_q * p->seqlen_q, 0)) * acc;
  if (p->algo != TC_ATTENTION_AUTO && p->algo != TC_ATTENTION_WGMMA) return d;
  if ((p->dtype != TC_FLOAT16 && p->dtype != TC_BFLOAT16) || p->head_dim < 1 || p->head_dim > 128) return d;
  if (p->batch < 1 || p->heads_q < 1 || p->seqlen_q < 1 || p->seqlen_k < 1 || p->seqlen_q > INT32_MAX ||
      p->seqlen_k > INT32_MAX)
    return d;
  const bool varlen = p->cu_seqlens_q || p->cu_seqlens_k;
  const int64_t pitch = (p->seqlen_q + 7) / 8 * 8;
  const double bytes = double(p->batch) * double(p->heads_q) * double(p->seqlen_k) * double(pitch) * 2.0;
  d.offset = (d.total + 255) / 256 * 256;
  if (!varlen && p->head_dim <= 64 && bytes <= double(kDsMaxBytes)) {
    d.pitch = pitch;
    d.total = d.offset + size_t(bytes);
  } else if (!p->deterministic) {
    const int64_t rows = p->heads_q * (varlen ? p->total_q : p->batch * p->seqlen_q);
    if (rows < 1) return d;
    d.acc_dim = p->head_dim <= 64 ? 64 : 128;
    d.total = d.offset + size_t(rows) * size_t(d.acc_dim) * sizeof(float);
  }
  return d;
}

}  // namespace plan
