// Does compute-sanitizer racecheck handle TMA stores (cp.async.bulk.tensor
// shared -> global)? The wgmma GEMM's store_tma protocol, alone: 128 threads
// write a 64 x 64 box of halves into one of two shared buffers, fence the
// writes to the async proxy, sync, and one thread stores the box with TMA and
// commits the group; before a buffer is written again, that thread waits until
// all but the latest group have read their shared memory (bulk_wait_read<1>)
// and the block syncs. 8 boxes into an [8 x 64] x 64 matrix; the check counts
// wrong elements. The buffers sit at the end of a dynamic shared allocation
// of KiB (argument; the GEMM's is 226 of the 227 a block may have), 128-byte
// swizzled as the GEMM's. Run:
//   nvcc -std=c++17 -arch=sm_90a -Icsrc scripts/probe_racecheck_tma_store.cu -o /tmp/probe_tma
//   /tmp/probe_tma 226 && compute-sanitizer --tool racecheck /tmp/probe_tma 226
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "cuda/kit/mma.cuh"

__global__ void boxes(const __grid_constant__ CUtensorMap map, int n_boxes, int smem) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __half* buf = reinterpret_cast<__half*>(smem_raw + smem - 2 * 64 * 64 * 2);
  const int tid = threadIdx.x;
  for (int b = 0; b < n_boxes; ++b) {
    __half* x = buf + (b % 2) * 64 * 64;
    if (tid == 0) bulk_wait_read<1>();
    __syncthreads();
    for (int i = tid; i < 64 * 64; i += 128) {  // element (r, c) at 16-byte chunk c / 8 ^ r % 8 of row r
      const int r = i / 64, c = i % 64;
      x[r * 64 + ((c / 8) ^ (r % 8)) * 8 + c % 8] = __float2half(float(b * 64 + c));
    }
    fence_async_shared();
    __syncthreads();
    if (tid == 0) {
      tma_store_3d(&map, x, 0, 64 * b, 0);
      bulk_commit();
    }
  }
  if (tid == 0) bulk_wait_all();
}

int main(int argc, char** argv) {
  const int smem = (argc > 1 ? atoi(argv[1]) : 48) * 1024;
  const int n_boxes = 8, rows = 64 * n_boxes;
  __half* out;
  cudaMalloc(&out, rows * 64 * sizeof(__half));
  CUtensorMap map;
  const cuuint64_t dims[3] = {64, cuuint64_t(rows), 1}, strides[2] = {64 * 2, cuuint64_t(rows) * 64 * 2};
  const cuuint32_t box[3] = {64, 64, 1}, unit[3] = {1, 1, 1};
  CUresult r = tma_encoder()(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 3, out, dims, strides, box, unit,
                             CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                             CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  cudaFuncSetAttribute(boxes, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  boxes<<<1, 128, smem>>>(map, n_boxes, smem);
  std::vector<__half> h(rows * 64);
  cudaMemcpy(h.data(), out, h.size() * sizeof(__half), cudaMemcpyDeviceToHost);
  int wrong = 0;
  for (int i = 0; i < rows * 64; ++i) wrong += __half2float(h[i]) != float(i / 4096 * 64 + i % 64);
  printf("%d KiB: encode %d, %d of %d wrong, %s\n", smem / 1024, int(r), wrong, rows * 64, cudaGetErrorString(cudaGetLastError()));
  return 0;
}
