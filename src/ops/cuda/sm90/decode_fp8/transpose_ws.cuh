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
// Bank conflicts: the ldmatrix rows (8 keys at one chunk) are distinct swizzle rows; for the 4-byte stores,
// lanes g < 4 store their even dim first and lanes g >= 4 their odd dim, so the 8 row groups g hit 8
// distinct rows mod 8 (= 8 distinct swizzled chunks) and the 4 t's the 4 words of a chunk: 32 banks.
// Keys at or past the sequence end are zeroed here (their cache slots may hold NaN codes, and 0 * NaN
// would reach O through P = 0).
#include <cstdint>

#include "ops/cuda/sm90/decode/ptx.h"
#include "ops/cuda/sm90/decode_fp8/config_ws.h"
#include "ops/cuda/sm90/decode_fp8/traits.h"

namespace mla::sm90::decode_fp8 {

// V^T layout (config_ws.h): the 4 permuted keys 16G + {2t, 2t+1, 8+2t, 9+2t} of output dim d sit at byte
//   (d % 256) * 128 + (((4 (d / 256) + G) ^ (d % 8)) << 4) + 4t
// (scripts/check_fp8_ws_layouts.py checks the stores below against this formula).

// One warp's share: chunk pairs cp = warp, warp + 3, ... (dims 32 cp .. 32 cp + 31), all four key groups per
// pair (four independent ldmatrix in flight). Per lane, the ldmatrix address of group G is base(cp) + 2048 G
// (16 keys = 16 swizzle rows further; the XOR depends on the key mod 8 only), and the V^T row of each store
// is n = 32 cp % 256 + 16 q + 2g + (0 or 1): its swizzle term n % 8 = (2g + 0 / 1) % 8 is a lane constant.
template <bool kTail>
__device__ __forceinline__ void transpose_page_impl(uint32_t s_page, uint32_t s_vt, int valid_keys, int tw) {
  const int warp = tw >> 5, lane = tw & 31, g = lane >> 2, t = lane & 3;
  const bool odd_first = g >= 4;
  const int key_in = (lane & 7) + 8 * ((lane >> 3) & 1), chunk_in = lane >> 4;  // this lane's ldmatrix row
  const int sel1 = odd_first ? 1 : 0, sel2 = 1 - sel1;                          // dim offsets of the 2 stores
  const int r1 = (2 * g + sel1) & 7, r2 = (2 * g + sel2) & 7;                   // their rows' swizzle terms
  uint32_t keep[4] = {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu};
  if constexpr (kTail) {
#pragma unroll
    for (int group = 0; group < 4; ++group) {
      const int k0 = 16 * group + 2 * t;
      keep[group] = (k0 < valid_keys ? 0xFFu : 0u) | (k0 + 1 < valid_keys ? 0xFF00u : 0u) |
                    (k0 + 8 < valid_keys ? 0xFF0000u : 0u) | (k0 + 9 < valid_keys ? 0xFF000000u : 0u);
    }
  }
#pragma unroll 1
  for (int cp = warp; cp < 16; cp += 3) {
    const uint32_t src = s_page + slab_offset(key_in, 2 * cp + chunk_in);
    uint32_t v[4][4];
#pragma unroll
    for (int group = 0; group < 4; ++group) decode::ldmatrix_x4_trans(v[group], src + group * 16 * 128);
    const int h = cp >> 3;
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      const int n0 = ((32 * cp) & 255) + 16 * q + 2 * g;
      const uint32_t row1 = s_vt + (n0 + sel1) * 128 + 4 * t, row2 = s_vt + (n0 + sel2) * 128 + 4 * t;
#pragma unroll
      for (int group = 0; group < 4; ++group) {
        const uint32_t even = select_even(v[group][2 * q], v[group][2 * q + 1]) & keep[group];
        const uint32_t odd = select_odd(v[group][2 * q], v[group][2 * q + 1]) & keep[group];
        const int c = 4 * h + group;
        asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(row1 + ((c ^ r1) << 4)), "r"(odd_first ? odd : even) : "memory");
        asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(row2 + ((c ^ r2) << 4)), "r"(odd_first ? even : odd) : "memory");
      }
    }
  }
}

// tw: this thread's index among the 96 transpose threads; valid_keys: keys of the page below seqlen.
__device__ __forceinline__ void transpose_page(uint32_t s_page, uint32_t s_vt, int valid_keys, int tw) {
  if (valid_keys < kBlockN) {
    transpose_page_impl<true>(s_page, s_vt, valid_keys, tw);
  } else {
    transpose_page_impl<false>(s_page, s_vt, valid_keys, tw);
  }
}

}  // namespace mla::sm90::decode_fp8
