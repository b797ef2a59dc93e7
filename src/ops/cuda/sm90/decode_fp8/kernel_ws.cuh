#pragma once
// Warp-specialized split-KV fp8 decode kernel for 64-row tiles (h_q 64 / 128, or s_q * h_q >= 48): the
// e4m3 version of ../decode/kernel_ws.cuh (same plan, part cursor, ping-pong of pages between two consumer
// warpgroups, epilogue), with both products on 8-bit wgmma.
//
// Roles (384 threads):
//   warpgroup 2, warp 0, one thread: TMA of the Q tile per segment and of each page into kKStages K stages
//     (k_full: TMA bytes; k_empty: the owner's S and the transpose are done with the page);
//   warpgroup 2, warps 1..3: V^T of each page into kVStages V^T stages (transpose_ws.cuh; vt_full: 96
//     arrivals; vt_empty: both consumers' P.V done). (Four transpose warps with the copies issued by one of them
//     between its rounds, sessions 55-71, lost 27-78 % to that warp's polls: bench/decode/patches/
//     fp8_ws_four_transpose_warps.patch.)
//   warpgroups 0 / 1: consumers owning output columns [0, 256) / [256, 512). Page j belongs to warpgroup
//     j % 2, which computes S (m64n64k32), the softmax against the running max of page j - 1 and P (e4m3)
//     into half j % 2 of the P buffer; both warpgroups add P V for their half (m64n256k32).
// Per own page j a consumer runs (the "ahead" schedule, config_ws.h WsSchedule): S_j | wait P_{j-1}, rescale O,
//   issue P_{j-1} V_{j-1} | release K_j | softmax_j, P_j | signal | issue P_j V_j (behind P_{j-1} V_{j-1} when no
//   row's max moved, else after it and a rescale) | release V^T_{j-1}, V^T_j as their products complete. With
//   S::kLatePv (WsQReg, session 51) P_{j-1} V_{j-1} is issued after the signal instead, just before P_j V_j.
// Unlike the 16-bit kernel, the K stage is released right after S (P lives in its own buffer, V in V^T),
// so the TMA of page j + kKStages starts while both P.V products of page j are still to come.
// At a sequence switch the owner of the new segment's first page adds the previous segment's last page and writes
// that segment's epilogue before it waits for the new Q tile and page (run W21: −1…−1.3 % at h128 b128 s4096/8192).
//
// Reuse of the P halves (page j: half j % kPHalves) and of s_m[j % kPHalves] without extra barriers: the next
// write of P half j % kPHalves is the softmax of page j + kPHalves, after its owner waited for P of page
// j + kPHalves - 1. The other warpgroup *issues* its read of P_j before its signal of P_{j+1} (with kLatePv: right
// after it), and that wgmma may still be reading after the signal; it has waited for it before it signals P_{j+3},
// which is what makes 4 halves safe (2 would race). s_m[j % kPHalves] is read right after the P_j wait, before the
// reader's own signal, so kPHalves entries suffice (2 would, too).
#include <cstdint>

#include "mla/ops/decode_running_max.h"
#include "ops/cuda/sm90/decode/clock_probe.cuh"  // effective SM clock (nothing outside a -DMLA_DECODE_CLOCK build)
#include "ops/cuda/sm90/decode/epilogue.cuh"
#include "ops/cuda/sm90/decode/scheduler.cuh"
#include "ops/cuda/sm90/decode/thread_rows.cuh"
#include "ops/cuda/sm90/decode/timeline.cuh"  // MLA_TL_MARK_* (nothing outside a timeline build)
#include "ops/cuda/sm90/decode/traits.h"
#include "ops/cuda/sm90/decode_fp8/mainloop_ws.cuh"
#include "ops/cuda/sm90/decode_fp8/phases_ws.cuh"  // per-phase clock sums (nothing outside a -DMLA_DECODE_PHASES build)
#include "ops/cuda/sm90/decode_fp8/timeline_ws.cuh"
#include "ops/cuda/sm90/decode_fp8/transpose_ws.cuh"

// Knock-outs for measurements (diagnostics only: results are wrong by design; 0 in every normal build, whose SASS is
// the same as without them): -DMLA_FP8_WS_KO=bits, 1 S not issued (scores 0), 2 no P.V wgmma (the part's last page
// excepted), 4 no transpose (V^T stages left as they are), 16 no page TMA (k_full completed by a plain arrive); bits 4
// and 16 also act on kernel_ws3.cuh, whose producer and transposers are these.
// What they showed: bench/decode/NOTES_plan.md sessions 18 and 20. Session 54 (bench/decode/NOTES.md "Session 54"):
// 32 each consumer frees a V^T stage when it issues its P.V from it, not when the product is done (the transposer may
// overwrite V^T under the wgmma): a V^T ring as deep as wanted; 64 the transposers free the K stage before their first
// load from it (transpose_ws.cuh): a K ring one stage deeper; 128 the page's TMA without its rope box
// (mainloop_ws.cuh issue_page_tma). On rows 17 / 18 (h_q 128 b128 s4096 / s8192): 32 -0.3 / -0.1 %, 64 +0.5 / +1.8 %,
// 128 -1.7 / -2.1 %, 16 -8.4 / -7.6 %, 4 -15.2 / -17.1 %. Session 55 (bounds of a sequence switch, not yet run): 256
// the epilogues of segments other than the part's last write nothing (both warpgroups skip them alike, so neither
// exchanges row sums); 512 a new segment keeps the previous segment's Q tile (the producer completes q_full without a
// copy). Session 59 ran them (NOTES.md "Session 59" 4: 256 row 17 -1.4 %, 512 -0.5 %) and added
// 1024 / 2048, the parts of a switch's epilogue (epilogue_out_ws.cuh). Session 70: 4096 the transposers do chunk
// pairs 0-7 only (transpose_ws.cuh): the bound of splitting each page's V^T between the two CTAs of a head-tile pair
// (session 71 built that split: 27-84 % slower, bench/decode/NOTES.md "Session 71").
// (The macro's default, 0, is in config_ws.h: transpose_ws.cuh, mainloop_ws.cuh and epilogue_out_ws.cuh read it too.)
// The V^T transposer's split form (1, session 53: transpose_ws.cuh transpose_page_split, round 0 loaded before the
// V^T stage wait and the K stage released after the last load) or the whole-round form before it (0: for A/B runs).
#ifndef MLA_FP8_WS_TR_SPLIT
#define MLA_FP8_WS_TR_SPLIT 1
#endif
// The owner's row maxima as a tree on whole pages (1, session 53: mainloop_ws.cuh page_row_max) or the serial chains
// before it (0: for A/B runs). Schedules with more than 6 Q-register steps (WsSplit's 8) keep the chains: the tree's
// temporaries made ptxas spill 68 bytes there.
#ifndef MLA_FP8_WS_TREE_MAX
#define MLA_FP8_WS_TREE_MAX 1
#endif
namespace mla::sm90::decode_fp8 {

using decode::kBarPReady;
using decode::kBarWg;
using decode::mbar_arrive;
using decode::mbar_wait;
using decode::PartCursor;

template <int kKStages, int kVStages>
struct WsBarriers {
  uint32_t base;
  __device__ uint32_t k_full(int s) const { return base + 8 * s; }
  __device__ uint32_t k_empty(int s) const { return base + 8 * (kKStages + s); }
  __device__ uint32_t vt_full(int v) const { return base + 8 * (2 * kKStages + v); }
  __device__ uint32_t vt_empty(int v) const { return base + 8 * (2 * kKStages + kVStages + v); }
  __device__ uint32_t q_full() const { return base + 8 * (2 * kKStages + 2 * kVStages); }
  __device__ uint32_t q_empty() const { return q_full() + 8; }
};

// One thread: Q tile of segment s once both consumers released segment s - 1's; page j into K stage
// j % kKStages once page j - kKStages's S and transpose are done.
template <class S, class Bars>
__device__ __forceinline__ void ws_producer(const Fp8DecodeParams& fp, PartCursor c, const Bars& bars,
                                            uint32_t s_q_tile, uint32_t s_k0, int tile_row0) {
  constexpr int kKStages = S::kKStages;
  const decode::DecodeKernelParams& p = fp.d;
  int j = 0, seg = -1;
  bool new_seg = true;
  c.fetch_page(p);
  while (c.valid()) {
    if (new_seg) {
      ++seg;
      // (The q_empty wait stays in knock-out 512 too: it keeps q_full's phases from running ahead of the consumers.)
      if (seg > 0) mbar_wait(bars.q_empty(), (seg - 1) & 1);
      if ((MLA_FP8_WS_KO & 512) != 0 && seg > 0) {
        mbar_arrive(bars.q_full());  // knock-out 512: the segment keeps the previous Q tile
      } else {
        issue_tile_tma(&p.tmap_q, c.b * p.rows + tile_row0, s_q_tile, bars.q_full());
      }
    }
    const int stage = j % kKStages;
    if (j >= kKStages) mbar_wait(bars.k_empty(stage), phase(j - kKStages, kKStages));
    issue_k_page(p, c, c.page, s_k0 + stage * kSlabTileBytes, bars.k_full(stage));
    new_seg = c.last_of_sequence();
    c.advance(p);
    c.fetch_page(p);  // the next page's block-table entry loads while this thread waits
    ++j;
  }
}

// 32 kTrWarps threads: V^T of page j into stage j % kVStages once both consumers are done with page
// j - kVStages's; tokens past the sequence end become zeros. kSplitForm: transpose_ws.cuh's split form
// (MLA_FP8_WS_TR_SPLIT; kernel_ws3.cuh keeps the whole-round form: the split one spilled 56 bytes under its
// 56-register producer warpgroup there).
template <class S, int kTrWarps, bool kSplitForm = (MLA_FP8_WS_TR_SPLIT != 0)>
__device__ __forceinline__ void ws_transposer(const decode::DecodeKernelParams& p, PartCursor c,
                                              const WsBarriers<S::kKStages, S::kVStages>& bars, uint32_t s_k0,
                                              uint32_t s_vt0, int tw) {
  constexpr int kKStages = S::kKStages, kVStages = S::kVStages;
  int j = 0;
  decode::ProducerPhaseSums ph;  // diagnostics only (../decode/phase_sums.cuh, phases_ws.cuh)
  // The split form (transpose_ws.cuh transpose_page_split) waits for K first and for the V^T stage after loading its
  // first round, and arrives on k_empty itself; the knock-out of the transpose keeps the whole form's order.
  constexpr bool kSplit = kSplitForm && (MLA_FP8_WS_KO & 4) == 0;
  while (c.valid()) {
    const int ks = j % kKStages, vs = j % kVStages;
    ph.mark(kTrLoop);
    auto wait_vt = [&] {
      if (j >= kVStages) mbar_wait(bars.vt_empty(vs), phase(j - kVStages, kVStages));
    };
    if constexpr (!kSplit) {
      wait_vt();
      ph.mark(kTrVtWait);
    }
    mbar_wait(bars.k_full(ks), phase(j, kKStages));
    ph.mark(kTrKWait);
    if (tw == 0 && j == 0) MLA_TL_MARK_FIRST(p.timeline, 9);  // timeline_ws.cuh: first K page landed (transposer)
    const uint32_t s_k = s_k0 + ks * kSlabTileBytes, s_vt = s_vt0 + vs * kVtBytes;
    const int valid_keys = c.seqlen - c.blk * kBlockN;
    if constexpr (kSplit) {
      transpose_page<kTrWarps>(s_k, s_vt, valid_keys, tw, [&] {
        ph.mark(kTrTranspose);
        wait_vt();
        ph.mark(kTrVtWait);
      }, bars.k_empty(ks));
    } else if constexpr ((MLA_FP8_WS_KO & 4) == 0) {
      transpose_page<kTrWarps>(s_k, s_vt, valid_keys, tw);
    }
    decode::fence_proxy_async();  // generic stores, read by wgmma (async proxy) after vt_full
    mbar_arrive(bars.vt_full(vs));
    if constexpr (!kSplit) mbar_arrive(bars.k_empty(ks));
    ph.mark(kTrTranspose);
    ph.page();
    if (tw == 0 && c.last_of_sequence() && c.b == c.end_b) MLA_TL_MARK_LAST(p.timeline, 11);  // last V^T written
    c.advance(p);
    ++j;
  }
  if ((tw & 31) == 0) ph.store_producer_warp(tw >> 5);  // per transpose warp (phase_sums.cuh)
}

template <class S, bool kFused>
__device__ __forceinline__ void ws_consumer(const Fp8DecodeParams& fp, PartCursor cur,
                                            const WsBarriers<S::kKStages, S::kVStages>& bars, uint8_t* smem, int wg,
                                            int tid) {
  constexpr int kKStages = S::kKStages, kVStages = S::kVStages;
  constexpr WsSmemLayout L = ws_smem_layout<S>();
  constexpr bool kTreeMax = MLA_FP8_WS_TREE_MAX != 0 && S::kQRegSteps <= 6;  // the owner's row maxima (top of file)
  const decode::DecodeKernelParams& p = fp.d;
  const uint32_t s_q_tile = decode::smem_u32(smem + L.q_offset);
  const uint32_t s_k0 = decode::smem_u32(smem + L.k_offset);
  const uint32_t s_vt0 = decode::smem_u32(smem + L.vt_offset);
  const uint32_t s_p = decode::smem_u32(smem + L.p_offset);
  uint8_t* p_buf = smem + L.p_offset;
  float* s_m = reinterpret_cast<float*>(smem + L.m_offset);  // [j % kPHalves][64]: running max after page j
  float* s_l = reinterpret_cast<float*>(smem + L.l_offset);
  const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  const int tile_row0 = blockIdx.y * kRowsPerCta;
  const int valid_rows = min(kRowsPerCta, p.rows - tile_row0);
  const int32_t* rec = decode::part_record(p);
  const int first_batch = rec[kPartBeginBatch], first_split = rec[kPartFirstSplit];
  int row_local[2], row_i[2];  // the thread's two tile rows and their query positions (causal mask)
  decode::thread_rows(tile_row0, p.h_q, warp, g, row_local, row_i);

  WsTimeline tl;  // diagnostics only (timeline_ws.cuh), empty in a normal build
  tl.init(p, tid == 0);
  decode::FusedMerges<kFused>::zero_empty(p, wg * 128 + tid, kWsConsumerThreads);
  WsState st;
  st.reset();
  decode::ConsumerPhaseSums ph;  // diagnostics only (../decode/phase_sums.cuh, phases_ws.cuh)
  int epi = 0;  // segments written so far (parity of the s_l buffer)
  decode::FusedMerges<kFused> merges;  // split sequences this CTA merges after its part (fused mode)
  // Where a direct segment's output is staged for its TMA stores (S::kTmaOut, config_ws.h). The part's last
  // segment: the K stages, free once both warpgroups are in the epilogue (every S and transpose of the part is done and
  // no page is in flight). A segment followed by another (a switch): each warpgroup's own two 8 KB slots. The warpgroup
  // that owns the next segment's first page (the `switched` path) takes the P area: every P.V is done once both are in
  // the epilogue, and the next P written is its own, after its epilogue; the other warpgroup writes P only after that
  // one (it waits for it), so it takes the spare out area, which nothing else uses.
  auto out_stage = [&](bool part_last, bool switched_wg) {
    OutStage o;
    if (part_last ? S::kTmaOut >= 1 : S::kTmaOut >= 2) {
      o.base = part_last ? s_k0 : switched_wg ? s_p : decode::smem_u32(smem + L.out_offset);
      o.rounds = part_last ? 1 : 2;
    }
    return o;
  };

  // Max of the other warpgroup's page jj, which also says its P is in shared memory.
  auto wait_other = [&](int jj, float (&mp)[2]) {
    decode::named_sync(kBarPReady + (jj & 1), kWsConsumerThreads);
#pragma unroll
    for (int h = 0; h < 2; ++h) mp[h] = s_m[(jj % S::kPHalves) * kRowsPerCta + row_local[h]];
  };
  // Adds page jj (its P and V^T) to this warpgroup's columns, then releases the V^T stage.
  auto pv = [&](int jj, const float (&m)[2], const float (&rowsum)[2]) {
    const int vs = jj % kVStages;
    mbar_wait(bars.vt_full(vs), phase(jj, kVStages));
    pv_page_ws(st, m, rowsum, s_p + p_half_offset(jj % S::kPHalves), s_vt0 + vs * kVtBytes, wg, p.scale_log2);
    mbar_arrive(bars.vt_empty(vs));
  };
  const float zero2[2] = {0.f, 0.f};
  // The page whose P.V group is in flight on O (-1: none); its V^T stage is released once a wait_group
  // has seen it complete. Nothing is in flight at the start of an own page.
  float(&o_regs)[128] = reinterpret_cast<float(&)[128]>(st.o);
  int pend = -1;
  auto release_pending = [&]() {
    if ((MLA_FP8_WS_KO & 32) == 0 && pend >= 0) mbar_arrive(bars.vt_empty(pend % kVStages));
    pend = -1;
  };
  // chained: queued behind a P.V group that may still be in flight on O (same shape, same accumulator: the two
  // are ordered without a wait; touching O here, fence_operands, would make ptxas serialize, C7514). The wgmma fence
  // is still stated: on the path where nothing is in flight (an epilogue reset O at the start of the segment and
  // every row is still masked, so no max moved) O was last written by ordinary instructions, and ptxas would
  // otherwise inject the fence itself (C7519).
  // ph_wait / ph_issue: the phases_ws.cuh sums its V^T wait and its issue go to.
  auto issue_pv = [&](int jj, bool chained, int ph_wait = kPhVtWait1, int ph_issue = kPhPvIssue1) {
    const int vs = jj % kVStages;
    mbar_wait(bars.vt_full(vs), phase(jj, kVStages));
    ph.mark(ph_wait);
    if (!chained) decode::fence_operands(o_regs);
    decode::wgmma_fence();
    if constexpr ((MLA_FP8_WS_KO & 2) == 0)
      pv_issue_ws(o_regs, s_p + p_half_offset(jj % S::kPHalves), s_vt0 + vs * kVtBytes, wg);
    if constexpr ((MLA_FP8_WS_KO & 32) != 0) mbar_arrive(bars.vt_empty(vs));  // at the issue: a bound, not a schedule
    ph.mark(ph_issue);
  };

  // S of a page into sc (issued and committed, not waited for), Q's last kQRegSteps steps from registers.
  constexpr int kQR = S::kQRegSteps;
  uint32_t qf[kQR > 0 ? kQR : 1][4];
  auto issue_s = [&](float (&d)[32], uint32_t s_k) {
    if constexpr ((MLA_FP8_WS_KO & 1) != 0) {
#pragma unroll
      for (int i = 0; i < 32; ++i) d[i] = 0.f;
    } else if constexpr (kQR > 0) {
      scores_qreg<kQR>(d, qf, s_q_tile, s_k);
    } else {
      scores_over_slabs<32, false>(d, s_q_tile, s_k);
    }
  };
  // A segment's epilogue. This warpgroup's next S is of a new segment, whose Q tile it waits for and loads (q_new
  // below), so the Q registers are dead from the segment's last S on; overwriting them after the epilogue tells ptxas
  // so (it frees them for the epilogue; it did not, alone, keep the 8-step build from spilling: config_ws.h).
  // part_last: the part's last segment (knock-out 256 skips the others' output, both warpgroups alike).
  auto epilogue = [&](int b, OutStage out, bool part_last) {
    tl.last(7);  // timeline_ws.cuh: an epilogue started
    const unsigned long long t_epi = tl.now();
    tl.seg();
    bool write = true;
    if constexpr ((MLA_FP8_WS_KO & 256) != 0) {
      write = part_last;
      if (!write) {
        merges.note(b, p.split_offsets[b + 1] - p.split_offsets[b]);  // the fused merge's counters stay whole
        ++epi;
        st.reset();
      }
    }
    if (write)
      ws_fp8_epilogue(fp, st, s_l, epi, b, first_batch, first_split, tile_row0, valid_rows, wg, warp, lane, merges,
                      out);
    tl.add(kTlEpilogue, t_epi);
    if constexpr (kQR > 0 && S::kTmaOut > 0) {
#pragma unroll
      for (int i = 0; i < kQR; ++i)
#pragma unroll
        for (int k = 0; k < 4; ++k) qf[i][k] = 0u;
    }
  };
  int j = 0, seg = -1, q_seg = -1;  // q_seg: newest segment whose Q tile this warpgroup waited for
  bool q_held = false;              // ... and has not released yet
  bool prev_end = true;
  int prev_b = 0;
  while (cur.valid()) {
    const bool first = prev_end;  // first page of a segment
    if (first) ++seg;
    const bool end = cur.last_of_sequence();
    if ((j & 1) == wg) {
      const int ks = j % kKStages;
      float mp[2] = {-INFINITY, -INFINITY};
      // Page j - 1 ended the previous segment: add it and write that segment first, before this segment's Q tile
      // and first page are waited for (the Q tile's TMA starts only once both warpgroups' last S of the previous
      // segment is done): the epilogue then runs under that latency instead of after this page's S, and the other
      // warpgroup, waiting for this one in the epilogue's row-sum barrier, leaves it that much sooner (run W21).
      const bool switched = first && j > 0;
      ph.mark(kPhBetween);
      if (switched) {
        tl.last(6);  // timeline_ws.cuh: a sequence switch
        const unsigned long long t_w = tl.now();
        wait_other(j - 1, mp);
        rescale_o_ws(st, mp, zero2, p.scale_log2);
        issue_pv(j - 1, false, kPhSwitch, kPhSwitch);
        pend = j - 1;
        wgmma_wait_group<0>();
        decode::fence_operands(o_regs);
        release_pending();
        tl.add(kTlEpilogue, t_w);
        epilogue(prev_b, out_stage(false, true), false);
        ph.mark(kPhSwitch);
      }
      const unsigned long long t_top = tl.now();
      // Q of this segment (acquire in order, releasing the segments this warpgroup had no page in).
      bool q_new = false;
      while (q_seg < seg) {
        if (q_held) mbar_arrive(bars.q_empty());
        ++q_seg;
        mbar_wait(bars.q_full(), q_seg & 1);
        q_held = true;
        q_new = true;
      }
      if constexpr (kQR > 0) {
        if (q_new) load_q_frags<kQR>(qf, s_q_tile, warp, lane);
      }
      const unsigned long long t_k = tl.now();
      mbar_wait(bars.k_full(ks), phase(j, kKStages));
      tl.add(kTlKWait, t_k);
      ph.mark(kPhKWait);
      if (j < 2) tl.first(4);  // timeline_ws.cuh: first K page landed (consumer)
      float sc[8][4];
      // Once S_j is done, O is rescaled to m_{j-1} and P_{j-1} V_{j-1} issued before the softmax of page j, which
      // then overlaps it; P_j V_j queues behind it when no row's max moved.
      issue_s(reinterpret_cast<float(&)[32]>(sc), s_k0 + ks * kSlabTileBytes);
      ph.mark(kPhSIssue);
      if (j > 0 && !switched) wait_other(j - 1, mp);
      ph.mark(kPhPWait);
      wgmma_wait_group<0>();  // S_j (rescaling O while it runs makes ptxas insert a wait anyway, C7517)
      decode::fence_operands(reinterpret_cast<float(&)[32]>(sc));
      ph.mark(kPhSTail);
      if (j < 2) tl.first(5);  // timeline_ws.cuh: first S done
      if (first) tl.add(kTlSegStart, t_top);
      // late (S::kLatePv): P_{j-1} V_{j-1} waits until this page's P_j is signalled (config_ws.h).
      const bool late = S::kLatePv && j > 0 && !switched;
      if (!S::kLatePv && j > 0 && !switched) {
        rescale_o_ws(st, mp, zero2, p.scale_log2);
        ph.mark(kPhRescale);
        issue_pv(j - 1, false);
        pend = j - 1;
      }
      mbar_arrive(bars.k_empty(ks));
      // No further page of this segment for this warpgroup: let the producer bring the next Q tile.
      if (cur.hi - cur.blk - 1 < 2 && q_held) {
        mbar_arrive(bars.q_empty());
        q_held = false;
      }
      ph.mark(kPhRelease);
      // Mask keys past each row's visible length (sequence end, causal diagonal); row maxima. Keys past
      // the sequence end may hold NaN codes: the mask replaces their scores whatever they are.
      float mx[2];
      page_row_max<kTreeMax>(sc, p, cur, row_i, t4, mx);  // mainloop_ws.cuh: a tree on whole pages (kTreeMax)
      float m_new[2], rowsum[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        m_new[h] = decode_running_max(first ? -INFINITY : mp[h], mx[h], p.scale_log2, kDecodeFp8MaxSlackLog2);
        const float ms = m_new[h] == -INFINITY ? 0.f : m_new[h] * p.scale_log2;
        float p0[8], p1[8];
        float sum = 0.f;
#pragma unroll
        for (int t = 0; t < 8; ++t) {
          const float x0 = fmaf(sc[t][2 * h], p.scale_log2, -ms), x1 = fmaf(sc[t][2 * h + 1], p.scale_log2, -ms);
          p0[t] = decode::ex2_ftz(x0);  // ptx.h
          p1[t] = decode::ex2_ftz(x1);
          sum += p0[t] + p1[t];  // the row sum uses unrounded P (as the reference does)
        }
        rowsum[h] = sum;
        store_p_e4m3(p_buf, j % S::kPHalves, row_local[h], t4, p0, p1);
        if (t4 == 0) s_m[(j % S::kPHalves) * kRowsPerCta + row_local[h]] = m_new[h];
      }
      decode::fence_proxy_async();  // P is a wgmma operand (async proxy) for both warpgroups
      ph.mark(kPhSoftmax);
      // O is at st.m (= m_{j-1}, or -inf after an epilogue; late: still at m_{j-2}, so m_{j-1} counts too): if no
      // row of the warpgroup moved, P_j V_j queues behind P_{j-1} V_{j-1} on the same accumulator without a rescale.
      bool moved = false;
#pragma unroll
      for (int h = 0; h < 2; ++h) moved = moved || m_new[h] != st.m[h] || (late && mp[h] != st.m[h]);
      const bool keep = !decode_fp8::named_sync_any(kBarWg + wg, 128, moved);
      decode::named_arrive(kBarPReady + (j & 1), kWsConsumerThreads);
      ph.mark(kPhVote);
      ph.page();
      if (late) {  // keep: O, P_{j-1} and P_j all at st.m, so both products queue on O without a wait
        if (!keep) rescale_o_ws(st, mp, zero2, p.scale_log2);
        issue_pv(j - 1, false);
        pend = j - 1;
      }
      if (keep) {
#pragma unroll
        for (int h = 0; h < 2; ++h) st.l[h] += rowsum[h];
        issue_pv(j, true, kPhVtWait2, kPhPvIssue2);
        wgmma_wait_group<1>();  // P.V of page j - 1 (O stays in flight: no fence_operands here, C7514)
      } else {
        wgmma_wait_group<0>();
        decode::fence_operands(o_regs);
        release_pending();
        rescale_o_ws(st, m_new, rowsum, p.scale_log2);
        issue_pv(j, false, kPhVtWait2, kPhPvIssue2);
      }
      release_pending();
      ph.mark(kPhPvWait1);
      pend = j;
      // P_j V_j is waited for here, not in the next own page: accumulators in flight across the loop's branches
      // and back edge make ptxas serialize every wgmma of the kernel (C7514, measured in the compile).
      wgmma_wait_group<0>();
      decode::fence_operands(o_regs);
      release_pending();
      ph.mark(kPhDrain);
      if (end) {
        const bool part_last = cur.last_of_part(p);
        epilogue(cur.b, out_stage(part_last, false), part_last);
      }
    }
    prev_end = end;
    prev_b = cur.b;
    cur.advance(p);
    ++j;
  }
  // The part's last page belongs to the other warpgroup: add it and write the last segment.
  if (j > 0 && ((j - 1) & 1) != wg) {
    float mp[2];
    wait_other(j - 1, mp);
    pv(j - 1, mp, zero2);
    epilogue(prev_b, out_stage(true, false), true);
  }
  tl.last(8);  // timeline_ws.cuh: CTA done
  tl.flush();
  ph.store_consumer(wg, warp, lane);
  merges.template finish<decode::Bf16Traits, __nv_bfloat16, kWsConsumerThreads>(p, tid + 128 * wg);
}

// kFused: the fused merge (../decode/fused_merge.cuh; the combine-mode instantiation has none of its code).
template <class S, bool kFused>
__global__ void __launch_bounds__(kWsThreads, 1) mla_decode_fp8_ws_kernel(const __grid_constant__ Fp8DecodeParams fp) {
  constexpr int kKStages = S::kKStages, kVStages = S::kVStages;
  constexpr WsSmemLayout L = ws_smem_layout<S>();
  const decode::DecodeKernelParams& p = fp.d;
  extern __shared__ __align__(1024) uint8_t smem[];
  // Let the combine grid (programmatic stream serialization) get scheduled as SMs free up.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  if (threadIdx.x == 0) decode::clock_probe_start();  // diagnostics builds only (../decode/clock_probe.cuh)
  const WsBarriers<kKStages, kVStages> bars{decode::smem_u32(smem + L.bar_offset)};
  if (threadIdx.x == 0) {
    for (int s = 0; s < kKStages; ++s) {
      decode::mbar_init(bars.k_full(s), 1);
      decode::mbar_init(bars.k_empty(s), 128 + kWsTransposeThreads);  // owner warpgroup + transposers
    }
    for (int v = 0; v < kVStages; ++v) {
      decode::mbar_init(bars.vt_full(v), kWsTransposeThreads);
      decode::mbar_init(bars.vt_empty(v), kWsConsumerThreads);
    }
    decode::mbar_init(bars.q_full(), 1);
    decode::mbar_init(bars.q_empty(), kWsConsumerThreads);
    decode::mbar_init_fence();
  }
  __syncthreads();
  PartCursor cur;
  if (!cur.init_part(p)) {  // an empty part: uniform across the CTA
    decode::FusedMerges<kFused>::zero_empty(p, threadIdx.x, blockDim.x);
    return;
  }
  const int wg = decode::ws_warpgroup(), tid = threadIdx.x % 128;
  if (wg == 2) {
    decode::setmaxnreg_dec<56>();
    if (tid == 0) {
      ws_producer<S>(fp, cur, bars, decode::smem_u32(smem + L.q_offset), decode::smem_u32(smem + L.k_offset),
                     blockIdx.y * kRowsPerCta);
    } else if (tid >= 32) {
      ws_transposer<S, kWsTrWarps>(p, cur, bars, decode::smem_u32(smem + L.k_offset),
                                   decode::smem_u32(smem + L.vt_offset), tid - 32);
    }
    return;
  }
  decode::setmaxnreg_inc<224>();  // 2 x 224 + 56 = 3 x 168, the launch allocation
  ws_consumer<S, kFused>(fp, cur, bars, smem, wg, tid);
  if (threadIdx.x == 0) decode::clock_probe_stop();
}

}  // namespace mla::sm90::decode_fp8
