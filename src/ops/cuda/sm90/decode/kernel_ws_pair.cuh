#pragma once
// "Pair" schedule of the warp-specialized 64-row kernel (kernel_ws.cuh), 16-bit KV formats.
//
// Why: in the pvfirst schedule (kernel_ws.cuh) page j + 1's S starts only once page j's P exists, so the
// tensor cores idle through every page's softmax (the other warpgroup waits for that P). Here the pages of
// a sequence go in pairs (a, b): a in stage 0, its S / softmax / P by warpgroup 0; b in stage 1, by
// warpgroup 1. Both S run at the same time; the only dependency between the two softmaxes is the row max:
// warpgroup 0 publishes m_a = max(m_prev, rowmax S_a) before its exponentials, warpgroup 1 computes
// m_b = max(m_a, rowmax S_b) from it. P_a is relative to m_a and P_b to m_b; each warpgroup adds
// O_half = O_half * exp(m_o - m_a) + P_a V_a[half], then O_half = O_half * exp(m_a - m_b) + P_b V_b[half]
// (the second rescale waits for the first product only when some row's max moved, which after the first
// pages is rare). Each warpgroup keeps the row sum of the P it computed; the epilogue adds the two.
//
// Each warpgroup's own P.V takes P from registers (wgmma with A in registers), so P in shared memory (the
// page's RoPE slab, dead once its S is done) is read only by the other warpgroup. Stages are released by
// halves, each half by the one warpgroup that reads it last: lo(s) by warpgroup 0 after its P.V there, hi(s)
// by warpgroup 1 after its P.V (4 warp arrivals each). Stage 0 (page a): lo = slabs 0-3 (V columns 0-255),
// hi = slabs 4-8 (V columns 256-511 and P_a, which warpgroup 1 reads). Stage 1 (page b): lo = slabs 0-3 and
// 8 (P_b, read by warpgroup 0), hi = slabs 4-7. The owner's S and P stores precede its hand-off signal,
// which the other warpgroup waits for before its P.V and hence before its release. One producer thread per
// stage refills each half as soon as it is free. Pairs restart with every segment (a sequence's pages in
// the part): a segment with an odd page count ends on a pair without b, and the next one starts in stage
// 0 again, so the producers and the consumers count uses per stage for the barrier parities.
//
// Hand-offs (named barriers, arrive by one warpgroup, sync by the other, 256 threads):
//   kBarMaxA: m_a in s_ma[pair parity] (only pairs with a page b: warpgroup 1 has no softmax otherwise);
//   kBarPA + pair parity: P_a in stage 0 and m_a; two ids because warpgroup 0 may signal pair i + 1
//     (after it synced P_b of pair i) before warpgroup 1 synced P_a of pair i;
//   kBarPB: P_b in stage 1 and m_b in s_mb[pair parity].
// No id can run a whole generation ahead: warpgroup 0 arrives on kBarMaxA / kBarPA of pair i + 1 only after
// kBarPB of pair i, which warpgroup 1 arrives on after its kBarMaxA sync of pair i; kBarPA of pair i + 2 only
// after kBarPB of pair i + 1, which comes after warpgroup 1's kBarPA sync of pair i. A pair without b ends
// its segment, and the epilogue's 256-thread barrier separates it from the next pair. s_ma / s_mb entries
// of parity i & 1 are rewritten at pair i + 2 by the same ordering.
#include <cstdint>

#include "ops/cuda/sm90/decode/epilogue.cuh"
#include "ops/cuda/sm90/decode/mainloop_ws.cuh"
#include "ops/cuda/sm90/decode/scheduler.cuh"

namespace mla::sm90::decode {

constexpr int kBarMaxA = 6;
constexpr int kBarPB = 7;
constexpr int kBarPA = 8;  // and 9

struct PairBarriers {
  uint32_t base;
  __device__ uint32_t full(int stage, int slab) const { return base + 8 * (stage * kSlabsPerPage + slab); }
  __device__ uint32_t lo(int stage) const { return base + 8 * (kWsStages * kSlabsPerPage + stage); }
  __device__ uint32_t hi(int stage) const { return base + 8 * (kWsStages * kSlabsPerPage + kWsStages + stage); }
  __device__ uint32_t q_full() const { return base + 8 * (kWsStages * kSlabsPerPage + 2 * kWsStages); }
  __device__ uint32_t q_empty() const { return q_full() + 8; }
};
static_assert(8 * (kWsStages * kSlabsPerPage + 2 * kWsStages + 2) <= kWsBarrierBytes, "barrier area");

// Shared memory: Q tile and two stages as in ws_smem_layout, then s_ma / s_mb [pair parity][64], the
// epilogue's row sums [parity][warpgroup][64], the mbarriers.
struct PairSmemLayout {
  int q_offset, kv_offset, ma_offset, mb_offset, l_offset, bar_offset, total;
};
constexpr PairSmemLayout pair_smem_layout() {
  PairSmemLayout s{};
  s.q_offset = 0;
  s.kv_offset = kRowsPerCta * kRowBytes;
  s.ma_offset = s.kv_offset + kWsStages * kPageBytes;
  s.mb_offset = s.ma_offset + 2 * kRowsPerCta * 4;
  s.l_offset = s.mb_offset + 2 * kRowsPerCta * 4;
  s.bar_offset = s.l_offset + 2 * 2 * kRowsPerCta * 4;
  s.total = s.bar_offset + kWsBarrierBytes;
  return s;
}
static_assert(pair_smem_layout().total <= 227 * 1024, "pair schedule fits the sm90 shared-memory limit");

// Does the part (cursor at its start) have at most `limit` pages? Counts whole sequences at a time.
__device__ __forceinline__ bool part_pages_at_most(const DecodeKernelParams& p, PartCursor c, int limit) {
  int n = 0;
  while (c.valid() && n <= limit) {
    n += c.hi - c.blk;
    c.blk = c.hi - 1;
    c.advance(p);
  }
  return n <= limit;
}

__device__ __forceinline__ void pair_init_barriers(const PairBarriers& bars) {
  for (int s = 0; s < kWsStages; ++s) {
    for (int slab = 0; slab < kSlabsPerPage; ++slab) mbar_init(bars.full(s, slab), 1);
    mbar_init(bars.lo(s), kWsReleaseWarps / 2);
    mbar_init(bars.hi(s), kWsReleaseWarps / 2);
  }
  mbar_init(bars.q_full(), 1);
  mbar_init(bars.q_empty(), kWsConsumerThreads);
  mbar_init_fence();
}

// Thread `stage` of the producer: the pages of stage `stage` (page k of a segment goes to stage k % 2): the
// lo slabs once warpgroup 0 released the stage's previous page's lo half, the hi slabs once warpgroup 1
// released its hi half. Thread 0 also brings the Q tile of segment s once both consumers released s - 1's.
template <int stage>
__device__ __forceinline__ void pair_producer(const DecodeKernelParams& p, PartCursor c, const PairBarriers& bars,
                                              uint32_t s_q_tile, uint32_t s_kv0, int tile_row0) {
  int k = 0, seg = -1, uses = 0;
  bool new_seg = true;
  const uint32_t dst = s_kv0 + stage * kPageBytes;
  c.fetch_page(p);
  while (c.valid()) {
    if (new_seg) {
      ++seg;
      k = 0;
      if constexpr (stage == 0) {
        if (seg > 0) mbar_wait(bars.q_empty(), (seg - 1) & 1);
        issue_q_tma(p, c.b, tile_row0, s_q_tile, bars.q_full());
      }
    }
    if ((k & 1) == stage) {
      const int n = uses++;
      // The RoPE slab (P) goes with the lo half in stage 1, with the hi half in stage 0.
      if (n > 0) mbar_wait(bars.lo(stage), (n - 1) & 1);
#pragma unroll 1
      for (int slab = 0; slab < 4; ++slab) issue_slab_tma(p, c.page, slab, dst, bars.full(stage, slab));
      if constexpr (stage == 1) issue_slab_tma(p, c.page, kRopeSlab, dst, bars.full(stage, kRopeSlab));
      if (n > 0) mbar_wait(bars.hi(stage), (n - 1) & 1);
#pragma unroll 1
      for (int slab = 4; slab < kRopeSlab; ++slab) issue_slab_tma(p, c.page, slab, dst, bars.full(stage, slab));
      if constexpr (stage == 0) issue_slab_tma(p, c.page, kRopeSlab, dst, bars.full(stage, kRopeSlab));
    }
    new_seg = c.last_of_sequence();
    c.advance(p);
    c.fetch_page(p);  // the next page's block-table entry loads while this thread waits
    ++k;
  }
}

// As rescale_o, for a warpgroup whose previous P.V may still be in flight: waits for it only when some row
// of the warp needs its O multiplied (alpha != 1).
__device__ __forceinline__ void rescale_o_inflight(WsState& st, const float (&m_page)[2], const float (&rowsum)[2],
                                                   float scale_log2) {
  float alpha[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float ms = m_page[h] == -INFINITY ? 0.f : m_page[h] * scale_log2;
    alpha[h] = exp2f(st.m[h] * scale_log2 - ms);
    st.m[h] = m_page[h];
    st.l[h] = st.l[h] * alpha[h] + rowsum[h];
  }
  if (__all_sync(0xffffffffu, alpha[0] == 1.f && alpha[1] == 1.f)) return;
  pv_wait(st);
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int t = 0; t < 32; ++t) {
      st.o[t][2 * h] *= alpha[h];
      st.o[t][2 * h + 1] *= alpha[h];
    }
}

// Masks keys past each row's visible length (sequence end, causal diagonal) to -inf; row maxima of S.
__device__ __forceinline__ void pair_mask_rowmax(float (&sc)[8][4], float (&mx)[2], const DecodeKernelParams& p,
                                                 int blk, int seqlen, const int (&row_i)[2], int t4) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    // Clamped: rows past the tile's valid rows (causal position >= s_q) must not see past seqlen.
    const int visible = p.causal ? min(seqlen, seqlen - p.s_q + 1 + row_i[h]) : seqlen;
    const int limit = visible - blk * kBlockN;
    mx[h] = -INFINITY;
#pragma unroll
    for (int t = 0; t < 8; ++t)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& v = sc[t][2 * h + e];
        if (t * 8 + 2 * t4 + e >= limit) v = -INFINITY;
        mx[h] = fmaxf(mx[h], v);
      }
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
  }
}

// P = exp(S - m), rounded to 16 bits: into the page's RoPE slab (for the other warpgroup's P.V, the layout
// that reads) and into `pa`, the A fragments of this warpgroup's own P.V (k-step ks: keys 16 ks ..; the S
// accumulator layout packed in pairs, wgmma.h); its row sums.
template <class Traits>
__device__ __forceinline__ void pair_softmax(const float (&sc)[8][4], const float (&m)[2], float (&rowsum)[2],
                                             uint32_t (&pa)[4][4], uint8_t* stage_ptr, const int (&row_local)[2],
                                             int t4, float scale_log2) {
  uint8_t* p_slab = stage_ptr + kRopeSlab * kSlabBytes;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float ms = m[h] == -INFINITY ? 0.f : m[h] * scale_log2;
    const int row = row_local[h];
    float sum = 0.f;
#pragma unroll
    for (int t = 0; t < 8; ++t) {
      const float p0 = exp2f(fmaf(sc[t][2 * h], scale_log2, -ms));
      const float p1 = exp2f(fmaf(sc[t][2 * h + 1], scale_log2, -ms));
      sum += p0 + p1;
      const uint32_t v = Traits::pack(p0, p1);
      pa[t >> 1][2 * (t & 1) + h] = v;
      *reinterpret_cast<uint32_t*>(p_slab + row * 128 + ((t ^ (row & 7)) << 4) + 4 * t4) = v;
    }
    rowsum[h] = sum;
  }
}

// O_half += P V_half with P from registers (pa, pair_softmax), one wgmma group, no wait. kChained: as pv_issue.
template <class Traits, bool kChained>
__device__ __forceinline__ void pv_issue_rs(WsState& st, const uint32_t (&pa)[4][4], uint32_t s_kv, int wg) {
  float(&d)[128] = reinterpret_cast<float(&)[128]>(st.o);
  if constexpr (!kChained) fence_operands(d);
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < kBlockN / 16; ++ks) {
    const uint64_t db = make_smem_desc(s_kv + (4 * wg) * kSlabBytes + ks * 16 * 128, kSlabBytes, 1024);
    Traits::wgmma_pv_rs(d, pa[ks], db);
  }
  wgmma_commit();
}

template <class Traits>
__device__ __forceinline__ void pair_consumer(const DecodeKernelParams& p, PartCursor cur, const PairBarriers& bars,
                                              uint8_t* smem, int wg, int tid) {
  constexpr PairSmemLayout L = pair_smem_layout();
  const uint32_t s_q_tile = smem_u32(smem + L.q_offset);
  const uint32_t s_kv0 = smem_u32(smem + L.kv_offset);
  float* s_ma = reinterpret_cast<float*>(smem + L.ma_offset);  // [pair parity][64]: m_a
  float* s_mb = reinterpret_cast<float*>(smem + L.mb_offset);  // [pair parity][64]: m_b
  float* s_l = reinterpret_cast<float*>(smem + L.l_offset);
  const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  const int tile_row0 = blockIdx.y * kRowsPerCta;
  const int valid_rows = min(kRowsPerCta, p.rows - tile_row0);
  const int32_t* rec = p.parts + static_cast<int64_t>(blockIdx.x) * kPlanPartInts;
  const int first_batch = rec[kPartBeginBatch], first_split = rec[kPartFirstSplit];
  int row_local[2], row_i[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_local[h] = warp * kRowGroup + g + 8 * h;
    row_i[h] = (tile_row0 + row_local[h]) / p.h_q;  // query position of the row (causal mask)
  }
  const float zero2[2] = {0.f, 0.f};
  // This warp is done with `stage` (its P.V there completed): warpgroup 0 frees the lo half, 1 the hi half.
  auto release = [&](int stage) {
    __syncwarp();
    if (lane == 0) mbar_arrive(wg == 0 ? bars.lo(stage) : bars.hi(stage));
  };

  WsState st;
  st.reset();
  int epi = 0, seg = -1, pair = 0;
  int uses[kWsStages] = {0, 0};  // pages seen per stage: parity of its full barriers
  int pending = -1;              // stage of this warpgroup's last P.V, issued and not released yet
  while (cur.valid()) {
    ++seg;
    const int b = cur.b;
    mbar_wait(bars.q_full(), seg & 1);
    bool q_held = true;
    bool seg_done = false;
    while (!seg_done) {
      const int blk_a = cur.blk, seqlen = cur.seqlen;
      const bool has_b = !cur.last_of_sequence();
      cur.advance(p);
      int blk_b = 0;
      if (has_b) {
        blk_b = cur.blk;
        seg_done = cur.last_of_sequence();
        cur.advance(p);
      } else {
        seg_done = true;
      }
      const int par = pair & 1;
      const uint32_t parity_a = uses[0]++ & 1;
      const uint32_t parity_b = has_b ? (uses[1]++ & 1) : 0;
      const bool own = wg == 0 || has_b;  // this warpgroup computes S of a page in this pair
      float sc[8][4], mx[2] = {-INFINITY, -INFINITY};
      if (own) {
        const int stage = wg, blk = wg == 0 ? blk_a : blk_b;
        const uint32_t parity = wg == 0 ? parity_a : parity_b;
        uint8_t* stage_ptr = smem + L.kv_offset + stage * kPageBytes;
        const int valid_tokens = seqlen - blk * kBlockN;
        if (valid_tokens < kBlockN) {
          for (int slab = 0; slab < kSlabsPerPage; ++slab) mbar_wait(bars.full(stage, slab), parity);
          zero_page_tail_wg(stage_ptr, valid_tokens, tid);
          fence_proxy_async();  // generic zeros before wgmma (and the next TMA) touch the stage
          named_sync(kBarWg + wg, 128);
        }
        const int rel = pending;
        compute_scores_page<Traits>(sc, s_q_tile, s_kv0 + stage * kPageBytes, bars.full(stage, 0), parity, rel >= 0,
                                    [&] { release(rel); });
        pending = -1;
        fence_operands(reinterpret_cast<float(&)[128]>(st.o));  // the P.V released above is done, too
        // This warpgroup's last S of the segment: let the producer bring the next Q tile.
        const bool last_s = wg == 0 ? seg_done : (seg_done || cur.last_of_sequence());
        if (last_s) {
          mbar_arrive(bars.q_empty());
          q_held = false;
        }
        pair_mask_rowmax(sc, mx, p, blk, seqlen, row_i, t4);
      }
      if (wg == 0) {
        float m_a[2], rowsum[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          m_a[h] = fmaxf(st.m[h], mx[h]);
          if (t4 == 0) s_ma[par * kRowsPerCta + row_local[h]] = m_a[h];
        }
        if (has_b) named_arrive(kBarMaxA, kWsConsumerThreads);
        uint32_t pa[4][4];
        pair_softmax<Traits>(sc, m_a, rowsum, pa, smem + L.kv_offset, row_local, t4, p.scale_log2);
        fence_proxy_async();  // P in shared memory is a wgmma operand (async proxy) of the other warpgroup
        named_arrive(kBarPA + par, kWsConsumerThreads);
        // No P.V is in flight here (compute_scores_page waited for all); the wait, free at run time, shows
        // ptxas that no path reaches O with a product pending (else it serializes every wgmma: C7514).
        pv_wait(st);
        rescale_o(st, m_a, rowsum, p.scale_log2);
        pv_issue_rs<Traits, false>(st, pa, s_kv0, wg);
        if (has_b) {
          // P_b V_b queued right behind P_a V_a (waiting for P_a V_a before P_b arrives, to free stage 0's lo
          // half a little earlier, cost the one-pair parts up to 2 µs: run 15).
          named_sync(kBarPB, kWsConsumerThreads);
          float m_b[2];
#pragma unroll
          for (int h = 0; h < 2; ++h) m_b[h] = s_mb[par * kRowsPerCta + row_local[h]];
          rescale_o_inflight(st, m_b, zero2, p.scale_log2);
          pv_issue<Traits, true>(st, s_kv0 + kPageBytes, wg);
          wgmma_wait_1();
          release(0);
          pending = 1;
        } else {
          pending = 0;
        }
      } else if (has_b) {
        named_sync(kBarMaxA, kWsConsumerThreads);
        float m_a[2], m_b[2], rowsum[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          m_a[h] = s_ma[par * kRowsPerCta + row_local[h]];
          m_b[h] = fmaxf(m_a[h], mx[h]);
          if (t4 == 0) s_mb[par * kRowsPerCta + row_local[h]] = m_b[h];
        }
        uint32_t pb[4][4];
        pair_softmax<Traits>(sc, m_b, rowsum, pb, smem + L.kv_offset + kPageBytes, row_local, t4, p.scale_log2);
        fence_proxy_async();
        named_arrive(kBarPB, kWsConsumerThreads);
        named_sync(kBarPA + par, kWsConsumerThreads);
        pv_wait(st);  // as for warpgroup 0
        rescale_o(st, m_a, zero2, p.scale_log2);
        pv_issue<Traits>(st, s_kv0, wg);
        rescale_o_inflight(st, m_b, rowsum, p.scale_log2);
        pv_issue_rs<Traits, true>(st, pb, s_kv0 + kPageBytes, wg);
        wgmma_wait_1();
        release(0);
        pending = 1;
      } else {
        // Warpgroup 1, pair without b (the segment's last): only P_a V_a for its half.
        named_sync(kBarPA + par, kWsConsumerThreads);
        float m_a[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) m_a[h] = s_ma[par * kRowsPerCta + row_local[h]];
        // No S of its own to release the previous page's stage under (and rescale_o touches O).
        pv_wait(st);
        if (pending >= 0) release(pending);
        pending = -1;
        rescale_o(st, m_a, zero2, p.scale_log2);
        pv_issue<Traits>(st, s_kv0, wg);
        pending = 0;
      }
      ++pair;
    }
    if (q_held) mbar_arrive(bars.q_empty());  // warpgroup 1 in a one-page segment
    pv_wait(st);
    if (pending >= 0) release(pending);
    pending = -1;
    const int n_splits = p.split_offsets[b + 1] - p.split_offsets[b];
    const int slot = p.split_offsets[b] + (b == first_batch ? first_split : 0);
    write_segment_ws<Traits>(p, st, s_l, epi & 1, b, slot, n_splits == 1, tile_row0, valid_rows, wg, warp, lane);
    ++epi;
    st.reset();
  }
}

}  // namespace mla::sm90::decode
