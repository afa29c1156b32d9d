/* tinycuda.h: the C ABI of libtinycuda, the same kernel core the torch ops use.
 *
 * Every op family has a header of its own, included below; each declares a
 * params struct (pointers, sizes, dtype, and a `void* stream`, a cudaStream_t
 * or NULL for the default stream) and entry points
 *
 *     tc_status tc_<op>_cpu(const tc_<op>_params*);    host buffers
 *     tc_status tc_<op>_cuda(const tc_<op>_params*);   device buffers, async on `stream`
 *
 * All buffers are contiguous (row-major) arrays of one dtype. Reductions that
 * need scratch on the GPU take a workspace whose size tc_<op>_workspace_size()
 * returns for the same params (0 on the CPU).
 *
 * Errors: every entry point returns a tc_status (common.h); TC_OK is 0. On
 * failure tc_last_error() holds a message naming the op and the argument (per
 * thread, valid until the next failing call on that thread), and
 * tc_status_string() names the status. CUDA entry points of a library built
 * without CUDA, or run without a CUDA device, return TC_ERR_NO_CUDA.
 * A NULL params pointer or a NULL buffer where data is needed is an error,
 * never a crash; buffers too small for the given sizes cannot be detected
 * here: the callers (tinycuda.capi) check them.
 *
 * Build: `make -C csrc` (CUDA when nvcc is found; USE_CUDA=0 for CPU only)
 * writes build/capi/libtinycuda.so; `pip install` ships the same library in
 * tinycuda/lib/.
 */
#ifndef TINYCUDA_H
#define TINYCUDA_H

#include "common.h"
#include "cross_entropy.h"
#include "gelu.h"
#include "glu.h"
#include "layer_norm.h"
#include "linear.h"
#include "relu.h"
#include "rms_norm.h"
#include "scale_bias_relu.h"
#include "softmax.h"
#include "square.h"
#include "sum.h"

#define TC_VERSION "0.1.0"

/* The library's version string, TC_VERSION. */
TC_API const char* tc_version(void);

/* 1 when the library was built with CUDA kernels, else 0. */
TC_API int tc_built_with_cuda(void);

/* Number of CUDA devices visible (0 without CUDA, a driver or a device). */
TC_API int tc_cuda_device_count(void);

/* sizeof the params struct named e.g. "tc_linear_params", 0 if unknown:
 * lets foreign-function callers check their struct layouts. */
TC_API size_t tc_params_sizeof(const char* name);

#endif /* TINYCUDA_H */
