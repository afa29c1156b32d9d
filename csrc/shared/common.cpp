// Status strings and the per-thread error message behind tc_last_error().
#include <cstdio>

#include "internal.h"

namespace {
thread_local char last_error[1024] = "";
}

tc_status tc_fail(tc_status status, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(last_error, sizeof(last_error), fmt, args);
  va_end(args);
  return status;
}

const char* tc_last_error(void) { return last_error; }

const char* tc_status_string(tc_status status) {
  switch (status) {
    case TC_OK: return "ok";
    case TC_ERR_INVALID_ARGUMENT: return "invalid argument";
    case TC_ERR_UNSUPPORTED_DTYPE: return "unsupported dtype";
    case TC_ERR_NO_CUDA: return "no CUDA device";
    case TC_ERR_CUDA: return "CUDA error";
    case TC_ERR_INTERNAL: return "internal error";
  }
  return "unknown status";
}

size_t tc_dtype_size(tc_dtype dtype) {
  switch (dtype) {
    case TC_INT8:
    case TC_UINT8:
    case TC_BOOL: return 1;
    case TC_FLOAT16:
    case TC_BFLOAT16:
    case TC_INT16: return 2;
    case TC_FLOAT32:
    case TC_INT32: return 4;
    case TC_FLOAT64:
    case TC_INT64: return 8;
  }
  return 0;
}
