#pragma once
// Mainloop pieces of the decode kernel: global -> shared copies (Q tile, KV page) and the per-page math
// S = Q K^T, online softmax, O += P V on mma.sync.
//
// Warp roles: warp w owns row group rg = w % RG (16 query rows) and slice ws = w / RG of NS = 8 / RG
// slices. For S it computes the slice's 64 / NS keys; for O it accumulates the slice's 512 / NS output
// columns. Softmax row maxima and P are exchanged through shared memory, so every warp of a row group
// applies the identical running max (their partial row sums then add up exactly).
#include <cstdint>

#include "ops/cuda/sm90/decode/config.h"
#include "ops/cuda/sm90/decode/params.h"
#include "ops/cuda/sm90/decode/ptx.h"
#include "ops/cuda/sm90/decode/wgmma.h"

namespace mla::sm90::decode {

template <int RG>
struct WarpShape {
  static constexpr int kRowGroups = RG;
  static constexpr int kSlices = kWarps / RG;
  static constexpr int kKeys = kBlockN / kSlices;    // keys of S per warp: 8, 16, 32
  static constexpr int kSTiles = kKeys / 8;          // n8 tiles of S
  static constexpr int kCols = kDimV / kSlices;      // output columns per warp: 64, 128, 256
  static constexpr int kOTiles = kCols / 8;          // n8 tiles of O
  static_assert(kWarps % RG == 0 && kOTiles % 2 == 0, "warp layout");
};

// Copy mapping shared by the Q tile and the KV page: thread t copies chunks 8j + t % 8 (j < 9) of rows
// t / 8 and t / 8 + 32. Since 72 chunks are 9 groups of 8 and the swizzle only permutes within a group,
// every copy of a thread sits at a compile-time offset from one shared and one global base (no
// per-chunk index math to keep live across the mainloop), and 8 neighbouring threads read 128
// contiguous bytes of one row.
constexpr int kCopyRowsPerPass = kThreads / 8;  // 32
constexpr int kCopyPasses = kBlockN / kCopyRowsPerPass;  // 2
static_assert(kBlockN == kRowsPerCta && kCopyPasses * kCopyRowsPerPass == kBlockN, "copy mapping");

// kSlab: slab-major shared layout (wgmma variant, swizzle_slab) instead of 1152-byte rows (swizzle).
template <int kSmemRows, bool kSlab>
__device__ __forceinline__ void copy_rows(const uint8_t* src, uint32_t dst, int valid_rows) {
  constexpr int kDstRow = kSlab ? 128 : kRowBytes;          // bytes between rows in shared memory
  constexpr int kDstGroup = kSlab ? kSmemRows * 128 : 128;  // bytes between groups of 8 chunks
  const int r = threadIdx.x >> 3, cl = threadIdx.x & 7;
  const uint8_t* s = src + r * kRowBytes + cl * 16;
  const uint32_t d = dst + r * kDstRow + ((cl ^ (r & 7)) << 4);
#pragma unroll
  for (int a = 0; a < kCopyPasses; ++a) {
    if (a * kCopyRowsPerPass >= kSmemRows || r + a * kCopyRowsPerPass >= kSmemRows) continue;
    const bool valid = r + a * kCopyRowsPerPass < valid_rows;
    // A zero-filled row reads nothing; point it at the (valid) first row anyway.
    const uint8_t* sa = valid ? s + a * kCopyRowsPerPass * kRowBytes : src;
#pragma unroll
    for (int j = 0; j < kChunksPerRow / 8; ++j)
      cp_async_16(d + a * kCopyRowsPerPass * kDstRow + j * kDstGroup, sa + j * 128, valid ? 16 : 0);
  }
}

// Copies the valid query rows of this CTA's tile (sequence b) into swizzled shared memory. Rows past
// valid_rows are zero-filled from row 0's address (never read from global).
template <int RG, bool kSlab>
__device__ __forceinline__ void load_q_tile(const DecodeKernelParams& p, int b, int tile_row0, int valid_rows,
                                            uint32_t s_q_tile) {
  const uint8_t* src = static_cast<const uint8_t*>(p.q) + (static_cast<int64_t>(b) * p.rows + tile_row0) * kRowBytes;
  copy_rows<RG * kRowGroup, kSlab>(src, s_q_tile, valid_rows);
}

// Copies KV page `blk` (physical `page`) of a sequence into a stage; tokens at or past seqlen are zero-filled (their cache
// slots are garbage, possibly NaN, and 0 * NaN would poison P.V).
template <bool kSlab>
__device__ __forceinline__ void load_kv_page(const DecodeKernelParams& p, int32_t page, int blk, int seqlen,
                                             uint32_t s_stage) {
  const uint8_t* src = static_cast<const uint8_t*>(p.kv_cache) + static_cast<int64_t>(page) * kPageBytes;
  copy_rows<kBlockN, kSlab>(src, s_stage, seqlen - blk * kBlockN);
}

// Byte offset of 16-byte chunk `chunk` of key `key` in a KV stage: 1152-byte rows (swizzle; cp.async loaders), or
// slab-major (swizzle_slab; TMA pages, pages.cuh TmaPages). Both spread 8 consecutive keys at one chunk over all banks.
template <bool kSlabStage>
__device__ __forceinline__ int kv_offset(int key, int chunk) {
  return kSlabStage ? swizzle_slab(key, chunk, kBlockN) : swizzle(key, chunk, kRowBytes);
}

// Per-thread softmax/accumulator state of one warp: rows g and g + 8 of its row group
// (g = lane / 4), the warp's output columns.
template <int RG>
struct RowState {
  using WS = WarpShape<RG>;
  float o[WS::kOTiles][4];
  float m[2];  // running max of raw scores (before softmax_scale)
  float l[2];  // this thread's share of the running sum of exp

  __device__ __forceinline__ void reset() {
#pragma unroll
    for (int t = 0; t < WS::kOTiles; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[t][e] = 0.f;
    m[0] = m[1] = -INFINITY;
    l[0] = l[1] = 0.f;
  }
};

// S (16 rows x kKeys) = Q_rg (16 x 576) . K_slice^T, both from swizzled shared memory.
template <class Traits, int RG, bool kSlabStage>
__device__ __forceinline__ void compute_scores(float (&s)[WarpShape<RG>::kSTiles][4], uint32_t s_q_tile,
                                               uint32_t s_kv, int rg, int ws, int lane) {
  using WS = WarpShape<RG>;
#pragma unroll
  for (int t = 0; t < WS::kSTiles; ++t)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[t][e] = 0.f;
  const int q_row = rg * kRowGroup + (lane & 15);
  const int k_row0 = ws * WS::kKeys + (lane & 7);
#pragma unroll 1
  for (int kk = 0; kk < kDimQK / 32; ++kk) {
    uint32_t a0[4], a1[4];
    ldmatrix_x4(a0, s_q_tile + swizzle(q_row, kk * 4 + (lane >> 4), kRowBytes));
    ldmatrix_x4(a1, s_q_tile + swizzle(q_row, kk * 4 + 2 + (lane >> 4), kRowBytes));
#pragma unroll
    for (int t = 0; t < WS::kSTiles; ++t) {
      uint32_t bk[4];  // keys t*8..+8, dims 32kk..+32: two k16 steps
      const int key = k_row0 + t * 8;
      ldmatrix_x4(bk, s_kv + kv_offset<kSlabStage>(key, kk * 4 + (lane >> 3)));
      Traits::mma(s[t], a0, bk[0], bk[1]);
      Traits::mma(s[t], a1, bk[2], bk[3]);
    }
  }
}

// One-row-group tiles (h_q 16/32 with few query rows) keep their 16 Q rows in registers as mma.sync A
// fragments, loaded once per sequence: the eight warps then read only K from shared memory for S,
// which halves the shared-memory traffic of the memory-bound small-head case.
using QFrags = uint32_t[kDimQK / 16][4];

__device__ __forceinline__ void load_q_frags(QFrags& qf, uint32_t s_q_tile, int lane) {
  const int q_row = lane & 15;
#pragma unroll
  for (int kk = 0; kk < kDimQK / 16; ++kk) ldmatrix_x4(qf[kk], s_q_tile + swizzle(q_row, kk * 2 + (lane >> 4), kRowBytes));
}

// Each warp owns kSTiles n8 tiles of S (one for RG 1), so accumulating all 36 k16 steps into one
// fragment makes S one dependent chain of 36 mma.sync per page (~36 x the MMA latency). kChains
// independent partial sums over interleaved k16 steps, added at the end, cut that chain to 36 / kChains;
// the extra fp32 additions change S by rounding only (well inside the tests' bf16 tolerances).
template <class Traits, int RG, bool kSlabStage>
__device__ __forceinline__ void compute_scores_qregs(float (&s)[WarpShape<RG>::kSTiles][4], const QFrags& qf,
                                                     uint32_t s_kv, int ws, int lane) {
  using WS = WarpShape<RG>;
  constexpr int kChains = WS::kSTiles == 1 ? 4 : 2;
  static_assert((kDimQK / 16) % kChains == 0, "k16 steps split evenly over the chains");
  float acc[WS::kSTiles][kChains][4];
#pragma unroll
  for (int t = 0; t < WS::kSTiles; ++t)
#pragma unroll
    for (int c = 0; c < kChains; ++c)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[t][c][e] = 0.f;
  const int k_row0 = ws * WS::kKeys + (lane & 7);
#pragma unroll
  for (int kk = 0; kk < kDimQK / 32; ++kk) {
#pragma unroll
    for (int t = 0; t < WS::kSTiles; ++t) {
      uint32_t bk[4];
      ldmatrix_x4(bk, s_kv + kv_offset<kSlabStage>(k_row0 + t * 8, kk * 4 + (lane >> 3)));
      Traits::mma(acc[t][(2 * kk) % kChains], qf[2 * kk], bk[0], bk[1]);
      Traits::mma(acc[t][(2 * kk + 1) % kChains], qf[2 * kk + 1], bk[2], bk[3]);
    }
  }
#pragma unroll
  for (int t = 0; t < WS::kSTiles; ++t)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float v = acc[t][0][e];
#pragma unroll
      for (int c = 1; c < kChains; ++c) v += acc[t][c][e];
      s[t][e] = v;
    }
}

// O (16 x kCols) += P_rg (16 x 64) . V (64 x kCols); V = the first 512 dims of the KV page.
template <class Traits, int RG, bool kSlabStage>
__device__ __forceinline__ void accumulate_pv(RowState<RG>& st, uint32_t s_p, uint32_t s_kv, int rg, int ws,
                                              int lane) {
  using WS = WarpShape<RG>;
  const int p_row = rg * kRowGroup + (lane & 15);
  const int v_key = ((lane >> 3) & 1) * 8 + (lane & 7);
  const int v_chunk0 = ws * WS::kCols / 8 + (lane >> 4);
#pragma unroll 1
  for (int ks = 0; ks < kBlockN / 16; ++ks) {
    uint32_t a[4];
    ldmatrix_x4(a, s_p + swizzle(p_row, ks * 2 + (lane >> 4), kPRowBytes));
#pragma unroll
    for (int t = 0; t < WS::kOTiles; t += 2) {
      uint32_t bv[4];  // keys 16ks..+16, columns of tiles t and t+1 (transposed: V is [key][dim])
      ldmatrix_x4_trans(bv, s_kv + kv_offset<kSlabStage>(ks * 16 + v_key, v_chunk0 + t));
      Traits::mma(st.o[t], a, bv[0], bv[1]);
      Traits::mma(st.o[t + 1], a, bv[2], bv[3]);
    }
  }
}

// wgmma variant (RG == 4, one warpgroup per slice): warpgroup ws computes S for keys [32 ws, 32 ws + 32)
// of all 64 rows, and O for columns [256 ws, 256 ws + 256). The accumulator fragments have exactly the
// mma.sync layout above (warp w of the group owns rows 16 w.., tile t = columns 8 t..), so masking,
// softmax and the epilogue are shared with the mma.sync variants.
template <class Traits>
__device__ __forceinline__ void compute_scores_wgmma(float (&s)[4][4], uint32_t s_q_tile, uint32_t s_kv, int ws) {
  float(&d)[16] = reinterpret_cast<float(&)[16]>(s);
#pragma unroll
  for (int i = 0; i < 16; ++i) d[i] = 0.f;
  fence_operands(d);
  wgmma_fence();
  // Descriptors advance by adding to their address field (16-byte units): 32 bytes per k16 step inside
  // a slab, one slab (64 x 128 bytes) per 4 steps. The slab loop stays rolled so the compiler does not
  // hoist 72 loop-invariant descriptors into registers the O accumulators need.
  uint64_t da = make_smem_desc(s_q_tile, 16, 1024);
  uint64_t db = make_smem_desc(s_kv + ws * 32 * 128, 16, 1024);
#pragma unroll 1
  for (int slab = 0; slab < kDimQK / 64; ++slab) {
    // Fence and commit per iteration, stated rather than injected by ptxas (C7519) because the
    // accumulators cross the loop's back edge; neither waits for the wgmma in flight.
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < 4; ++k) Traits::wgmma_qk(d, da + 2 * k, db + 2 * k);
    wgmma_commit();
    da += (kBlockN * 128) >> 4;
    db += (kBlockN * 128) >> 4;
  }
  wgmma_wait_all();
  fence_operands(d);
}

template <class Traits>
__device__ __forceinline__ void accumulate_pv_wgmma(float (&o)[32][4], uint32_t s_p, uint32_t s_kv, int ws) {
  float(&d)[128] = reinterpret_cast<float(&)[128]>(o);
  fence_operands(d);
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < kBlockN / 16; ++ks) {
    const uint64_t da = make_smem_desc(s_p + ks * 32, 16, 1024);
    // V = K[:, 0:512]: slabs 4 ws .. 4 ws + 3 (64 columns each, lbo apart), keys 16 ks.. (sbo per 8 keys).
    const uint64_t db = make_smem_desc(s_kv + (4 * ws) * (kBlockN * 128) + ks * 16 * 128, kBlockN * 128, 1024);
    Traits::wgmma_pv(d, da, db);
  }
  wgmma_commit();
  wgmma_wait_all();
  fence_operands(d);
}

}  // namespace mla::sm90::decode
