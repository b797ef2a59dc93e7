#pragma once
// The split-KV decode kernel: CTA (part, head tile) walks its plan part page by page with a two-stage
// pipeline (TMA pages for 16-row tiles, cp.async otherwise: pages.cuh), 64 query rows x one 64-token page per step,
// and writes one result per (part, sequence) segment.
//
// Pipeline (per step j, page j in load slot j % slots; pages.cuh says how a slot becomes a stage):
//   wait for page j (and the Q tile when j starts a sequence) -> [fp8_ds: dequantize, issue page j + 3]
//   -> S = Q K^T -> row max exchange -> P = exp(S - m) to shared -> O = O * alpha + P V ->
//   [segment end: epilogue] -> barrier -> [next segment: load its Q tile] -> [16-bit: issue page j + 2
//   into the freed stage].
#include <cstdint>

#include "ops/cuda/sm90/decode/clock_probe.cuh"  // effective SM clock (nothing outside a -DMLA_DECODE_CLOCK build)
#include "ops/cuda/sm90/decode/epilogue.cuh"
#include "ops/cuda/sm90/decode/mainloop.cuh"
#include "ops/cuda/sm90/decode/pages.cuh"
#include "ops/cuda/sm90/decode/scheduler.cuh"
#include "ops/cuda/sm90/decode/timeline.cuh"

namespace mla::sm90::decode {

// kWg: 64-row tiles (RG == 4) on wgmma, one warpgroup per slice; otherwise mma.sync, which has no 64-row
// minimum and so skips empty row groups.
//
// Timeline marks (diagnostics build only; bench_decode --timeline: µs after the first CTA's start). Thread 0 sets them,
// only at the part's first and last step and at sequence switches: each mark is a call + globaltimer read + atomic
// (~0.3 µs; four per step stretched a step from ~2.3 to ~3.5 µs, bench/decode/NOTES.md session 7 run N1).
//   4 FIRST  the first page (and the first Q tile) landed and visible: the first step passed its wait + barrier
//   5 FIRST  the first S done (thread 0's warp)
//   6 LAST   a sequence switch: the first step of a later sequence passed its wait + barrier (the last switch's)
//   7 LAST   the epilogue of the part's last segment started
//   8 LAST   CTA done (the last stores issued, the copies drained)
//   9 LAST   a sequence switch: the epilogue of a segment that another segment follows started (the last switch's)
//   10 LAST  a sequence switch: the new sequence's first step started its wait (after the Q / refill issue)
//   11 LAST  the part's last step passed its wait + barrier (its last page visible)
//   12 LAST  the part's last step started its wait
//   13 LAST  an epilogue's stores issued (write_segment returned; the part's last)
template <class Traits, int RG, bool kWg>
__global__ void __launch_bounds__(kThreads, 1) mla_decode_kernel(const __grid_constant__ DecodeKernelParams p) {
  using WS = WarpShape<RG>;
  static_assert(!kWg || RG == 4, "the wgmma variant computes all 64 rows");
  constexpr bool kQRegs = RG == 1;  // Q as register fragments (see compute_scores_qregs)
  using Pages = typename PageLoaderOf<Traits, RG, kWg>::type;
  constexpr SmemLayout L = Pages::layout(RG, WS::kSlices);
  extern __shared__ __align__(1024) uint8_t smem[];
  // Let the combine grid (launched with programmatic stream serialization) get scheduled as SMs free
  // up; it waits on griddepcontrol.wait for this grid's completion before reading any result.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  if (threadIdx.x == 0) clock_probe_start();  // diagnostics builds only (clock_probe.cuh)
  const uint32_t s_q_tile = smem_u32(smem + L.q_offset);
  const uint32_t s_p = smem_u32(smem + L.p_offset);
  uint8_t* s_p_ptr = smem + L.p_offset;
  float* s_max = reinterpret_cast<float*>(smem + L.max_offset);  // [kSlices][64]
  float* s_sum = reinterpret_cast<float*>(smem + L.sum_offset);  // [kSlices][64]

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int rg = warp % RG, ws = warp / RG;
  const int g = lane >> 2, t4 = lane & 3;
  const int tile_row0 = blockIdx.y * kRowsPerCta;
  const int valid_rows = min(kRowsPerCta, p.rows - tile_row0);  // a multiple of 16 (h_q is)
  const bool writes = rg * kRowGroup < valid_rows;  // this warp's rows exist
  // wgmma is warpgroup-wide: every warp computes (rows past valid_rows see a zero Q tile: finite,
  // never written); mma.sync warps of empty row groups skip the math.
  const bool active = kWg || writes;
#ifdef MLA_DECODE_TIMELINE
  const bool tl_on = threadIdx.x == 0 && p.timeline != nullptr;
  bool tl_first = true;  // the part's first step
#else
  constexpr bool tl_on = false, tl_first = false;
#endif
  const int32_t* rec = part_record(p);
  const int first_batch = rec[kPartBeginBatch], first_split = rec[kPartFirstSplit];

  PartCursor comp, load;
  // The plan's start hints only for a part of one item (one page): with hints, every CTA asks its first two pages
  // at the same instant, all first pages complete together and late (run N4: first page visible min 2.8 -> 6.7 µs,
  // median 5.9 -> 7.7 at h16 b32 s4096; b32 / b128 rows +1.35-1.85 µs), while without them the block-table loads
  // stagger the CTAs' first copies. A one-page part has no second page competing: there the hints save the two
  // dependent loads (b1 rows -0.3..-0.5 µs, runs N5-N6). Measured on the 16-bit mma.sync tiles only: fp8_ds and wgmma
  // tiles keep loading their start themselves, as before.
  constexpr bool kHintOneItem = !kWg && Traits::kFormat != KvFormat::kFp8Ds;
  // One item: [begin_block, begin_block + 1) of begin_batch, recorded either as end (begin_batch, begin_block + 1) or,
  // when that block is the sequence's last, as end (begin_batch + 1, 0) (known from the hinted seqlen).
  const int bk = rec[kPartBeginBlock], eb = rec[kPartEndBatch], ek = rec[kPartEndBlock];
  const bool one_item = (eb == first_batch && ek == bk + 1) ||
                        (eb == first_batch + 1 && ek == 0 && rec[kPartFirstSeqlen] >= 0 &&
                         bk + 1 == decode_num_blocks(rec[kPartFirstSeqlen]));
  comp.init(p, rec, /*hints=*/kHintOneItem && one_item);
  if (!comp.valid()) return;  // an empty part (more CTAs than work)
  Pages pages;
  pages.init(p, smem, L);
  load = comp;
  load.fetch_page(p);

  // Prologue: Q tile of the first sequence, then one page per load slot, one commit group each.
  load_q_tile<RG, kWg>(p, comp.b, tile_row0, valid_rows, s_q_tile);
  cp_async_commit();
#pragma unroll
  for (int s = 0; s < Pages::kSlots; ++s) {
    if (load.valid()) {
      pages.issue(p, load, s);
      load.advance(p);
      load.fetch_page(p);
    }
    cp_async_commit();
  }

  // L2 prefetch cursor (thread 0), p.l2_prefetch pages ahead of the next page the stages will load:
  // more bytes in flight from DRAM than two shared-memory stages hold. Its block-table entry is read
  // one step before use, so warp 0 never stalls on it.
  PartCursor pf = load;
  const bool prefetcher = !kWg && threadIdx.x == 0 && p.l2_prefetch > 0;  // (kWg: a divergent branch would serialize its wgmma)
  if (prefetcher) {
    for (int i = 0; i < p.l2_prefetch; ++i) {
      pf.fetch_page(p);
      pf.prefetch_page(p);
      pf.advance(p);
    }
    pf.fetch_page(p);
  }

  // Causal visibility of this thread's two rows depends on the sequence; recomputed per segment.
  const int row_i[2] = {(tile_row0 + rg * kRowGroup + g) / p.h_q, (tile_row0 + rg * kRowGroup + g + 8) / p.h_q};
  RowState<RG> st;
  st.reset();
  uint32_t qf[kQRegs ? kDimQK / 16 : 1][4];
  bool q_fresh = true;  // the Q tile in shared memory belongs to a sequence not yet in qf
  // Issues the next page of the part into load slot `s` (freed by this step).
  auto refill = [&](int s) {
    if (load.valid()) {
      pages.issue(p, load, s);
      load.advance(p);
      load.fetch_page(p);
      if (prefetcher) {
        pf.prefetch_page(p);
        pf.advance(p);
        pf.fetch_page(p);
      }
    }
  };
  int slot = 0;
  uint32_t phase = 0;  // parity of the slot's use (mbarrier-tracked slots)
  bool switched = false;  // (timeline) this step starts a later sequence of the part
  while (comp.valid()) {
    bool tl_last = false;  // (timeline) the part's last step
#ifdef MLA_DECODE_TIMELINE
    if (tl_on && comp.last_of_sequence()) {
      PartCursor next = comp;
      next.advance(p);
      tl_last = !next.valid();
    }
#endif
    if (tl_on) {
      if (tl_last) MLA_TL_MARK_LAST(p.timeline, 12);
      if (switched) MLA_TL_MARK_LAST(p.timeline, 10);
    }
    pages.wait(slot, phase);
    if constexpr (kWg) fence_proxy_async();  // cp.async data is read by wgmma (async proxy)
    __syncthreads();
    if (tl_on) {
      if (tl_first) MLA_TL_MARK_FIRST(p.timeline, 4);
      if (tl_last) MLA_TL_MARK_LAST(p.timeline, 11);
      if (switched) MLA_TL_MARK_LAST(p.timeline, 6);
    }
    switched = false;
    const uint32_t s_kv = pages.stage(p, comp, slot);
    if constexpr (Pages::kEarlyRefill) refill(slot);
    const int b = comp.b, blk = comp.blk;
    float sc[WS::kSTiles][4];
    float alpha[2] = {1.f, 1.f};
    if (active) {
      if constexpr (kWg) {
        compute_scores_wgmma<Traits>(sc, s_q_tile, s_kv, ws);
      } else if constexpr (kQRegs) {
        if (q_fresh) load_q_frags(reinterpret_cast<QFrags&>(qf), s_q_tile, lane);
        q_fresh = false;
        compute_scores_qregs<Traits, RG, Pages::kStageSlab>(sc, reinterpret_cast<const QFrags&>(qf), s_kv, ws, lane);
      } else {
        compute_scores<Traits, RG, Pages::kStageSlab>(sc, s_q_tile, s_kv, rg, ws, lane);
      }
      if (tl_on && tl_first) MLA_TL_MARK_FIRST(p.timeline, 5);
      // Mask keys past the row's visible length (sequence end, causal diagonal); partial row maxima.
      float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int visible = p.causal ? comp.seqlen - p.s_q + 1 + row_i[h] : comp.seqlen;
        const int limit = visible - blk * kBlockN - ws * WS::kKeys;  // first masked key, slice-local
#pragma unroll
        for (int t = 0; t < WS::kSTiles; ++t)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float& v = sc[t][2 * h + e];
            if (t * 8 + 2 * t4 + e >= limit) v = -INFINITY;
            mx[h] = fmaxf(mx[h], v);
          }
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
        if (t4 == 0) s_max[ws * kRowsPerCta + rg * kRowGroup + g + 8 * h] = mx[h];
      }
    }
    __syncthreads();
    if (active) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row_local = rg * kRowGroup + g + 8 * h;
        float m_new = st.m[h];
#pragma unroll
        for (int w = 0; w < WS::kSlices; ++w) m_new = fmaxf(m_new, s_max[w * kRowsPerCta + row_local]);
        // A row that has seen no key yet keeps m = -inf; subtract 0 then so exp2 gives 0, not NaN.
        const float m_scaled = m_new == -INFINITY ? 0.f : m_new * p.scale_log2;
        alpha[h] = exp2f(st.m[h] * p.scale_log2 - m_scaled);
        st.m[h] = m_new;
        float sum = 0.f;
#pragma unroll
        for (int t = 0; t < WS::kSTiles; ++t) {
          const float p0 = exp2f(fmaf(sc[t][2 * h], p.scale_log2, -m_scaled));
          const float p1 = exp2f(fmaf(sc[t][2 * h + 1], p.scale_log2, -m_scaled));
          sum += p0 + p1;
          const int key = ws * WS::kKeys + t * 8 + 2 * t4;
          *reinterpret_cast<uint32_t*>(s_p_ptr + swizzle(row_local, key >> 3, kPRowBytes) + (key & 7) * 2) =
              Traits::pack(p0, p1);
        }
        st.l[h] = st.l[h] * alpha[h] + sum;
      }
      if constexpr (kWg) fence_proxy_async();  // P is the A operand of the next wgmma
    }
    __syncthreads();
    if (active) {
#pragma unroll
      for (int t = 0; t < WS::kOTiles; ++t) {
        st.o[t][0] *= alpha[0];
        st.o[t][1] *= alpha[0];
        st.o[t][2] *= alpha[1];
        st.o[t][3] *= alpha[1];
      }
      if constexpr (kWg) {
        accumulate_pv_wgmma<Traits>(st.o, s_p, s_kv, ws);
      } else {
        accumulate_pv<Traits, RG, Pages::kStageSlab>(st, s_p, s_kv, rg, ws, lane);
      }
    }
    const bool seg_end = comp.last_of_sequence();
    if (seg_end) {
      if (tl_on) MLA_TL_MARK_LAST(p.timeline, tl_last ? 7 : 9);
      const int n_splits = p.split_offsets[b + 1] - p.split_offsets[b];
      const int slot = p.split_offsets[b] + (b == first_batch ? first_split : 0);
      write_segment<Traits, RG>(p, st, s_sum, b, slot, n_splits == 1, tile_row0, writes, rg, ws, lane);
      if (tl_on) MLA_TL_MARK_LAST(p.timeline, 13);
      st.reset();
      q_fresh = true;
      switched = true;
    }
    __syncthreads();  // stage, P, Q and the reduction buffers are free again
    comp.advance(p);
#ifdef MLA_DECODE_TIMELINE
    tl_first = false;
#endif
    if (seg_end && comp.valid()) {
      // Its own commit group, ahead of page j + 2: the next step's wait<1> then covers Q and page j + 1.
      load_q_tile<RG, kWg>(p, comp.b, tile_row0, valid_rows, s_q_tile);
      cp_async_commit();
    }
    if constexpr (!Pages::kEarlyRefill) refill(slot);
    cp_async_commit();
    if (++slot == Pages::kSlots) {
      slot = 0;
      phase ^= 1;
    }
  }
  cp_async_wait<0>();
  if (tl_on) MLA_TL_MARK_LAST(p.timeline, 8);
  if (threadIdx.x == 0) clock_probe_stop();
}

}  // namespace mla::sm90::decode
