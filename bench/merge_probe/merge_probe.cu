// How fast can one CTA read partials that the other CTAs of its grid have just written? The fused merge
// (src/ops/cuda/sm90/decode/fused_merge.cuh) runs at ~1.3 us per round of ld.global.cg loads on the H200 (NOTES.md
// "Session 24" item 3), 3-4x an L2 round trip; this probe times the same protocol outside the decode kernels.
//
// Grid of G CTAs x 256 threads. Each CTA stores its piece (bytes_per_piece of floats, as a decode CTA stores its
// partial), arrives on a counter (bar.sync, fence, atomicAdd), and the last arriver sums the G pieces and stores the
// sum with one of the read methods below. The merge's cost is the kernel's time minus the time of the same kernel whose
// last arriver reads nothing (method kNone). Every method's sum is checked against the host's.
// H200, session 25 (bench/decode/NOTES.md "Session 25", with one launch per event pair then): 8 x 2 loads in flight
// per thread read 128 pieces of 32 KB in 30 us (139 GB/s) where the fused merge of the same bytes took ~165 us; the
// merge was instruction-bound.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "common/dev_mem.h"
#include "merge_probe.h"
#include "mla/core/cuda_check.h"

namespace mla::bench {
namespace {

constexpr const char* kOp = "merge_probe";
constexpr int kThreads = 256;

enum Method : int { kNone = 0, kLdcg8 = 1, kLdcg16 = 2, kNumMethods = 3 };
const char* const kMethodNames[kNumMethods] = {"none", "ldcg 8x2", "ldcg 16x2"};

__device__ __forceinline__ float value_of(int piece, int i) { return static_cast<float>((piece * 7 + i) % 13) - 6.f; }

// Register loads (the fused merge's form: ld.global.cg, all issued before use): kCols float4 columns of kK pieces in
// flight per thread, i.e. kCols x kK x 16 bytes; the fused merge runs 8 x 2 (kRows x kSplits).
template <int kCols, int kK>
__device__ void read_ldcg(const float4* parts, int g, int q, float4* out) {
  for (int c0 = threadIdx.x; c0 < q; c0 += kThreads * kCols) {
    float4 acc[kCols];
#pragma unroll
    for (int i = 0; i < kCols; ++i) acc[i] = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int k0 = 0; k0 < g; k0 += kK) {
      float4 v[kK][kCols];
#pragma unroll
      for (int k = 0; k < kK; ++k)
#pragma unroll
        for (int i = 0; i < kCols; ++i)
          v[k][i] = __ldcg(parts + static_cast<int64_t>(min(k0 + k, g - 1)) * q + min(c0 + i * kThreads, q - 1));
#pragma unroll
      for (int k = 0; k < kK; ++k) {
        const float w = k0 + k < g ? 1.f : 0.f;
#pragma unroll
        for (int i = 0; i < kCols; ++i) {
          acc[i].x += w * v[k][i].x;
          acc[i].y += w * v[k][i].y;
          acc[i].z += w * v[k][i].z;
          acc[i].w += w * v[k][i].w;
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kCols; ++i)
      if (c0 + i * kThreads < q) out[c0 + i * kThreads] = acc[i];
  }
}

__global__ void __launch_bounds__(kThreads, 1)
    probe_kernel(float4* parts, float4* out, int* counter, int q, int method) {
  __shared__ int last;
  const int g = gridDim.x, piece = blockIdx.x;
  for (int c = threadIdx.x; c < q; c += kThreads) {
    const int i = 4 * c;
    parts[static_cast<int64_t>(piece) * q + c] =
        make_float4(value_of(piece, i), value_of(piece, i + 1), value_of(piece, i + 2), value_of(piece, i + 3));
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    last = atomicAdd(counter, 1) == g - 1;
    if (last) {
      *counter = 0;
      __threadfence();
    }
  }
  __syncthreads();
  if (!last) return;
  switch (method) {
    case kLdcg8: read_ldcg<8, 2>(parts, g, q, out); break;
    case kLdcg16: read_ldcg<16, 2>(parts, g, q, out); break;
    default: break;
  }
}

// Launches per event pair: a single merge of 2-8 pieces is ~1 us, near the events' resolution, so each timing spans
// kLaunches launches back to back (each one's last arriver resets the counter for the next).
constexpr int kLaunches = 10;

}  // namespace

Status run_merge_probe(int reps) {
  if (reps < 1) return Status::invalid(kOp, "reps must be >= 1, got " + std::to_string(reps));
  const int grids[] = {2, 4, 8, 32, 128};
  const int piece_kb[] = {32, 128};
  const int in_flight_cols[kNumMethods] = {0, 8, 16};  // kCols of each register method (columns per thread and batch)
  const int max_q = 128 * 1024 / 16;
  DevMem<float4> parts, out;
  DevMem<int> counter;
  MLA_TRY(parts.alloc(static_cast<size_t>(128) * max_q, kOp));
  MLA_TRY(out.alloc(max_q, kOp));
  MLA_TRY(counter.alloc(1, kOp));
  MLA_CUDA_TRY(kOp, cudaMemset(counter.p, 0, 4));
  EventPair ev;
  MLA_TRY(ev.create(kOp));
  std::printf("# merge_probe: G CTAs store a piece each, the last arriver sums them; median of %d timings of %d "
              "launches, us per launch\n", reps, kLaunches);
  std::printf("# merge = kernel - kernel(none); GB/s = G x piece / merge; n/a: a piece narrower than the method's "
              "256 threads x columns (its loads would repeat addresses)\n");
  std::printf("| piece KB | G | none us |");
  for (int m = 1; m < kNumMethods; ++m) std::printf(" %s merge us (GB/s) |", kMethodNames[m]);
  std::printf("\n");
  for (const int kb : piece_kb)
    for (const int g : grids) {
      const int q = kb * 1024 / 16;
      double med[kNumMethods];
      for (int m = 0; m < kNumMethods; ++m) {
        med[m] = -1.0;
        if (m != kNone && q < kThreads * in_flight_cols[m]) continue;
        MLA_CUDA_TRY(kOp, cudaMemset(out.p, 0xFF, static_cast<size_t>(q) * 16));  // NaN: a method must write it all
        std::vector<float> t;
        for (int r = 0; r < reps + 2; ++r) {
          MLA_CUDA_TRY(kOp, cudaEventRecord(ev.start));
          for (int l = 0; l < kLaunches; ++l) probe_kernel<<<g, kThreads>>>(parts.p, out.p, counter.p, q, m);
          MLA_CUDA_TRY(kOp, cudaEventRecord(ev.stop));
          MLA_CUDA_TRY(kOp, cudaEventSynchronize(ev.stop));
          float ms = 0.f;
          MLA_CUDA_TRY(kOp, cudaEventElapsedTime(&ms, ev.start, ev.stop));
          if (r >= 2) t.push_back(ms * 1000.f / kLaunches);
        }
        MLA_CUDA_TRY_LAUNCH(kOp);
        std::sort(t.begin(), t.end());
        med[m] = t[t.size() / 2];
        if (m == kNone) continue;
        // The sum: every method must read every piece.
        std::vector<float> host(static_cast<size_t>(q) * 4);
        MLA_CUDA_TRY(kOp, cudaMemcpy(host.data(), out.p, host.size() * 4, cudaMemcpyDeviceToHost));
        for (int i = 0; i < q * 4; i += 97) {
          float want = 0.f;
          for (int k = 0; k < g; ++k) want += static_cast<float>((k * 7 + i) % 13) - 6.f;
          if (host[i] != want)
            return Status::internal(kOp, std::string(kMethodNames[m]) + " G " + std::to_string(g) + " piece " +
                                             std::to_string(kb) + " KB: out[" + std::to_string(i) + "] = " +
                                             std::to_string(host[i]) + ", want " + std::to_string(want));
        }
      }
      std::printf("| %d | %d | %.2f |", kb, g, med[0]);
      for (int m = 1; m < kNumMethods; ++m) {
        const double us = med[m] - med[0];
        if (med[m] < 0)
          std::printf(" n/a |");
        else
          std::printf(" %.2f (%.0f) |", us, us > 0 ? g * kb * 1024.0 / (us * 1e3) : 0.0);
      }
      std::printf("\n");
    }
  return Status::ok();
}

}  // namespace mla::bench
