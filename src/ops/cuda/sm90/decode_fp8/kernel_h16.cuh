#pragma once
// Split-KV fp8 decode for 16-row tiles on 8-bit wgmma (constants and rationale: config_h16.h). Same plan, part
// cursor, partials layout and combine as every decode kernel; one CTA per (part, head tile), 256 threads.
// The same kernel runs 32-row tiles (RG = 2: h_q 32 s_q 1, h_q 16 s_q 2; session 23) with 384 threads: the scorer's S^T
// is m64n32k32 and its softmax runs per 16-row group (each group its own exchange buffers, its own causal limit), and
// two accumulator warpgroups take V dims [0, 256) and [256, 512) of all 32 rows. Below, for RG 1:
//   warpgroup 0 (scorer): S^T_j = K_j Q^T (18 x m64n16k32), release the stage, mask, row max (shuffles + one
//     128-thread exchange), P_j = exp2(S scale - m) as e4m3 into P buffer j % 2, alpha_j (and the row sums / max
//     at a segment end) -> P_full[j % 2]; its thread 0 also loads the Q tiles (five 16 x 128 B boxes, sequence n
//     into slot n % kQSlots on q_full[slot]: n = 0, 1 up front, n + 2 once all four warps are past n's last S);
//   warpgroup 1 (accumulator): V^T_j fragments (ldmatrix.trans, before P_j exists), wait P_full, O^T = O^T alpha +
//     V^T P^T (16 x m64n16k32, A from registers; once issued, release the stage) -> P_empty[j % 2], epilogue; its
//     thread 0 also issues the pages: page j + L into stage (j + L) % kStages (its five 64 x 128 B slabs on
//     full[stage]: one 3D copy, or five 2D boxes for evict-first pages, page_tma.cuh) once its P.V wgmmas of page j
//     are issued and all 8 warps released the stage's previous page;
//     L = kStages, or kShallowLead for a part of few pages (producer_lead).
// So the scorer's page j + 1 overlaps the accumulator's page j, and neither waits for the other's barrier more
// than once per page. Stage j is released by 8 warp arrivals (4 scorer warps after S, 4 accumulator warps once
// their P.V wgmmas, whose A registers the ldmatrix filled, are issued), so the TMA of page j + L overlaps the P.V of
// page j.
// Timeline marks (bench_decode --timeline in a -DMLA_DECODE_TIMELINE build; nothing otherwise), per CTA, in the
// session's convention (4-8 as in decode_fp8/timeline_ws.cuh, sums in 12-15 through decode::TimelineSums):
//   4  FIRST scorer: page 0 landed (its full wait returned)
//   5  FIRST scorer: page 0's S done (its wgmma wait returned)
//   6  LAST  scorer: a segment's last P handed off (a sequence switch, or the part's end)
//   7  LAST  accumulator: an epilogue started (the latest: the part's last segment's)
//   8  LAST  accumulator: a segment's stores issued (over the 4 warps; the latest is the CTA's end)
//   9  FIRST scorer: S of page kStages - 1 done (the initial ring complete, as the scorer sees it)
//   10 LAST  producer: the part's last page issued
//   11 LAST  scorer: S of the part's last page done
// Per-CTA sums (TimelineSums: written once at the end as the CTA's start stamp + value, max over the two leaders):
//   12 segments written (accumulator thread 0), in µs units (m12 - start = count)
//   13 ns scorer thread 0 spent in page full waits
//   14 ns scorer thread 0 spent in P_empty waits (the accumulator still on P.V of page j - 2)
//   15 ns accumulator thread 0 spent in P_full waits (the scorer not done with P_j)
// (The accumulator's own page full waits, a fourth sum before, has no slot left in the convention.)
#include <cstdint>

#include "mla/ops/decode_running_max.h"
#include "ops/cuda/sm90/decode/clock_probe.cuh"  // effective SM clock (nothing outside a -DMLA_DECODE_CLOCK build)
#include "ops/cuda/sm90/decode/fused_merge.cuh"
#include "ops/cuda/sm90/decode/handoff_n16.cuh"
#include "ops/cuda/sm90/decode/row_end.cuh"
#include "ops/cuda/sm90/decode/scheduler.cuh"
#include "ops/cuda/sm90/decode/timeline.cuh"
#include "ops/cuda/sm90/decode/tma.h"
#include "ops/cuda/sm90/decode/traits.h"
#include "ops/cuda/sm90/decode_fp8/epilogue.cuh"
#include "ops/cuda/sm90/decode_fp8/mainloop_h16.cuh"
#include "ops/cuda/sm90/decode_fp8/page_tma.cuh"
#include "ops/cuda/sm90/decode_fp8/params.h"

namespace mla::sm90::decode_fp8::h16 {

using decode::mbar_arrive_warp;
using decode::mbar_wait;
using decode::PartCursor;

using decode::n16::phase_of;

// The three sums of marks 13..15 (decode::TimelineSums::add; empty in a normal build).
enum H16TlSum { kTlScorerFull = 0, kTlScorerPEmpty = 1, kTlAccPFull = 2 };

using H16Timeline = decode::TimelineSums;

// The page ring (full / empty per stage), then the Q slots' q_full barriers.
using Bars = decode::n16::RingQBars<kStages, kQSlots>;

// Pages the producer keeps ahead of the accumulator: kStages, or kShallowLead for a short part (config_h16.h). It
// issues that many up front and then one per page consumed, so only the prologue's count differs; the ring's slots
// and phases stay j % kStages (as a loop variable the depth cost the long rows 2.5 %: NOTES_plan.md session 14).
// The part's pages come from its record (decode::part_pages_from_record) when the part is one sequence's range or
// the tail of its first sequence; any other part counts as long (as measured in session 14).
__device__ __forceinline__ int producer_lead(const decode::DecodeKernelParams& p) {
  const int32_t* rec = decode::part_record(p);
  const int b0 = rec[kPartBeginBatch], b1 = rec[kPartEndBatch];
  const bool sized = b1 == b0 || (b1 == b0 + 1 && rec[kPartEndBlock] == 0);
  return sized && decode::part_pages_from_record(p) <= kShallowLeadMaxPages ? kShallowLead : kStages;
}

// No L2 prefetch beyond the ring: keeping 1 or 2 pages prefetched (cp.async.bulk.prefetch.L2) made every large
// row slower (NOTES_fp8.md run H2), so MLA_DECODE_FP8_L2_PREFETCH does not apply to this kernel.
// The page stream, run by accumulator thread 0 (no producer warp: a 9th warp put 3 warps on one SM sub-partition,
// so ptxas capped every thread at 168 registers and spilled; NOTES_fp8.md runs H4-H5). step() issues the next
// page into its stage, waiting for that stage's previous page to be released by all 8 warps.
struct PageProducer {
  PartCursor c;
  bool evict_first = false;  // the part's L2 policy (decode/config.h kKvEvictFirstPartBytes)
  int last_page = 0;         // the cache's last page (page_tma.cuh)
  int j = 0;
  __device__ void init(const decode::DecodeKernelParams& p, PartCursor cur, int cache_last_page) {
    c = cur;
    last_page = cache_last_page;
    c.fetch_page(p);
    evict_first = decode::kv_evict_first(p, kPageBytes);
  }
  __device__ __forceinline__ void step(const decode::DecodeKernelParams& p, const Bars& bars, uint32_t s_k0) {
    if (!c.valid()) return;
    const int stage = j % kStages;
    if (j >= kStages) mbar_wait(bars.empty(stage), phase_of(j - kStages, kStages));
    decode::mbar_expect_tx(bars.full(stage), kSlabTileBytes);
    if (evict_first)
      tma_page_hint(p, c.page, s_k0 + stage * kSlabTileBytes, bars.full(stage), decode::l2_evict_first_fraction(1.f));
    else
      tma_page(p, c.page, last_page, s_k0 + stage * kSlabTileBytes, bars.full(stage));
    if (c.last_of_sequence()) MLA_TL_MARK_LAST(p.timeline, 10);  // mark 10; the last call: the part's last page
    c.advance(p);
    c.fetch_page(p);  // the next block-table entry loads while the warp computes page j
    ++j;
  }
};

// Q tiles, run by scorer thread 0 (decode/handoff_n16.cuh): five 16 x 128-byte boxes per 16-row group of the tile.
template <int RG>
using QLoader = decode::n16::QLoader<kSlabs, 128, Tile<RG>::kQSlabBytes, kQSlots, RG>;

// Row group q's share of a float array: elements [8q, 8q + 8) of an m64n(16 RG) accumulator are its rows' (j = 2q,
// 2q + 1 of decode/handoff_n16.cuh's layout), which the 16-row helpers take as their 8.
template <int N>
__device__ __forceinline__ float (&group8(float (&a)[N], int q))[8] {
  return *reinterpret_cast<float (*)[8]>(a + 8 * q);
}

// Keys row group q of a 32-row tile does not see at the sequence's end: the causal diagonal (s_q > 1: query row i sees
// keys < seqlen - s_q + 1 + i). The tile is the sequence's only one (32 rows = s_q h_q), so its group q holds query
// index 16q / h_q (h_q a multiple of 16).
__device__ __forceinline__ int hidden_keys(const decode::DecodeKernelParams& p, int q) {
  return p.causal ? p.s_q - 1 - (16 * q) / p.h_q : 0;
}
// Offsets (floats) of row group q's exchange buffers (decode/smem_n16.h).
__device__ __forceinline__ int red_of(int q) { return q * decode::red_group_bytes() / 4; }
__device__ __forceinline__ int alpha_of(int q) { return q * decode::alpha_group_bytes() / 4; }

// S^T of page j is waited for before its softmax. When page j + 1 (same sequence) has already landed at page j's
// row-max exchange, its S^T is issued right after that barrier into s_next and runs on the tensor cores while page
// j's exp, P store and hand-off proceed (NOTES_fp8.md runs H10-H11: b128 s4096 -2.2 %, s8192 -0.8 %, b32 s8192 -1 %;
// +0.2-0.4 us on 1-8-page rows, where it never applies: the larger code is fetched cold after the bench's L2 flush).
// The decision must be warpgroup-uniform (wgmma is collective): thread 0 probes the page's barrier before the
// exchange, and the exchange barrier returns its answer to all (decode::named_sync_or, tma.h; until session 10 a
// shared flag written before the barrier and read after it, one LDS more before the S issue: NOTES_fp8.md session 10,
// fp8s). Waiting for page j + 1 before the softmax unconditionally made P_j late whenever that page had not landed
// (run H2). kEarlyS (H16EarlyS, params.h) forces either path for tests (MLA_DECODE_FP8_H16_EARLY_S=always / never):
// which one a page takes by default depends on timing, so a default run cannot be relied on to reach both. A template
// parameter, not a kernel argument: as a uniform argument the default kernel read +0.1-0.5 µs on short rows and
// +0.6 % at b128 s8192 (h16fix run 1).
template <int RG, int kEarlyS>
__device__ __forceinline__ void scorer(const decode::DecodeKernelParams& p, PartCursor c, const Bars& bars,
                                       uint8_t* smem, int w, int lane) {
  using T = Tile<RG>;
  constexpr SmemLayoutH16 L = smem_layout_h16<RG>();
  const uint32_t s_k0 = decode::smem_u32(smem + L.k_offset), s_q0 = decode::smem_u32(smem + L.q_offset);
  const uint32_t s_p0 = decode::smem_u32(smem + L.p_offset);
  float* s_red = reinterpret_cast<float*>(smem + L.red_offset);      // [RG][2][16][4]
  float* s_alpha = reinterpret_cast<float*>(smem + L.alpha_offset);  // [RG][2][16]
  float* s_lsum = reinterpret_cast<float*>(smem + L.lsum_offset);    // [RG][2][16][4]
  float* s_mfin = reinterpret_cast<float*>(smem + L.mfin_offset);    // [RG][2][16]
  const int g = lane >> 2, t = lane & 3;
  ScorerState st[RG];
#pragma unroll
  for (int q = 0; q < RG; ++q) st[q].reset();
  int hidden[RG];  // per row group (0 for RG 1: s_q 1)
#pragma unroll
  for (int q = 0; q < RG; ++q) hidden[q] = RG == 1 ? 0 : hidden_keys(p, q);
  const bool q_loader = w == 0 && lane == 0;
  QLoader<RG> ql{c};
  if (q_loader) ql.start(p, bars, s_q0);
  bool seq_start = true, pre = false;
  int j = 0, seq = 0;
  H16Timeline tl;
  tl.init(p, q_loader);
  float s_next[8 * RG];
  while (c.valid()) {
    const int stage = j % kStages, buf = j & 1;
    const bool seg_end = c.last_of_sequence();
    if (seq_start) mbar_wait(bars.q_full(seq % kQSlots), phase_of(seq, kQSlots));
    seq_start = seg_end;
    float s[8 * RG];
    if (!pre) {
      const unsigned long long t0 = tl.now();
      mbar_wait(bars.full(stage), phase_of(j, kStages));
      tl.add(kTlScorerFull, t0);
      if (j == 0) tl.first(4);
      issue_scores_t<RG>(s, s_k0 + stage * kSlabTileBytes, s_q0 + (seq % kQSlots) * T::kQTileBytes);
      decode::wgmma_wait_all();
      decode::fence_operands(s);
    } else {
      decode::wgmma_wait_all();
      decode::fence_operands(s_next);
#pragma unroll
      for (int i = 0; i < 8 * RG; ++i) s[i] = s_next[i];
    }
    if (j == 0) tl.first(5);
    if (j == kStages - 1) tl.first(9);
    if (seg_end) tl.last(11);
    mbar_arrive_warp(bars.empty(stage));
    // s_q 1 (16-row tiles): every row sees keys < seqlen; a 32-row group q sees hidden[q] fewer (causal).
    // Row-max exchange across the 4 warps: [buf][row][warp], so one float4 per row. buf alternates by page: a warp
    // writing page j + 1's entries has passed page j's barrier, so nobody still reads page j - 1's.
#pragma unroll
    for (int q = 0; q < RG; ++q) {
      float* red = s_red + red_of(q) + buf * 16 * 4;
      // Lanes g < 4 hold one row each (mask_and_warp_max).
      const float mx = mask_and_warp_max(group8(s, q), c.seqlen - hidden[q] - c.blk * kBlockN, w, g);
      if (g < 4) red[decode::n16::row_of(warp_max_row(g), t) * 4 + w] = mx;
    }
    const int next_stage = (j + 1) % kStages;
    const bool probe = q_loader && !seg_end && kEarlyS != kEarlySNever &&
                       (kEarlyS == kEarlySAlways || decode::mbar_test(bars.full(next_stage), phase_of(j + 1, kStages)));
    pre = decode::named_sync_or(kBarScorer, 32 * kScorerWarps, probe) != 0;
    if (pre) {
      // Completed (auto: each thread observes it itself) or not yet (always: this is the wait). No deadlock with
      // `always`: page j + 1 is issued after the P.V of page j + 1 - kStages, whose P this warpgroup handed off.
      mbar_wait(bars.full(next_stage), phase_of(j + 1, kStages));
      issue_scores_t<RG>(s_next, s_k0 + next_stage * kSlabTileBytes, s_q0 + (seq % kQSlots) * T::kQTileBytes);
    }
    // Every warp's S of this sequence has completed (wgmma waited, then this barrier): its Q slot is free.
    if (q_loader && seg_end) ql.issue(p, bars, s_q0);
    float alpha[RG][4], m_scaled[RG][4], pr[8 * RG];
    // The exps as ex2.approx.ftz (ptx.h ex2_ftz; fp8s run 2: b128 s4096 / s8192 −0.3…−0.9 µs alone).
#pragma unroll
    for (int q = 0; q < RG; ++q) {
      const float* red = s_red + red_of(q) + buf * 16 * 4;
      // alpha exactly 1 (see below); the lazy running max of the fp8 format (mla/ops/decode_running_max.h)
      decode::n16::update_row_max<true, true>(red, st[q].m, alpha[q], m_scaled[q], p.scale_log2, t,
                                              kDecodeFp8MaxSlackLog2);
      decode::n16::exp_and_row_sums<true>(group8(s, q), group8(pr, q), st[q].l, alpha[q], m_scaled[q], p.scale_log2);
    }
    // P buffer `buf` is free once the accumulators finished P.V of page j - 2 (pre-armed for pages 0 and 1).
    const unsigned long long t1 = tl.now();
    decode::named_sync(kBarPEmpty + buf, T::kBarPair);
    tl.add(kTlScorerPEmpty, t1);
    // Group q's rows 16q .. 16q + 15 of the P buffer: 2048 bytes in (the swizzle is by row % 8).
#pragma unroll
    for (int q = 0; q < RG; ++q) store_p_packed(s_p0 + buf * T::kPBufBytes + 2048 * q, group8(pr, q), w, g, t);
    if (w == 0 && g == 0) {
#pragma unroll
      for (int q = 0; q < RG; ++q)
#pragma unroll
        for (int r = 0; r < 4; ++r)
          // racecheck: hand-off (s_alpha for the accumulators, ordered by the P_full named barrier)
          s_alpha[alpha_of(q) + buf * 16 + 8 * (r >> 1) + 2 * t + (r & 1)] = alpha[q][r];
    }
    if (seg_end) {
#pragma unroll
      for (int q = 0; q < RG; ++q) {
        decode::n16::publish_segment_totals(st[q].l, st[q].m, s_lsum + red_of(q), s_mfin + alpha_of(q), buf, w, g, t);
        st[q].reset();
      }
      ++seq;
    }
    decode::fence_proxy_async();  // P (generic stores) is read by wgmma (async proxy) after P_full
    decode::named_arrive(kBarPFull + buf, T::kBarPair);
    if (seg_end) tl.last(6);
    c.advance(p);
    ++j;
  }
  tl.flush();
}

// Epilogue of one segment (accumulator warpgroup a, V dims [64 MT a, 64 MT (a + 1))): out = O / l * k_scale as bf16
// (single split) or the fp32 partial and its lse into the split slot, in the partials layout the combine kernel
// reads. Row group q's rows are 16q + row_of(r, t), in o[i][8q + 4jj + ..].
template <int RG, int MT>
__device__ __forceinline__ void write_segment_h16(const Fp8DecodeParams& fp, const float (&o)[MT][8 * RG],
                                                  const float (&lsum)[RG][4], const float (&mfin)[RG][4], int b, int slot,
                                                  bool direct, int a, int w, int lane) {
  const decode::DecodeKernelParams& p = fp.d;
  const int g = lane >> 2, t = lane & 3;
  const int col0 = 64 * MT * a + 16 * w + 2 * g;
  const int row0 = decode::n16::tile_row0<RG>();
#pragma unroll
  for (int q = 0; q < RG; ++q)
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int row = row0 + 16 * q + 8 * (r >> 1) + 2 * t + (r & 1), jj = 8 * q + 4 * (r >> 1), e = r & 1;
    const float total = lsum[q][r];
    const bool seen = total > 0.f;
    const float inv = decode::row_inv(seen, total, fp.out_scale);
    const float lse = decode::row_lse(seen, total, mfin[q][r] * p.softmax_scale);
    if (direct) {
      uint16_t* out = static_cast<uint16_t*>(p.out) + (static_cast<int64_t>(b) * p.rows + row) * kDimV + col0;
#pragma unroll
      for (int i = 0; i < MT; ++i)
        *reinterpret_cast<uint32_t*>(out + 64 * i) = pack_bf16x2(o[i][jj + e] * inv, o[i][jj + 2 + e] * inv);
      if (a == 0 && w == 0 && g == 0) p.lse[(static_cast<int64_t>(b) * p.h_q + row % p.h_q) * p.s_q + row / p.h_q] = lse;
    } else {
      // Dims 64 i + 16 w + 2 g + {0, 1} (+ 64 MT a): one pair, stored where decode/partials.h puts it (the 8 lanes g
      // of a row still fill its 64 B; the permutation is within 16-column groups).
      float* acc = p.o_accum + (static_cast<int64_t>(slot) * p.rows + row) * kDimV + 64 * MT * a +
                   decode::partial_pair_offset(16 * w + 2 * g);
#pragma unroll
      for (int i = 0; i < MT; ++i)
        *reinterpret_cast<float2*>(acc + 64 * i) = make_float2(o[i][jj + e] * inv, o[i][jj + 2 + e] * inv);
      if (a == 0 && w == 0 && g == 0) p.lse_accum[static_cast<int64_t>(slot) * p.rows + row] = lse;
    }
  }
}

// Accumulator warpgroup a (of RG): O^T for V dims [64 MT a, 64 MT (a + 1)) of all rows; its thread 0 (a = 0) issues the
// pages.
template <int RG, bool kFused>
__device__ __forceinline__ void accumulator(const Fp8DecodeParams& fp, PartCursor c, const Bars& bars, uint8_t* smem,
                                            int a, int w, int lane) {
  using T = Tile<RG>;
  constexpr int MT = T::kMTiles;
  constexpr SmemLayoutH16 L = smem_layout_h16<RG>();
  const decode::DecodeKernelParams& p = fp.d;
  const uint32_t s_k0 = decode::smem_u32(smem + L.k_offset), s_p0 = decode::smem_u32(smem + L.p_offset);
  const decode::n16::AccExchange x = decode::n16::acc_exchange(p, smem, L);
  const int t = lane & 3;
  decode::named_arrive(kBarPEmpty + 0, T::kBarPair);  // both P buffers start free
  decode::named_arrive(kBarPEmpty + 1, T::kBarPair);
  decode::FusedMerges<kFused>::zero_empty(p, a * 128 + w * 32 + lane, 128 * RG);
  decode::FusedMerges<kFused> merges;  // split sequences this CTA merges after its part (fused mode)
  float o[MT][8 * RG];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int e = 0; e < 8 * RG; ++e) o[i][e] = 0.f;
  const bool is_producer = a == 0 && w == 0 && lane == 0;
  PageProducer prod;
  if (is_producer) {
    prod.init(p, c, fp.last_page);
    static_assert(kShallowLead == kStages - 1, "the long parts' lead is one page more");
#pragma unroll
    for (int k = 0; k < kShallowLead; ++k) prod.step(p, bars, s_k0);
    // Decided after the first pages are on their way (the record's fields are in L1 since the cursor read them).
    if (producer_lead(p) == kStages) prod.step(p, bars, s_k0);
  }
  __syncwarp();
  int j = 0;
  H16Timeline tl;
  tl.init(p, is_producer);
  while (c.valid()) {
    const int stage = j % kStages, buf = j & 1;
    mbar_wait(bars.full(stage), phase_of(j, kStages));
    uint32_t vf[2][MT][4];
    // Keys past the sequence's end are zeroed; causal rows that see fewer get P = 0 there (finite V).
    load_v_frags<MT>(vf, s_k0 + stage * kSlabTileBytes, c.seqlen - c.blk * kBlockN, w, lane, MT * a);
    const unsigned long long t0 = tl.now();
    decode::named_sync(kBarPFull + buf, T::kBarPair);
    tl.add(kTlAccPFull, t0);
    float alpha[RG][4];
#pragma unroll
    for (int q = 0; q < RG; ++q)
#pragma unroll
      for (int r = 0; r < 4; ++r)
        // racecheck: hand-off (read after the P_full named barrier)
        alpha[q][r] = x.alpha[alpha_of(q) + buf * 16 + 8 * (r >> 1) + 2 * t + (r & 1)];
    bool moved = false;
#pragma unroll
    for (int q = 0; q < RG; ++q)
      moved = moved || alpha[q][0] != 1.f || alpha[q][1] != 1.f || alpha[q][2] != 1.f || alpha[q][3] != 1.f;
    // The O rescale only on pages where a row of this warp moved its running max: elsewhere every alpha is exactly 1
    // (update_row_max<true>) and the 64 multiplies would leave O as it is. Once the max settles most pages skip them,
    // and the accumulator's per-page instructions are on the page rate's path (the bare page stream runs at 1.04 µs per
    // page, the kernel at 1.12). H200 (NOTES_fp8.md session 9, fp8b32 run B3, one call, two passes): b128 s8192
    // −2.5 µs, clean-L2 slope 1.14 -> 1.12 µs per page; b1 / s512 rows +0.1…+0.35 µs. A warp vote: a uniform branch.
    if (__any_sync(0xffffffffu, moved)) {
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int q = 0; q < RG; ++q)
#pragma unroll
          for (int jj = 0; jj < 2; ++jj)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              o[i][8 * q + 4 * jj + e] *= alpha[q][2 * jj + e];
              o[i][8 * q + 4 * jj + 2 + e] *= alpha[q][2 * jj + e];
            }
    }
    issue_pv_t<RG, MT>(o, vf, s_p0 + buf * T::kPBufBytes);
    // Released once the P.V wgmmas are issued: a wgmma issues only with its A registers loaded, so the ldmatrix reads
    // of the stage are done. (Right after the ldmatrix, as before session 31, the arrive could overtake them:
    // decode/wait_for_loads.h; waiting for them there, or after P_full, cost 4-27 % at h_q 16: the ldmatrix latency
    // then stops overlapping the P_full wait.) The refill below waits for this arrive of all 4 warps anyway.
    mbar_arrive_warp(bars.empty(stage));
    // Page j + kStages into this stage (once all 8 warps released it) while the P.V wgmmas run. Before the
    // P_full barrier, warp 0's step held up the barrier and with it the other three warps (the scorer waited 28 %
    // of its time for P_empty, the accumulator 23 % for P_full): -4 % at b128 s8192 (NOTES_fp8.md runs H7-H8).
    if (is_producer) prod.step(p, bars, s_k0);
    __syncwarp();
    wait_pv_t<RG, MT>(o);
    const bool seg_end = c.last_of_sequence();
    float lsum[RG][4], mfin[RG][4];
    if (seg_end) {
#pragma unroll
      for (int q = 0; q < RG; ++q)
        decode::n16::read_segment_totals(x.lsum + red_of(q), x.mfin + alpha_of(q), buf, t, lsum[q], mfin[q]);
    }
    decode::named_arrive(kBarPEmpty + buf, T::kBarPair);
    if (seg_end) {
      tl.last(7);
      tl.seg();
      const decode::n16::SegmentDest d = decode::n16::segment_dest(p, c.b, x.first_batch, x.first_split);
      write_segment_h16<RG, MT>(fp, o, lsum, mfin, c.b, d.slot, d.n_splits == 1, a, w, lane);
      merges.note(c.b, d.n_splits);
      if (lane == 0) MLA_TL_MARK_LAST(p.timeline, 8);
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int e = 0; e < 8 * RG; ++e) o[i][e] = 0.f;
    }
    c.advance(p);
    ++j;
  }
  tl.flush();
  merges.template finish<decode::Bf16Traits, float, 128 * RG, RG == 1 ? 8 : 4>(p, a * 128 + w * 32 + lane);
}

// kFused: the fused merge (../decode/fused_merge.cuh; the combine-mode instantiation has none of its code).
template <int RG, int kEarlyS, bool kFused>
__global__ void __launch_bounds__(Tile<RG>::kThreads, 1)
    mla_decode_fp8_h16_kernel(const __grid_constant__ Fp8DecodeParams fp) {
  constexpr SmemLayoutH16 L = smem_layout_h16<RG>();
  const decode::DecodeKernelParams& p = fp.d;
  extern __shared__ __align__(1024) uint8_t smem[];
  if (threadIdx.x == 0) decode::clock_probe_start();  // diagnostics builds only (../decode/clock_probe.cuh)
  PartCursor c;
  if (!decode::n16::begin_part(p, c)) {  // an empty part: uniform across the CTA
    decode::FusedMerges<kFused>::zero_empty(p, threadIdx.x, blockDim.x);
    return;
  }
  const Bars bars{decode::smem_u32(smem + L.bar_offset)};
  if (threadIdx.x == 0) {
    bars.init(Tile<RG>::kConsumerWarps);
    for (int q = 0; q < kQSlots; ++q) decode::mbar_init(bars.q_full(q), 1);
    decode::mbar_init_fence();
  }
  __syncthreads();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (warp < kScorerWarps) {
    scorer<RG, kEarlyS>(p, c, bars, smem, warp, lane);
    if (threadIdx.x == 0) decode::clock_probe_stop();
  } else {
    const int acc_warp = warp - kScorerWarps;  // (RG 1: a = 0 as a constant, the 16-row kernel's code)
    accumulator<RG, kFused>(fp, c, bars, smem, RG == 1 ? 0 : acc_warp / kAccWarps, RG == 1 ? acc_warp : acc_warp % kAccWarps, lane);
  }
}

}  // namespace mla::sm90::decode_fp8::h16
