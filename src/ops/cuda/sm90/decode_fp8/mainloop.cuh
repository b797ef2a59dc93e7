#pragma once
// Mainloop pieces of the fp8 decode kernel: global -> shared copies (Q tile, KV page) and the per-page
// math S = Q K^T (e4m3 x e4m3), online softmax, O += P V (P rounded to e4m3, V e4m3) on mma.sync
// m16n8k32.
//
// Warp roles as in the 16-bit kernel: warp w owns row group rg = w % RG (16 query rows) and slice
// ws = w / RG of NS = 8 / RG slices; it computes S for the slice's 64 / NS keys and O for the slice's
// 512 / NS output columns. Row maxima and P are exchanged through shared memory.
//
// Key order inside the P.V product. The mma k index kappa (0..31) of a 32-key step stands for key
//   key(kappa) = 16 * (kappa / 16) + 8 * ((kappa / 2) % 2) + 2 * ((kappa / 4) % 4) + kappa % 2
// i.e. kappa = 16h + 4t + 2a + e <-> key 16h + 8a + 2t + e. This is the order in which ldmatrix.trans
// plus one byte permute delivers V (traits.h), so P is stored in shared memory in that order too, and
// the A fragment of P is a plain ldmatrix.
//
// Column order of O. For each 16-dim chunk c of V, the "even" n8 tile has column n = dim 16c + 2n and
// the "odd" tile column n = dim 16c + 2n + 1. Thread (g, t) then holds dims 16c + 4t .. 16c + 4t + 3 of
// rows g and g + 8 as (even[0], odd[0], even[1], odd[1]) / (even[2], odd[2], even[3], odd[3]):
// four consecutive output dims, stored as one 8-byte (bf16) or 16-byte (fp32) vector.
#include <cstdint>

#include "ops/cuda/sm90/decode/ptx.h"
#include "ops/cuda/sm90/decode/wgmma.h"
#include "ops/cuda/sm90/decode_fp8/config.h"
#include "ops/cuda/sm90/decode_fp8/params.h"
#include "ops/cuda/sm90/decode_fp8/traits.h"
#include "ops/cuda/sm90/decode_fp8/wgmma_e4m3.h"

namespace mla::sm90::decode_fp8 {

using decode::cp_async_16;
using decode::ldmatrix_x4;
using decode::ldmatrix_x4_trans;

template <int RG>
struct WarpShape {
  static constexpr int kSlices = kWarps / RG;
  static constexpr int kKeys = kBlockN / kSlices;  // keys of S per warp: 16 (RG 2), 32 (RG 4)
  static constexpr int kSTiles = kKeys / 8;        // n8 tiles of S
  static constexpr int kCols = kDimV / kSlices;    // output columns per warp: 128 (RG 2), 256 (RG 4)
  static constexpr int kVChunks = kCols / 16;      // 16-dim chunks of V per warp (one even + one odd n8 tile each)
  static constexpr int kOTiles = 2 * kVChunks;     // n8 tiles of O
  static_assert(kWarps % RG == 0 && kKeys % 8 == 0, "warp layout");
};

// Copies `rows` rows of 576 bytes (contiguous in global memory) into shared rows of 592 bytes; rows at or past valid_rows are zero-filled and read nothing. Thread i copies linear
// chunks i, i + 256, ...: 32 threads cover 512 contiguous global bytes (fully coalesced 16-byte accesses).
template <int kRows>
__device__ __forceinline__ void copy_rows(const uint8_t* src, uint32_t dst, int valid_rows) {
  constexpr int kChunks = kRows * kChunksPerRow;
#pragma unroll
  for (int j = 0; j < (kChunks + kThreads - 1) / kThreads; ++j) {
    const int i = static_cast<int>(threadIdx.x) + j * kThreads;
    if (kChunks % kThreads != 0 && i >= kChunks) break;
    const int row = i / kChunksPerRow, chunk = i - row * kChunksPerRow;
    const bool valid = row < valid_rows;
    const int offset = row * kSmemRowBytes + chunk * 16;
    cp_async_16(dst + offset, valid ? src + i * 16 : src, valid ? 16 : 0);
  }
}

template <int RG>
__device__ __forceinline__ void load_q_tile(const decode::DecodeKernelParams& p, int b, int tile_row0, int valid_rows,
                                            uint32_t s_q_tile) {
  const uint8_t* src = static_cast<const uint8_t*>(p.q) + (static_cast<int64_t>(b) * p.rows + tile_row0) * kTokenBytes;
  copy_rows<RG * kRowGroup>(src, s_q_tile, valid_rows);
}

// Tokens at or past seqlen are zero-filled: their cache slots are garbage (NaN codes), and 0 * NaN
// would poison P.V; a zero e4m3 code is +0.
__device__ __forceinline__ void load_kv_page(const decode::DecodeKernelParams& p, int32_t page, int blk, int seqlen,
                                             uint32_t s_stage) {
  const uint8_t* src = static_cast<const uint8_t*>(p.kv_cache) + static_cast<int64_t>(page) * kPageBytes;
  copy_rows<kBlockN>(src, s_stage, seqlen - blk * kBlockN);
}

// Per-thread softmax/accumulator state: rows g and g + 8 of the warp's row group, the warp's columns
// (tile 2c = even, 2c + 1 = odd columns of V chunk c, see the top of this file).
template <int RG>
struct RowState {
  using WS = WarpShape<RG>;
  float o[WS::kOTiles][4];
  float m[2];  // running max of raw scores (e4m3 dot products, before any scale)
  float l[2];  // this thread's share of the running sum of unrounded exp

  __device__ __forceinline__ void reset() {
#pragma unroll
    for (int t = 0; t < WS::kOTiles; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[t][e] = 0.f;
    m[0] = m[1] = -INFINITY;
    l[0] = l[1] = 0.f;
  }
};

// A fragment of 16 rows x 32 bytes at byte column `col` of a padded tile: ldmatrix matrices
// (rows 0-7, bytes 0-15), (rows 8-15, bytes 0-15), (rows 0-7, bytes 16-31), (rows 8-15, bytes 16-31) are
// exactly a0..a3 of the 8-bit m16n8k32 layout (lane l addresses row l % 16, byte half l / 16).
__device__ __forceinline__ void load_a_frag(uint32_t (&a)[4], uint32_t s_tile, int row0, int row_bytes, int col,
                                            int lane) {
  ldmatrix_x4(a, s_tile + (row0 + (lane & 15)) * row_bytes + col + ((lane >> 4) << 4));
}

// S (16 rows x kKeys) = Q_rg (16 x 576) . K_slice^T. K rows are keys with dims contiguous: the B operand
// is "col" already, so plain ldmatrix gives b0/b1: matrices at chunks 4m .. 4m + 3 of 8 keys are b0, b1
// of the k32 step 2m and b0, b1 of step 2m + 1.
template <int RG>
__device__ __forceinline__ void compute_scores(float (&s)[WarpShape<RG>::kSTiles][4], uint32_t s_q_tile, uint32_t s_kv,
                                               int rg, int ws, int lane) {
  using WS = WarpShape<RG>;
#pragma unroll
  for (int t = 0; t < WS::kSTiles; ++t)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[t][e] = 0.f;
  const uint32_t k_base = s_kv + (ws * WS::kKeys + (lane & 7)) * kSmemRowBytes + ((lane >> 3) << 4);
#pragma unroll 1
  for (int m = 0; m < kDimQK / 64; ++m) {
    uint32_t a0[4], a1[4];
    load_a_frag(a0, s_q_tile, rg * kRowGroup, kSmemRowBytes, m * 64, lane);
    load_a_frag(a1, s_q_tile, rg * kRowGroup, kSmemRowBytes, m * 64 + 32, lane);
#pragma unroll
    for (int t = 0; t < WS::kSTiles; ++t) {
      uint32_t bk[4];
      ldmatrix_x4(bk, k_base + t * 8 * kSmemRowBytes + m * 64);
      mma_e4m3(s[t], a0, bk[0], bk[1]);
      mma_e4m3(s[t], a1, bk[2], bk[3]);
    }
  }
}

// Byte position of `key` (0..63) in a row of P: 32 * (key / 32) + kappa(key % 32), see the top of the file.
// key % 32 = 16h + 8a + 2t + e  ->  kappa = 16h + 4t + 2a + e.
__device__ __forceinline__ int p_position(int key) {
  const int r = key & 31;
  return (key & ~31) + (r & 16) + ((r >> 1) & 3) * 4 + ((r >> 3) & 1) * 2 + (r & 1);
}

// Masks this thread's keys at or past `limit` (index within the tile's kTiles * 8 keys) in row h of its S
// fragment (columns 2h, 2h + 1 of each n8 tile) to -inf; returns the row's max over the 4 lanes sharing it.
template <int kTiles>
__device__ __forceinline__ float mask_row_max(float (&s)[kTiles][4], int h, int limit, int t4) {
  float mx = -INFINITY;
#pragma unroll
  for (int t = 0; t < kTiles; ++t)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      float& v = s[t][2 * h + e];
      if (t * 8 + 2 * t4 + e >= limit) v = -INFINITY;
      mx = fmaxf(mx, v);
    }
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
  return fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
}

// O (16 x kCols) += P_rg (16 x 64, e4m3) . V (64 x kCols, e4m3); V = the first 512 dims of the KV page.
// Per k32 step ks and V chunk c: one ldmatrix.x4.trans reads keys 32ks + lane at chunk c (matrix i =
// keys 32ks + 8i ..), i.e. x0 = keys 0-7, y0 = 8-15, x1 = 16-23, y1 = 24-31 of the step.
template <int RG>
__device__ __forceinline__ void accumulate_pv(RowState<RG>& st, uint32_t s_p, uint32_t s_kv, int rg, int ws, int lane) {
  using WS = WarpShape<RG>;
  // Rolled: the 64-row variant's 128 accumulator registers leave no room for two steps of fragments.
#pragma unroll 1
  for (int ks = 0; ks < kBlockN / 32; ++ks) {
    uint32_t a[4];
    load_a_frag(a, s_p, rg * kRowGroup, kPRowBytes, ks * 32, lane);
    const int key = ks * 32 + lane;
    const uint32_t v_base = s_kv + key * kSmemRowBytes + ws * WS::kCols;  // padded layout
#pragma unroll
    for (int c = 0; c < WS::kVChunks; ++c) {
      uint32_t v[4];
      const int cg = ws * WS::kVChunks + c;  // chunk of the 512 V dims
      ldmatrix_x4_trans(v, v_base + c * 16);
      mma_e4m3(st.o[2 * c], a, select_even(v[0], v[1]), select_even(v[2], v[3]));
      mma_e4m3(st.o[2 * c + 1], a, select_odd(v[0], v[1]), select_odd(v[2], v[3]));
    }
  }
}

}  // namespace mla::sm90::decode_fp8
