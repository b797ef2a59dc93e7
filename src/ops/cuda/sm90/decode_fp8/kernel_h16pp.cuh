#pragma once
// Paired split-KV fp8 decode for 16-row tiles (constants and rationale: config_h16pp.h). Same plan, part cursor,
// partials layout, per-page math (mainloop_h16.cuh) and combine as the hand-off kernel (kernel_h16.cuh); 256
// threads, two identical warpgroups. Both walk the part's items in order; warpgroup w computes the items j with
// j % 2 == w:
//   wait page j; S^T_j (18 x m64n16k32) issued, V^T_j fragments (ldmatrix.trans) while it runs, S waited; mask,
//   row max over the warpgroup's 4 warps (exchange barrier: after it the stage is free, and the warpgroup's thread 0
//   issues its page j + 4 into it); P_j = exp2(S scale - m) into the warpgroup's P buffer (P-ready barrier);
//   O^T = O^T alpha + V^T P^T (16 x m64n16k32), waited.
// At the end of a segment of two or more items (a sequence switch or the part's end) both warpgroups merge: B1 (both
// past the segment's pages and the previous merge's reads; warpgroup 0's thread 0 then loads the Q tile of sequence
// n + 2), publish row max / row sums and hand the other warpgroup the half of O^T it writes (M tiles 4..7 from
// warpgroup 0, 0..3 from 1), B2, read, rescale both states to the common max, add, and each warpgroup writes its
// 256 of the 512 output dims. A one-item segment is written by its owner alone (finalize_alone) while the other
// warpgroup goes on: no CTA barrier, so parts of many short sequences keep both warpgroups busy (P1: with a merge
// at every segment end, b32 s512 was 6 % slower than the hand-off kernel).
// Timeline marks (a -DMLA_DECODE_TIMELINE build): 4 FIRST page 0 landed, 5 FIRST its S done, 7 LAST an epilogue
// started, 8 LAST a segment's stores issued.
#include <cstdint>

#include "ops/cuda/sm90/decode/handoff_n16.cuh"
#include "ops/cuda/sm90/decode/scheduler.cuh"
#include "ops/cuda/sm90/decode/timeline.cuh"
#include "ops/cuda/sm90/decode/tma.h"
#include "ops/cuda/sm90/decode_fp8/config_h16pp.h"
#include "ops/cuda/sm90/decode_fp8/kernel_h16.cuh"
#include "ops/cuda/sm90/decode_fp8/mainloop_h16.cuh"
#include "ops/cuda/sm90/decode_fp8/params.h"

namespace mla::sm90::decode_fp8::h16pp {

using decode::mbar_wait;
using decode::PartCursor;
using decode::n16::phase_of;
using decode::n16::row_of;

struct Bars {
  uint32_t base;
  __device__ uint32_t full(int s) const { return base + 8 * s; }
  __device__ uint32_t q_full(int q) const { return base + 8 * (kStages + q); }
};

// The page stream of one warpgroup, run by its thread 0: its own items (j % 2 == wg) into stage j % kStages. The
// cursor walks every item of the part (it must, to follow sequence boundaries) and fetches only the own ones'
// block-table entries, one own item ahead of their copy.
struct PairProducer {
  PartCursor c;
  int j = 0;  // the item c points at: the next own one to issue
  __device__ void init(const decode::DecodeKernelParams& p, PartCursor cur, int wg) {
    c = cur;
    if (wg == 1) {
      c.advance(p);
      j = 1;
    }
    c.fetch_page(p);
  }
  // Issues own items before `limit`. The caller knows each target stage is free: at start (the ring is empty), or
  // after its warpgroup's exchange barrier of item limit - 1 - kStages (that item's S and V reads are done).
  __device__ __forceinline__ void issue_before(const decode::DecodeKernelParams& p, const Bars& bars, uint32_t s_k0,
                                               int limit) {
    while (c.valid() && j < limit) {
      const int stage = j % kStages;
      decode::mbar_expect_tx(bars.full(stage), kSlabTileBytes);
      h16::tma_slabs(&p.tmap_kv, c.page * kBlockN, s_k0 + stage * kSlabTileBytes, kSlabBytes, bars.full(stage));
      c.advance(p);
      c.advance(p);  // past the other warpgroup's item (a no-op past the part's end)
      j += kWarpgroups;
      c.fetch_page(p);
    }
  }
};

// Q tiles: sequence n (the n-th this part visits) into slot n % kQSlots. Both warpgroups' threads 0 step a copy
// at every segment end, in the same order; the one the segment end names issues the copy (`issue`): warpgroup 0
// after a merge, the owner of a one-item segment after its finalize (the other warpgroup never read that Q tile).
struct PairQLoader {
  PartCursor c;
  int n = 0;
  __device__ __forceinline__ void step(const decode::DecodeKernelParams& p, const Bars& bars, uint32_t s_q0, bool issue) {
    if (!c.valid()) return;
    const int slot = n % kQSlots;
    if (issue) {
      decode::mbar_expect_tx(bars.q_full(slot), h16::kQTileBytes);
      h16::tma_slabs(&p.tmap_q, c.b * p.rows, s_q0 + slot * h16::kQTileBytes, h16::kQSlabBytes, bars.q_full(slot));
    }
    ++n;
    c.blk = c.hi - 1;  // the sequence's last block: advance() settles on the next non-empty sequence
    c.advance(p);
  }
};

// Element k of a thread's o[i][k] (and of the merged half) belongs to its row r = 2 (k / 4) + k % 2 (mainloop_h16.cuh).
__device__ __forceinline__ int row_slot(int k) { return 2 * (k >> 2) + (k & 1); }

// Output of one merged half (M tiles 4 wg .. 4 wg + 3): out = O / l * k_scale (bf16, single split) or the fp32
// partial and its lse into the split slot, as h16::write_segment_h16 does for all 8 tiles.
__device__ __forceinline__ void write_half(const Fp8DecodeParams& fp, const float (&o)[4][8], const float (&lsum)[4],
                                           const float (&mtot)[4], int b, int slot, bool direct, int wg, int w, int lane) {
  const decode::DecodeKernelParams& p = fp.d;
  const int g = lane >> 2, t = lane & 3;
  const int dim0 = 256 * wg + 16 * w + 2 * g;
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int row = row_of(r, t), jj = r >> 1, e = r & 1;
    const float total = lsum[r];
    const float inv = total > 0.f ? fp.out_scale / total : 0.f;
    const float lse = total > 0.f ? mtot[r] * p.softmax_scale + logf(total) : -INFINITY;
    const bool lse_writer = wg == 0 && w == 0 && g == 0;
    if (direct) {
      uint16_t* out = static_cast<uint16_t*>(p.out) + (static_cast<int64_t>(b) * p.rows + row) * kDimV + dim0;
#pragma unroll
      for (int i = 0; i < 4; ++i)
        *reinterpret_cast<uint32_t*>(out + 64 * i) = pack_bf16x2(o[i][4 * jj + e] * inv, o[i][4 * jj + 2 + e] * inv);
      if (lse_writer) p.lse[(static_cast<int64_t>(b) * p.h_q + row % p.h_q) * p.s_q + row / p.h_q] = lse;
    } else {
      float* acc = p.o_accum + (static_cast<int64_t>(slot) * p.rows + row) * kDimV + dim0;
#pragma unroll
      for (int i = 0; i < 4; ++i)
        *reinterpret_cast<float2*>(acc + 64 * i) = make_float2(o[i][4 * jj + e] * inv, o[i][4 * jj + 2 + e] * inv);
      if (lse_writer) p.lse_accum[static_cast<int64_t>(slot) * p.rows + row] = lse;
    }
  }
}

// The segment end of both warpgroups (see the header): merge the two (m, l, O) states and write the segment.
// Every thread of the CTA calls it once per segment, in the same order.
__device__ __forceinline__ void merge_and_write(const Fp8DecodeParams& fp, const float (&o)[8][8], const h16::ScorerState& st,
                                                uint8_t* smem, int b, int first_batch, int first_split, int wg, int w,
                                                int lane) {
  constexpr SmemLayoutH16pp L = smem_layout_h16pp();
  const decode::DecodeKernelParams& p = fp.d;
  float* s_lsum = reinterpret_cast<float*>(smem + L.lsum_offset);  // [wg][row][warp]
  float* s_mrow = reinterpret_cast<float*>(smem + L.mrow_offset);  // [wg][row]
  float4* s_x = reinterpret_cast<float4*>(smem + L.x_offset);      // [wg][8][128]
  const int g = lane >> 2, t = lane & 3, tid = threadIdx.x & 127;
  // B1 (in the caller, before the Q load) has passed: the previous merge's reads are done.
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    float lr = st.l[r];
    lr += __shfl_xor_sync(0xffffffffu, lr, 4);
    lr += __shfl_xor_sync(0xffffffffu, lr, 8);
    lr += __shfl_xor_sync(0xffffffffu, lr, 16);
    const int row = row_of(r, t);
    if (g == 0) s_lsum[(wg * kRows + row) * 4 + w] = lr;
    if (g == 0 && w == 0) s_mrow[wg * kRows + row] = st.m[r];
  }
  // The half the other warpgroup writes out: tiles 4..7 from warpgroup 0, 0..3 from warpgroup 1 (selects, so o stays
  // in registers: a run-time tile index would put it in local memory).
  float4* give = s_x + wg * 8 * 128 + tid;
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float v[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) v[e] = wg == 0 ? o[i + 4][4 * h + e] : o[i][4 * h + e];
      give[(2 * i + h) * 128] = make_float4(v[0], v[1], v[2], v[3]);
    }
  __syncthreads();  // B2: stats and halves written (all 256 threads: the CTA barrier, which racecheck models)
  float lsum[4], mtot[4], a_own[4], a_oth[4];
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int row = row_of(r, t);
    const float4 l0 = *reinterpret_cast<const float4*>(s_lsum + row * 4);
    const float4 l1 = *reinterpret_cast<const float4*>(s_lsum + (kRows + row) * 4);
    const float m0 = s_mrow[row], m1 = s_mrow[kRows + row];
    const float m = fmaxf(m0, m1);
    // A row no key reached keeps m = -inf in both states: subtract 0 so the factors are 0, not NaN.
    const float ms = m == -INFINITY ? 0.f : m * p.scale_log2;
    const float f0 = exp2f(m0 * p.scale_log2 - ms), f1 = exp2f(m1 * p.scale_log2 - ms);
    lsum[r] = f0 * ((l0.x + l0.y) + (l0.z + l0.w)) + f1 * ((l1.x + l1.y) + (l1.z + l1.w));
    mtot[r] = m;
    a_own[r] = wg == 0 ? f0 : f1;
    a_oth[r] = wg == 0 ? f1 : f0;
  }
  const float4* got = s_x + (1 - wg) * 8 * 128 + tid;
  float keep[4][8];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float4 v = got[(2 * i + h) * 128];
      const float other[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int k = 4 * h + e;
        const float mine = wg == 0 ? o[i][k] : o[i + 4][k];
        keep[i][k] = mine * a_own[row_slot(k)] + other[e] * a_oth[row_slot(k)];
      }
    }
  if (lane == 0) MLA_TL_MARK_LAST(p.timeline, 7);
  const decode::n16::SegmentDest d = decode::n16::segment_dest(p, b, first_batch, first_split);
  write_half(fp, keep, lsum, mtot, b, d.slot, d.n_splits == 1, wg, w, lane);
  if (lane == 0) MLA_TL_MARK_LAST(p.timeline, 8);
}

// A one-item segment's end, by its owner warpgroup only: the row sums over its 4 warps (through its own
// lsum_solo[wg], which no other code touches: the merge's lsum may still be read by the other warpgroup), then the
// whole O^T written as the hand-off kernel's accumulator writes it.
__device__ __forceinline__ void finalize_alone(const Fp8DecodeParams& fp, const float (&o)[8][8], const h16::ScorerState& st,
                                               uint8_t* smem, int b, int first_batch, int first_split, int wg, int w,
                                               int lane) {
  constexpr SmemLayoutH16pp L = smem_layout_h16pp();
  const decode::DecodeKernelParams& p = fp.d;
  float* s_l = reinterpret_cast<float*>(smem + L.lsum_solo_offset) + wg * kRows * 4;  // [row][warp]
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    float lr = st.l[r];
    lr += __shfl_xor_sync(0xffffffffu, lr, 4);
    lr += __shfl_xor_sync(0xffffffffu, lr, 8);
    lr += __shfl_xor_sync(0xffffffffu, lr, 16);
    if (g == 0) s_l[row_of(r, t) * 4 + w] = lr;
  }
  // Rewritten only at this warpgroup's next one-item segment, after at least one more exchange barrier of its own.
  decode::named_sync(kBarSolo + wg, 128);
  float lsum[4];
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const float4 v = *reinterpret_cast<const float4*>(s_l + row_of(r, t) * 4);
    lsum[r] = (v.x + v.y) + (v.z + v.w);
  }
  if (lane == 0) MLA_TL_MARK_LAST(p.timeline, 7);
  const decode::n16::SegmentDest d = decode::n16::segment_dest(p, b, first_batch, first_split);
  h16::write_segment_h16(fp, o, lsum, st.m, b, d.slot, d.n_splits == 1, w, lane);
  if (lane == 0) MLA_TL_MARK_LAST(p.timeline, 8);
}

template <bool kSolo>
__device__ __forceinline__ void pair_warpgroup(const Fp8DecodeParams& fp, PartCursor c, const Bars& bars, uint8_t* smem,
                                               int wg, int w, int lane) {
  constexpr SmemLayoutH16pp L = smem_layout_h16pp();
  const decode::DecodeKernelParams& p = fp.d;
  const uint32_t s_k0 = decode::smem_u32(smem + L.k_offset), s_q0 = decode::smem_u32(smem + L.q_offset);
  const uint32_t s_p = decode::smem_u32(smem + L.p_offset) + wg * h16::kPBufBytes;
  float* red = reinterpret_cast<float*>(smem + L.red_offset) + wg * kRows * 4;  // [row][warp]
  const int g = lane >> 2, t = lane & 3;
  const int32_t* rec = p.parts + static_cast<int64_t>(blockIdx.x) * kPlanPartInts;
  const int first_batch = rec[kPartBeginBatch], first_split = rec[kPartFirstSplit];
  const bool leader = w == 0 && lane == 0;
  PairProducer prod;
  if (leader) {
    prod.init(p, c, wg);
    prod.issue_before(p, bars, s_k0, kStages);
  }
  PairQLoader ql{c};
  if (leader) {
    static_assert(kQSlots == 2, "sequences 0 and 1 up front, n + 2 after n");
    ql.step(p, bars, s_q0, wg == 0);
    ql.step(p, bars, s_q0, wg == 0);
  }
  h16::ScorerState st;
  st.reset();
  float o[8][8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int e = 0; e < 8; ++e) o[i][e] = 0.f;
  int j = 0, seq = 0, seg_items = 0;
  bool q_waited = false;
  while (c.valid()) {
    const bool seg_end = c.last_of_sequence();
    ++seg_items;
    if ((j & 1) == wg) {
      const int stage = j % kStages;
      if (!q_waited) {
        mbar_wait(bars.q_full(seq % kQSlots), phase_of(seq, kQSlots));
        q_waited = true;
      }
      mbar_wait(bars.full(stage), phase_of(j, kStages));
      if (j == 0 && leader) MLA_TL_MARK_FIRST(p.timeline, 4);
      const uint32_t s_stage = s_k0 + stage * kSlabTileBytes;
      const int limit = c.seqlen - c.blk * kBlockN;
      float s[8];
      h16::issue_scores_t(s, s_stage, s_q0 + (seq % kQSlots) * h16::kQTileBytes);
      uint32_t vf[2][8][4];
      h16::load_v_frags(vf, s_stage, limit, w, lane);  // while the S wgmmas run
      decode::wgmma_wait_all();
      decode::fence_operands(s);
      if (j == 0 && leader) MLA_TL_MARK_FIRST(p.timeline, 5);
      float mx[4];
      h16::mask_and_warp_max(s, mx, limit, w, g);
      // red is rewritten at this warpgroup's next item, after every warp passed this item's P-ready barrier (so
      // after their reads below).
      decode::n16::store_row_max(red, mx, w, g, t);
      decode::named_sync(kBarExchange + wg, 128);
      // All 4 warps have waited their S and hold their V fragments: the stage takes this warpgroup's item j + 4.
      if (leader) prod.issue_before(p, bars, s_k0, j + kStages + 1);
      float alpha[4], m_scaled[4], pr[8];
      decode::n16::update_row_max(red, st.m, alpha, m_scaled, p.scale_log2, t);
      decode::n16::exp_and_row_sums(s, pr, st.l, alpha, m_scaled, p.scale_log2);
      // The P buffer's previous reader, this warpgroup's P.V of item j - 2, was waited for by every warp before
      // this item's exchange barrier.
      h16::store_p_packed(s_p, pr, w, g, t);
      decode::fence_proxy_async();  // generic P stores, read by wgmma (async proxy)
      decode::named_sync(kBarPReady + wg, 128);
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int k = 0; k < 8; ++k) o[i][k] *= alpha[row_slot(k)];
      h16::issue_pv_t(o, vf, s_p);
      h16::wait_pv_t(o);
    }
    if (kSolo && seg_end && seg_items == 1) {
      // A one-item segment: its owner holds the whole state and writes it alone; the other warpgroup (no page in
      // it, nothing to merge) goes on to the next segment.
      const bool owner = (j & 1) == wg;
      if (leader) ql.step(p, bars, s_q0, owner);
      if (owner) finalize_alone(fp, o, st, smem, c.b, first_batch, first_split, wg, w, lane);
    } else if (seg_end) {
      // B1: both warpgroups are past this segment's S (its Q slot is free) and past the previous merge's reads.
      __syncthreads();
      if (leader) ql.step(p, bars, s_q0, wg == 0);
      merge_and_write(fp, o, st, smem, c.b, first_batch, first_split, wg, w, lane);
    }
    if (seg_end) {
      seg_items = 0;
      st.reset();
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int e = 0; e < 8; ++e) o[i][e] = 0.f;
      ++seq;
      q_waited = false;
    }
    c.advance(p);
    ++j;
  }
}

// kSolo: one-item segments written by their owner alone (true), or merged like any other segment (false: run P1's
// schedule; temporary, MLA_DECODE_FP8_H16_MODE=pair_merge, for the P3 A/B).
template <bool kSolo>
__global__ void __launch_bounds__(kThreads, 1) mla_decode_fp8_h16pp_kernel(const __grid_constant__ Fp8DecodeParams fp) {
  constexpr SmemLayoutH16pp L = smem_layout_h16pp();
  const decode::DecodeKernelParams& p = fp.d;
  extern __shared__ __align__(1024) uint8_t smem[];
  PartCursor c;
  if (!decode::n16::begin_part(p, c)) return;
  const Bars bars{decode::smem_u32(smem + L.bar_offset)};
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) decode::mbar_init(bars.full(s), 1);
    for (int q = 0; q < kQSlots; ++q) decode::mbar_init(bars.q_full(q), 1);
    decode::mbar_init_fence();
  }
  __syncthreads();
  pair_warpgroup<kSolo>(fp, c, bars, smem, threadIdx.x >> 7, (threadIdx.x >> 5) & 3, threadIdx.x & 31);
}

}  // namespace mla::sm90::decode_fp8::h16pp
