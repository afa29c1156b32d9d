// Argument checks the CPU and CUDA entry points of embedding share (sizes,
// pointers, padding_idx; the indices themselves are checked where they are
// read: cpu/embedding.cpp, cuda/embedding.cu).
#pragma once
#include "internal.h"
#include "tinycuda/embedding.h"

inline tc_status embedding_check(const tc_embedding_params* p) {
  TC_REQUIRE(p, "embedding: params is NULL");
  TC_REQUIRE(p->num_indices >= 0 && p->num_embeddings >= 0 && p->embedding_dim >= 0,
             "embedding: sizes must be >= 0 (num_indices %lld, num_embeddings %lld, embedding_dim %lld)",
             (long long)p->num_indices, (long long)p->num_embeddings, (long long)p->embedding_dim);
  TC_REQUIRE(p->num_indices == 0 || p->input, "embedding: input is NULL");
  TC_REQUIRE(p->num_indices * p->embedding_dim == 0 || (p->weight && p->out), "embedding: weight or out is NULL");
  return TC_OK;
}

inline tc_status embedding_check(const tc_embedding_backward_params* p) {
  TC_REQUIRE(p, "embedding_backward: params is NULL");
  TC_REQUIRE(p->num_indices >= 0 && p->num_embeddings >= 0 && p->embedding_dim >= 0,
             "embedding_backward: sizes must be >= 0 (num_indices %lld, num_embeddings %lld, embedding_dim %lld)",
             (long long)p->num_indices, (long long)p->num_embeddings, (long long)p->embedding_dim);
  TC_REQUIRE(p->padding_idx == -1 || (p->padding_idx >= 0 && p->padding_idx < p->num_embeddings),
             "embedding_backward: padding_idx must be in [0, num_embeddings = %lld) or -1 (none), got %lld",
             (long long)p->num_embeddings, (long long)p->padding_idx);
  TC_REQUIRE(p->num_indices == 0 || p->input, "embedding_backward: input is NULL");
  TC_REQUIRE(p->num_indices * p->embedding_dim == 0 || p->grad_out, "embedding_backward: grad_out is NULL");
  TC_REQUIRE(p->num_embeddings * p->embedding_dim == 0 || p->grad_weight, "embedding_backward: grad_weight is NULL");
  return TC_OK;
}

// The accumulator's bytes for a dtype (float; double for float64), 0 for one the family does not take.
inline size_t embedding_acc_bytes(tc_dtype dtype) {
  switch (dtype) {
    case TC_FLOAT32: case TC_FLOAT16: case TC_BFLOAT16: return 4;
    case TC_FLOAT64: return 8;
    default: return 0;
  }
}
