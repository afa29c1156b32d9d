// Rows split across a thread-block cluster (sm_90): when a row no longer fits
// one block's registers, CLUSTER blocks (2..16, on SMs of one GPC) each hold
// a slice of it, reduce their slice as usual (row_reduce / group_sum), and
// swap the block totals through distributed shared memory:
//   ClusterRow<C>      which slice of which row this block holds: rank() in
//                      0..C-1, id() the cluster's index in the grid
//   ClusterSync        the barrier state: arrives at kernel start, so that the
//                      first exchange waits until every block of the cluster
//                      runs (its shared memory exists)
//   cluster_allreduce  each block's total, written by C of its threads into
//                      slot [rank] of every block of the cluster, one
//                      cluster barrier, then every block folds the C slots in
//                      rank order: all blocks get the same bits, run to run
//   launch_clustered   cudaLaunchKernelEx with a cluster dimension (sizes
//                      above 8 are "non-portable" and opted into once)
//   cluster_capacity   how many clusters of a kernel fit at once (0: none, or
//                      no sm_90: the caller picks its fallback)
// One barrier a reduction suffices because the slots alternate between two
// buffers: a block writes a buffer again only two reductions later, after a
// barrier that every block passes only once it has read that buffer. No block
// touches another's shared memory after the last barrier, so blocks may exit.
// CLUSTER == 1 compiles to nothing here: the one-block kernels use the same
// source.
#pragma once
#include <atomic>

#include "cuda_utils.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define TC_CLUSTERS 1
#include <cooperative_groups.h>
#endif

template <int CLUSTER>
struct ClusterRow {
  static_assert(CLUSTER == 1 || CLUSTER == 2 || CLUSTER == 4 || CLUSTER == 8 || CLUSTER == 16,
                "clusters of 1, 2, 4, 8 or 16 blocks");
  // blockIdx.x = id * CLUSTER + rank: a cluster is CLUSTER consecutive blocks along x
  __device__ __forceinline__ static int rank() { return CLUSTER == 1 ? 0 : int(blockIdx.x % CLUSTER); }
  __device__ __forceinline__ static int64_t id() { return blockIdx.x / CLUSTER; }
  __device__ __forceinline__ static int64_t count() { return gridDim.x / CLUSTER; }
};

// A kernel's cluster barrier state, made by every thread at its start. A
// block may write into another's shared memory only once that block runs:
// the constructor arrives on the cluster barrier (relaxed: it publishes
// nothing) and the first cluster_allreduce waits on it, so the first row's
// loads overlap the wait. `turn` picks the slot buffer.
template <int CLUSTER>
struct ClusterSync {
  int turn = 0;
  bool started = CLUSTER == 1;
  __device__ __forceinline__ ClusterSync() {
#ifdef TC_CLUSTERS
    if constexpr (CLUSTER > 1) asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
#endif
  }
};

// v[0..N) is this block's total, held by threads 0..CLUSTER-1 (at least);
// every thread gets op over the cluster's totals. `slots` is __shared__;
// every block of the cluster must make the same calls (the barrier is
// cluster-wide).
template <int CLUSTER, int N, class A, class Op>
__device__ __forceinline__ void cluster_allreduce(A (&v)[N], Op op, A (&slots)[2][CLUSTER][N],
                                                  ClusterSync<CLUSTER>& sync) {
  if constexpr (CLUSTER > 1) {
#ifdef TC_CLUSTERS
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    if (!sync.started) {
      asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
      sync.started = true;
    }
    const int turn = sync.turn;
    if (threadIdx.x < CLUSTER) {
      A* remote = cluster.map_shared_rank(&slots[turn][ClusterRow<CLUSTER>::rank()][0], int(threadIdx.x));
#pragma unroll
      for (int i = 0; i < N; ++i) remote[i] = v[i];
    }
    cluster.sync();  // barrier.cluster arrive.release / wait.acquire: the slots are visible
#pragma unroll
    for (int i = 0; i < N; ++i) {
      A r = slots[turn][0][i];
      for (int b = 1; b < CLUSTER; ++b) r = op(r, slots[turn][b][i]);
      v[i] = r;
    }
    sync.turn ^= 1;
#else
    __trap();  // launchers run clusters only where cluster_capacity found sm_90
#endif
  }
}

template <int CLUSTER, class A, class Op>
__device__ __forceinline__ A cluster_allreduce(A v, Op op, A (&slots)[2][CLUSTER][1], ClusterSync<CLUSTER>& sync) {
  A a[1] = {v};
  cluster_allreduce<CLUSTER>(a, op, slots, sync);
  return a[0];
}

// A launch configuration with a cluster dimension along x (cudaLaunchKernelEx,
// cudaOccupancyMaxActiveClusters). Not copyable: cfg points at attr.
struct ClusterLaunch {
  cudaLaunchAttribute attr{};
  cudaLaunchConfig_t cfg{};
  ClusterLaunch(unsigned grid, int threads, int cluster, size_t smem, cudaStream_t stream) {
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = unsigned(cluster);
    attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(unsigned(threads));
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
  }
  ClusterLaunch(const ClusterLaunch&) = delete;
  ClusterLaunch& operator=(const ClusterLaunch&) = delete;
};

// Clusters of `cluster` blocks of Kernel (`threads` each, `smem` dynamic
// bytes) that fit on the current device at once; 0 when none do or the device
// has no clusters (before sm_90). Sizes above 8 are opted into here. Asked
// once per device and kernel.
template <auto Kernel>
int cluster_capacity(int threads, int cluster, size_t smem = 0) {
  static std::atomic<int> known[64];  // the answer + 1; 0: not asked yet
  int dev = 0, major = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) {
    cudaGetLastError();
    return 0;
  }
  if (const int k = known[dev].load(std::memory_order_relaxed)) return k - 1;
  int n = 0;
  const ClusterLaunch launch(unsigned(cluster), threads, cluster, smem, nullptr);
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess || major < 9 ||
      (cluster > 8 && cudaFuncSetAttribute(Kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess) ||
      cudaOccupancyMaxActiveClusters(&n, Kernel, &launch.cfg) != cudaSuccess) {
    cudaGetLastError();
    n = 0;
  }
  known[dev].store(n + 1, std::memory_order_relaxed);
  return n;
}

// kernel<<<grid, threads, smem, stream>>>(args...) in clusters of `cluster`
// blocks along x (grid a multiple of it); then check_launch.
template <class... P, class... Args>
tc_status launch_clustered(const char* op, void (*kernel)(P...), unsigned grid, int threads, int cluster,
                           size_t smem, cudaStream_t stream, Args... args) {
  const ClusterLaunch launch(grid, threads, cluster, smem, stream);
  TC_RETURN_IF_ERROR(cuda_status(op, "cluster launch", cudaLaunchKernelEx(&launch.cfg, kernel, P(args)...)));
  return check_launch(op);
}

// f(std::integral_constant<int, c>{}) for a cluster size c of 2, 4, 8 or 16.
template <class F>
decltype(auto) with_cluster_size(int c, F f) {
  switch (c) {
    case 2: return f(std::integral_constant<int, 2>{});
    case 4: return f(std::integral_constant<int, 4>{});
    case 8: return f(std::integral_constant<int, 8>{});
    default: return f(std::integral_constant<int, 16>{});
  }
}

// The smallest cluster size (2, 4, 8, 16) of at least `blocks` blocks that
// the device runs: capacity(std::integral_constant<int, C>{}) is
// cluster_capacity of the kernel that size would launch. 0: more than 16
// blocks, or none runs.
template <class Capacity>
int cluster_for(int64_t blocks, Capacity capacity) {
  if (blocks > 16) return 0;
  int c = 2;
  while (c < blocks) c *= 2;
  return with_cluster_size(c, [&](auto size) { return capacity(size) > 0 ? int(decltype(size)::value) : 0; });
}
