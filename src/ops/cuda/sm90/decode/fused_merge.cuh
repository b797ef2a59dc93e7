#pragma once
// The fused merge: with DecodeKernelParams::merge_counters set, a decode kernel merges the split sequences itself and
// the call launches no combine grid. Where nothing merges (large batches of whole sequences), the combine grid's mere
// existence cost 1.7-3.3 us a call at h_q 128 and 0.7-1.1 at h_q 16 (H200, bench/decode/NOTES_plan.md "Session 21"
// item 2; "Session 10, tail" ko 1: 2-6 us on the b128 rows). The caller picks it per step by passing the plan's
// merge_counters (decode_plan_wants_fused_merge: one CTA merging a sequence of many pieces is far slower than the
// combine grid, NOTES.md "Session 24"); mla_decode.cu then launches the kernels' kFused instantiations.
//
// Protocol, per (sequence b, head tile) with n >= 2 pieces: the CTA writing a piece stores its partial as for the
// combine; after its part its writer threads meet at a named barrier, one of them adds 1 to b's counter (release), and
// the CTA that brings it to n (acquire) resets it to 0 and merges the tile's rows from the n partials with the same
// threads. No CTA waits for another, so any grid size is safe. The counters start at 0 (plan_decode zeroes them at
// every step) and every call leaves them at 0, so each layer of a step finds them so.
// Sequences without keys (no piece) get out 0, lse -inf (FusedMerges::zero_empty), as the combine writes them.
#include <cuda_bf16.h>

#include <cstdint>

#include "mla/core/mla_shapes.h"
#include "mla/ops/plan_decode.h"
#include "ops/cuda/sm90/decode/merge_store.cuh"
#include "ops/cuda/sm90/decode/params.h"
#include "ops/cuda/sm90/decode/partials.h"
#include "ops/cuda/sm90/decode/row_end.cuh"  // merge_weight, row_inv, row_lse
#include "ops/cuda/sm90/decode/tma.h"

namespace mla::sm90::decode {

constexpr int kBarFusedMerge = 12;  // named barrier of the writers (every decode kernel uses ids 1-7 otherwise)

// L2-coherent loads (ld.global.cg): the partials were written during this grid by other SMs, so never through a
// possibly stale L1 line or the read-only path.
template <class PT>
__device__ __forceinline__ float4 ld4_cg(const PT* p);
template <>
__device__ __forceinline__ float4 ld4_cg<float>(const float* p) {
  return __ldcg(reinterpret_cast<const float4*>(p));
}
template <>
__device__ __forceinline__ float4 ld4_cg<__nv_bfloat16>(const __nv_bfloat16* p) {
  const uint2 u = __ldcg(reinterpret_cast<const uint2*>(p));
  const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.x));
  const float2 c = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.y));
  return make_float4(a.x, a.y, c.x, c.y);
}

// Merges the n partials (slots first .. first + n - 1) of sequence b's rows in this CTA's head tile into out / lse,
// with the combine's math: weights exp(lse_k - max), normalized; no visible key in any piece gives out 0, lse -inf.
// Thread t of kWriters (128 or 256) owns float4 t % 128 of the 512 partial values (partials.h order) of rows t / 128,
// t / 128 + kWriters / 128, ...; kRows of those rows at a time with the loads of kSplits = 2 pieces in flight (8 kRows
// registers of loads), so a 64-row tile of 2 pieces is 4 L2 round trips at 256 writers and kRows 8, a 16-row tile 1-4.
template <class Traits, class PT, int kWriters, int kRows>
__device__ __forceinline__ void fused_merge_tile(const DecodeKernelParams& p, int b, int first, int n, int t) {
  constexpr int kSplits = 2, kHalves = kWriters / 128;
  static_assert(kWriters == 128 || kWriters == 256, "one or two writer warpgroups");
  const int row0 = blockIdx.y * kDecodeRowsPerCta;
  const int rows = min(kDecodeRowsPerCta, p.rows - row0);
  const int f = t % 128, half = t / 128;
  const int64_t stride = static_cast<int64_t>(p.rows) * kDimV;
  const PT* src = reinterpret_cast<const PT*>(p.o_accum) + (static_cast<int64_t>(first) * p.rows + row0) * kDimV + 4 * f;
  const float* lse_k = p.lse_accum + static_cast<int64_t>(first) * p.rows + row0;
  for (int r0 = half; r0 < rows; r0 += kRows * kHalves) {
    float m[kRows], s[kRows];
    float4 acc[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      m[r] = -INFINITY;
      s[r] = 0.f;
      acc[r] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    for (int k0 = 0; k0 < n; k0 += kSplits) {
      float4 v[kSplits][kRows];
      float l[kSplits][kRows];
#pragma unroll
      for (int kk = 0; kk < kSplits; ++kk)
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          // Past the tile's rows or past n: load a valid row / piece again, weighted 0 or not stored.
          const int k = min(k0 + kk, n - 1), row = min(r0 + kHalves * r, rows - 1);
          v[kk][r] = ld4_cg<PT>(src + k * stride + static_cast<int64_t>(row) * kDimV);
          l[kk][r] = k0 + kk < n ? __ldcg(lse_k + static_cast<int64_t>(k) * p.rows + row) : -INFINITY;
        }
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        float mb = m[r];
#pragma unroll
        for (int kk = 0; kk < kSplits; ++kk) mb = fmaxf(mb, l[kk][r]);
        if (mb == -INFINITY) continue;  // no visible key so far (s and acc still 0)
        const float sc = merge_weight(m[r], mb);
        s[r] *= sc;
        acc[r].x *= sc;
        acc[r].y *= sc;
        acc[r].z *= sc;
        acc[r].w *= sc;
#pragma unroll
        for (int kk = 0; kk < kSplits; ++kk) {
          const float w = merge_weight(l[kk][r], mb);  // l = -inf (past n, or a piece without visible keys): 0
          s[r] += w;
          acc[r].x += w * v[kk][r].x;
          acc[r].y += w * v[kk][r].y;
          acc[r].z += w * v[kk][r].z;
          acc[r].w += w * v[kk][r].w;
        }
        m[r] = mb;
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int row = r0 + kHalves * r;
      if (row >= rows) break;
      const bool empty = m[r] == -INFINITY;
      const float inv = row_inv(!empty, s[r]);
      store_partial_quad<Traits>(p, b, row0 + row, 4 * f,
                                 make_float4(acc[r].x * inv, acc[r].y * inv, acc[r].z * inv, acc[r].w * inv));
      if (f == 0) store_lse(p, b, row0 + row, row_lse(!empty, s[r], m[r]));
    }
  }
}

// The fused merge in one decode kernel instantiation (kFused; with false every member is empty, so the combine-mode
// instantiation is the kernel as it was: code added to the 64-row kernels slowed their main loops by 1-6 us even
// where it never ran, session 11's self-merge and this session's first form). The loop only notes the CTA's split
// sequences (at most two: the part's first and last); after the part the writers arrive on their counters and merge
// the ones they complete. Arriving late only moves a merge to the last piece's CTA end: no CTA ever waits for another.
template <bool kFused>
struct FusedMerges {
  int b[2] = {-1, -1};

  // At a segment's end, after its stores: n_splits > 1 means a partial was written (the same value in every writer).
  __device__ __forceinline__ void note(int b_seg, int n_splits) {
    if constexpr (kFused) {
      if (n_splits > 1) {
        if (b[0] < 0) b[0] = b_seg; else b[1] = b_seg;
      }
    }
  }

  // After the part, by the kWriters writer threads (t = 0 .. kWriters - 1: every thread that stored part of the
  // tile's columns, all with the same notes). For each noted sequence: arrive on its counter (release); the CTA whose
  // arrival completes it (acquire) resets the counter and merges the tile. PT: the partials' storage type
  // (partials.h); kRows: rows merged at once (fused_merge_tile), 4 where the kernel's register cap is 168.
  template <class Traits, class PT, int kWriters, int kRows = 8>
  __device__ __forceinline__ void finish(const DecodeKernelParams& p, int t) const {
    if constexpr (kFused) {
#pragma unroll  // (unroll 1 made ptxas spill 108 bytes in the 16-bit 16-row kernel)
      for (int i = 0; i < 2; ++i) {
        const int bi = i == 0 ? b[0] : b[1];  // a select, not a local-memory array
        if (bi < 0) continue;
        const int first = p.split_offsets[bi], n = p.split_offsets[bi + 1] - first;
        // Every writer's partial stores happen before thread 0's fence (bar.sync orders them at CTA scope; the
        // fence is cumulative), as in a grid-wide barrier.
        named_sync(kBarFusedMerge, kWriters);
        bool last = false;
        if (t == 0) {
          int32_t* cnt = p.merge_counters + static_cast<int64_t>(bi) * gridDim.y + blockIdx.y;
          __threadfence();  // release this piece
          last = atomicAdd(cnt, 1) == n - 1;
          if (last) {
            *cnt = 0;         // every piece of this call is in: the next call starts from zero
            __threadfence();  // acquire the other pieces before this CTA's loads
          }
        }
        // Uniform over the writers; the shuffle lets ptxas see it per warp.
        if (__shfl_sync(0xffffffffu, named_sync_or(kBarFusedMerge, kWriters, last), 0) != 0)
          fused_merge_tile<Traits, PT, kWriters, kRows>(p, bi, first, n, t);
      }
    }
  }

  // The rows of sequences without keys (no piece: seqlen 0) get out 0, lse -inf. CTA x of head tile y writes
  // sequences b = x, x + gridDim.x, ... of tile y, with nthreads threads (t < nthreads), in every CTA, so also
  // before a CTA with an empty part returns. One load round trip where no sequence is empty (batch <= grid width).
  __device__ __forceinline__ static void zero_empty(const DecodeKernelParams& p, int t, int nthreads) {
    if constexpr (kFused) {
      const int row0 = blockIdx.y * kDecodeRowsPerCta;
      const int rows = min(kDecodeRowsPerCta, p.rows - row0);
      for (int bb = blockIdx.x; bb < p.batch; bb += gridDim.x) {
        if (p.split_offsets[bb + 1] != p.split_offsets[bb]) continue;
        uint4* out = reinterpret_cast<uint4*>(static_cast<uint16_t*>(p.out) +
                                              (static_cast<int64_t>(bb) * p.rows + row0) * kDimV);
        for (int i = t; i < rows * kDimV / 8; i += nthreads) out[i] = make_uint4(0u, 0u, 0u, 0u);
        for (int r = t; r < rows; r += nthreads) store_lse(p, bb, row0 + r, -INFINITY);
      }
    }
  }
};

}  // namespace mla::sm90::decode
