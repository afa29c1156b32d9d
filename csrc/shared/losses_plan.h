// How the CUDA losses cut a reduction, shared by the launchers and the
// workspace-size query (which must agree, and must not need a device): a
// function of the shape alone, so the sum's order, and its bits, are too.
//
//   elements   `loss_blocks` blocks of 256 threads stride over the elements,
//              ~16 a thread at least: 2^26 fp32 elements are 1024 blocks of 64
//              16-byte vectors a thread (1024 blocks: ~8 resident an SM on
//              the H200's 132, one wave)
//   rows       triplet_margin_loss: a warp a row (rows of up to 4096), else a
//              block; `loss_row_blocks` blocks stride over the rows
// Each block leaves one partial sum; a second kernel folds them (one block,
// a fixed tree) into the loss. One block writes the loss itself.
#pragma once
#include <cstdint>

#include "reduce_plan.h"  // ceil_div, clamp64

namespace plan {

constexpr int kLossThreads = 256;
constexpr int64_t kLossMaxBlocks = 1024;  // the second stage's block: a partial a thread

inline int64_t loss_blocks(int64_t n) { return clamp64(ceil_div(n, kLossThreads * 16), 1, kLossMaxBlocks); }

inline int loss_row_group(int64_t cols) { return cols <= 4096 ? 32 : kLossThreads; }

inline int64_t loss_row_blocks(int64_t rows, int64_t cols) {
  return clamp64(ceil_div(rows, kLossThreads / loss_row_group(cols)), 1, kLossMaxBlocks);
}

}  // namespace plan
