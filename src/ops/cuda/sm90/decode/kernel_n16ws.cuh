#pragma once
// Warp-specialized split-KV decode for 16-bit KV and 16-row tiles (constants and rationale: config_n16ws.h). Same
// plan, part cursor, partials layout and combine as every decode kernel; one CTA per plan part, 384 threads:
//   warpgroup 0 (scorer): S^T_j = K_j Q^T (36 x m64n16k16 from shared memory), release the stage, mask, row max
//     (shuffles + one 128-thread exchange), P_j = exp2(S scale - m) as 16-bit P^T into P buffer j % 2, alpha_j (and
//     the row sums / max at a segment end) -> P_full[j % 2]; its thread 0 loads the Q tiles (sequence n into slot
//     n % kQSlots on q_full[slot]: n = 0, 1 up front, n + 2 once all four warps are past n's last S);
//   warpgroups 1, 2 (accumulators, V dims [256 a, 256 a + 256)): V^T_j A fragments (ldmatrix.trans, before P_j
//     exists), release the stage once they are in registers, wait P_full, O^T = O^T alpha + V^T P^T (16 x
//     m64n16k16, A from registers) -> P_empty[j % 2], epilogue at a segment end; accumulator 1's thread 0 also
//     issues the pages: page j + kStages into stage j % kStages once all 12 warps' threads released page j (one 3D
//     TMA copy per page; a part's first kStages pages as three slab groups on their own full barriers, which S^T
//     waits for group by group).
// A stage is held from its landing only until S_j and the V loads are done, not through the softmax and P.V (the
// 256-thread kernel's hold), and the scorer's page j + 1 overlaps the accumulators' page j.
// Timeline marks (bench_decode --timeline in a -DMLA_DECODE_TIMELINE build; nothing otherwise): those of the fp8 16-row
// kernel (decode_fp8/kernel_h16.cuh), the same numbers with the same meaning; the page-issuing thread (the first
// accumulator warpgroup's thread 0) stands for the accumulators:
//   4 / 5 / 9 FIRST scorer: page 0 landed / page 0's S done / S of page kStages - 1 done; 6 LAST scorer: a segment's
//   last P handed off; 7 LAST accumulator: an epilogue started; 8 LAST: a segment's stores issued (the CTA's end);
//   10 LAST producer: the part's last page issued; 11 LAST scorer: S of the part's last page done;
//   sums 12 segments, 13 scorer full waits, 14 scorer P_empty waits, 15 accumulator P_full waits (ns).
#include <cstdint>

#include "ops/cuda/sm90/decode/clock_probe.cuh"  // effective SM clock (nothing outside a -DMLA_DECODE_CLOCK build)
#include "ops/cuda/sm90/decode/config_n16ws.h"
#include "ops/cuda/sm90/decode/fused_merge.cuh"
#include "ops/cuda/sm90/decode/handoff_n16.cuh"
#include "ops/cuda/sm90/decode/params.h"
#include "ops/cuda/sm90/decode/partials.h"
#include "ops/cuda/sm90/decode/ptx.h"
#include "ops/cuda/sm90/decode/row_end.cuh"
#include "ops/cuda/sm90/decode/scheduler.cuh"
#include "ops/cuda/sm90/decode/timeline.cuh"
#include "ops/cuda/sm90/decode/tma.h"
#include "ops/cuda/sm90/decode/traits.h"
#include "ops/cuda/sm90/decode/wait_for_loads.h"
#include "ops/cuda/sm90/decode/wgmma.h"
#include "ops/cuda/sm90/decode/wgmma_n16.h"

namespace mla::sm90::decode::n16ws {

using n16::phase_of;
using n16::row_of;

template <class Traits>
constexpr bool kF16 = Traits::kFormat == KvFormat::kFp16;

// The page ring -- full[stage][slab group] (one arrival plus the group's bytes), empty[stage] (one arrival per
// consumer thread: release_page) -- then the Q slots' q_full barriers (smem_layout_n16ws's barrier area).
struct Bars {
  uint32_t base;
  __device__ uint32_t full(int s, int grp) const { return base + 8 * (s * kSlabGroups + grp); }
  __device__ uint32_t empty(int s) const { return base + 8 * (kStages * kSlabGroups + s); }
  __device__ uint32_t q_full(int q) const { return base + 8 * (kStages * (kSlabGroups + 1) + q); }
  __device__ void init(int consumer_warps) const {
    for (int s = 0; s < kStages; ++s) {
      for (int grp = 0; grp < kSlabGroups; ++grp) mbar_init(full(s, grp), 1);
      mbar_init(empty(s), 32 * consumer_warps);
    }
  }
  // This thread is done reading stage s (its wgmma reads waited for, its ldmatrix registers loaded): it arrives
  // itself, not lane 0 for its warp after __syncwarp. Session 67 c2 (H100, 5 interleaved passes, same-tree
  // binaries): bf16 h_q 128 b1 s4096 / s8192 (narrow tiles) -1.7 / -0.9 %, the h_q 16 rows -0.7..+0.95 % (rows
  // 5 / 6 / 8: 0 / 0 / -0.1 %); c3 (H200): rows 1-12 -1.3..+0.6 %, neutral. The fp8 / fp8_ds rings keep
  // mbar_arrive_warp (tma.h).
  __device__ void release_page(int s) const { mbar_arrive(empty(s)); }
  // Every slab group of a stage's page landed.
  __device__ void wait_page(int s, uint32_t parity) const {
#pragma unroll
    for (int grp = 0; grp < kSlabGroups; ++grp) mbar_wait(full(s, grp), parity);
  }
};

// The three timeline sums (marks 13..15; empty in a normal build).
enum N16TlSum { kTlScorerFull = 0, kTlScorerPEmpty = 1, kTlAccPFull = 2 };

// The page stream, run by accumulator 1's thread 0. step() issues the next page into its stage, waiting for that
// stage's previous page to be released by all 12 warps' threads.
struct PageProducer {
  PartCursor c;
  bool evict_first = false;  // the part's L2 policy (config.h kKvEvictFirstPartBytes)
  int j = 0;
  __device__ void init(const DecodeKernelParams& p, PartCursor cur) {
    c = cur;
    c.fetch_page(p);
    evict_first = kv_evict_first(p, kPageBytes);
  }
  __device__ __forceinline__ void load(const CUtensorMap* map, uint32_t dst, uint32_t bar, int slab) const {
    if (evict_first)
      tma_load_3d_hint(dst, map, bar, 0, c.page * kBlockN, slab, l2_evict_first_fraction(1.f));
    else
      tma_load_3d(dst, map, bar, 0, c.page * kBlockN, slab);
  }
  __device__ __forceinline__ void step(const DecodeKernelParams& p, const Bars& bars, uint32_t s_k0) {
    if (!c.valid()) return;
    const int stage = j % kStages;
    if (j >= kStages) mbar_wait(bars.empty(stage), phase_of(j - kStages, kStages));
    const uint32_t dst = s_k0 + stage * kPageBytes;
    // The part's first kStages pages (its start, where a page's arrival is the critical path) in kSlabGroups boxes;
    // later pages as one box of kSlabGroups times the bytes on group 0's barrier, the others arrived on at once, so a
    // consumer waiting group by group still sees the whole page after group 0 (bench/decode/NOTES.md "Session 33"
    // items 11-14: every page in groups cost the b128 s4096 / s8192 rows 0.7 %; the first two gain 0.1-0.4 us on short
    // parts, h16 b32 s512 18.0-18.2 -> 17.8-17.9).
    if (j < kStages) {
      // tmap_kv_rope: the cache in boxes of kN16WsGroupSlabs slabs (tensor_maps.cu).
#pragma unroll
      for (int grp = 0; grp < kSlabGroups; ++grp) {
        mbar_expect_tx(bars.full(stage, grp), kGroupBytes);
        load(&p.tmap_kv_rope, dst + grp * kGroupBytes, bars.full(stage, grp), grp * kN16WsGroupSlabs);
      }
    } else {
      mbar_expect_tx(bars.full(stage, 0), kPageBytes);
      load(&p.tmap_kv, dst, bars.full(stage, 0), 0);  // tmap_kv: the page as one box
#pragma unroll
      for (int grp = 1; grp < kSlabGroups; ++grp) mbar_arrive(bars.full(stage, grp));
    }
    if (c.last_of_sequence()) MLA_TL_MARK_LAST(p.timeline, 10);  // the last call: the part's last page
    c.advance(p);
    c.fetch_page(p);  // the next block-table entry loads while the warp computes
    ++j;
  }
};

// Q tiles, run by scorer thread 0 (handoff_n16.cuh): nine 16 x 64-element boxes per tile.
using QLoader = n16::QLoader<kSlabs, 64, kQSlabBytes, kQSlots>;

// S^T (64 keys x 16 rows) = K . Q^T over the nine slabs of a stage and of a Q tile: +32 bytes per k16 step inside a
// 128-byte swizzled row, 4 steps per slab, each slab group's steps issued once its full barrier (group_bar0 + 8 grp,
// `parity`) completed -- group 0's waited for by the caller --, so S runs on the first groups while the page's last
// ones land. One wgmma group; the caller waits for it. The base addresses go through a
// shuffle from lane 0 so that ptxas keeps the descriptors in uniform registers (decode_fp8/mainloop_h16.cuh). One
// accumulator chain: two or four independent chains (summed after the wait) timed the same on rows 1-9 (session 22
// call 2, within +-0.3 us), so the 36 dependent wgmmas are not the stage's hold.
template <class Traits>
__device__ __forceinline__ void issue_scores_t(float (&s)[8], uint32_t s_k, uint32_t s_q, uint32_t group_bar0,
                                               uint32_t parity) {
  s_k = __shfl_sync(0xffffffffu, s_k, 0);
  s_q = __shfl_sync(0xffffffffu, s_q, 0);
#pragma unroll
  for (int i = 0; i < 8; ++i) s[i] = 0.f;
  fence_operands(s);
  wgmma_fence();
  uint64_t da = make_smem_desc(s_k, 16, 1024);
  uint64_t db = make_smem_desc(s_q, 16, 1024);
#pragma unroll
  for (int slab = 0; slab < kSlabs; ++slab) {
    if (slab % kN16WsGroupSlabs == 0 && slab > 0) {  // group 0: the caller waited for it (its timeline sum)
      // A warp-uniform wait (mbar_wait_warp), then the register fence the wgmma chain needs across the spin loop.
      mbar_wait_warp(group_bar0 + 8 * (slab / kN16WsGroupSlabs), parity);
      wgmma_fence();
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) wgmma_m64n16k16_ss<kF16<Traits>>(s, da + 2 * k, db + 2 * k);
    da += kSlabBytes >> 4;
    db += kQSlabBytes >> 4;
  }
  wgmma_commit();
}

// P^T of one page into a P buffer (16 rows x 64 keys, 128-byte rows, 128B swizzle), 32-bit stores: the scorer thread
// holds keys 16w + g (h = 0) and 16w + g + 8 (h = 1) of rows 8j + 2t + e; one shuffle with lane g ^ 1 pairs adjacent
// keys: an even g stores keys (16w + g, + 1) of its h = 0 values, an odd g keys (16w + g + 7, + 8) of its h = 1
// values. A warp's store of one (j, e) covers 4 rows x 2 chunks: 8 distinct chunks after the swizzle, 32 banks.
template <class Traits>
__device__ __forceinline__ void store_p(uint32_t s_pb, const float (&pr)[8], int w, int g, int t) {
  const bool odd = g & 1;
#pragma unroll
  for (int j = 0; j < 2; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const float v0 = pr[4 * j + e], v1 = pr[4 * j + 2 + e];
      const float got = __shfl_xor_sync(0xffffffffu, odd ? v0 : v1, 4);
      const uint32_t word = odd ? Traits::pack(got, v1) : Traits::pack(v0, got);
      const int row = 8 * j + 2 * t + e, key0 = 16 * w + g + (odd ? 7 : 0), byte = 2 * key0;
      const uint32_t addr = s_pb + row * 128 + ((((byte >> 4) ^ row) & 7) << 4) + (byte & 15);
      asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(addr), "r"(word) : "memory");
    }
}

// V^T A fragments of this accumulator warpgroup's V dims for one page: for M tile i (slab 4a + i: dims 64i + 16w ..
// + 15 of the warpgroup's half for warp w) and k16 step ks, one ldmatrix.x4.trans: matrix m = lane / 8 reads keys
// 16ks + 8(m >> 1) + lane % 8 at the 16-byte chunk 2w + (m & 1), so register m holds (dim 16w + g + 8(m & 1), keys
// 16ks + 8(m >> 1) + 2t, + 1): the A fragment's a0..a3. Keys at or past `limit` become zeros (their cache slots hold
// anything, NaN in the tests, and P = 0 times NaN would still be NaN).
__device__ __forceinline__ void load_v_frags(uint32_t (&vf)[kMTiles][kKSteps][4], uint32_t s_stage, int limit, int a,
                                             int w, int lane) {
  const int t = lane & 3, m = lane >> 3, r = lane & 7;
#pragma unroll
  for (int ks = 0; ks < kKSteps; ++ks) {
    const int key = 16 * ks + 8 * (m >> 1) + r;
    const int chunk = (2 * w + (m & 1)) ^ (key & 7);
#pragma unroll
    for (int i = 0; i < kMTiles; ++i)
      ldmatrix_x4_trans(vf[i][ks], s_stage + (4 * a + i) * kSlabBytes + key * 128 + (chunk << 4));
    if (limit < kBlockN) {
      // Registers 0-1: keys 16ks + 2t, + 1; registers 2-3: the same + 8 (low half the even key).
      const int k0 = 16 * ks + 2 * t;
      const uint32_t lo = (k0 < limit ? 0x0000ffffu : 0u) | (k0 + 1 < limit ? 0xffff0000u : 0u);
      const uint32_t hi = (k0 + 8 < limit ? 0x0000ffffu : 0u) | (k0 + 9 < limit ? 0xffff0000u : 0u);
#pragma unroll
      for (int i = 0; i < kMTiles; ++i) {
        vf[i][ks][0] &= lo;
        vf[i][ks][1] &= lo;
        vf[i][ks][2] &= hi;
        vf[i][ks][3] &= hi;
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kMTiles; ++i)
#pragma unroll
    for (int ks = 0; ks < kKSteps; ++ks) fence_operands(vf[i][ks]);  // the loads stay before the P.V wgmma fence
}

// O^T (this warpgroup's 4 M tiles) += V^T . P^T for one page, then waits for it.
template <class Traits>
__device__ __forceinline__ void pv_t(float (&o)[kMTiles][8], const uint32_t (&vf)[kMTiles][kKSteps][4], uint32_t s_pb) {
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < kKSteps; ++ks) {
    const uint64_t db = make_smem_desc(s_pb + ks * 32, 16, 1024);
#pragma unroll
    for (int i = 0; i < kMTiles; ++i) wgmma_m64n16k16_rs<kF16<Traits>>(o[i], vf[i][ks], db);
  }
  wgmma_commit();
  wgmma_wait_all();
#pragma unroll
  for (int i = 0; i < kMTiles; ++i) fence_operands(o[i]);
}

template <class Traits>
__device__ __forceinline__ void scorer(const DecodeKernelParams& p, PartCursor c, const Bars& bars, uint8_t* smem, int w,
                                       int lane) {
  constexpr SmemLayoutN16 L = smem_layout_n16ws();
  const uint32_t s_k0 = smem_u32(smem + L.k_offset), s_q0 = smem_u32(smem + L.q_offset);
  const uint32_t s_p0 = smem_u32(smem + L.p_offset);
  float* s_red = reinterpret_cast<float*>(smem + L.red_offset);      // [2][16][4]
  float* s_alpha = reinterpret_cast<float*>(smem + L.alpha_offset);  // [2][16]
  float* s_lsum = reinterpret_cast<float*>(smem + L.lsum_offset);    // [2][16][4]
  float* s_mfin = reinterpret_cast<float*>(smem + L.mfin_offset);    // [2][16]
  const int g = lane >> 2, t = lane & 3;
  float m[4], l[4];  // as local arrays, not n16::ScorerState: with the struct ptxas allocates the kernel differently
  n16::reset_rows(m, l);
  const bool q_loader = w == 0 && lane == 0;
  QLoader ql{c};
  if (q_loader) ql.start(p, bars, s_q0);
  bool seq_start = true;
  int j = 0, seq = 0;
  TimelineSums tl;
  tl.init(p, q_loader);
  while (c.valid()) {
    const int stage = j % kStages, buf = j & 1;
    const bool seg_end = c.last_of_sequence();
    if (seq_start) mbar_wait(bars.q_full(seq % kQSlots), phase_of(seq, kQSlots));
    seq_start = seg_end;
    const unsigned long long t0 = tl.now();
    mbar_wait(bars.full(stage, 0), phase_of(j, kStages));  // group 0; issue_scores_t waits for the others
    tl.add(kTlScorerFull, t0);
    if (j == 0) tl.first(4);
    float s[8];
    issue_scores_t<Traits>(s, s_k0 + stage * kPageBytes, s_q0 + (seq % kQSlots) * kQTileBytes, bars.full(stage, 0),
                           phase_of(j, kStages));
    wgmma_wait_all();
    fence_operands(s);
    if (j == 0) tl.first(5);
    if (j == kStages - 1) tl.first(9);
    if (seg_end) tl.last(11);
    bars.release_page(stage);
    // s_q 1 (this kernel's tiles): every row sees keys < seqlen. Row-max exchange across the 4 warps: [buf][row][warp];
    // buf alternates by page, so a warp writing page j + 1's entries has passed page j's barrier, after which nobody
    // reads page j - 1's.
    float* red = s_red + buf * kRows * 4;
    const float mx = n16::mask_and_warp_max(s, c.seqlen - c.blk * kBlockN, w, g);
    if (g < 4) red[row_of(n16::warp_max_row(g), t) * 4 + w] = mx;
    named_sync(kBarScorer, 32 * kScorerWarps);
    // Every warp's S of this sequence has completed (wgmma waited, then this barrier): its Q slot is free.
    if (q_loader && seg_end) ql.issue(p, bars, s_q0);
    float alpha[4], m_scaled[4], pr[8];
    // alpha exactly 1 where m stays (the accumulators' rescale skip); exps as ex2.approx.ftz: a P below 2^-126 is
    // flushed to 0 (bf16 could hold it down to 2^-133), a change of < 2^-126 against a row sum >= 1.
    n16::update_row_max<true, true>(red, m, alpha, m_scaled, p.scale_log2, t);
    n16::exp_and_row_sums<true>(s, pr, l, alpha, m_scaled, p.scale_log2);
    // P buffer `buf` is free once the accumulators finished P.V of page j - 2 (pre-armed for pages 0 and 1).
    const unsigned long long t1 = tl.now();
    named_sync(kBarPEmpty + buf, kBarAll);
    tl.add(kTlScorerPEmpty, t1);
    store_p<Traits>(s_p0 + buf * kPBufBytes, pr, w, g, t);
    if (w == 0 && g == 0) {
      // racecheck: hand-off (s_alpha for the accumulators, ordered by the P_full named barrier)
#pragma unroll
      for (int r = 0; r < 4; ++r) s_alpha[buf * kRows + row_of(r, t)] = alpha[r];
    }
    if (seg_end) {
      n16::publish_segment_totals(l, m, s_lsum, s_mfin, buf, w, g, t);
      n16::reset_rows(m, l);
      ++seq;
    }
    fence_proxy_async();  // P (generic stores) is read by wgmma (async proxy) after P_full
    named_arrive(kBarPFull + buf, kBarAll);
    if (seg_end) tl.last(6);
    c.advance(p);
    ++j;
  }
  tl.flush();
}

// Epilogue of one segment (accumulator warpgroup a): out = O / l as 16-bit (single split) or the fp32 partial and its
// lse into the split slot, in the partials layout the combine kernel reads. o[i][4j + 2h + e] is (dim D + g + 8h, row
// 8j + 2t + e) with D = 256a + 64i + 16w; one shuffle with lane g ^ 1 pairs adjacent dims (as store_p pairs keys):
// an even g writes dims (D + g, + 1) of its h = 0 values, an odd g dims (D + g + 7, + 8) of its h = 1 values.
template <class Traits>
__device__ __forceinline__ void write_segment(const DecodeKernelParams& p, const float (&o)[kMTiles][8],
                                              const float (&lsum)[4], const float (&mfin)[4], int b,
                                              n16::SegmentDest d, int a, int w, int lane) {
  const int g = lane >> 2, t = lane & 3;
  const bool odd = g & 1, direct = d.n_splits == 1;
  const int row0 = n16::tile_row0();
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int row = row0 + row_of(r, t), j = r >> 1, e = r & 1;
    const float total = lsum[r];
    const bool seen = total > 0.f;
    const float inv = row_inv(seen, total);
#pragma unroll
    for (int i = 0; i < kMTiles; ++i) {
      const float v0 = o[i][4 * j + e] * inv, v1 = o[i][4 * j + 2 + e] * inv;
      const float got = __shfl_xor_sync(0xffffffffu, odd ? v0 : v1, 4);
      const float lo = odd ? got : v0, hi = odd ? v1 : got;
      const int col = kDimsPerAcc * a + 64 * i + 16 * w + g + (odd ? 7 : 0);
      if (direct) {
        uint16_t* out = static_cast<uint16_t*>(p.out) + (static_cast<int64_t>(b) * p.rows + row) * kDimV + col;
        *reinterpret_cast<uint32_t*>(out) = Traits::pack(lo, hi);
      } else {
        float* acc = p.o_accum + (static_cast<int64_t>(d.slot) * p.rows + row) * kDimV + partial_pair_offset(col);
        *reinterpret_cast<float2*>(acc) = make_float2(lo, hi);
      }
    }
    if (a == 0 && w == 0 && g == 0) {
      const float lse = row_lse(seen, total, mfin[r] * p.softmax_scale);
      if (direct) store_lse(p, b, row, lse);
      else p.lse_accum[static_cast<int64_t>(d.slot) * p.rows + row] = lse;
    }
  }
}

template <class Traits, bool kFused>
__device__ __forceinline__ void accumulator(const DecodeKernelParams& p, PartCursor c, const Bars& bars, uint8_t* smem,
                                            int a, int w, int lane) {
  constexpr SmemLayoutN16 L = smem_layout_n16ws();
  const uint32_t s_k0 = smem_u32(smem + L.k_offset), s_p0 = smem_u32(smem + L.p_offset);
  const n16::AccExchange x = n16::acc_exchange(p, smem, L);
  const int t = lane & 3;
  named_arrive(kBarPEmpty + 0, kBarAll);  // both P buffers start free
  named_arrive(kBarPEmpty + 1, kBarAll);
  FusedMerges<kFused>::zero_empty(p, a * 128 + w * 32 + lane, 128 * kAccWarpgroups);
  FusedMerges<kFused> merges;  // split sequences this CTA merges after its part (fused mode)
  float o[kMTiles][8];
#pragma unroll
  for (int i = 0; i < kMTiles; ++i)
#pragma unroll
    for (int e = 0; e < 8; ++e) o[i][e] = 0.f;
  const bool is_producer = a == 0 && w == 0 && lane == 0;
  PageProducer prod;
  if (is_producer) {
    prod.init(p, c);
#pragma unroll
    for (int k = 0; k < kStages; ++k) prod.step(p, bars, s_k0);
  }
  __syncwarp();
  int j = 0;
  TimelineSums tl;
  tl.init(p, a == 0 && w == 0 && lane == 0);
  while (c.valid()) {
    const int stage = j % kStages, buf = j & 1;
    bars.wait_page(stage, phase_of(j, kStages));
    uint32_t vf[kMTiles][kKSteps][4];
    load_v_frags(vf, s_k0 + stage * kPageBytes, c.seqlen - c.blk * kBlockN, a, w, lane);
    wait_for_loads(vf);  // the arrive alone does not wait for the ldmatrix reads of the stage (wait_for_loads.h)
    bars.release_page(stage);
    // Page j + kStages into this stage once all 12 warps' threads released page j: the scorer's S_j completes before
    // P_j is handed off, so the wait costs this warpgroup nothing it would not wait for below.
    if (is_producer) prod.step(p, bars, s_k0);
    __syncwarp();
    const unsigned long long t0 = tl.now();
    named_sync(kBarPFull + buf, kBarAll);
    tl.add(kTlAccPFull, t0);
    float alpha[4];
    // racecheck: hand-off (read after the P_full named barrier)
#pragma unroll
    for (int r = 0; r < 4; ++r) alpha[r] = x.alpha[buf * kRows + row_of(r, t)];
    // The O rescale only where a row of this warp moved its running max (alpha exactly 1 elsewhere: update_row_max
    // <true>); a warp vote, so a uniform branch.
    if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f || alpha[2] != 1.f || alpha[3] != 1.f)) {
#pragma unroll
      for (int i = 0; i < kMTiles; ++i)
#pragma unroll
        for (int jj = 0; jj < 2; ++jj)
#pragma unroll
          for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int e = 0; e < 2; ++e) o[i][4 * jj + 2 * h + e] *= alpha[2 * jj + e];
    }
    pv_t<Traits>(o, vf, s_p0 + buf * kPBufBytes);
    const bool seg_end = c.last_of_sequence();
    float lsum[4], mfin[4];
    if (seg_end) n16::read_segment_totals(x.lsum, x.mfin, buf, t, lsum, mfin);
    named_arrive(kBarPEmpty + buf, kBarAll);
    if (seg_end) {
      tl.last(7);
      tl.seg();
      write_segment<Traits>(p, o, lsum, mfin, c.b, n16::segment_dest(p, c.b, x.first_batch, x.first_split), a, w, lane);
      if constexpr (kFused) merges.note(c.b, n16::segment_dest(p, c.b, x.first_batch, x.first_split).n_splits);
      if (lane == 0) MLA_TL_MARK_LAST(p.timeline, 8);
#pragma unroll
      for (int i = 0; i < kMTiles; ++i)
#pragma unroll
        for (int e = 0; e < 8; ++e) o[i][e] = 0.f;
    }
    c.advance(p);
    ++j;
  }
  tl.flush();
  merges.template finish<Traits, float, 128 * kAccWarpgroups>(p, a * 128 + w * 32 + lane);
}

// kFused: the fused merge (fused_merge.cuh; the combine-mode instantiation has none of its code).
template <class Traits, bool kFused>
__global__ void __launch_bounds__(kThreads, 1) mla_decode_n16ws_kernel(const __grid_constant__ DecodeKernelParams p) {
  constexpr SmemLayoutN16 L = smem_layout_n16ws();
  extern __shared__ __align__(1024) uint8_t smem[];
  if (threadIdx.x == 0) clock_probe_start();  // diagnostics builds only (clock_probe.cuh)
  PartCursor c;
  if (!n16::begin_part(p, c)) {  // an empty part: uniform across the CTA
    FusedMerges<kFused>::zero_empty(p, threadIdx.x, blockDim.x);
    return;
  }
  const Bars bars{smem_u32(smem + L.bar_offset)};
  if (threadIdx.x == 0) {
    bars.init(kScorerWarps + kAccWarps);
    for (int q = 0; q < kQSlots; ++q) mbar_init(bars.q_full(q), 1);
    mbar_init_fence();
  }
  __syncthreads();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (warp < kScorerWarps) {
    scorer<Traits>(p, c, bars, smem, warp, lane);
    if (threadIdx.x == 0) clock_probe_stop();  // the scorer's end: its last P handed off (as the fp8 16-row kernel)
  } else {
    const int acc_warp = warp - kScorerWarps;
    accumulator<Traits, kFused>(p, c, bars, smem, acc_warp / 4, acc_warp % 4, lane);
  }
}

}  // namespace mla::sm90::decode::n16ws
