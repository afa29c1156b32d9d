// Tensor-core building blocks: sm_80 and later first, then Hopper's (below)
// sm_80 and later (mma.sync, Ampere's warp-level
// instruction, which Hopper still runs at about half of wgmma's peak):
//
//   cp_async16    16 bytes global -> shared without passing through registers,
//                 so a k-tile's loads overlap the tiles being multiplied
//   ldsm_x4       ldmatrix: four 8x8 16-bit matrices from shared memory into
//                 the register fragments mma expects, one row address per lane;
//                 the .trans form turns a tile stored k-major-in-rows into the
//                 same fragment, which is how an operand of either layout is
//                 read without a transposed copy in memory
//   stsm_x4       stmatrix: the inverse, D fragments (packed by pack2) to shared memory
//   mma_16816     D[16x8] += A[16x16] B[16x8], fp16 or bf16 in, fp32 out
//
// Fragment layouts (PTX ISA, "mma.m16n8k16"), lane = 4 g + q:
//   A (row-major 16x16): a0 (g, 2q..2q+1)  a1 (g+8, 2q..)  a2 (g, 2q+8..)  a3 (g+8, 2q+8..)
//   B (col-major 16x8):  b0 (k 2q..2q+1, n g)  b1 (k 2q+8.., n g)
//   D (16x8, fp32):      d0,d1 (g, 2q..2q+1)  d2,d3 (g+8, 2q..2q+1)
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda.h>
#include <cudaTypedefs.h>

#include <atomic>
#include <cstdint>
#include <type_traits>

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// `in` false writes 16 zero bytes (src-size 0: nothing is read from gmem).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool in) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem),
               "r"(in ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

template <bool kTrans>
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
  if constexpr (kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// stmatrix, ldsm_x4's inverse: four 8x8 16-bit matrices from registers in
// the mma D layout (register i holds matrix i's row lane / 4, columns
// 2 (lane % 4) and + 1, two T packed) to shared memory, lanes 8i..8i+7 giving
// matrix i's row addresses. One instruction where 16-bit stores of the same
// fragments take four (the GEMM's epilogue).
__device__ __forceinline__ void stsm_x4(uint32_t addr, const uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r[0]),
               "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}

// A 64-row x 128-byte box of 16-bit elements in TMA's 128-byte swizzle
// (16-byte chunk x of row r at x ^ (r % 8); the box on 1 KiB): the address
// lane `lane` of warp `warp` gives stsm_x4 / ldsm_x4 for 16 columns of the
// warp's 16 rows, the columns' 8-column groups j, j + 1 as matrices (rows
// g, g + 8 each). Lane l addresses row l % 8 + 8 (l / 8 % 2) at chunk
// (jj + l / 16) ^ (l % 8): this base XOR (jj << 4) for an even chunk jj.
__device__ __forceinline__ uint32_t swizzled_x4_base(const void* box, int warp, int lane) {
  return smem_addr(box) + (16 * warp + lane % 8 + 8 * (lane / 8 % 2)) * 128 + (((lane / 16) ^ (lane % 8)) << 4);
}

// Two floats as one register of two T, the lower column in the low half (the
// order of mma's operand fragments), and back.
template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __half>) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  } else {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
}
template <class T>
__device__ __forceinline__ float2 unpack2(uint32_t w) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half22float2(*reinterpret_cast<__half2*>(&w));
  } else {
    return __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&w));
  }
}

template <class T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  static_assert(std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>, "fp16 or bf16 operands");
  if constexpr (std::is_same_v<T, __half>)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ---------------------------------------------------------------------------
// Hopper (sm_90a): TMA bulk tensor copies, mbarriers, wgmma
//
//   tma_load_3d   a box of a 3-D (4-D) tensor, described by a CUtensorMap made
//                 on the host with tma_encoder, into shared memory, 128-byte
//   tma_load_4d   swizzled; completion is counted in bytes on an mbarrier
//   tma_store_3d  the reverse: a shared-memory box out to global memory,
//                 asynchronous; bulk_commit groups a thread's stores and
//                 bulk_wait_read<N> waits until all but its N latest groups
//                 have read their shared memory (the box may be rewritten);
//                 tma_reduce_add_3d adds the box into global memory instead
//   mbar_*        the shared-memory barriers a producer and its consumers hand
//                 stages over with: wait on a phase parity, arrive, expect bytes
//   wgmma_desc    the descriptor of a k-major operand tile (_mn: m/n-major)
//   wgmma_ss      D[64xN] += A[64x16] B[16xN] for one warpgroup (128
//                 threads), both operands read from shared memory through
//                 descriptors, either k-major or (transpose bit) m/n-major;
//                 asynchronous until wgmma_wait
//   wgmma_rs      the same with A from registers (mma.sync's A fragments)
// Only the sm_90a build may call these (wgmma and setmaxnreg exist nowhere else).

__device__ __forceinline__ void mbar_init(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count));
}
__device__ __forceinline__ void mbar_expect_bytes(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, int parity) {
  uint32_t done = 0;
  while (!done)
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
}

// coordinates innermost first
__device__ __forceinline__ void tma_load_3d(void* dst, const void* tensor_map, int x, int y, int z, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];\n" ::"r"(smem_addr(dst)),
      "l"(tensor_map), "r"(x), "r"(y), "r"(z), "r"(smem_addr(bar))
      : "memory");
}

// The same with an L2 eviction policy (l2_policy): an operand read once
// leaves L2 first, one read again stays.
__device__ __forceinline__ void tma_load_3d(void* dst, const void* tensor_map, int x, int y, int z, uint64_t* bar,
                                            uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint [%0], "
      "[%1, {%2, %3, %4}], [%5], %6;\n" ::"r"(smem_addr(dst)),
      "l"(tensor_map), "r"(x), "r"(y), "r"(z), "r"(smem_addr(bar)), "l"(policy)
      : "memory");
}
// An L2 policy for every line an access touches: evict_first (streamed
// once) or evict_last (read again soon).
__device__ __forceinline__ uint64_t l2_policy(bool evict_first) {
  uint64_t p;
  if (evict_first) asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(p));
  else asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(p));
  return p;
}

__device__ __forceinline__ void tma_load_4d(void* dst, const void* tensor_map, int x, int y, int z, int w,
                                            uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, "
      "%5}], [%6];\n" ::"r"(smem_addr(dst)),
      "l"(tensor_map), "r"(x), "r"(y), "r"(z), "r"(w), "r"(smem_addr(bar))
      : "memory");
}

// Shared-memory writes made by this thread are seen by the TMA unit (the
// async proxy) after this; the box's writers each fence, then sync, then one
// thread stores it.
__device__ __forceinline__ void fence_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void tma_store_3d(const void* tensor_map, const void* src, int x, int y, int z) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
                   tensor_map),
               "r"(smem_addr(src)), "r"(x), "r"(y), "r"(z)
               : "memory");
}
// The same box added into global memory element by element (the L2 does the
// adds, in the tensor map's type), for an accumulating float32 C.
__device__ __forceinline__ void tma_reduce_add_3d(const void* tensor_map, const void* src, int x, int y, int z) {
  asm volatile(
      "cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
          tensor_map),
      "r"(smem_addr(src)), "r"(x), "r"(y), "r"(z)
      : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

// A driver entry point found through the runtime, so that nothing links
// -lcuda; nullptr where the driver lacks it.
inline void* driver_entry(const char* name) {
  void* f = nullptr;
  cudaDriverEntryPointQueryResult found;
  if (cudaGetDriverEntryPointByVersion(name, &f, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess)
    return nullptr;
  return f;
}

// The driver's tensor-map encoder (cuTensorMapEncodeTiled); nullptr where the
// driver lacks it. The driver encodes in the calling thread's current
// context, and a thread whose first CUDA call this is has none (autograd's
// backward thread: the encode failed with CUDA_ERROR_INVALID_CONTEXT under
// memcheck and the product fell back to mma). Where none is current,
// cudaSetDevice binds the current device's primary context (documented to,
// without synchronizing), as the runtime would at its next call; a context
// the caller made current is left alone.
inline PFN_cuTensorMapEncodeTiled_v12000 tma_encoder() {
  static const auto fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(driver_entry("cuTensorMapEncodeTiled"));
  static const auto current = reinterpret_cast<CUresult (*)(CUcontext*)>(driver_entry("cuCtxGetCurrent"));
  CUcontext ctx = nullptr;
  int dev = 0;
  if (current && current(&ctx) == CUDA_SUCCESS && !ctx && cudaGetDevice(&dev) == cudaSuccess) cudaSetDevice(dev);
  return fn;
}

// A tiled TMA map of E elements, 128-byte swizzled: `extent` innermost first,
// `stride` (in elements) of each dimension past the first, boxes `box`.
// TMA's rules are checked before the driver is asked (the base and every
// stride multiples of 16 bytes, strides below 2^40 bytes, extents in
// [1, 2^32]): a tensor it cannot describe, an odd head_dim's rows, is a
// false for the caller's fallback, not a refused driver call (which
// compute-sanitizer reports as an API error). False too where the driver
// refuses it for another reason.
template <class E, int R>
bool tma_map(CUtensorMap* map, const E* base, const int64_t (&extent)[R], const int64_t (&stride)[R - 1],
             const cuuint32_t (&box)[R], CUtensorMapL2promotion l2 = CU_TENSOR_MAP_L2_PROMOTION_L2_256B) {
  static_assert(sizeof(E) == 2 || sizeof(E) == 4, "16-bit or float32 elements");
  constexpr CUtensorMapDataType type = std::is_same_v<E, float>    ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                                       : std::is_same_v<E, __half> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                                   : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  cuuint64_t dims[R], bytes[R > 1 ? R - 1 : 1];
  cuuint32_t unit[R];
  if (reinterpret_cast<uintptr_t>(base) % 16 != 0) return false;
  for (int i = 0; i < R; ++i) {
    if (extent[i] < 1 || extent[i] > (int64_t(1) << 32)) return false;
    dims[i] = cuuint64_t(extent[i]), unit[i] = 1;
  }
  for (int i = 0; i < R - 1; ++i) {
    const int64_t b = stride[i] * int64_t(sizeof(E));
    if (stride[i] < 1 || b % 16 != 0 || b >= (int64_t(1) << 40)) return false;
    bytes[i] = cuuint64_t(b);
  }
  const auto encode = tma_encoder();
  return encode && encode(map, type, R, const_cast<E*>(base), dims, bytes, const_cast<cuuint32_t*>(box), unit,
                          CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, l2,
                          CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// Whether the current device (set in *dev) runs `Kernel`, a kernel written
// for sm_90a: an sm_90 device, an sm_90a cubin of it in this build (elsewhere
// its body is compiled out) and the driver's encoder. Asked once per device.
template <auto Kernel>
bool hopper_runs(int* dev) {
  static std::atomic<int8_t> known[64];  // 0 not asked yet, 1 yes, -1 no
  if (cudaGetDevice(dev) != cudaSuccess || *dev < 0 || *dev >= 64) return false;
  int8_t v = known[*dev].load(std::memory_order_relaxed);
  if (v == 0) {
    int major = 0;
    cudaFuncAttributes attr{};
    const bool ok = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, *dev) == cudaSuccess &&
                    major == 9 && cudaFuncGetAttributes(&attr, Kernel) == cudaSuccess &&
                    attr.binaryVersion == 90 && tma_encoder() != nullptr;
    known[*dev].store(v = ok ? 1 : -1, std::memory_order_relaxed);
  }
  return v == 1;
}

// Descriptor of a k-major tile with 128-byte rows (64 16-bit elements), as the
// 128B-swizzled TMA box writes it: 8-row groups 1024 bytes apart.
__device__ __forceinline__ uint64_t wgmma_desc(const void* tile) {
  return (uint64_t(smem_addr(tile)) & 0x3FFFF) >> 4 | uint64_t(16 >> 4) << 16 | uint64_t(1024 >> 4) << 32 |
         uint64_t(1) << 62;
}
// Descriptor of an m/n-major tile as 128B-swizzled TMA boxes of [k][64 i]
// write it: rows of 64 contiguous m (or n) per k, 8-k groups 1024 bytes apart
// (the stride field), and the next 64 of m/n `block_bytes` further (the
// leading-offset field; CUTLASS's canonical MN-major SW128 layout).
__device__ __forceinline__ uint64_t wgmma_desc_mn(const void* tile, uint32_t block_bytes) {
  return (uint64_t(smem_addr(tile)) & 0x3FFFF) >> 4 | uint64_t(block_bytes >> 4) << 16 |
         uint64_t(1024 >> 4) << 32 | uint64_t(1) << 62;
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Keeps the compiler from moving accumulator reads or writes across the
// asynchronous wgmma that owns the registers.
template <int R>
__device__ __forceinline__ void wgmma_pin(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// The instruction strings, one per shape (PTX names each operand register).
#define TC_WGMMA_SS_64(TYPE)                                                         \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                      \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " {"   \
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"                                                                 \
               "}, %32, %33, p, 1, 1, %35, %36;\n}\n"                     \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])                                                                 \
               : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(int(kTA)), "n"(int(kTB)))
#define TC_WGMMA_RS_64(TYPE)                                                         \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                      \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " {"   \
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"                                                                 \
               "}, {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"  \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])                                                                 \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(int(kTB)))
#define TC_WGMMA_SS_128(TYPE)                                                         \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                      \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " {"   \
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"                                                                 \
               "}, %64, %65, p, 1, 1, %67, %68;\n}\n"                     \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])                                                                 \
               : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(int(kTA)), "n"(int(kTB)))
#define TC_WGMMA_RS_128(TYPE)                                                         \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                      \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " {"   \
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"                                                                 \
               "}, {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"  \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])                                                                 \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(int(kTB)))
#define TC_WGMMA_SS_256(TYPE)                                                         \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"                      \
               "wgmma.mma_async.sync.aligned.m64n256k16.f32." TYPE "." TYPE " {"   \
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"                                                                 \
               "}, %128, %129, p, 1, 1, %131, %132;\n}\n"                     \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])                                                                 \
               : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(int(kTA)), "n"(int(kTB)))
#define TC_WGMMA_RS_256(TYPE)                                                         \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"                      \
               "wgmma.mma_async.sync.aligned.m64n256k16.f32." TYPE "." TYPE " {"   \
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"                                                                 \
               "}, {%128, %129, %130, %131}, %132, p, 1, 1, %134;\n}\n"  \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])                                                                 \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(int(kTB)))

// D[64xN] (+)= A[64x16] B[16xN] for one warpgroup, N in {64, 128, 256}, N/2
// fp32 accumulators a thread (d[4j + 2h + e] at row 16 warp + g + 8h, column
// 8j + 2q + e, lane = 4g + q: mma.sync's m16n8 fragments side by side).
// wgmma_ss reads A and B from shared memory through descriptors, either
// k-major or (kTA / kTB, the transpose bits; 16-bit types only) m/n-major;
// wgmma_rs takes A from registers, each warp its 16 rows as mma.sync's A
// fragment (a0 (g, 2q..) a1 (g+8, 2q..) a2 (g, 2q+8..) a3 (g+8, 2q+8..)), so a
// softmax's P goes from accumulators to operand without shared memory.
// scale_d 0: D = A B (the accumulators are not read). Asynchronous until wgmma_wait.
template <class T, int N, bool kTA, bool kTB>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, int scale_d = 1) {
  static_assert(N == 64 || N == 128 || N == 256, "wgmma_ss: N in {64, 128, 256}");
  constexpr bool kHalf = std::is_same_v<T, __half>;
  if constexpr (N == 64) {
    if constexpr (kHalf) TC_WGMMA_SS_64("f16"); else TC_WGMMA_SS_64("bf16");
  } else if constexpr (N == 128) {
    if constexpr (kHalf) TC_WGMMA_SS_128("f16"); else TC_WGMMA_SS_128("bf16");
  } else {
    if constexpr (kHalf) TC_WGMMA_SS_256("f16"); else TC_WGMMA_SS_256("bf16");
  }
}
template <class T, int N, bool kTB>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc_b,
                                         int scale_d = 1) {
  static_assert(N == 64 || N == 128 || N == 256, "wgmma_rs: N in {64, 128, 256}");
  constexpr bool kHalf = std::is_same_v<T, __half>;
  if constexpr (N == 64) {
    if constexpr (kHalf) TC_WGMMA_RS_64("f16"); else TC_WGMMA_RS_64("bf16");
  } else if constexpr (N == 128) {
    if constexpr (kHalf) TC_WGMMA_RS_128("f16"); else TC_WGMMA_RS_128("bf16");
  } else {
    if constexpr (kHalf) TC_WGMMA_RS_256("f16"); else TC_WGMMA_RS_256("bf16");
  }
}
#undef TC_WGMMA_SS_64
#undef TC_WGMMA_RS_64
#undef TC_WGMMA_SS_128
#undef TC_WGMMA_RS_128
#undef TC_WGMMA_SS_256
#undef TC_WGMMA_RS_256

template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
