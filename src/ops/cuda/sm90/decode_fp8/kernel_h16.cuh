#pragma once
// Split-KV fp8 decode for 16-row tiles on 8-bit wgmma (constants and rationale: config_h16.h). Same plan, part
// cursor, partials layout and combine as every decode kernel; one CTA per (part, head tile), 256 threads:
//   warpgroup 0 (scorer): S^T_j = K_j Q^T (18 x m64n16k32), release the stage, mask, row max (shuffles + one
//     128-thread exchange), P_j = exp2(S scale - m) as e4m3 into P buffer j % 2, alpha_j (and the row sums / max
//     at a segment end) -> P_full[j % 2]; its thread 0 also loads the Q tiles (five 16 x 128 B boxes, sequence n
//     into slot n % kQSlots on q_full[slot]: n = 0, 1 up front, n + 2 once all four warps are past n's last S);
//   warpgroup 1 (accumulator): V^T_j fragments (ldmatrix.trans, before P_j exists), release the stage, wait
//     P_full, O^T = O^T alpha + V^T P^T (16 x m64n16k32, A from registers) -> P_empty[j % 2], epilogue; its
//     thread 0 also issues the pages: page j + L into stage (j + L) % kStages (its five 64 x 128 B slabs on
//     full[stage]: one 3D copy, or five 2D boxes for evict-first pages, page_tma.cuh) once its P.V wgmmas of page j
//     are issued and all 8 warps released the stage's previous page;
//     L = kStages, or kShallowLead for a part of few pages (producer_lead).
// So the scorer's page j + 1 overlaps the accumulator's page j, and neither waits for the other's barrier more
// than once per page. Stage j is released by 8 warp arrivals (4 scorer warps after S, 4 accumulator warps after
// their ldmatrix), so the TMA of page j + L overlaps the P.V of page j.
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

#include "ops/cuda/sm90/decode/clock_probe.cuh"  // effective SM clock (nothing outside a -DMLA_DECODE_CLOCK build)
#include "ops/cuda/sm90/decode/handoff_n16.cuh"
#include "ops/cuda/sm90/decode/scheduler.cuh"
#include "ops/cuda/sm90/decode/timeline.cuh"
#include "ops/cuda/sm90/decode/tma.h"
#include "ops/cuda/sm90/decode_fp8/epilogue.cuh"
#include "ops/cuda/sm90/decode_fp8/mainloop_h16.cuh"
#include "ops/cuda/sm90/decode_fp8/page_tma.cuh"
#include "ops/cuda/sm90/decode_fp8/params.h"

namespace mla::sm90::decode_fp8::h16 {

using decode::mbar_arrive;
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
  const int32_t* rec = p.parts + static_cast<int64_t>(blockIdx.x) * kPlanPartInts;
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

// Q tiles, run by scorer thread 0 (decode/handoff_n16.cuh): five 16 x 128-byte boxes per tile.
using QLoader = decode::n16::QLoader<kSlabs, 128, kQSlabBytes, kQSlots>;

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
template <int kEarlyS>
__device__ __forceinline__ void scorer(const decode::DecodeKernelParams& p, PartCursor c, const Bars& bars,
                                       uint8_t* smem, int w, int lane) {
  constexpr SmemLayoutH16 L = smem_layout_h16();
  const uint32_t s_k0 = decode::smem_u32(smem + L.k_offset), s_q0 = decode::smem_u32(smem + L.q_offset);
  const uint32_t s_p0 = decode::smem_u32(smem + L.p_offset);
  float* s_red = reinterpret_cast<float*>(smem + L.red_offset);      // [2][16][4]
  float* s_alpha = reinterpret_cast<float*>(smem + L.alpha_offset);  // [2][16]
  float* s_lsum = reinterpret_cast<float*>(smem + L.lsum_offset);    // [2][16][4]
  float* s_mfin = reinterpret_cast<float*>(smem + L.mfin_offset);    // [2][16]
  const int g = lane >> 2, t = lane & 3;
  ScorerState st;
  st.reset();
  const bool q_loader = w == 0 && lane == 0;
  QLoader ql{c};
  if (q_loader) ql.start(p, bars, s_q0);
  bool seq_start = true, pre = false;
  int j = 0, seq = 0;
  H16Timeline tl;
  tl.init(p, q_loader);
  float s_next[8];
  while (c.valid()) {
    const int stage = j % kStages, buf = j & 1;
    const bool seg_end = c.last_of_sequence();
    if (seq_start) mbar_wait(bars.q_full(seq % kQSlots), phase_of(seq, kQSlots));
    seq_start = seg_end;
    float s[8];
    if (!pre) {
      const unsigned long long t0 = tl.now();
      mbar_wait(bars.full(stage), phase_of(j, kStages));
      tl.add(kTlScorerFull, t0);
      if (j == 0) tl.first(4);
      issue_scores_t(s, s_k0 + stage * kSlabTileBytes, s_q0 + (seq % kQSlots) * kQTileBytes);
      decode::wgmma_wait_all();
      decode::fence_operands(s);
    } else {
      decode::wgmma_wait_all();
      decode::fence_operands(s_next);
#pragma unroll
      for (int i = 0; i < 8; ++i) s[i] = s_next[i];
    }
    if (j == 0) tl.first(5);
    if (j == kStages - 1) tl.first(9);
    if (seg_end) tl.last(11);
    __syncwarp();
    if (lane == 0) mbar_arrive(bars.empty(stage));
    // s_q 1 (this kernel's tiles): every row sees keys < seqlen.
    // Row-max exchange across the 4 warps: [buf][row][warp], so one float4 per row. buf alternates by page: a warp
    // writing page j + 1's entries has passed page j's barrier, so nobody still reads page j - 1's.
    float* red = s_red + buf * kRows * 4;
    // Lanes g < 4 hold one row each (mask_and_warp_max).
    const float mx = mask_and_warp_max(s, c.seqlen - c.blk * kBlockN, w, g);
    if (g < 4) red[decode::n16::row_of(warp_max_row(g), t) * 4 + w] = mx;
    const int next_stage = (j + 1) % kStages;
    const bool probe = q_loader && !seg_end && kEarlyS != kEarlySNever &&
                       (kEarlyS == kEarlySAlways || decode::mbar_test(bars.full(next_stage), phase_of(j + 1, kStages)));
    pre = decode::named_sync_or(kBarScorer, 32 * kScorerWarps, probe) != 0;
    if (pre) {
      // Completed (auto: each thread observes it itself) or not yet (always: this is the wait). No deadlock with
      // `always`: page j + 1 is issued after the P.V of page j + 1 - kStages, whose P this warpgroup handed off.
      mbar_wait(bars.full(next_stage), phase_of(j + 1, kStages));
      issue_scores_t(s_next, s_k0 + next_stage * kSlabTileBytes, s_q0 + (seq % kQSlots) * kQTileBytes);
    }
    // Every warp's S of this sequence has completed (wgmma waited, then this barrier): its Q slot is free.
    if (q_loader && seg_end) ql.issue(p, bars, s_q0);
    float alpha[4], m_scaled[4], pr[8];
    // The exps as ex2.approx.ftz (ptx.h ex2_ftz; fp8s run 2: b128 s4096 / s8192 −0.3…−0.9 µs alone).
    decode::n16::update_row_max<true, true>(red, st.m, alpha, m_scaled, p.scale_log2, t);  // alpha exactly 1: see below
    decode::n16::exp_and_row_sums<true>(s, pr, st.l, alpha, m_scaled, p.scale_log2);
    // P buffer `buf` is free once the accumulator finished P.V of page j - 2 (pre-armed for pages 0 and 1).
    const unsigned long long t1 = tl.now();
    decode::named_sync(kBarPEmpty + buf, kBarPair);
    tl.add(kTlScorerPEmpty, t1);
    store_p_packed(s_p0 + buf * kPBufBytes, pr, w, g, t);
    if (w == 0 && g == 0) {
      // racecheck: hand-off (s_alpha for the accumulator, ordered by the P_full named barrier)
#pragma unroll
      for (int r = 0; r < 4; ++r) s_alpha[buf * kRows + 8 * (r >> 1) + 2 * t + (r & 1)] = alpha[r];
    }
    if (seg_end) {
      decode::n16::publish_segment_totals(st.l, st.m, s_lsum, s_mfin, buf, w, g, t);
      st.reset();
      ++seq;
    }
    decode::fence_proxy_async();  // P (generic stores) is read by wgmma (async proxy) after P_full
    decode::named_arrive(kBarPFull + buf, kBarPair);
    if (seg_end) tl.last(6);
    c.advance(p);
    ++j;
  }
  tl.flush();
}

// Epilogue of one segment (accumulator warpgroup): out = O / l * k_scale as bf16 (single split) or the fp32
// partial and its lse into the split slot, in the partials layout the combine kernel reads.
__device__ __forceinline__ void write_segment_h16(const Fp8DecodeParams& fp, const float (&o)[8][8], const float (&lsum)[4],
                                                  const float (&mfin)[4], int b, int slot, bool direct, int w, int lane) {
  const decode::DecodeKernelParams& p = fp.d;
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int row = 8 * (r >> 1) + 2 * t + (r & 1), jj = r >> 1, e = r & 1;
    const float total = lsum[r];
    const float inv = total > 0.f ? fp.out_scale / total : 0.f;
    const float lse = total > 0.f ? mfin[r] * p.softmax_scale + logf(total) : -INFINITY;
    if (direct) {
      uint16_t* out = static_cast<uint16_t*>(p.out) + (static_cast<int64_t>(b) * p.rows + row) * kDimV + 16 * w + 2 * g;
#pragma unroll
      for (int i = 0; i < 8; ++i)
        *reinterpret_cast<uint32_t*>(out + 64 * i) = pack_bf16x2(o[i][4 * jj + e] * inv, o[i][4 * jj + 2 + e] * inv);
      if (w == 0 && g == 0) p.lse[(static_cast<int64_t>(b) * p.h_q + row % p.h_q) * p.s_q + row / p.h_q] = lse;
    } else {
      // Dims 64 i + 16 w + 2 g + {0, 1}: one pair, stored where decode/partials.h puts it (the 8 lanes g of a row
      // still fill its 64 B).
      float* acc = p.o_accum + (static_cast<int64_t>(slot) * p.rows + row) * kDimV +
                   decode::partial_pair_offset(16 * w + 2 * g);
#pragma unroll
      for (int i = 0; i < 8; ++i)
        *reinterpret_cast<float2*>(acc + 64 * i) = make_float2(o[i][4 * jj + e] * inv, o[i][4 * jj + 2 + e] * inv);
      if (w == 0 && g == 0) p.lse_accum[static_cast<int64_t>(slot) * p.rows + row] = lse;
    }
  }
}

__device__ __forceinline__ void accumulator(const Fp8DecodeParams& fp, PartCursor c, const Bars& bars, uint8_t* smem,
                                            int w, int lane) {
  constexpr SmemLayoutH16 L = smem_layout_h16();
  const decode::DecodeKernelParams& p = fp.d;
  const uint32_t s_k0 = decode::smem_u32(smem + L.k_offset), s_p0 = decode::smem_u32(smem + L.p_offset);
  const float* s_alpha = reinterpret_cast<const float*>(smem + L.alpha_offset);
  const float* s_lsum = reinterpret_cast<const float*>(smem + L.lsum_offset);
  const float* s_mfin = reinterpret_cast<const float*>(smem + L.mfin_offset);
  const int t = lane & 3;
  const int32_t* rec = p.parts + static_cast<int64_t>(blockIdx.x) * kPlanPartInts;
  const int first_batch = rec[kPartBeginBatch], first_split = rec[kPartFirstSplit];
  decode::named_arrive(kBarPEmpty + 0, kBarPair);  // both P buffers start free
  decode::named_arrive(kBarPEmpty + 1, kBarPair);
  float o[8][8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int e = 0; e < 8; ++e) o[i][e] = 0.f;
  const bool is_producer = w == 0 && lane == 0;
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
    uint32_t vf[2][8][4];
    load_v_frags(vf, s_k0 + stage * kSlabTileBytes, c.seqlen - c.blk * kBlockN, w, lane);
    __syncwarp();
    if (lane == 0) mbar_arrive(bars.empty(stage));  // release orders the ldmatrix reads before the refill
    const unsigned long long t0 = tl.now();
    decode::named_sync(kBarPFull + buf, kBarPair);
    tl.add(kTlAccPFull, t0);
    float alpha[4];
    // racecheck: hand-off (read after the P_full named barrier)
#pragma unroll
    for (int r = 0; r < 4; ++r) alpha[r] = s_alpha[buf * kRows + 8 * (r >> 1) + 2 * t + (r & 1)];
    // The O rescale only on pages where a row of this warp moved its running max: elsewhere every alpha is exactly 1
    // (update_row_max<true>) and the 64 multiplies would leave O as it is. Once the max settles most pages skip them,
    // and the accumulator's per-page instructions are on the page rate's path (the bare page stream runs at 1.04 µs per
    // page, the kernel at 1.12). H200 (NOTES_fp8.md session 9, fp8b32 run B3, one call, two passes): b128 s8192
    // −2.5 µs, clean-L2 slope 1.14 -> 1.12 µs per page; b1 / s512 rows +0.1…+0.35 µs. A warp vote: a uniform branch.
    if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f || alpha[2] != 1.f || alpha[3] != 1.f)) {
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int jj = 0; jj < 2; ++jj)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            o[i][4 * jj + e] *= alpha[2 * jj + e];
            o[i][4 * jj + 2 + e] *= alpha[2 * jj + e];
          }
    }
    issue_pv_t(o, vf, s_p0 + buf * kPBufBytes);
    // Page j + kStages into this stage (once all 8 warps released it) while the P.V wgmmas run. Before the
    // P_full barrier, warp 0's step held up the barrier and with it the other three warps (the scorer waited 28 %
    // of its time for P_empty, the accumulator 23 % for P_full): -4 % at b128 s8192 (NOTES_fp8.md runs H7-H8).
    if (is_producer) prod.step(p, bars, s_k0);
    __syncwarp();
    wait_pv_t(o);
    const bool seg_end = c.last_of_sequence();
    float lsum[4], mfin[4];
    if (seg_end) decode::n16::read_segment_totals(s_lsum, s_mfin, buf, t, lsum, mfin);
    decode::named_arrive(kBarPEmpty + buf, kBarPair);
    if (seg_end) {
      tl.last(7);
      tl.seg();
      const decode::n16::SegmentDest d = decode::n16::segment_dest(p, c.b, first_batch, first_split);
      write_segment_h16(fp, o, lsum, mfin, c.b, d.slot, d.n_splits == 1, w, lane);
      if (lane == 0) MLA_TL_MARK_LAST(p.timeline, 8);
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int e = 0; e < 8; ++e) o[i][e] = 0.f;
    }
    c.advance(p);
    ++j;
  }
  tl.flush();
}

template <int kEarlyS>
__global__ void __launch_bounds__(kThreads, 1) mla_decode_fp8_h16_kernel(const __grid_constant__ Fp8DecodeParams fp) {
  constexpr SmemLayoutH16 L = smem_layout_h16();
  const decode::DecodeKernelParams& p = fp.d;
  extern __shared__ __align__(1024) uint8_t smem[];
  if (threadIdx.x == 0) decode::clock_probe_start();  // diagnostics builds only (../decode/clock_probe.cuh)
  PartCursor c;
  if (!decode::n16::begin_part(p, c)) return;
  const Bars bars{decode::smem_u32(smem + L.bar_offset)};
  if (threadIdx.x == 0) {
    bars.init(kScorerWarps + kAccWarps);
    for (int q = 0; q < kQSlots; ++q) decode::mbar_init(bars.q_full(q), 1);
    decode::mbar_init_fence();
  }
  __syncthreads();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (warp < kScorerWarps) {
    scorer<kEarlyS>(p, c, bars, smem, warp, lane);
    if (threadIdx.x == 0) decode::clock_probe_stop();
  } else {
    accumulator(fp, c, bars, smem, warp - kScorerWarps, lane);
  }
}

}  // namespace mla::sm90::decode_fp8::h16
