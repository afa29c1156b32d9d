/* tinycuda kernel core: the contract shared by every op family.
 *
 * Plain C so that the same declarations serve the torch extension, the C ABI
 * library (libtinycuda) and any other caller. No torch and no CUDA header here:
 * a stream travels as `void*` (a cudaStream_t), NULL meaning the default stream.
 *
 * Every core entry point returns a tc_status; on failure the message is kept
 * per thread and read back with tc_last_error().
 */
#ifndef TINYCUDA_COMMON_H
#define TINYCUDA_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define TC_EXTERN_C extern "C"
#else
#define TC_EXTERN_C
#endif

/* libtinycuda exports the core, and the torch door (tinycuda._C) links it:
 * both define TC_BUILD_SHARED. The JIT build (TINYCUDA_JIT=1) compiles core and
 * door into one module and hides the entry points, so that module and a loaded
 * libtinycuda can live in one process without interposing on each other.
 * (Only these symbols: -fvisibility=hidden on a whole module gave it private
 * copies of libstdc++ templates that crashed in ostream << long against the
 * GPU machine's runtime.) */
#if defined(TC_BUILD_SHARED)
#define TC_API TC_EXTERN_C __attribute__((visibility("default")))
#else
#define TC_API TC_EXTERN_C __attribute__((visibility("hidden")))
#endif

typedef enum {
  TC_OK = 0,
  TC_ERR_INVALID_ARGUMENT = 1, /* a size, pointer or option is out of range */
  TC_ERR_UNSUPPORTED_DTYPE = 2,
  TC_ERR_NO_CUDA = 3, /* built without CUDA, or no CUDA device present */
  TC_ERR_CUDA = 4,    /* a CUDA runtime call or kernel launch failed */
  TC_ERR_INTERNAL = 5
} tc_status;

/* The float dtypes are every family's; the integer ones (and bool, one byte
 * 0 or 1) only those families' that say so in their header (sort). */
typedef enum {
  TC_FLOAT32 = 0,
  TC_FLOAT16 = 1,
  TC_BFLOAT16 = 2,
  TC_FLOAT64 = 3,
  TC_INT8 = 4,
  TC_INT16 = 5,
  TC_INT32 = 6,
  TC_INT64 = 7,
  TC_UINT8 = 8,
  TC_BOOL = 9
} tc_dtype;

/* Message of the last failing call on this thread ("" if none). */
TC_API const char* tc_last_error(void);
/* Fixed text of a status code. */
TC_API const char* tc_status_string(tc_status status);
/* Bytes per element of a dtype, 0 for an unknown one. */
TC_API size_t tc_dtype_size(tc_dtype dtype);

#endif /* TINYCUDA_COMMON_H */
