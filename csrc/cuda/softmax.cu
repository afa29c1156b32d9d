// softmax / log_softmax over the last dim of [rows, cols], and their backward.
//
// Bytes: the forward must read x and write y (2 * rows * cols * itemsize), the
// backward read grad_y and y and write grad_x (3x). Both are memory-bound
// (~10 FLOPs an element), so the goal is copy bandwidth: 3.0 TB/s on an H100.
//
// Two kernels a direction, chosen by the launcher (or tc_softmax_algo):
//  REGISTERS  the row lives in registers: WIDTH threads a row (8..256, the
//             fewest that hold it in 4 16-byte vectors a thread; 512 threads of
//             8 vectors beyond), 256 / WIDTH rows a block (rows of 256 bf16: 8
//             threads, 4 rows a warp, their reductions 3 shuffles deep). Each thread issues
//             its loads before using any, and at most 64 registers keep 1024
//             threads an SM resident: 64 KB in flight an SM, ~3x what Little's
//             law asks at 3 TB/s and ~1 us of latency. max, then
//             sum(exp(x - m)) from registers, then y: x is read from memory
//             once. One block covers cols <= 4096 vectors (32768 bf16, 16384
//             fp32) when cols is a multiple of the vector width; on sm_90 a
//             cluster of 2..16 such blocks covers up to 16x that (524288
//             bf16), each reduction ending in one cluster barrier
//             (kit/cluster.cuh). Without it (ONLINE, x read twice, 256 threads
//             a row) 65536 bf16 ran at 1.20 TB/s, 262144 at 0.76.
//  ONLINE     scalar loads, a warp a row up to 1024 columns, a block beyond:
//             one online pass for (max, sum) (softmax_math.h), one writing y.
//             x is read twice (the second time mostly from L2). The fallback
//             for odd widths, misaligned pointers and rows too long for
//             registers; also the baseline the REGISTERS variant is measured
//             against (docs/BENCHMARKS.md).
// NaN / inf: max uses fmax (which skips NaN), but a NaN or +inf then makes
// sum(exp(x - m)) NaN, and an all -inf row makes x - m NaN: such rows come
// out NaN, as in torch, without a special case.
#include "../shared/softmax_check.h"
#include "../shared/softmax_math.h"
#include "kit/cluster.cuh"
#include "kit/reduce.cuh"
#include "kit/vec.cuh"

namespace {

constexpr int kMaxRegisterCols = 4096;  // in 16-byte vectors: 32768 bf16, 16384 fp32

// ---------------------------------------------------------------------------
// REGISTERS kernels: WIDTH threads a row, max(256, WIDTH) threads a block

template <int WIDTH>
constexpr int kBlockOf = WIDTH > 256 ? WIDTH : 256;

// The row's vectors this thread holds: j = lane + k * STRIDE, k < VECS
// (STRIDE: the threads of a row, over all the blocks of its cluster).
// Rows past the end (`live` false) hold nothing but still reach the barriers.
template <class T, int STRIDE, int VECS>
struct RowSlice {
  Vec<T> v[VECS];
  bool has[VECS];

  __device__ __forceinline__ void load(const T* row, int64_t nvec, int lane, bool live) {
#pragma unroll
    for (int k = 0; k < VECS; ++k) {
      const int64_t j = lane + int64_t(k) * STRIDE;
      has[k] = live && j < nvec;
      if (has[k]) v[k] = load_vec(row + j * Vec<T>::size);
    }
  }
};

// CLUSTER > 1: a row spans the cluster's blocks (WIDTH = the block), block
// `rank` holding every CLUSTER-th run of WIDTH vectors; the reductions end in
// cluster_allreduce (kit/cluster.cuh).
template <class T, int WIDTH, int VECS, int CLUSTER>
__global__ void __launch_bounds__(kBlockOf<WIDTH>, 1024 / kBlockOf<WIDTH>)
softmax_registers_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t cols, int log) {
  using A = acc_t<T>;
  using C = ClusterRow<CLUSTER>;
  constexpr int N = Vec<T>::size, kRowsPerBlock = kBlockOf<WIDTH> / WIDTH, kStride = WIDTH * CLUSTER;
  __shared__ A scratch[32];
  __shared__ A slots[2][CLUSTER][1];
  ClusterSync<CLUSTER> sync;
  const int lane = C::rank() * WIDTH + threadIdx.x % WIDTH;
  const int64_t nvec = cols / N;
  // uniform over the cluster (its barriers)
  for (int64_t first = C::id() * kRowsPerBlock; first < rows; first += C::count() * kRowsPerBlock) {
    const int64_t r = first + threadIdx.x / WIDTH;
    RowSlice<T, kStride, VECS> in;
    in.load(x + r * cols, nvec, lane, r < rows);
    A m = -INFINITY;
#pragma unroll
    for (int k = 0; k < VECS; ++k)
      if (in.has[k])
#pragma unroll
        for (int i = 0; i < N; ++i) m = fmax(m, A(to_acc(in.v[k].v[i])));
    m = cluster_allreduce<CLUSTER>(row_reduce<WIDTH>(m, Max{}, scratch), Max{}, slots, sync);
    launder(in.v);
    A s = 0;
#pragma unroll
    for (int k = 0; k < VECS; ++k)
      if (in.has[k])
#pragma unroll
        for (int i = 0; i < N; ++i) s += ::exp(A(to_acc(in.v[k].v[i])) - m);
    s = cluster_allreduce<CLUSTER>(row_reduce<WIDTH>(s, Sum{}, scratch), Sum{}, slots, sync);
    // exp is computed again rather than kept: 32 floats a thread instead of 16
    // packed registers would not fit the 64-register budget.
    launder(in.v);
    const A log_s = ::log(s), inv_s = A(1) / s;
#pragma unroll
    for (int k = 0; k < VECS; ++k) {
      if (!in.has[k]) continue;
      Vec<T> out;
#pragma unroll
      for (int i = 0; i < N; ++i) {
        const A v = A(to_acc(in.v[k].v[i])) - m;
        out.v[i] = from_acc<T>(log ? v - log_s : ::exp(v) * inv_s);
      }
      store_vec(y + r * cols + (lane + int64_t(k) * kStride) * N, out);
    }
  }
}

// Two rows' slices (grad_y and y) a thread: half the threads of the forward
// keep as many bytes in flight, so 128 registers (512 threads an SM) rather
// than 64, which spilled ~90 bytes a thread in bf16.
template <class T, int WIDTH, int VECS, int CLUSTER>
__global__ void __launch_bounds__(kBlockOf<WIDTH>, 512 / kBlockOf<WIDTH>)
softmax_backward_registers_kernel(const T* __restrict__ g, const T* __restrict__ y, T* __restrict__ gx,
                                  int64_t rows, int64_t cols, int log) {
  using A = acc_t<T>;
  using C = ClusterRow<CLUSTER>;
  constexpr int N = Vec<T>::size, kRowsPerBlock = kBlockOf<WIDTH> / WIDTH, kStride = WIDTH * CLUSTER;
  __shared__ A scratch[32];
  __shared__ A slots[2][CLUSTER][1];
  ClusterSync<CLUSTER> sync;
  const int lane = C::rank() * WIDTH + threadIdx.x % WIDTH;
  const int64_t nvec = cols / N;
  for (int64_t first = C::id() * kRowsPerBlock; first < rows; first += C::count() * kRowsPerBlock) {
    const int64_t r = first + threadIdx.x / WIDTH;
    RowSlice<T, kStride, VECS> gs, ys;
    gs.load(g + r * cols, nvec, lane, r < rows);
    ys.load(y + r * cols, nvec, lane, r < rows);
    A dot = 0;
#pragma unroll
    for (int k = 0; k < VECS; ++k)
      if (gs.has[k])
#pragma unroll
        for (int i = 0; i < N; ++i)
          dot += log ? A(to_acc(gs.v[k].v[i])) : A(to_acc(gs.v[k].v[i])) * A(to_acc(ys.v[k].v[i]));
    dot = cluster_allreduce<CLUSTER>(row_reduce<WIDTH>(dot, Sum{}, scratch), Sum{}, slots, sync);
    launder(gs.v);
    launder(ys.v);
#pragma unroll
    for (int k = 0; k < VECS; ++k) {
      if (!gs.has[k]) continue;
      Vec<T> out;
#pragma unroll
      for (int i = 0; i < N; ++i) {
        const A gv = to_acc(gs.v[k].v[i]), yv = to_acc(ys.v[k].v[i]);
        out.v[i] = from_acc<T>(log ? gv - ::exp(yv) * dot : yv * (gv - dot));
      }
      store_vec(gx + r * cols + (lane + int64_t(k) * kStride) * N, out);
    }
  }
}

// ---------------------------------------------------------------------------
// ONLINE kernels: WIDTH threads a row (32 or 256), 256 / WIDTH rows a block

template <class T, int WIDTH>
__global__ void __launch_bounds__(256)
softmax_online_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t cols, int log) {
  using A = acc_t<T>;
  __shared__ MaxSum<A> scratch[32];
  constexpr int kRowsPerBlock = 256 / WIDTH;
  const int lane = threadIdx.x % WIDTH;
  // A block-wide row loop is uniform across the block (it has barriers).
  for (int64_t r = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / WIDTH; r < rows;
       r += int64_t(gridDim.x) * kRowsPerBlock) {
    const T* xr = x + r * cols;
    MaxSum<A> ms{-INFINITY, 0};
    for (int64_t c = lane; c < cols; c += WIDTH) online_add(ms.m, ms.s, A(to_acc(xr[c])));
    ms = row_reduce<WIDTH, 256>(ms, OnlineMerge{}, scratch);
    const A m = ms.m;
    A s = ms.s;
    online_finish(m, s);
    const A log_s = ::log(s), inv_s = A(1) / s;
    T* yr = y + r * cols;
    for (int64_t c = lane; c < cols; c += WIDTH) {
      const A v = A(to_acc(xr[c])) - m;
      yr[c] = from_acc<T>(log ? v - log_s : ::exp(v) * inv_s);
    }
  }
}

template <class T, int WIDTH>
__global__ void __launch_bounds__(256)
softmax_backward_online_kernel(const T* __restrict__ g, const T* __restrict__ y, T* __restrict__ gx,
                               int64_t rows, int64_t cols, int log) {
  using A = acc_t<T>;
  __shared__ A scratch[32];
  constexpr int kRowsPerBlock = 256 / WIDTH;
  const int lane = threadIdx.x % WIDTH;
  for (int64_t r = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / WIDTH; r < rows;
       r += int64_t(gridDim.x) * kRowsPerBlock) {
    const T* gr = g + r * cols;
    const T* yr = y + r * cols;
    A dot = 0;
    for (int64_t c = lane; c < cols; c += WIDTH)
      dot += log ? A(to_acc(gr[c])) : A(to_acc(gr[c])) * A(to_acc(yr[c]));
    dot = row_reduce<WIDTH>(dot, Sum{}, scratch);
    T* gxr = gx + r * cols;
    for (int64_t c = lane; c < cols; c += WIDTH) {
      const A gv = to_acc(gr[c]), yv = to_acc(yr[c]);
      gxr[c] = from_acc<T>(log ? gv - ::exp(yv) * dot : yv * (gv - dot));
    }
  }
}

// ---------------------------------------------------------------------------
// kernel choice

template <class T, bool BWD, int WIDTH, int VECS, int CLUSTER>
constexpr auto registers_kernel() {
  if constexpr (BWD) return softmax_backward_registers_kernel<T, WIDTH, VECS, CLUSTER>;
  else return softmax_registers_kernel<T, WIDTH, VECS, CLUSTER>;
}

// The blocks that hold a row in registers: 1 up to kMaxRegisterCols vectors
// (cols a multiple of the vector, 16-byte aligned pointers), a cluster of
// 2..16 blocks of 512 threads x 8 vectors up to 16x that (524288 bf16, 262144
// fp32) where the device runs one; 0 where neither holds it: ONLINE runs.
template <class T, bool BWD>
int register_blocks(int64_t cols, std::initializer_list<const void*> ptrs) {
  constexpr int N = Vec<T>::size;
  if (cols % N != 0) return 0;
  for (const void* p : ptrs)
    if (!aligned16(p)) return 0;
  const int64_t nvec = cols / N;
  // double stops at 256 x 4 vectors: 512 x 8 of them spill ~350 bytes a thread.
  if constexpr (sizeof(T) == 8) {
    return nvec <= 256 * 4;
  } else {
    if (nvec <= kMaxRegisterCols) return 1;
    return cluster_for((nvec + kMaxRegisterCols - 1) / kMaxRegisterCols, [](auto c) {
      return cluster_capacity<registers_kernel<T, BWD, 512, 8, decltype(c)::value>()>(512, c);
    });
  }
}

// Launches the REGISTERS kernel with the fewest threads a row that hold it in
// 4 vectors each, up to 256 threads; longer rows get 512 threads of 8 vectors,
// in clusters of `blocks` (register_blocks) past one block. (1024 threads of 4
// fill the register file with one block, which then idles through its own
// reductions: 2.36 TB/s at 8192 x 32768 bf16; 2 blocks of 512 overlap them.)
template <class T, bool BWD, class... Args>
tc_status launch_registers(const char* op, int64_t rows, int64_t cols, int blocks, cudaStream_t stream,
                           Args... args) {
  auto go = [&](auto width, auto vecs, auto cluster) -> tc_status {
    constexpr int W = decltype(width)::value, V = decltype(vecs)::value, C = decltype(cluster)::value;
    constexpr int B = kBlockOf<W>;
    constexpr auto kernel = registers_kernel<T, BWD, W, V, C>();
    if constexpr (C == 1) {
      kernel<<<grid_1d(rows, B / W), B, 0, stream>>>(args...);
      return check_launch(op);
    } else {  // a cluster a row (the kernel loops past 2^31 blocks)
      return launch_clustered(op, kernel, grid_1d(rows, 1, INT32_MAX / C) * C, B, C, 0, stream, args...);
    }
  };
  using I = std::integral_constant<int, 1>;
  using Four = std::integral_constant<int, 4>;
  using Eight = std::integral_constant<int, 8>;
  using W512 = std::integral_constant<int, 512>;
  const int64_t nvec = cols / Vec<T>::size;
  if (nvec <= 8 * 4) return go(std::integral_constant<int, 8>{}, Four{}, I{});
  if (nvec <= 16 * 4) return go(std::integral_constant<int, 16>{}, Four{}, I{});
  if (nvec <= 32 * 4) return go(std::integral_constant<int, 32>{}, Four{}, I{});
  if (nvec <= 64 * 4) return go(std::integral_constant<int, 64>{}, Four{}, I{});
  if (nvec <= 128 * 4) return go(std::integral_constant<int, 128>{}, Four{}, I{});
  if constexpr (sizeof(T) == 8) {  // register_blocks stops double at 256 x 4 vectors
    return go(std::integral_constant<int, 256>{}, Four{}, I{});
  } else {
    if (nvec <= 256 * 4) return go(std::integral_constant<int, 256>{}, Four{}, I{});
    if (blocks > 1) return with_cluster_size(blocks, [&](auto c) { return go(W512{}, Eight{}, c); });
    return go(W512{}, Eight{}, I{});
  }
}

// Rows up to 1024 columns: a warp each; longer: a block each.
template <class Launch>
void by_online_width(int64_t rows, int64_t cols, Launch launch) {
  if (cols <= 1024) launch(std::integral_constant<int, 32>{}, grid_1d(rows, 8));
  else launch(std::integral_constant<int, 256>{}, grid_1d(rows, 1));
}

}  // namespace

// ---------------------------------------------------------------------------
// launchers

tc_status tc_softmax_cuda(const tc_softmax_params* p) {
  TC_RETURN_IF_ERROR(softmax_check(p));
  TC_REQUIRE(p->algo >= TC_SOFTMAX_AUTO && p->algo <= TC_SOFTMAX_REGISTERS,
             "softmax: algo must be 0 (auto), 1 (online) or 2 (registers), got %d", int(p->algo));
  if (p->rows * p->cols == 0) return TC_OK;
  return dispatch_cuda(p->dtype, "softmax", [&](auto tag) -> tc_status {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(p->x);
    T* y = static_cast<T*>(p->y);
    cudaStream_t stream = as_stream(p->stream);
    const int blocks = register_blocks<T, false>(p->cols, {x, y});
    TC_REQUIRE(blocks || p->algo != TC_SOFTMAX_REGISTERS,
               "softmax: algo 2 (registers) needs cols a multiple of %d and at most %lld (16 blocks of a "
               "cluster on sm_90, else %lld), and 16-byte aligned x and y; got cols %lld",
               Vec<T>::size, (long long)(sizeof(T) == 8 ? 256 * 4 : 16 * kMaxRegisterCols) * Vec<T>::size,
               (long long)(sizeof(T) == 8 ? 256 * 4 : kMaxRegisterCols) * Vec<T>::size, (long long)p->cols);
    if (blocks && p->algo != TC_SOFTMAX_ONLINE)
      return launch_registers<T, false>("softmax", p->rows, p->cols, blocks, stream, x, y, p->rows, p->cols,
                                        p->log);
    by_online_width(p->rows, p->cols, [&](auto width, unsigned grid) {
      softmax_online_kernel<T, decltype(width)::value><<<grid, 256, 0, stream>>>(x, y, p->rows, p->cols, p->log);
    });
    return check_launch("softmax");
  });
}

tc_status tc_softmax_backward_cuda(const tc_softmax_backward_params* p) {
  const char* op = "softmax_backward";
  TC_RETURN_IF_ERROR(softmax_check(p));
  if (p->rows * p->cols == 0) return TC_OK;
  return dispatch_cuda(p->dtype, op, [&](auto tag) -> tc_status {
    using T = decltype(tag);
    const T* g = static_cast<const T*>(p->grad_y);
    const T* y = static_cast<const T*>(p->y);
    T* gx = static_cast<T*>(p->grad_x);
    cudaStream_t stream = as_stream(p->stream);
    if (const int blocks = register_blocks<T, true>(p->cols, {g, y, gx}))
      return launch_registers<T, true>(op, p->rows, p->cols, blocks, stream, g, y, gx, p->rows, p->cols, p->log);
    by_online_width(p->rows, p->cols, [&](auto width, unsigned grid) {
      softmax_backward_online_kernel<T, decltype(width)::value><<<grid, 256, 0, stream>>>(
          g, y, gx, p->rows, p->cols, p->log);
    });
    return check_launch(op);
  });
}
