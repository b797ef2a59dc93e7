#pragma once
// V^T of one page for the P.V wgmma (8-bit wgmma needs B K-major: keys contiguous per output dim), built
// by the producer warpgroup's three transpose warps from the K page the TMA brought (slabs 0..3 = dims
// 0..511, 128B-swizzled, config.h slab_offset) into the V^T stage (config_ws.h).
//
// One ldmatrix.x4.trans reads 16 keys (16G .. 16G + 15) x two 16-byte chunks (dims 16c .. 16c + 31):
// matrices (keys +0..7, chunk c), (+8..15, c), (+0..7, c + 1), (+8..15, c + 1). As in the mma.sync kernel
// (traits.h), lane (g, t) gets per 8-key matrix [V[2t][2g], V[2t][2g+1], V[2t+1][2g], V[2t+1][2g+1]], and
// select_even / select_odd of the two key halves give dim 2g / 2g + 1 of the chunk over the keys
// {2t, 2t+1, 8+2t, 9+2t}. So V^T stores, within each 16-key group, key 8a + 2t + e at byte kappa = 4t + 2a + e
// (the same permutation as mainloop.cuh p_position); P is written in that order too (mainloop_ws.cuh), and
// P.V sums over matching keys.
//
// Bank conflicts: the ldmatrix rows (8 keys at one chunk) are distinct swizzle rows; each stmatrix matrix
// writes 8 V^T rows with 8 distinct swizzle terms (see transpose_page_stsm_impl).
// Keys at or past the sequence end are zeroed here (their cache slots may hold NaN codes, and 0 * NaN
// would reach O through P = 0).
#include <cstdint>

#include "ops/cuda/sm90/decode/ptx.h"
#include "ops/cuda/sm90/decode/tma.h"
#include "ops/cuda/sm90/decode_fp8/config_ws.h"
#include "ops/cuda/sm90/decode_fp8/traits.h"

// Which transpose warp of the split form takes the page's sixth round (chunk pairs share, share + 3, ..., 15: share 0 has
// six rounds, 1 and 2 five): the warp whose share is 0. 0 (default): warp 0. Session 69's per-warp phase sums (H100)
// put warp 0 at ~1590 cycles for five rounds where warps 1-2 took ~1360, so the sixth round might belong to a faster
// warp; session 70 measured 1 and 2 against 0 (H100): fp8 rows 10-18 within -0.9..+0.5 %, since at HEAD the warps
// take alike per round (282 / 271 cycles). Kept for A/B runs.
#ifndef MLA_FP8_WS_TR_SIXTH
#define MLA_FP8_WS_TR_SIXTH 0
#endif

namespace mla::sm90::decode_fp8 {

// V^T layout (config_ws.h): the 4 permuted keys 16G + {2t, 2t+1, 8+2t, 9+2t} of output dim d sit at byte
//   (d % 256) * 128 + (((4 (d / 256) + G) ^ (d % 8)) << 4) + 4t
// (scripts/check_fp8_ws_layouts.py checks the stores below against this formula).

__device__ __forceinline__ void stmatrix_x4(uint32_t addr, const uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r[0]), "r"(r[1]),
               "r"(r[2]), "r"(r[3])
               : "memory");
}

// Per-lane constants of a transpose round (see transpose_page_stsm).
struct TransposeLane {
  uint32_t sel_a, sel_b;
  int key_in, chunk_in, dim_off, swz;
  __device__ explicit TransposeLane(int lane) {
    const bool odd_first = lane >= 16;  // g >= 4
    sel_a = odd_first ? 0x7531u : 0x6420u;
    sel_b = odd_first ? 0x6420u : 0x7531u;
    key_in = (lane & 7) + 8 * ((lane >> 3) & 1);  // this lane's ldmatrix row
    chunk_in = lane >> 4;
    const int k = lane >> 3, r = lane & 7;  // this lane's stmatrix row
    dim_off = 16 * (k >> 1) + 2 * r + ((k & 1) ? (r < 4 ? 1 : 0) : (r >= 4 ? 1 : 0));
    swz = dim_off & 7;
  }
};
// Chunk pair cp's four key groups: loaded (ldmatrix.x4.trans) and permuted into w, the stmatrix words.
__device__ __forceinline__ void transpose_load(const TransposeLane& L, uint32_t s_page, int cp, uint32_t (&w)[4][4]) {
  const uint32_t src = s_page + slab_offset(L.key_in, 2 * cp + L.chunk_in);
#pragma unroll
  for (int g = 0; g < 4; ++g) decode::ldmatrix_x4_trans(w[g], src + g * 16 * 128);
#pragma unroll
  for (int g = 0; g < 4; ++g)
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      const uint32_t a = __byte_perm(w[g][2 * q], w[g][2 * q + 1], L.sel_a);
      const uint32_t b = __byte_perm(w[g][2 * q], w[g][2 * q + 1], L.sel_b);
      w[g][2 * q] = a;
      w[g][2 * q + 1] = b;
    }
}
// ... and stored (stmatrix.x4) into the V^T stage.
__device__ __forceinline__ void transpose_store(const TransposeLane& L, uint32_t s_vt, int cp,
                                                const uint32_t (&w)[4][4]) {
  const int h = cp >> 3;
  const uint32_t row = s_vt + (((32 * cp) & 255) + L.dim_off) * 128;
#pragma unroll
  for (int g = 0; g < 4; ++g) stmatrix_x4(row + (((4 * h + g) ^ L.swz) << 4), w[g]);
}
// V^T with one stmatrix.x4 per (chunk pair, key group) instead of 16 four-byte stores (run W4: 20 % faster than
// the 4-byte stores, which scripts/check_fp8_ws_layouts.py keeps as its reference). stmatrix is ldmatrix's inverse: register k of lane (g, t) is bytes 4t..4t+3 of row g
// of matrix k, and lanes 8k..8k+7 give matrix k's row addresses. Lane (g, t) holds, per group and q, the
// words of dims 32 cp + 16 q + 2g and + 1 (its 4 keys each); the byte permute with a lane-dependent selector
// puts dim 2g + (g >= 4) in register 2q and the other one in 2q + 1, so matrix k's row r is dim
// 32 cp + 16 (k / 2) + 2r + s(k, r), s = (r >= 4) for even k, (r < 4) for odd k: 8 rows with 8 distinct
// swizzle terms (conflict-free), and lane l's row (k = l / 8, r = l % 8) has a fixed offset in the pair and a
// fixed swizzle term, so its address per group is one add.
// One warp's share: chunk pairs cp = warp, warp + 3, ... (dims 32 cp .. 32 cp + 31), all four key groups per
// pair. Per lane, the ldmatrix address of group G is base(cp) + 2048 G (16 keys = 16 swizzle rows further; the
// XOR depends on the key mod 8 only).
// Each round issues the four ldmatrix of a chunk pair (all four key groups) and waits for them once, so a warp pays
// the ldmatrix latency 6 times per page (runs W8-W10: 2 per round paid it 12 times and the transposer sat on the
// critical path; 8 per round spills in the producer warpgroup's 56 registers). No tail mask here: an AND per word
// on every page was 3 % slower (W9); tail pages are fixed up by zero_vt_tail.
// kWarps: the transpose warps (3).
template <int kWarps>
__device__ __forceinline__ void transpose_page_stsm(uint32_t s_page, uint32_t s_vt, int tw) {
  const int warp = tw >> 5;
  const TransposeLane L(tw & 31);
  uint32_t w[4][4];
#pragma unroll 1
  for (int cp = warp; cp < 16; cp += kWarps) {
    transpose_load(L, s_page, cp, w);
    transpose_store(L, s_vt, cp, w);
  }
}

// The split form (MLA_FP8_WS_TR_SPLIT, session 53): transpose_page_stsm's rounds, stores and bytes, and
//  - round 0 is loaded and permuted before the V^T stage is known to be free (wait_vt()), so its load latency leaves
//    the path from that release to the page's V^T whenever the K page landed first (the usual order: the transposers
//    waited ~400 cycles a page for a V^T stage and ~150 for K, session 52 c2);
//  - each thread arrives on the K stage's empty barrier (k_empty) right after its last load from it, before its last
//    round's stores, so the TMA of the page two ahead starts a round earlier (mbarrier.arrive releases: the loads are
//    done before the producer can see the phase complete).
// H200 (bench/decode/NOTES.md "Session 53" c3): fp8 rows 16-18 -2.0 %, 13-15 -1.1..-1.8 %. Moving pair 15's key groups
// to even out the warps' shares (20 / 22 / 22 group units a page instead of 24 / 20 / 20) cost +2..+3 % on top of it:
// two warps then pay a sixth, short round's load latency.
template <int kWarps, class WaitVt>
__device__ __forceinline__ void transpose_page_split(uint32_t s_page, uint32_t s_vt, int tw, WaitVt&& wait_vt,
                                                     uint32_t k_empty) {
  // Knock-out bit 64 (kernel_ws.cuh MLA_FP8_WS_KO, session 54): arrive before the first load, so the producer may
  // refill the stage under this page's loads (wrong results): the timing of a K ring one stage deeper.
  constexpr bool kEarlyArrive = (MLA_FP8_WS_KO & 64) != 0;
  if constexpr (kEarlyArrive) decode::mbar_arrive(k_empty);
  // Knock-out bit 4096 (session 70): chunk pairs 0-7 only (dims 256-511 of V^T left as they are, wrong results): the
  // bound of a head-tile pair that splits each page's transpose between its two CTAs, without the hand-off's cost.
  constexpr int kPairs = (MLA_FP8_WS_KO & 4096) != 0 ? 8 : 16;
  // This warp's share, its first chunk pair (MLA_FP8_WS_TR_SIXTH above: warp MLA_FP8_WS_TR_SIXTH takes share 0, the
  // six-round one; by default share = warp).
  const int share = kWarps == 3 && MLA_FP8_WS_TR_SIXTH != 0 ? ((tw >> 5) + 3 - MLA_FP8_WS_TR_SIXTH) % 3 : tw >> 5;
  const TransposeLane L(tw & 31);
  uint32_t w[4][4];
  transpose_load(L, s_page, share, w);
  wait_vt();
  transpose_store(L, s_vt, share, w);
#pragma unroll 1
  for (int cp = share + kWarps; cp < kPairs; cp += kWarps) {
    transpose_load(L, s_page, cp, w);
    // this thread's last load from the K stage is done
    if (!kEarlyArrive && cp + kWarps >= kPairs) decode::mbar_arrive(k_empty);
    transpose_store(L, s_vt, cp, w);
  }
}

// Zeroes the V^T bytes of keys >= valid_keys (0 < valid_keys < 64) of a stage the unmasked transpose wrote: whole
// 16-byte chunks for the key groups past the tail's, the byte mask of the permuted key order (kappa = 4t + 2a + e
// for key 16G + 8a + 2t + e) in the tail's group. Every (row, half) pair of the 256 x 2: threads take pairs tw,
// tw + n, ... The caller syncs the transpose threads before (the bytes were stored by other warps' stmatrix).
__device__ __forceinline__ void zero_vt_tail(uint32_t s_vt, int valid_keys, int tw, int n_threads) {
  const int g0 = valid_keys >> 4, r0 = valid_keys & 15;
  uint32_t keep[4];  // bytes 4w .. 4w + 3 of the tail group's chunk (t = w): keys 2w, 2w + 1, 8 + 2w, 9 + 2w
#pragma unroll
  for (int w = 0; w < 4; ++w)
    keep[w] = (2 * w < r0 ? 0xFFu : 0u) | (2 * w + 1 < r0 ? 0xFF00u : 0u) | (8 + 2 * w < r0 ? 0xFF0000u : 0u) |
              (9 + 2 * w < r0 ? 0xFF000000u : 0u);
  for (int i = tw; i < 2 * 256; i += n_threads) {
    const int row = i >> 1, h = i & 1;
    const uint32_t base = s_vt + row * 128;
    for (int g = g0; g < 4; ++g) {
      const uint32_t addr = base + (((4 * h + g) ^ (row & 7)) << 4);
      uint32_t v[4] = {0u, 0u, 0u, 0u};
      if (g == g0 && r0 != 0) {
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
                     : "r"(addr));
#pragma unroll
        for (int w = 0; w < 4; ++w) v[w] &= keep[w];
      }
      asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(v[0]), "r"(v[1]), "r"(v[2]),
                   "r"(v[3])
                   : "memory");
    }
  }
}

// tw: this thread's index among the 32 x kWarps transpose threads; valid_keys: keys of the page below seqlen. One
// unmasked loop for every page; a tail page is then fixed up by zero_vt_tail after a barrier of the transpose threads
// (named barrier kBarTranspose): a second, masked copy of the loop next to the unmasked one spills.
constexpr int kBarTranspose = 6;  // kernel_ws.cuh's consumers use named barriers 1-5
template <int kWarps>
__device__ __forceinline__ void fix_vt_tail(uint32_t s_vt, int valid_keys, int tw) {
  if (valid_keys < kBlockN) {  // uniform across the transpose threads (same page)
    decode::named_sync(kBarTranspose, 32 * kWarps);
    zero_vt_tail(s_vt, valid_keys, tw, 32 * kWarps);
  }
}
template <int kWarps>
__device__ __forceinline__ void transpose_page(uint32_t s_page, uint32_t s_vt, int valid_keys, int tw) {
  transpose_page_stsm<kWarps>(s_page, s_vt, tw);
  fix_vt_tail<kWarps>(s_vt, valid_keys, tw);
}
// The split form: wait_vt() waits for the V^T stage, k_empty is the K stage's empty barrier (arrived on here).
template <int kWarps, class WaitVt>
__device__ __forceinline__ void transpose_page(uint32_t s_page, uint32_t s_vt, int valid_keys, int tw,
                                               WaitVt&& wait_vt, uint32_t k_empty) {
  transpose_page_split<kWarps>(s_page, s_vt, tw, wait_vt, k_empty);
  fix_vt_tail<kWarps>(s_vt, valid_keys, tw);
}

}  // namespace mla::sm90::decode_fp8
