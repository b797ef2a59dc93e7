#pragma once
// Per-page math of the 16- and 32-row wgmma kernel (kernel_h16.cuh, constants in config_h16.h).
//
// Scorer thread (warp w of warpgroup 0, g = lane / 4, t = lane % 4) after S^T: s[4j + 2h + e] = score of key
// 16w + g + 8h (page-local) for query row 8j + 2t + e. Its four rows are indexed r = 2j + e below.
// Accumulator thread (warp w of warpgroup 1): for M tile i (V dims 64i .. 64i + 63), the A fragment rows of warp w
// are 16-dim chunk c = 4i + w, M row g <-> dim 16c + 2g and M row g + 8 <-> dim 16c + 2g + 1 (what ldmatrix.trans
// plus the even/odd byte select of traits.h delivers), so o[i][4j + e] = O(row 8j + 2t + e, dim 16c + 2g) and
// o[i][4j + 2 + e] = O(row 8j + 2t + e, dim 16c + 2g + 1).
// Key order of the P.V product: the A fragment's k slot kappa = 16h + 4t + 2a + e holds key 16h + 8a + 2t + e
// (mainloop.cuh p_position), so P^T is stored with its keys at p_position in each row.
#include <cstdint>

#include "ops/cuda/sm90/decode/ptx.h"
#include "ops/cuda/sm90/decode/wgmma.h"
#include "ops/cuda/sm90/decode_fp8/config_h16.h"
#include "ops/cuda/sm90/decode_fp8/mainloop.cuh"
#include "ops/cuda/sm90/decode_fp8/traits.h"
#include "ops/cuda/sm90/decode_fp8/wgmma_e4m3_n16.h"

namespace mla::sm90::decode_fp8::h16 {

// S^T (64 keys x 16 rows) = K . Q^T over the five slabs of a stage and of a Q tile (16-row slabs of 2 KB):
// +32 bytes per k32 step inside a 128-byte swizzled row, 4 steps per slab, 2 in the fifth (dims 512..575).
// Issued as one wgmma group; the caller waits for it.
// Both base addresses go through a shuffle from lane 0 first. They are the same in every lane, but ptxas cannot tell
// (the stage and the Q slot follow the part cursor, which loads its sequence bounds from global memory), so it built
// all 36 descriptors in vector registers and moved each pair to the uniform registers wgmma reads with 4 R2UR: ~10
// instructions before every wgmma, ~200 on the scorer's path per page. As shuffle results they are warp-uniform, the
// descriptors live in uniform registers and advance by UIADD3.64, the wgmmas go 3 instructions apart (the block ~55).
// The scorer's per-page latency is the kernel's page rate (NOTES_fp8.md session 10, fp8acc: a scorer held to the
// accumulator's pace loses 0.3-0.4 µs per page). H200, fp8acc run A3, against HEAD's kernel as two binaries of one
// tree, two passes: b128 s8192 −3.4 µs (−2.1 %), s4096 −1.55, s512 −0.4, b32 −0.25…−0.35, b1 −0.1…−0.25 (run A2, knob
// instantiations in one binary: −3.55 / −1.35 / −0.35, b32 −0.05…−0.6).
// 32 rows (RG 2): the same over a 32-row Q tile (4 KB slabs), m64n32k32.
template <int RG>
__device__ __forceinline__ void issue_scores_t(float (&s)[8 * RG], uint32_t s_k, uint32_t s_q) {
  constexpr int kQSlabBytes = Tile<RG>::kQSlabBytes;
  s_k = __shfl_sync(0xffffffffu, s_k, 0);
  s_q = __shfl_sync(0xffffffffu, s_q, 0);
#pragma unroll
  for (int i = 0; i < 8 * RG; ++i) s[i] = 0.f;
  decode::fence_operands(s);
  decode::wgmma_fence();
  uint64_t da = decode::make_smem_desc(s_k, 16, 1024);
  uint64_t db = decode::make_smem_desc(s_q, 16, 1024);
#pragma unroll
  for (int slab = 0; slab < kDimQK / 128; ++slab) {
#pragma unroll
    for (int k = 0; k < 4; ++k) wgmma_nrows_ss<RG>(s, da + 2 * k, db + 2 * k);
    da += kSlabBytes >> 4;
    db += kQSlabBytes >> 4;
  }
  static_assert(kDimQK % 128 == 64, "the fifth slab holds 64 bytes: two k32 steps");
  wgmma_nrows_ss<RG>(s, da, db);
  wgmma_nrows_ss<RG>(s, da + 2, db + 2);
  decode::wgmma_commit();
}

// The scorer's row state and the masked row max of a page's S^T (decode/handoff_n16.cuh, shared with the 16-bit
// 16-row kernel).
using decode::n16::ScorerState;
using decode::n16::mask_and_warp_max;
using decode::n16::warp_max_row;

// Byte address of P^T(row, key) in a P buffer: row-major 128-byte rows, 128B swizzle (chunk ^ row % 8), the key at
// its kappa position.
__device__ __forceinline__ uint32_t p_byte(uint32_t s_p, int row, int key) {
  const int pos = p_position(key);
  return s_p + row * 128 + ((((pos >> 4) ^ row) & 7) << 4) + (pos & 15);
}

// P^T of one page (the scorer thread's pr, keys 16w + g and 16w + g + 8 of its rows 8j + 2t + e) into a P buffer
// as two 32-bit stores per thread instead of eight byte stores (-1.6 % at b128 s8192, NOTES_fp8.md run H7): the
// word at kappa 4m .. 4m + 3 of a row holds keys 16w + 2m, 16w + 2m + 1, 16w + 2m + 8, 16w + 2m + 9, i.e. the two
// bytes of lane g = 2m and the two of lane 2m + 1 (lane ^ 4). One shuffle swaps halves: the even lane writes rows
// 8j + 2t, the odd lane rows 8j + 2t + 1. Each store covers 8 rows (8 distinct 16-byte chunks after the swizzle)
// x 4 words of the warp: 32 distinct banks.
__device__ __forceinline__ void store_p_packed(uint32_t s_pb, const float (&pr)[8], int w, int g, int t) {
  uint32_t two[4];  // [2j + e]: key 16w + g (low byte), key 16w + g + 8 (high byte) of row 8j + 2t + e
#pragma unroll
  for (int j = 0; j < 2; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) two[2 * j + e] = pack_e4m3x2(pr[4 * j + e], pr[4 * j + 2 + e]);
  const bool odd = g & 1;
  // Keep the rows of this lane's parity, send the partner the others (j = 0 in the low half, j = 1 in the high).
  const uint32_t mine0 = odd ? two[1] : two[0], mine1 = odd ? two[3] : two[2];
  const uint32_t send = odd ? (two[0] | (two[2] << 16)) : (two[1] | (two[3] << 16));
  const uint32_t got = __shfl_xor_sync(0xffffffffu, send, 4);
  // Word bytes [even lo, odd lo, even hi, odd hi]; __byte_perm selectors: x = mine (0-3), y = got (4-7).
  const uint32_t w0 = __byte_perm(mine0, got, odd ? 0x1504u : 0x5140u);
  const uint32_t w1 = __byte_perm(mine1, got, odd ? 0x1706u : 0x7160u);
  const int row0 = 2 * t + (g & 1), key = 16 * w + (g & ~1);
  asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(p_byte(s_pb, row0, key)), "r"(w0) : "memory");
  asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(p_byte(s_pb, row0 + 8, key)), "r"(w1) : "memory");
}

// O^T (this thread's MT M tiles of 16 RG rows) += V^T . P^T for one page, in issue / wait halves so that the caller
// can run the page stream while the tensor cores work. vf: A fragments [k32 step][M tile], built by load_v_frags;
// s_pb: the P buffer (16 RG rows: the descriptor's 8-row groups 1024 bytes apart, as for 16).
template <int RG, int MT>
__device__ __forceinline__ void issue_pv_t(float (&o)[MT][8 * RG], const uint32_t (&vf)[2][MT][4], uint32_t s_pb) {
  decode::wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < 2; ++ks) {
    const uint64_t db = decode::make_smem_desc(s_pb + ks * 32, 16, 1024);
#pragma unroll
    for (int i = 0; i < MT; ++i) wgmma_nrows_rs<RG>(o[i], vf[ks][i], db);
  }
  decode::wgmma_commit();
}
template <int RG, int MT>
__device__ __forceinline__ void wait_pv_t(float (&o)[MT][8 * RG]) {
  decode::wgmma_wait_all();
#pragma unroll
  for (int i = 0; i < MT; ++i) decode::fence_operands(o[i]);
}

// Pins the fragments' computation before this point: a prmt the compiler sinks past wgmma_fence would make ptxas
// inject a warpgroup.arrive between the P.V wgmmas (serializing them).
template <int MT>
__device__ __forceinline__ void fence_frags(uint32_t (&vf)[2][MT][4]) {
#pragma unroll
  for (int ks = 0; ks < 2; ++ks)
#pragma unroll
    for (int i = 0; i < MT; ++i) decode::fence_operands(vf[ks][i]);
}

// V^T A fragments of a page in the slab layout: for k32 step ks and M tile i (V dims 64 (i0 + i) ..), one
// ldmatrix.x4.trans of keys 32ks + lane at chunk 4 (i0 + i) + w (matrix q = keys 32ks + 8q ..), then the even/odd
// selects. Keys at or past `limit` become zeros (their cache slots hold garbage, and P = 0 times NaN would still be
// NaN).
template <int MT>
__device__ __forceinline__ void load_v_frags(uint32_t (&vf)[2][MT][4], uint32_t s_stage, int limit, int w, int lane,
                                             int i0) {
  const int t = lane & 3;
#pragma unroll
  for (int ks = 0; ks < 2; ++ks) {
    uint32_t keep[4];  // per 8-key matrix q: this thread's keys 32ks + 8q + 2t (bytes 0-1) and + 1 (bytes 2-3)
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int key = 32 * ks + 8 * q + 2 * t;
      keep[q] = (key < limit ? 0x0000ffffu : 0u) | (key + 1 < limit ? 0xffff0000u : 0u);
    }
    const int key = 32 * ks + lane;
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      uint32_t v[4];
      decode::ldmatrix_x4_trans(v, s_stage + slab_offset(key, 4 * (i0 + i) + w));
      if (limit < kBlockN) {
#pragma unroll
        for (int q = 0; q < 4; ++q) v[q] &= keep[q];
      }
      vf[ks][i][0] = select_even(v[0], v[1]);
      vf[ks][i][1] = select_odd(v[0], v[1]);
      vf[ks][i][2] = select_even(v[2], v[3]);
      vf[ks][i][3] = select_odd(v[2], v[3]);
    }
  }
  fence_frags(vf);
}

}  // namespace mla::sm90::decode_fp8::h16
