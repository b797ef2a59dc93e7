#pragma once
// Mainloop pieces of the warp-specialized 64-row fp8 kernel (kernel_ws.cuh): TMA issue (producer thread),
// S = Q K^T over a page (wgmma m64n64k32 e4m3, owner warpgroup), P as e4m3 into the shared P buffer in the
// key order of V^T (transpose_ws.cuh), and O_half = O_half * alpha + P V_half (wgmma m64n256k32 e4m3, both
// consumer warpgroups). The per-thread state (WsState), the named-barrier ids and the epilogue are the
// 16-bit warp-specialized kernel's (../decode/mainloop_ws.cuh, ../decode/epilogue.cuh): same fragment
// layouts, same hand-off.
#include <cstdint>

#include "ops/cuda/sm90/decode/epilogue.cuh"
#include "ops/cuda/sm90/decode/fused_merge.cuh"
#include "ops/cuda/sm90/decode/mainloop_ws.cuh"
#include "ops/cuda/sm90/decode/scheduler.cuh"
#include "ops/cuda/sm90/decode/timeline.cuh"  // MLA_TL_MARK_* (nothing outside a timeline build)
#include "ops/cuda/sm90/decode/tma.h"
#include "ops/cuda/sm90/decode/wgmma.h"
#include "ops/cuda/sm90/decode_fp8/config_ws.h"
#include "ops/cuda/sm90/decode_fp8/epilogue_out_ws.cuh"
#include "ops/cuda/sm90/decode_fp8/mainloop.cuh"
#include "ops/cuda/sm90/decode_fp8/params.h"
#include "ops/cuda/sm90/decode_fp8/traits.h"
#include "ops/cuda/sm90/decode_fp8/wgmma_e4m3.h"

namespace mla::sm90::decode_fp8 {

using decode::PartCursor;
using decode::WsState;

// Producer: a Q tile (64 rows of 576 bytes) as five 128 x 64 boxes onto an mbarrier expecting the full 40 KB: the
// fifth box reaches 64 bytes past the row, which the TMA unit fills with zeros and still counts. Rows past the
// tensor's end are zero-filled likewise. KV pages took this form too until session 54 (issue_page_tma below). (An
// in-bounds fifth box, bytes 448..575, measured the same: run W3. One 3D box per page, which the 16-row kernel takes
// (page_tma.cuh), cost this kernel +0.4..+1.3 us on every h_q 128 row of b32 / b128 (NOTES_plan.md session 16) and
// gained nothing in session 54.)
__device__ __forceinline__ void issue_tile_tma(const CUtensorMap* map, int row0, uint32_t dst, uint32_t bar) {
  decode::mbar_expect_tx(bar, kSlabTileBytes);
#pragma unroll
  for (int slab = 0; slab < kSlabs; ++slab) decode::tma_load_2d(dst + slab * kSlabBytes, map, bar, slab * 128, row0);
}

// Producer: KV page `page` into a K stage: dims 0..511 as the four 128 x 64 boxes of slabs 0-3 (tmap_kv), the rope
// dims 512..575 as one 64 x 64 box of tmap_kv_rope in the 64-byte-swizzle layout at the start of slab 4 (its second
// half stays unwritten; S reads the box through wgmma_e4m3.h rope_desc): 36 KB into shared memory, no zero fill.
// Session 54 (bench/decode/NOTES.md), against five 128-byte boxes (issue_tile_tma, whose fifth box is half zero
// fill), on three H200s: fp8 rows 17 / 18 -0.1..-0.7 %, rows 13-16 -0.5..+1.5 % (mean +0.0..+0.6 %). One 3D box of the
// five slabs (the 16-row kernel's page_tma.cuh) was no faster. Knocking the rope box out entirely (MLA_FP8_WS_KO bit
// 128) takes 1.6-2.4 % off rows 17 / 18: what the rope's own reads cost.
template <bool kRope = true>  // false: the knock-out (wrong scores)
__device__ __forceinline__ void issue_page_tma(const decode::DecodeKernelParams& p, int page, uint32_t dst,
                                               uint32_t bar) {
  decode::mbar_expect_tx(bar, kRope ? kPageBytes : kDimV * kBlockN);
#pragma unroll
  for (int slab = 0; slab < kDimV / 128; ++slab)
    decode::tma_load_2d(dst + slab * kSlabBytes, &p.tmap_kv, bar, slab * 128, page * kBlockN);
  if constexpr (kRope) decode::tma_load_2d(dst + kRopeSlab * kSlabBytes, &p.tmap_kv_rope, bar, kDimV, page * kBlockN);
}

// Producer: cursor c's page (physical page `page`) into the K stage at dst, onto its k_full barrier, and the
// timeline's last-TMA mark (kernel_ws.cuh ws_producer).
// Knock-outs (kernel_ws.cuh MLA_FP8_WS_KO): 16 completes k_full by a plain arrive, no copy; 128 copies no rope box.
__device__ __forceinline__ void issue_k_page(const decode::DecodeKernelParams& p, const PartCursor& c, int page,
                                             uint32_t dst, uint32_t k_full) {
  if constexpr ((MLA_FP8_WS_KO & 16) != 0) {
    decode::mbar_arrive(k_full);
  } else {
    issue_page_tma<(MLA_FP8_WS_KO & 128) == 0>(p, page, dst, k_full);
  }
  if (c.last_of_sequence() && c.b == c.end_b) MLA_TL_MARK_LAST(p.timeline, 10);  // timeline_ws.cuh: last TMA
}

// Parity of the barrier phase that page j completes in its stage (stage j % n, phase j / n).
__device__ __forceinline__ uint32_t phase(int j, int n) { return static_cast<uint32_t>(j / n) & 1u; }

// Row max of this thread's row h of an S fragment over the 4 lanes sharing it, no key masked (mainloop.cuh
// mask_row_max without the mask: for pages whose every key is visible to every row of the warp).
template <int kTiles>
__device__ __forceinline__ float row_max(const float (&s)[kTiles][4], int h) {
  float mx = -INFINITY;
#pragma unroll
  for (int t = 0; t < kTiles; ++t) mx = fmaxf(mx, fmaxf(s[t][2 * h], s[t][2 * h + 1]));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
  return fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
}

// Byte offset of this thread's 4 keys 16G + {2 t4, 2 t4 + 1, 8 + 2 t4, 9 + 2 t4} of `row` in P half `half` of the
// P area (config_ws.h p_half_offset): kappa order 4 t4 .. 4 t4 + 3 of the half's chunk G (the key order of V^T).
__host__ __device__ constexpr int p_byte(int row, int half, int group, int t4) {
  return half / 2 * kPBufBytes + row * 128 + (((4 * (half % 2) + group) ^ (row & 7)) << 4) + 4 * t4;
}

// P (this thread's row x 16 keys: p0[t] = key 8t + 2 t4, p1[t] = key 8t + 2 t4 + 1) rounded to e4m3.
__device__ __forceinline__ void store_p_e4m3(uint8_t* s_p, int half, int row, int t4, const float (&p0)[8],
                                             const float (&p1)[8]) {
#pragma unroll
  for (int group = 0; group < 4; ++group) {
    const uint32_t lo = pack_e4m3x2(p0[2 * group], p1[2 * group]);          // keys 16G + 2 t4, +1
    const uint32_t hi = pack_e4m3x2(p0[2 * group + 1], p1[2 * group + 1]);  // keys 16G + 8 + 2 t4, +1
    *reinterpret_cast<uint32_t*>(s_p + p_byte(row, half, group, t4)) = lo | (hi << 16);
  }
}

// One page's P.V into this warpgroup's columns, issued and committed as one group (no fence, no wait): the
// caller fences before the first group and waits (pv_page_ws; kernel_ws.cuh issue_pv).
__device__ __forceinline__ void pv_issue_ws(float (&d)[128], uint32_t s_p_page, uint32_t s_vt, int wg) {
#pragma unroll
  for (int ks = 0; ks < kBlockN / 32; ++ks)
    wgmma_m64n256k32_e4m3(d, decode::make_smem_desc(s_p_page + 32 * ks, 16, 1024),
                          decode::make_smem_desc(s_vt + 64 * wg + 32 * ks, 16, 1024));
  decode::wgmma_commit();
}

// O and l rescaled from st.m to m_page (l then plus rowsum): the first half of pv_page_ws.
__device__ __forceinline__ void rescale_o_ws(WsState& st, const float (&m_page)[2], const float (&rowsum)[2],
                                             float scale_log2) {
  // A warp none of whose rows changed its max skips the 128 multiplications by alpha = 1 (exact; the eager
  // form can round alpha below 1 by an ulp when fma contraction meets m * scale_log2 twice).
  // (Broadcast from lane 0: ptxas then treats the branch as warp-uniform; a "divergent" path around the wgmma
  // below makes it serialize every wgmma of the kernel, C7520.)
  const bool rescale =
      __shfl_sync(0xffffffffu, __any_sync(0xffffffffu, m_page[0] != st.m[0] || m_page[1] != st.m[1]), 0);
  if (rescale) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      // A row that has seen no key keeps m = -inf: subtract 0 then, so alpha = exp2(-inf) = 0, not NaN. A row whose max
      // stayed gets exp2 of a contracted fma, which can be 1 - an ulp; forcing exactly 1 there (a131730, as the h16
      // kernel's kExactOne) measured +0.3..+0.9 % on h_q 128 rows 15 / 17 (H100, session 63, two passes, code
      // placement) for ~1e-4 of a row, so it was reverted.
      const float ms = m_page[h] == -INFINITY ? 0.f : m_page[h] * scale_log2;
      // One MUFU.EX2 (ptx.h): exp2f's range check and subnormal scaling serve results below 2^-126 only, which
      // vanish against a row's l >= 1 and O's own magnitude (session 84).
      const float alpha = decode::ex2_ftz(st.m[h] * scale_log2 - ms);
      st.m[h] = m_page[h];
      st.l[h] = st.l[h] * alpha + rowsum[h];
#pragma unroll
      for (int t = 0; t < 32; ++t) {
        st.o[t][2 * h] *= alpha;
        st.o[t][2 * h + 1] *= alpha;
      }
    }
  } else {
#pragma unroll
    for (int h = 0; h < 2; ++h) st.l[h] += rowsum[h];
  }
}

// O_half = O_half * exp(m_o - m_page) + P_page V_page[:, half]; l likewise plus this warpgroup's own row
// sums (zero for the other warpgroup's page). m_page: the page's running max as its owner used it.
// s_p_page: the page's P half (P area + p_half_offset); s_vt: the page's V^T stage.
__device__ __forceinline__ void pv_page_ws(WsState& st, const float (&m_page)[2], const float (&rowsum)[2],
                                           uint32_t s_p_page, uint32_t s_vt, int wg, float scale_log2) {
  rescale_o_ws(st, m_page, rowsum, scale_log2);
  float(&d)[128] = reinterpret_cast<float(&)[128]>(st.o);
  decode::fence_operands(d);
  decode::wgmma_fence();
  pv_issue_ws(d, s_p_page, s_vt, wg);
  decode::wgmma_wait_all();
  decode::fence_operands(d);
}

// Keys of the page at cur visible to this thread's two rows (row_i: their query positions): up to the sequence end
// and, causal, the diagonal (query row i sees keys < seqlen - s_q + 1 + i), clamped to seqlen for rows past the tile's
// valid rows (causal position >= s_q). Returns whether every row of the warp sees the whole page (all pages but a
// sequence's last and the causal diagonal's), where the softmax skips the mask: a compare and a select less per score
// (run W14).
__device__ __forceinline__ bool visible_keys(const decode::DecodeKernelParams& p, const PartCursor& cur,
                                             const int (&row_i)[2], int (&limit)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int visible = p.causal ? min(cur.seqlen, cur.seqlen - p.s_q + 1 + row_i[h]) : cur.seqlen;
    limit[h] = visible - cur.blk * kBlockN;
  }
  return __all_sync(0xffffffffu, min(limit[0], limit[1]) >= kBlockN);
}

// The owner's row maxima (kernel_ws.cuh): a page every row of the warp sees whole (all but a sequence's last page and
// the causal diagonal's) reduces each row's 16 scores as a depth-4 tree (decode::row_max_tree), both rows
// interleaved, where `whole ? row_max : mask_row_max` per row compiled to a ~9-deep FMNMX chain and a branch diamond
// per row, the second row starting after the first (session 53; the 16-bit kernels' mask_row_max_tree since run 31).
// A partial page keeps the masked chains in the one warp-uniform branch: masking in place before the tree, as
// mask_row_max_tree does, made ptxas spill the part cursor (68 bytes) at these consumers' 224 registers. fmaxf is exact
// in any order, so the maxima (and P) are the serial chain's bit for bit. kTree false: the per-row serial chains on
// every page (the form before; WsSplit keeps it, kernel_ws.cuh kTreeMax).
template <bool kTree>
__device__ __forceinline__ void page_row_max(float (&sc)[8][4], const decode::DecodeKernelParams& p,
                                             const PartCursor& cur, const int (&row_i)[2], int t4, float (&mx)[2]) {
  int limit[2];
  const bool whole = visible_keys(p, cur, row_i, limit);
  if constexpr (kTree) {
    if (!whole) {
#pragma unroll
      for (int h = 0; h < 2; ++h) mx[h] = mask_row_max<8>(sc, h, limit[h], t4);
      return;
    }
    decode::row_max_tree(sc, mx);
  } else {
#pragma unroll
    for (int h = 0; h < 2; ++h) mx[h] = whole ? row_max<8>(sc, h) : mask_row_max<8>(sc, h, limit[h], t4);
  }
}

// Where a segment's epilogue stages a direct segment's output for its TMA stores (epilogue_out_ws.cuh):
// rounds 1: the tile's 8 boxes at base (the K stages, once the part is done); 2: this warpgroup's 2 slots at base
// (a sequence switch); 0: no staging, plain global stores (write_segment_ws: kernel_ws3.cuh, WsSplit, split
// segments).
struct OutStage {
  uint32_t base = 0;
  int rounds = 0;
};

// A segment's epilogue in the fp8 64-row kernels (kernel_ws.cuh, kernel_ws3.cuh): O accumulates P times raw e4m3 V,
// so out (and every partial) = O / l * k_scale; partials as bf16 values (docs/mla_decode.md: an fp8 partial needs no
// fp32 range; half the bytes). Then the next segment's state; epi counts the segments written (s_l's parity).
template <bool kFused>
__device__ __forceinline__ void ws_fp8_epilogue(const Fp8DecodeParams& fp, WsState& st, float* s_l, int& epi, int b,
                                                int first_batch, int first_split, int tile_row0, int valid_rows, int wg,
                                                int warp, int lane, decode::FusedMerges<kFused>& merges,
                                                OutStage out = {}) {
  const decode::DecodeKernelParams& p = fp.d;
  const int n_splits = p.split_offsets[b + 1] - p.split_offsets[b];
  const int slot = p.split_offsets[b] + (b == first_batch ? first_split : 0);
  if (out.rounds != 0 && n_splits == 1) {
    write_out_staged(p, st, s_l, epi & 1, b, tile_row0, valid_rows, wg, warp, lane, out.base, out.rounds,
                     fp.out_scale);
  } else {
#pragma unroll
    for (int t = 0; t < 32; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) st.o[t][e] *= fp.out_scale;
    decode::write_segment_ws<decode::Bf16Traits, true>(p, st, s_l, epi & 1, b, slot, n_splits == 1, tile_row0,
                                                       valid_rows, wg, warp, lane);
  }
  merges.note(b, n_splits);
  ++epi;
  st.reset();
}

// Warpgroup-wide "any thread's pred": a named barrier of `count` threads that also ORs a predicate (bar.red), so a
// decision taken on every row of the warpgroup (kernel_ws.cuh kAhead) costs no more than the barrier it replaces.
__device__ __forceinline__ bool named_sync_any(int id, int count, bool pred) {
  // Uniform anyway; the shuffle lets ptxas see it (see pv_page_ws).
  return __shfl_sync(0xffffffffu, decode::named_sync_or(id, count, pred), 0) != 0;
}

}  // namespace mla::sm90::decode_fp8
