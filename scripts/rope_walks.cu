// rope_walks: which walk over (token, head, chunk) lets rope reach copy
// bandwidth? A standalone timing of the shipped kernel (tc_rope_cuda: a
// thread a (token, head, chunk)) against the walk it replaced (a block a
// token, every head of it, cos and sin held across the heads) and against a
// plain device copy and a copy through the old walk, for
// the two layouts rope meets: the forward of Hugging Face's q and k (a
// [B, S, H, D] projection viewed [B, H, S, D]: token-major in, contiguous
// [B, H, S, D] out) and the backward (both contiguous [B, H, S, D]).
//
//   nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a -Icsrc/include \
//        scripts/rope_walks.cu csrc/cuda/rope.cu csrc/shared/common.cpp -o /tmp/rope_walks
//   /tmp/rope_walks            # prints a table: us and TB/s (q, k read and written once)
//
// CUDA events, the L2 flushed (a 256 MB memset) before every rep, median of 30.
#include <cstring>
#include <functional>

#include "timing.cuh"
#include "../csrc/cuda/kit/vec.cuh"
#include "../csrc/shared/rope_math.h"
#include "tinycuda/rope.h"

namespace walks {
using T = __nv_bfloat16;
constexpr int V = 8;

// The walk rope.cu had before. A block is (chunks, TT tokens, L head lanes); thread (c, ti, l) does chunk c of
// token tile*TT + ti for heads l, l + L, ...: G heads' loads issued before any
// store (x and out may alias in place; a thread only touches its own vectors,
// so hoisting by hand is safe where the compiler may not). MATH = false: a
// plain copy through the same walk (the pattern's ceiling).
template <int G, bool MATH>
__global__ void __launch_bounds__(512) tiles(const tc_rope_params p) {
  const int64_t D = p.head_dim, tokens = p.batch * p.seqlen, heads = p.heads_q + p.heads_k;
  const int64_t t = int64_t(blockIdx.x) * blockDim.y + threadIdx.y;
  if (t >= tokens) return;
  const int64_t b = t / p.seqlen, s = t - b * p.seqlen;
  const int64_t c = threadIdx.x, e0 = c * V, e1 = e0 + D / 2;
  const T* cs = static_cast<const T*>(p.cos) + b * p.cs_stride_b + s * D;
  const T* sn = static_cast<const T*>(p.sin) + b * p.cs_stride_b + s * D;
  Vec<T, V> c0, c1, s0, s1;
  if (MATH) c0 = load_vec<T, V>(cs + e0), c1 = load_vec<T, V>(cs + e1), s0 = load_vec<T, V>(sn + e0), s1 = load_vec<T, V>(sn + e1);
  for (int64_t h0 = threadIdx.z; h0 < heads; h0 += int64_t(G) * blockDim.z) {
    Vec<T, V> xa[G], xb[G];
    T* out[G];
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const int64_t head = h0 + int64_t(g) * blockDim.z;
      out[g] = nullptr;
      if (head >= heads) continue;
      const bool q = head < p.heads_q;
      const int64_t h = q ? head : head - p.heads_q;
      const T* x = static_cast<const T*>(q ? p.q : p.k) + b * (q ? p.q_stride[0] : p.k_stride[0]) +
                   h * (q ? p.q_stride[1] : p.k_stride[1]) + s * (q ? p.q_stride[2] : p.k_stride[2]);
      out[g] = static_cast<T*>(q ? p.q_out : p.k_out) + b * (q ? p.q_out_stride[0] : p.k_out_stride[0]) +
               h * (q ? p.q_out_stride[1] : p.k_out_stride[1]) + s * (q ? p.q_out_stride[2] : p.k_out_stride[2]);
      xa[g] = load_vec<T, V>(x + e0);
      xb[g] = load_vec<T, V>(x + e1);
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      if (!out[g]) continue;
      if (MATH) {
#pragma unroll
        for (int j = 0; j < V; ++j) {
          float o0, o1;
          rope_pair<float>(to_acc(xa[g].v[j]), to_acc(xb[g].v[j]), to_acc(c0.v[j]), to_acc(c1.v[j]),
                           to_acc(s0.v[j]), to_acc(s1.v[j]), o0, o1);
          xa[g].v[j] = from_acc<T>(o0);
          xb[g].v[j] = from_acc<T>(o1);
        }
      }
      store_vec(out[g] + e0, xa[g]);
      store_vec(out[g] + e1, xb[g]);
    }
  }
}

template <int G, bool MATH>
void launch(const tc_rope_params& p, int tt, int lanes) {
  const int chunks = int(p.head_dim / 2 / V);
  const int64_t tokens = p.batch * p.seqlen;
  tiles<G, MATH><<<unsigned((tokens + tt - 1) / tt), dim3(chunks, tt, lanes)>>>(p);
  CK(cudaGetLastError());
}

}  // namespace walks

struct Case {
  const char* name;
  int b, s, hq, hk, d;
};

int main() {
  const Case cases[] = {{"1x2048x32x8", 1, 2048, 32, 8, 128}, {"4x4096x32x8", 4, 4096, 32, 8, 128},
                        {"4x4096x32x32", 4, 4096, 32, 32, 128}, {"2x4096x64x8", 2, 4096, 64, 8, 128}};
  std::printf("%-14s %-4s %-34s %9s %7s\n", "shape", "dir", "walk", "us", "TB/s");
  for (const Case& c : cases) {
    const int64_t nq = int64_t(c.b) * c.s * c.hq * c.d, nk = int64_t(c.b) * c.s * c.hk * c.d;
    void *q, *k, *qo, *ko, *cs, *sn;
    CK(cudaMalloc(&q, nq * 2));
    CK(cudaMalloc(&k, nk * 2));
    CK(cudaMalloc(&qo, nq * 2));
    CK(cudaMalloc(&ko, nk * 2));
    CK(cudaMalloc(&cs, int64_t(c.s) * c.d * 2));
    CK(cudaMalloc(&sn, int64_t(c.s) * c.d * 2));
    {  // random bits in a bf16 range: rope's arithmetic on real numbers
      std::vector<uint16_t> h(std::max(nq, nk));
      for (auto& v : h) v = uint16_t(0x3c00 + (std::rand() & 0x3ff)) | uint16_t((std::rand() & 1) << 15);
      CK(cudaMemcpy(q, h.data(), nq * 2, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(k, h.data(), nk * 2, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(cs, h.data(), int64_t(c.s) * c.d * 2, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(sn, h.data() + 7, int64_t(c.s) * c.d * 2, cudaMemcpyHostToDevice));
    }
    const double bytes = 2.0 * 2 * (nq + nk);
    for (int dir = 0; dir < 2; ++dir) {
      tc_rope_params p{};
      p.dtype = TC_BFLOAT16;
      p.batch = c.b, p.seqlen = c.s, p.heads_q = c.hq, p.heads_k = c.hk, p.head_dim = c.d;
      p.q = q, p.k = k, p.q_out = qo, p.k_out = ko, p.cos = cs, p.sin = sn;
      p.table_rows = c.s, p.transpose = dir;
      // out: contiguous [B, H, S, D]; in: fwd token-major ([B, S, H, D] memory), bwd contiguous
      const int64_t hq = c.hq, hk = c.hk, S = c.s, D = c.d;
      int64_t qs[3] = {S * hq * D, D, hq * D}, ks[3] = {S * hk * D, D, hk * D};
      int64_t qc[3] = {hq * S * D, S * D, D}, kc[3] = {hk * S * D, S * D, D};
      for (int i = 0; i < 3; ++i) {
        p.q_stride[i] = dir ? qc[i] : qs[i], p.k_stride[i] = dir ? kc[i] : ks[i];
        p.q_out_stride[i] = qc[i], p.k_out_stride[i] = kc[i];
      }
      struct W {
        const char* name;
        std::function<void()> f;
      };
      std::vector<W> ws;
      ws.push_back({"memcpy (same layout)", [&] {
                      CK(cudaMemcpyAsync(qo, q, nq * 2, cudaMemcpyDeviceToDevice));
                      CK(cudaMemcpyAsync(ko, k, nk * 2, cudaMemcpyDeviceToDevice));
                    }});
      ws.push_back({"shipped tc_rope_cuda", [&] {
                      if (tc_rope_cuda(&p) != TC_OK) std::exit(2);
                    }});
      char* names = new char[64 * 64];
      int ni = 0;
      // the walk rope.cu had before: a block a token, all its heads, cos/sin held across them (here with
      // 1, 2 or 4 heads' loads in flight a thread); and a plain copy through that walk
      for (int g : {1, 2, 4}) {
        char* n = names + 64 * ni++;
        std::snprintf(n, 64, "token walk, %d head%s in flight", g, g > 1 ? "s" : "");
        ws.push_back({n, [&, g] {
                        if (g == 1) walks::launch<1, true>(p, 1, 8);
                        if (g == 2) walks::launch<2, true>(p, 1, 8);
                        if (g == 4) walks::launch<4, true>(p, 1, 8);
                      }});
      }
      ws.push_back({"copy through the token walk", [&] { walks::launch<4, false>(p, 1, 8); }});
      // the shipped kernel's output, bit for bit, is what every rotating walk must write
      std::vector<uint16_t> ref_q(nq), ref_k(nk), got_q(nq), got_k(nk);
      if (tc_rope_cuda(&p) != TC_OK) std::exit(2);
      CK(cudaMemcpy(ref_q.data(), qo, nq * 2, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(ref_k.data(), ko, nk * 2, cudaMemcpyDeviceToHost));
      for (auto& w : ws) {
        CK(cudaMemset(qo, 0xff, nq * 2));
        CK(cudaMemset(ko, 0xff, nk * 2));
        w.f();
        if (dir == 0 && std::strncmp(w.name, "token", 5) == 0) {
          CK(cudaMemcpy(got_q.data(), qo, nq * 2, cudaMemcpyDeviceToHost));
          CK(cudaMemcpy(got_k.data(), ko, nk * 2, cudaMemcpyDeviceToHost));
          if (got_q != ref_q || got_k != ref_k) std::printf("MISMATCH %s %s %s\n", c.name, dir ? "bwd" : "fwd", w.name);
        }
        const double us = median_us(w.f);
        std::printf("%-14s %-4s %-34s %9.1f %7.2f\n", c.name, dir ? "bwd" : "fwd", w.name, us, bytes / us * 1e-6);
      }
      delete[] names;
    }
    for (void* x : {q, k, qo, ko, cs, sn}) CK(cudaFree(x));
  }
  return 0;
}
