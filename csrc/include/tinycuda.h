/* tinycuda.h: the C ABI of libtinycuda, the same kernel core the torch ops use.
 *
 * Each op family declares its contract in a header of its own,
 * tinycuda/<family>.h: a params struct (pointers, sizes, dtype, and a
 * `void* stream`, a cudaStream_t or NULL for the default stream) and entry
 * points
 *
 *     tc_status tc_<op>_cpu(const tc_<op>_params*);    host buffers
 *     tc_status tc_<op>_cuda(const tc_<op>_params*);   device buffers, async on `stream`
 *
 * Include the families you call (`#include "tinycuda/softmax.h"`, with
 * -I<prefix>/include); this header adds the library-level functions below.
 * Those family headers are the only declaration of each op: the CPU-only
 * build's CUDA stubs and the Python door (tinycuda.capi, through cffi) are
 * read from them, so nothing restates a field.
 *
 * All buffers are contiguous (row-major) arrays of one dtype, but for
 * matmul's operands, which are described by strides. Reductions that
 * need scratch on the GPU take a workspace whose size tc_<op>_workspace_size()
 * returns for the same params (0 on the CPU).
 *
 * Errors: every entry point returns a tc_status (tinycuda/common.h); TC_OK is
 * 0. On failure tc_last_error() holds a message naming the op and the
 * argument (per thread, valid until the next failing call on that thread),
 * and tc_status_string() names the status. CUDA entry points of a library
 * built without CUDA, or run without a CUDA device, return TC_ERR_NO_CUDA.
 * A NULL params pointer or a NULL buffer where data is needed is an error,
 * never a crash; buffers too small for the given sizes cannot be detected
 * here: the callers (tinycuda.capi) check them.
 *
 * Build: `make -C csrc` (CUDA when nvcc is found; USE_CUDA=0 for CPU only)
 * writes build/capi/libtinycuda.so and its headers to build/capi/include;
 * `pip install` ships both in tinycuda/lib/.
 */
#ifndef TINYCUDA_H
#define TINYCUDA_H

#include "tinycuda/common.h"

#define TC_VERSION "0.1.0"

/* The library's version string, TC_VERSION. */
TC_API const char* tc_version(void);

/* 1 when the library was built with CUDA kernels, else 0. */
TC_API int tc_built_with_cuda(void);

/* Number of CUDA devices visible (0 without CUDA, a driver or a device). */
TC_API int tc_cuda_device_count(void);

#endif /* TINYCUDA_H */
