#pragma once
// Warp-specialized split-KV decode kernel for 64-row tiles (h_q >= 64, or s_q * h_q >= 48).
//
// Why: the 256-thread kernel (kernel.cuh) runs every phase of a page in series behind CTA-wide
// barriers (wait page -> S -> max exchange -> softmax -> P V -> refill), so the tensor cores idle
// through the softmax and the load latency. Here:
//   - warpgroup 2 is the producer: one thread walks the plan part and issues TMA for Q tiles and KV
//     pages into two stages, on mbarriers (full: TMA bytes; empty: kWsReleaseArrivals: per thread, fp8_ds per warp);
//   - warpgroups 0 and 1 are consumers and own the output columns [0, 256) and [256, 512) (64 x 256
//     fp32 = 128 registers per thread each; setmaxnreg moves the producer's registers to them);
//   - pages alternate owners: page j (j-th page of the part) belongs to warpgroup j % 2, which computes
//     S = Q K^T for all 64 keys (m64n64k16), the softmax against the running max of page j - 1, and P
//     into the page's RoPE slab; both warpgroups then add P V for their half.
// Per own page j a warpgroup runs ("pvfirst"):
//   wait P_{j-1} ready | issue P_{j-1} V_{j-1} | S_j (slab by slab, each on its own full barrier, so S starts
//   on slab 0 while the rest of the page lands; slab 0 queued behind P_{j-1} V_{j-1}, whose stage is released
//   once that group completes, or before S if slab 0 has not landed) | softmax_j, P_j | signal | P_j V_j
// (NOTES.md runs 10-13: no re-wait on the other's full barriers, no wait between the two products, the
// O rescale skipped when the max did not move, P-ready signalled first: -10 to -17 % on the long rows.)
// Adding the other's page j - 1 before S_j releases its stage as early as possible: with two stages the
// release -> refill -> use distance, not the MMA, bounds the page rate. Schedules measured and deleted
// (NOTES.md runs 5-6): S_j before P_{j-1} V_{j-1} (ws_overlap; run 6 with P_{j-1} V_{j-1} asynchronous
// under the softmax: 722 vs 631 us on h128 b128 s8192, the stage release then waits for the next page's
// S), and one full barrier per page. The only cross-warpgroup dependency is the max chain
// m_{j-1} -> m_j (and P_{j-1} itself).
//
// The running max is a chain over pages: m_j = max(m_{j-1}, rowmax S_j), P_j = exp(S_j - m_j). Each
// warpgroup applies pages to its O in order, rescaling by exp(m_{j-1} - m_j) with m_j read from
// shared memory (the exact float the owner used), so both halves end relative to the same max; each
// keeps the row sum of its own pages and the epilogue adds the two.
#include <cstdint>

#include "ops/cuda/sm90/decode/clock_probe.cuh"  // effective SM clock (nothing outside a -DMLA_DECODE_CLOCK build)
#include "ops/cuda/sm90/decode/epilogue.cuh"
#include "ops/cuda/sm90/decode/epilogue_tma_ws.cuh"
#include "ops/cuda/sm90/decode/fused_merge.cuh"
#include "ops/cuda/sm90/decode/mainloop_ws.cuh"
#include "ops/cuda/sm90/decode/phases_ws64.cuh"  // per-phase clock sums (nothing outside a -DMLA_DECODE_PHASES build)
#include "ops/cuda/sm90/decode/producer_ws_fp8ds.cuh"
#include "ops/cuda/sm90/decode/scheduler.cuh"
#include "ops/cuda/sm90/decode/thread_rows.cuh"
#include "ops/cuda/sm90/decode/timeline.cuh"
#include "ops/cuda/sm90/decode/timeline_ws64.cuh"

namespace mla::sm90::decode {

// All slabs of a stage's page landed (TMA bytes visible to the waiting warpgroup).
__device__ __forceinline__ void wait_page(const WsBarriers& bars, int stage, uint32_t parity) {
#pragma unroll 1
  for (int slab = 0; slab < kSlabsPerPage; ++slab) mbar_wait(bars.full(stage, slab), parity);
}

// One thread. Page j goes to stage j % 2 once both consumers released page j - 2 there; the Q tile of
// segment s (the part's s-th sequence) once both released segment s - 1's.
__device__ __forceinline__ void ws_producer(const DecodeKernelParams& p, PartCursor c, const WsBarriers& bars,
                                            uint32_t s_q_tile, uint32_t s_kv0, int tile_row0) {
  int j = 0, seg = -1;
  bool new_seg = true;
  // L2 prefetch cursor, p.l2_prefetch pages ahead of the next shared-memory load beyond the two stages:
  // bytes in flight from DRAM without shared memory to hold them (its block-table entry is read one
  // step early, so the prefetch never waits on it).
  PartCursor pf = c;
  if (p.l2_prefetch > 0) {
    for (int i = 0; i < kWsStages; ++i) pf.advance(p);
    for (int i = 0; i < p.l2_prefetch; ++i) {
      pf.fetch_page(p);
      pf.prefetch_page(p);
      pf.advance(p);
    }
    pf.fetch_page(p);
  }
  c.fetch_page(p);
  ProducerPhaseSums ph;  // diagnostics only (phase_sums.cuh)
  while (c.valid()) {
    ph.mark(kP64ProdLoop);
    if (new_seg) {
      ++seg;
      if (seg > 0) {
        mbar_wait(bars.q_empty(), (seg - 1) & 1);
        MLA_TL_MARK_LAST(p.timeline, 11);  // timeline_ws64.cuh: Q of a later segment issued
      }
      issue_q_tma(p, c.b, tile_row0, s_q_tile, bars.q_full());
    }
    const int stage = j & 1;
    if (j >= kWsStages) mbar_wait(bars.empty(stage), ((j >> 1) - 1) & 1);
    ph.mark(kP64ProdEmptyWait);
#pragma unroll
    for (int slab = 0; slab < kSlabsPerPage; ++slab)
      issue_slab_tma(p, c.page, slab, s_kv0 + stage * kPageBytes, bars.full(stage, slab));
    ph.mark(kP64ProdIssue);
    ph.page();
    new_seg = c.last_of_sequence();
    c.advance(p);
    c.fetch_page(p);  // the next page's block-table entry loads while this thread waits
    if (p.l2_prefetch > 0) {
      pf.prefetch_page(p);
      pf.advance(p);
      pf.fetch_page(p);
    }
    ++j;
  }
  MLA_TL_MARK_LAST(p.timeline, 10);  // timeline_ws64.cuh: the part's last TMA issued
  ph.store_producer();
}

// What a 64-row consumer does with the other warpgroup's pages and at a segment's end, shared by this file's
// ws_consumer and decode_fp8ds/kernel_ws64.cuh's consumer: a view on the consumer's own state (references, as the
// lambdas it replaces captured them), so it compiles to the same code.
// kTmaOut: direct segments through the TMA-store epilogue (kTmaOutFor's default); false: plain stores for every segment
// (the plain-store forms of this file's kernel and of decode_fp8ds/kernel_ws64.cuh, for steps that cut nearly every
// sequence, where the TMA epilogue seldom runs and its code mostly costs the kernel its allocation).
template <class Traits, bool kFused = false, bool kTmaOut = kTmaOutFor<Traits>>
struct WsPeerSteps {
  const DecodeKernelParams& p;
  const WsBarriers& bars;
  WsState& st;
  const float* s_m;  // [stage][64]: running max after each page
  float* s_l;
  const int (&row_local)[2];
  uint32_t s_kv0;
  int wg, warp, lane, tile_row0, valid_rows, first_batch, first_split;
  int epi = 0;  // segments written so far (parity of the s_l buffer)
  FusedMerges<kFused> merges{};  // split sequences this CTA merges after its part (fused mode)

  // Writes the segment of sequence b (out / lse, or its split slot) and starts the next one. stage >= 0: the stage of
  // the segment's last page, where a direct segment (16-bit formats, fp8_ds since session 49) is staged and TMA-stored
  // (epilogue_tma_ws.cuh); -1: plain stores (write_segment_ws). Called through epilogue_release.
  __device__ __forceinline__ void epilogue(int b, int stage = -1) {
    const int n_splits = p.split_offsets[b + 1] - p.split_offsets[b];
    const int slot = p.split_offsets[b] + (b == first_batch ? first_split : 0);
    if (kTmaOut && stage >= 0 && n_splits == 1) {
      write_segment_ws_tma<Traits>(p, st, s_l, epi & 1, b, tile_row0, valid_rows, wg, warp, lane,
                                   s_kv0 + stage * kPageBytes);
    } else {
      write_segment_ws<Traits>(p, st, s_l, epi & 1, b, slot, n_splits == 1, tile_row0, valid_rows, wg, warp, lane);
      merges.note(b, n_splits);
    }
    ++epi;
    st.reset();
  }
  // Writes the segment of sequence b and releases `stage`, the stage of its last page. A direct segment (kTmaOutFor:
  // 16-bit formats and fp8_ds) is staged there for its TMA store, so the release waits for the store's reads; any
  // other segment releases first, so the producer's refill of the stage overlaps the partial stores.
  __device__ __forceinline__ void epilogue_release(int b, int stage) {
    const bool staged = kTmaOut && p.split_offsets[b + 1] - p.split_offsets[b] == 1;
    if (!staged) release_stage<Traits>(bars, stage);
    epilogue(b, staged ? stage : -1);
    if (staged) release_stage<Traits>(bars, stage);
  }
  // Max of the other warpgroup's page jj, which also says its P is in shared memory.
  __device__ __forceinline__ void wait_other(int jj, float (&mp)[2]) const {
    named_sync(kBarPReady + (jj & 1), kWsConsumerThreads);
    // racecheck: hand-off (read after the kBarPReady named barrier)
#pragma unroll
    for (int h = 0; h < 2; ++h) mp[h] = s_m[(jj & 1) * kRowsPerCta + row_local[h]];
  }
  // Issues the other warpgroup's page jj (after wait_other) into O; the caller releases its stage once
  // the product is done. No wait on the page's full barriers: the owner waited on all of them before it
  // wrote P and arrived on the P-ready barrier this warpgroup synced on, and bar.arrive / bar.sync order
  // the owner's prior accesses (its observation of the completed TMA phases included) before ours, as
  // for P itself. Nine already-complete try_waits used to sit on the hand-off path (~5 % of samples).
  __device__ __forceinline__ void pv_other_issue(int jj, const float (&mp)[2]) const {
    const float zero2[2] = {0.f, 0.f};
    rescale_o(st, mp, zero2, p.scale_log2);
    pv_issue<Traits>(st, s_kv0 + (jj & 1) * kPageBytes, wg);
  }
  // After the part's last page j - 1: if it belongs to the other warpgroup, add it and write the last segment.
  __device__ __forceinline__ void finish_part(int j, int prev_b) {
    if (j > 0 && ((j - 1) & 1) != wg) {
      float mp[2];
      wait_other(j - 1, mp);
      pv_other_issue(j - 1, mp);
      pv_wait(st);
      epilogue_release(prev_b, (j - 1) & 1);
    }
  }
};

// Q of segment `seg` for this warpgroup: acquired in order, releasing the segments it had no page in.
__device__ __forceinline__ void acquire_q(const WsBarriers& bars, int seg, int& q_seg, bool& q_held) {
  while (q_seg < seg) {
    if (q_held) mbar_arrive(bars.q_empty());
    ++q_seg;
    mbar_wait(bars.q_full(), q_seg & 1);
    q_held = true;
  }
}

template <class Traits, bool kFused, bool kTmaOut>
__device__ __forceinline__ void ws_consumer(const DecodeKernelParams& p, PartCursor cur, const WsBarriers& bars,
                                            uint8_t* smem, int wg, int tid) {
  constexpr WsSmemLayout L = ws_smem_layout();
  const uint32_t s_q_tile = smem_u32(smem + L.q_offset);
  const uint32_t s_kv0 = smem_u32(smem + L.kv_offset);
  float* s_m = reinterpret_cast<float*>(smem + L.m_offset);  // [stage][64]: running max after the page
  float* s_l = reinterpret_cast<float*>(smem + L.l_offset);
  const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  const int tile_row0 = blockIdx.y * kRowsPerCta;
  const int valid_rows = min(kRowsPerCta, p.rows - tile_row0);
  const int32_t* rec = part_record(p);
  const int first_batch = rec[kPartBeginBatch], first_split = rec[kPartFirstSplit];
  int row_local[2], row_i[2];  // the thread's two tile rows and their query positions (causal mask)
  thread_rows(tile_row0, p.h_q, warp, g, row_local, row_i);

  FusedMerges<kFused>::zero_empty(p, wg * 128 + tid, kWsConsumerThreads);
  WsState st;
  st.reset();
  // The softmax path of bench/decode/NOTES.md run 31: mask_row_max_tree (every format; fp8_ds since session 9,
  // NOTES_fp8_ds.md "Session 9, tidy") and, 16-bit formats only, PStoreAddrs (fp8_ds keeps store_p: not measured).
  constexpr bool k16 = Traits::kFormat != KvFormat::kFp8Ds;
  PStoreAddrs p_addrs;
  if constexpr (k16) p_addrs.init(s_kv0 + wg * kPageBytes, row_local[0], t4);
  WsPeerSteps<Traits, kFused, kTmaOut> peer{p, bars, st, s_m, s_l, row_local, s_kv0, wg, warp, lane, tile_row0,
                                            valid_rows, first_batch, first_split};

  Ws64Timeline tl;  // diagnostics only (timeline_ws64.cuh), empty in a normal build
  tl.init(p, tid == 0);
  ConsumerPhaseSums ph;  // diagnostics only (phase_sums.cuh)

  int j = 0, seg = -1, q_seg = -1;  // q_seg: newest segment whose Q tile this warpgroup waited for
  bool q_held = false;              // ... and has not released yet
  bool prev_end = true;
  int prev_b = 0;
  while (cur.valid()) {
    const bool first = prev_end;  // first page of a segment
    if (first) ++seg;
    const bool end = cur.last_of_sequence();
    if ((j & 1) == wg) {
      const int stage = j & 1;
      const uint32_t s_kv = s_kv0 + stage * kPageBytes;
      uint8_t* stage_ptr = smem + L.kv_offset + stage * kPageBytes;
      float mp[2] = {-INFINITY, -INFINITY};
      int release = -1;  // stage of page j - 1, released by compute_scores_page once its P.V is done
      const unsigned long long t_top = first ? tl.now() : 0ull;
      ph.mark(kP64Between);
      if (j > 0) {
        const unsigned long long t_w = tl.now();
        peer.wait_other(j - 1, mp);
        tl.add(kTl64PReady, t_w);
        ph.mark(kP64PWait);
        peer.pv_other_issue(j - 1, mp);
        ph.mark(kP64PvIssue1);
        if (prev_end) {
          const unsigned long long t_e = tl.now();
          tl.last(6);  // timeline_ws64.cuh: a sequence switch
          tl.last(7);  // timeline_ws64.cuh: an epilogue started
          pv_wait(st);
          peer.epilogue_release(prev_b, (j - 1) & 1);
          tl.add(kTl64Epilogue, t_e);
          tl.seg();
          ph.mark(kP64Switch);
        } else {
          release = (j - 1) & 1;
        }
      }
      acquire_q(bars, seg, q_seg, q_held);  // Q of this segment
      if (j < 2 && seg == 0) tl.first(9);  // timeline_ws64.cuh: Q of segment 0 landed
      const uint32_t parity = (j >> 1) & 1;
#ifdef MLA_DECODE_TIMELINE
      if (j == wg && p.timeline != nullptr) {  // the first own page: wait for slab 0 as S would, to stamp it
        mbar_wait_warp(bars.full(stage, 0), parity);
        tl.first(4);  // timeline_ws64.cuh: first KV page landed (consumer)
      }
#endif
      const int valid_tokens = cur.seqlen - cur.blk * kBlockN;
      // fp8_ds pages arrive with their tail already zeroed by the dequantizing producer.
      if (Traits::kFormat != KvFormat::kFp8Ds && valid_tokens < kBlockN) {
        wait_page(bars, stage, parity);
        zero_page_tail_wg(stage_ptr, valid_tokens, tid);
        fence_proxy_async();  // generic zeros before wgmma (and the next TMA) touch the stage
        named_sync(kBarWg + wg, 128);
      }
      ph.mark(kP64QWait);
      float sc[8][4];
      compute_scores_page<Traits>(sc, s_q_tile, s_kv, bars.full(stage, 0), parity, bars, release);
      fence_operands(reinterpret_cast<float(&)[128]>(st.o));  // the P.V issued above is done, too
      if (j < 2) tl.first(5);  // timeline_ws64.cuh: the first S done
      if (first) tl.add(kTl64SegStart, t_top);
      ph.mark(kP64S);
      // No further page of this segment for this warpgroup: let the producer bring the next Q tile.
      if (cur.hi - cur.blk - 1 < 2 && q_held) {
        mbar_arrive(bars.q_empty());
        q_held = false;
      }
      ph.mark(kP64Release);
      float mx[2], m_new[2], rowsum[2];
      uint32_t pw[2][8];  // P packed to 16 bits: [row g / g + 8][8-key tile]
      mask_row_max_tree(sc, p, cur.seqlen, cur.blk, row_i, t4, mx);
      softmax_page<Traits>(sc, mx, first, mp, p.scale_log2, m_new, rowsum, pw);
      if constexpr (k16) p_addrs.store(pw);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if constexpr (!k16) store_p(stage_ptr + kRopeSlab * kSlabBytes, row_local[h], t4, pw[h]);
        // racecheck: hand-off (s_m for the other warpgroup, ordered by the kBarPReady named barrier)
        if (t4 == 0) s_m[stage * kRowsPerCta + row_local[h]] = m_new[h];
      }
      fence_proxy_async();  // P is a wgmma operand (async proxy) for the other warpgroup (and here for fp8_ds)
      ph.mark(kP64Softmax);
      // Signal first: each thread's arrive covers its own P and s_m writes, and the other warpgroup needs all 128
      // arrivals anyway. 16-bit formats: this warpgroup's own P.V takes P from registers, so no 128-thread barrier
      // before it and 8 KB less shared memory read per page (run 22: -0.7 to -1.3 % on the bf16 long rows).
      // fp8_ds (consumers at 208 registers) measured +1.5 % with it and keeps the shared-memory P.V.
      named_arrive(kBarPReady + stage, kWsConsumerThreads);
      ph.mark(kP64Signal);
      ph.page();
      if constexpr (Traits::kFormat != KvFormat::kFp8Ds) {
        pv_page_rs<Traits>(st, m_new, rowsum, pw, s_kv, wg, p.scale_log2);
      } else {
        named_sync(kBarWg + wg, 128);  // its P.V reads every thread's P from the stage
        pv_page<Traits>(st, m_new, rowsum, s_kv, wg, p.scale_log2);
      }
      ph.mark(kP64OwnPv);
      if (end) {
        const unsigned long long t_e = tl.now();
        tl.last(7);  // timeline_ws64.cuh: an epilogue started
        peer.epilogue_release(cur.b, stage);
        tl.add(kTl64Epilogue, t_e);
        tl.seg();
      } else {
        release_stage<Traits>(bars, stage);
      }
      ph.mark(kP64Epilogue);
    }
    prev_end = end;
    prev_b = cur.b;
    cur.advance(p);
    ++j;
  }
  if (j > 0 && ((j - 1) & 1) != wg) {  // finish_part writes the last segment (its time: the P-ready wait too)
    tl.last(7);  // timeline_ws64.cuh: an epilogue started
    const unsigned long long t_e = tl.now();
    peer.finish_part(j, prev_b);
    tl.add(kTl64Epilogue, t_e);
    tl.seg();
  }
  tl.last(8);  // timeline_ws64.cuh: CTA done (the last epilogue's stores issued)
  tl.flush();
  ph.store_consumer(wg, warp, lane);
  peer.merges.template finish<Traits, float, kWsConsumerThreads>(p, wg * 128 + tid);
}

// kFused: the fused merge (fused_merge.cuh; the combine-mode instantiation has none of its code). kTmaOut: direct
// segments through the TMA-store epilogue (the default); false: the plain-store form (WsPeerSteps), launched with the
// combine only (launch_decode_ws).
template <class Traits, bool kFused, bool kTmaOut = kTmaOutFor<Traits>>
__global__ void __launch_bounds__(kWsThreads, 1) mla_decode_ws_kernel(const __grid_constant__ DecodeKernelParams p) {
  // fp8_ds: the producer warpgroup dequantizes latent slabs (producer_ws_fp8ds.cuh), which then complete
  // one by one on the per-slab full barriers.
  constexpr bool kDequant = Traits::kFormat == KvFormat::kFp8Ds;
  constexpr WsSmemLayout L = ws_smem_layout(kDequant);
  extern __shared__ __align__(1024) uint8_t smem[];
  // Let the combine grid (programmatic stream serialization) get scheduled as SMs free up.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  if (threadIdx.x == 0) clock_probe_start();  // diagnostics builds only (clock_probe.cuh)
  const WsBarriers bars{smem_u32(smem + L.bar_offset)};
  if (threadIdx.x == 0) {
    for (int s = 0; s < kWsStages; ++s) {
      for (int slab = 0; slab < kSlabsPerPage; ++slab)
        mbar_init(bars.full(s, slab), kDequant && slab < kRopeSlab ? kConverterThreads : 1);
      mbar_init(bars.empty(s), kWsReleaseArrivals<Traits>);
      if constexpr (kDequant)
        for (int slab = 0; slab < kRopeSlab; ++slab) mbar_init(bars.raw(s, slab), 1);
    }
    mbar_init(bars.q_full(), 1);
    mbar_init(bars.q_empty(), kWsConsumerThreads);
    mbar_init_fence();
  }
  __syncthreads();
  PartCursor cur;
  if (!cur.init_part(p)) {  // an empty part: uniform across the CTA
    FusedMerges<kFused>::zero_empty(p, threadIdx.x, blockDim.x);
    return;
  }
  const int wg = ws_warpgroup(), tid = threadIdx.x % 128;
  // Register split (64512 per CTA): 16-bit 40 / 232; fp8_ds 72 / 208, since the converters' two-slab steps
  // spill below 72 and the consumers still fit 208 without spilling (ptxas -v; fp8_ds run G2).
  if (wg == 2) {
    if constexpr (kDequant) {
      setmaxnreg_dec<72>();
    } else {
      setmaxnreg_dec<40>();
    }
    if constexpr (kDequant) {
      if (tid == 0)
        ws_issue_fp8ds(p, cur, bars, smem_u32(smem + L.q_offset), smem_u32(smem + L.kv_offset),
                       smem_u32(smem + L.scale_offset), blockIdx.y * kRowsPerCta);
      else if (tid >= 32)
        ws_convert_fp8ds(p, cur, bars, smem + L.kv_offset, smem + L.scale_offset, tid - 32);
    } else if (tid == 0) {
      ws_producer(p, cur, bars, smem_u32(smem + L.q_offset), smem_u32(smem + L.kv_offset),
                                blockIdx.y * kRowsPerCta);
    }
    return;
  }
  if constexpr (kDequant) {
    setmaxnreg_inc<208>();
  } else {
    setmaxnreg_inc<232>();
  }
  ws_consumer<Traits, kFused, kTmaOut>(p, cur, bars, smem, wg, tid);
  if (threadIdx.x == 0) clock_probe_stop();
}

}  // namespace mla::sm90::decode
