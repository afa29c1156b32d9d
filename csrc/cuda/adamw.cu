// adamw: one AdamW step over many tensors; multi_tensor_l2norm: the global L2
// norm of many tensors (the math: tinycuda/adamw.h, the element update:
// shared/adamw_math.h, shared with the CPU).
//
// Multi-tensor launches (apex's and torch's _foreach idea): the tensors are
// cut into chunks of kNormChunk = 16384 elements and each block takes one
// chunk. A launch carries, by value in its kernel arguments, the pointers of
// up to kTensors tensors and, per block, its tensor and chunk: nothing is
// copied to the device first, so a step is a few launches whatever the
// tensor count, and a CUDA graph captures it as it is. The arguments stay
// under the 4 KB that every launch can pass (2.9 KB for adamw).
//
// Bytes: adamw reads p, g, m, v and writes p, m, v: 28 B a float32 parameter
// (124M parameters: 3.5 GB, 1.15 ms at 3 TB/s); with bf16 master weights it
// reads g, m, v, master and writes p, m, v, master: 30 B; the norm reads 4 B
// (2 B) an element.
// A block of 256 threads takes 64 elements a thread, in 16-byte vectors where
// all four buffers are 16-byte aligned (a chunk starts at a multiple of
// 16384 elements, so only the tensors' own addresses decide), else one
// element at a time.
//
// The norm: one float partial a chunk (a block's fixed tree), into the
// workspace in chunk order, then one block adds them in a fixed order and
// takes the square root: bit-identical run to run.
#include <algorithm>
#include <type_traits>

#include "../shared/adamw_math.h"
#include "kit/cuda_utils.cuh"
#include "kit/pdl.cuh"
#include "kit/reduce.cuh"
#include "kit/vec.cuh"

namespace {

constexpr int kThreads = 256;
constexpr int kBlocks = 320;  // blocks a launch: 320 x 5 B of block map

// The tensors and blocks of one launch: L pointer lists of up to TENSORS tensors.
template <int L, int TENSORS> struct Batch {
  void* ptr[L][TENSORS];
  int64_t numel[TENSORS];
  int64_t first_chunk;             // the norm's: this launch's first global chunk
  int32_t chunk[kBlocks];          // block -> chunk of its tensor
  uint8_t tensor[kBlocks];         // block -> tensor of this launch
};

// The batches of a tensor list, launched as they fill: `launch(batch, blocks)`
// for each full batch (kBlocks chunks, or TENSORS tensors' last chunks) and
// for what is left at the end. Empty tensors take no block.
template <int L, int TENSORS, class Launch>
tc_status for_each_batch(int64_t count, const int64_t* numel, const void* const* const (&lists)[L],
                         Launch&& launch) {
  Batch<L, TENSORS> b{};
  int tensors = 0, blocks = 0;
  int64_t chunks_done = 0;
  auto flush = [&]() -> tc_status {
    b.first_chunk = chunks_done;
    TC_RETURN_IF_ERROR(launch(b, blocks));
    chunks_done += blocks;
    blocks = tensors = 0;
    return TC_OK;
  };
  for (int64_t t = 0; t < count; ++t) {
    const int64_t chunks = (numel[t] + kNormChunk - 1) / kNormChunk;
    for (int64_t c = 0; c < chunks; ++c) {
      if (c == 0 || tensors == 0) {  // the tensor enters this batch (again, when cut by the last one)
        for (int l = 0; l < L; ++l) b.ptr[l][tensors] = const_cast<void*>(lists[l][t]);
        b.numel[tensors] = numel[t];
        ++tensors;
      }
      b.tensor[blocks] = uint8_t(tensors - 1);
      b.chunk[blocks] = int32_t(c);
      if (++blocks == kBlocks || (c == chunks - 1 && tensors == TENSORS)) TC_RETURN_IF_ERROR(flush());
    }
  }
  return blocks ? flush() : TC_OK;
}

// ---------------------------------------------------------------------------
// kernels

constexpr int kAdamwTensors = 24;

// MASTER: 16-bit p and g, float m, v and master (adamw.h), lists p, g, m, v, master;
// else every list in T and the fifth unused. S: the state's element type.
template <class T, bool MASTER> struct AdamwArgs {
  Batch<5, kAdamwTensors> b;
  AdamwCoefs<acc_t<T>> c;
  const acc_t<T>* grad_norm;  // NULL: no clipping
  acc_t<T> max_grad_norm;
};

template <class T, bool MASTER>
__global__ void __launch_bounds__(kThreads) adamw_kernel(const __grid_constant__ AdamwArgs<T, MASTER> a) {
  pdl_start();
  using A = acc_t<T>;
  using S = std::conditional_t<MASTER, float, T>;
  const int t = a.b.tensor[blockIdx.x];
  const int64_t start = int64_t(a.b.chunk[blockIdx.x]) * kNormChunk;
  const int64_t n = min(kNormChunk, a.b.numel[t] - start);
  T* p = static_cast<T*>(a.b.ptr[0][t]) + start;
  const T* g = static_cast<const T*>(a.b.ptr[1][t]) + start;
  S* m = static_cast<S*>(a.b.ptr[2][t]) + start;
  S* v = static_cast<S*>(a.b.ptr[3][t]) + start;
  float* w = MASTER ? static_cast<float*>(a.b.ptr[4][t]) + start : nullptr;
  const A clip = a.grad_norm ? clip_coef(*a.grad_norm, a.max_grad_norm) : A(1);
  // V elements a thread a pass: 16 bytes of the widest buffer (the float state's with master weights:
  // 4, read as one Vec<float> and written to p and g as 8 bytes)
  constexpr int V = 16 / sizeof(S);
  int64_t i0 = 0;
  if (((uintptr_t(p) | uintptr_t(g) | uintptr_t(m) | uintptr_t(v) | uintptr_t(w)) & 15) == 0) {
    const int64_t nv = n / V * V;
    for (int64_t i = int64_t(threadIdx.x) * V; i < nv; i += kThreads * V) {
      Vec<T, V> pv = load_vec<T, V>(p + i), gv = load_vec<T, V>(g + i);
      Vec<S, V> mv = load_vec<S, V>(m + i), vv = load_vec<S, V>(v + i);
      Vec<float, V> wv;
      if constexpr (MASTER) wv = load_vec<float, V>(w + i);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        A pk, mk = A(to_acc(mv.v[k])), vk = A(to_acc(vv.v[k]));
        if constexpr (MASTER) pk = wv.v[k]; else pk = to_acc(pv.v[k]);
        adamw_update(pk, A(to_acc(gv.v[k])) * clip, mk, vk, a.c);
        if constexpr (MASTER) wv.v[k] = pk;
        pv.v[k] = from_acc<T>(pk), mv.v[k] = from_acc<S>(mk), vv.v[k] = from_acc<S>(vk);
      }
      store_vec(p + i, pv), store_vec(m + i, mv), store_vec(v + i, vv);
      if constexpr (MASTER) store_vec(w + i, wv);
    }
    i0 = nv;
  }
  for (int64_t i = i0 + threadIdx.x; i < n; i += kThreads) {
    A pk, mk = A(to_acc(m[i])), vk = A(to_acc(v[i]));
    if constexpr (MASTER) pk = w[i]; else pk = to_acc(p[i]);
    adamw_update(pk, A(to_acc(g[i])) * clip, mk, vk, a.c);
    if constexpr (MASTER) w[i] = pk;
    p[i] = from_acc<T>(pk), m[i] = from_acc<S>(mk), v[i] = from_acc<S>(vk);
  }
}

constexpr int kNormTensors = 96;

template <class T>
__global__ void __launch_bounds__(kThreads) l2norm_chunks_kernel(const __grid_constant__ Batch<1, kNormTensors> b,
                                                                  acc_t<T>* partial) {
  pdl_start();
  using A = acc_t<T>;
  __shared__ A scratch[32];
  const int t = b.tensor[blockIdx.x];
  const int64_t start = int64_t(b.chunk[blockIdx.x]) * kNormChunk;
  const int64_t n = min(kNormChunk, b.numel[t] - start);
  const T* x = static_cast<const T*>(b.ptr[0][t]) + start;
  constexpr int V = 16 / sizeof(T);
  A s = 0;
  int64_t i0 = 0;
  if ((uintptr_t(x) & 15) == 0) {
    const int64_t nv = n / V * V;
    for (int64_t i = int64_t(threadIdx.x) * V; i < nv; i += kThreads * V) {
      const Vec<T> xv = load_vec(x + i);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const A xk = to_acc(xv.v[k]);
        s += xk * xk;
      }
    }
    i0 = nv;
  }
  for (int64_t i = i0 + threadIdx.x; i < n; i += kThreads) {
    const A xk = to_acc(x[i]);
    s += xk * xk;
  }
  s = block_reduce(s, Sum{}, A(0), scratch, kThreads / 32);
  if (threadIdx.x == 0) partial[b.first_chunk + blockIdx.x] = s;
}

// One block: thread k adds partials k, k + 1024, ... in order, then the
// block's fixed tree; the square root.
template <class A>
__global__ void __launch_bounds__(1024) l2norm_finish_kernel(const A* partial, int64_t chunks, A* norm) {
  pdl_start();
  __shared__ A scratch[32];
  A s = 0;
  for (int64_t i = threadIdx.x; i < chunks; i += 1024) s += partial[i];
  s = block_reduce(s, Sum{}, A(0), scratch, 32);
  if (threadIdx.x == 0) *norm = sqrt(s);
}

}  // namespace

// ---------------------------------------------------------------------------
// launchers

tc_status tc_adamw_cuda(const tc_adamw_params* p) {
  TC_RETURN_IF_ERROR(adamw_check(p));
  const char* op = "adamw_";
  return dispatch_cuda(p->dtype, op, [&](auto tag) -> tc_status {
    using T = decltype(tag);
    using A = acc_t<T>;
    auto run = [&](auto master) -> tc_status {
      constexpr bool MASTER = decltype(master)::value;
      AdamwArgs<T, MASTER> args{};
      args.c = adamw_coefs<A>(p);
      args.grad_norm = static_cast<const A*>(p->grad_norm);
      args.max_grad_norm = A(p->max_grad_norm);
      // without master weights the fifth list repeats the params (read by no kernel)
      const void* const* lists[5] = {p->params, p->grads, p->exp_avg, p->exp_avg_sq,
                                     MASTER ? p->master : p->params};
      return for_each_batch<5, kAdamwTensors>(p->count, p->numel, lists, [&](const auto& b, int blocks) {
        args.b = b;
        return launch_pdl(op, adamw_kernel<T, MASTER>, blocks, kThreads, 0, as_stream(p->stream), args);
      });
    };
    if constexpr (sizeof(T) == 2) {
      if (p->master) return run(std::true_type{});
    }
    return run(std::false_type{});
  });
}

tc_status tc_multi_tensor_l2norm_cuda(const tc_multi_tensor_l2norm_params* p) {
  TC_RETURN_IF_ERROR(l2norm_check(p));
  const char* op = "multi_tensor_l2norm";
  const int64_t chunks = norm_chunks(p);
  TC_REQUIRE(p->workspace_bytes >= tc_multi_tensor_l2norm_workspace_size(p) && (chunks == 0 || p->workspace),
             "%s: the workspace must hold %zu bytes (tc_multi_tensor_l2norm_workspace_size)", op,
             tc_multi_tensor_l2norm_workspace_size(p));
  return dispatch_cuda(p->dtype, op, [&](auto tag) -> tc_status {
    using T = decltype(tag);
    using A = acc_t<T>;
    A* partial = static_cast<A*>(p->workspace);
    const void* const* lists[1] = {p->tensors};
    const tc_status s = for_each_batch<1, kNormTensors>(p->count, p->numel, lists, [&](const auto& b, int blocks) {
      return launch_pdl(op, l2norm_chunks_kernel<T>, blocks, kThreads, 0, as_stream(p->stream), b, partial);
    });
    if (s != TC_OK) return s;
    // no chunks (no elements): the finish kernel writes sqrt(0) = 0
    return launch_pdl(op, l2norm_finish_kernel<A>, 1, 1024, 0, as_stream(p->stream), partial, chunks,
                      static_cast<A*>(p->norm));
  });
}
