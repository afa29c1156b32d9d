// adamw family: the workspace query (both builds).
#include "adamw_math.h"

size_t tc_multi_tensor_l2norm_workspace_size(const tc_multi_tensor_l2norm_params* p) {
  if (!p || p->count < 0 || (p->count && !p->numel)) return 0;
  const size_t acc = p->dtype == TC_FLOAT64 ? sizeof(double) : sizeof(float);
  return size_t(norm_chunks(p)) * acc;
}
