// The embedding backward's workspace size, a pure function of the params:
// built in both builds (the CPU-only one too, where capi and the torch layer
// still ask it).
#include "embedding_check.h"
#include "embedding_plan.h"

size_t tc_embedding_backward_workspace_size(const tc_embedding_backward_params* p) {
  if (embedding_check(p) != TC_OK) return 0;
  const size_t acc = embedding_acc_bytes(p->dtype);
  if (acc == 0) return 0;
  return plan::embedding_backward(p->num_indices, p->num_embeddings, p->embedding_dim, acc).total;
}
