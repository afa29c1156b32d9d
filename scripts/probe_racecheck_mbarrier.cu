// Does compute-sanitizer racecheck see an mbarrier hand-over as ordering?
// The protocol of flash_attention's wgmma dK/dV kernel, alone: a producer
// warp stores 64 floats into one of two stages with plain st.shared, every
// lane arrives on full[s] (count 32); a consumer warp waits on full[s], reads
// the stage, __syncwarp, lane 0 arrives on empty[s] (count 1); the producer
// waits on empty[s] before storing into the stage again. Correct by the PTX
// memory model (arrive releases, the parity wait acquires); the sum printed
// must be the expected one. Run:
//   nvcc -std=c++17 -arch=sm_90a -Icsrc scripts/probe_racecheck_mbarrier.cu -o /tmp/probe
//   compute-sanitizer --tool racecheck /tmp/probe
#include <cstdio>
#include "cuda/kit/mma.cuh"

__global__ void handover(float* out, int rounds) {
  __shared__ float stage[2][64];
  __shared__ __align__(8) uint64_t full[2], empty[2];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < 2; ++s) mbar_init(&full[s], 32), mbar_init(&empty[s], 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  float sum = 0;
  for (int t = 0; t < rounds; ++t) {
    const int s = t % 2, phase = (t / 2) & 1;
    if (warp == 0) {
      if (t >= 2) mbar_wait(&empty[s], phase ^ 1);
      stage[s][lane] = float(t), stage[s][lane + 32] = float(t);
      mbar_arrive(&full[s]);
    } else {
      mbar_wait(&full[s], phase);
      sum += stage[s][(lane + t) % 64];
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty[s]);
    }
  }
  if (warp == 1) out[lane] = sum;
}

int main() {
  float* out;
  cudaMalloc(&out, 32 * sizeof(float));
  const int rounds = 16;
  handover<<<1, 64>>>(out, rounds);
  float h[32];
  cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost);
  printf("sum %g (expected %d), %s\n", h[0], rounds * (rounds - 1) / 2, cudaGetErrorString(cudaGetLastError()));
  return 0;
}
