#pragma once
// fp8_ds decode for 16-row tiles (h_q 16, s_q 1), warp-specialized, on exact f16 codes and wgmma (constants and
// rationale: config_ws16.h):
//   S[r][t]   = 2^-k_r * sum_c scale[t][c] * (Q'_c[r] . code_c[t]) + Q_rope[r] . K_rope[t]
//   O_c[r][:] = u_c * sum_t P'_c[r][t] * code_c[t][:],   P'_c[r][t] = f16(P[r][t] * scale[t][c] / u_c)
// e4m3 -> f16 is exact, so the MMAs see the stored codes and the fp32 tile scales stay outside them: four S^T
// accumulators (one per scale tile), Q' = f16(q * 2^k_r) (a per-row power of two makes the bf16 query exact in f16),
// and u_c the page's largest tile-c scale rounded down to a power of two (O's tile-c columns are kept in units of
// u_c; a new page rescales them by alpha * u_old / u_new, exact). RoPE stays bf16 x bf16. Against the CPU reference
// (fp32 e4m3 x scale) K and V are exact and P is rounded once to f16 (2^-11) instead of bf16.
// One CTA per plan part, 288 threads:
//   warp 8, one thread (producer): page j into raw slot j % kStages (one bulk copy on full[slot]);
//   warpgroup 0 (scorer): at a sequence start Q -> Q' slabs (f16 of q * 2^k_row, permuted dims); per page:
//     K codes -> A fragments -> S^T_c (4 accumulators) + RoPE (bf16) -> release the slot -> scales, mask, row max
//     and page max tile scales (one 128-thread exchange) -> P, then P'_c for the 4 tiles into P buffer j % 2 ->
//     P_full;
//   warpgroup 1 (accumulator): V codes of tile 0 -> A fragments (before P' exists), P_full, O^T rescale, then per
//     tile c: wgmma on tile c while tile c + 1 converts; release the slot after the last codes, P_empty, epilogue.
// Layouts (warp w of a warpgroup, lane = 4g + t):
//  - S^T M row 16w + g + 8h is token 2f + h, f = 8(g/2) + 2(g%2) + w%2 + 4(w/2): a thread's two keys are adjacent
//    (one f16x2 store of P' per row and tile) and the two tokens of a quarter warp's 16-byte code loads are 4 apart
//    (16 words mod 32: conflict-free). k order inside each 64-dim block: the thread's 16 contiguous code bytes
//    dims 16t + 4i + {0,1,2,3} are k16 step i, slots 2t, 2t+1, 2t+8, 2t+9; Q' is stored in that order.
//  - O^T M row 16w + g + 8h of m-block 2c + bb is dim 128c + 32w + 4g + 2bb + h: each thread's A values of a tile
//    are one 4-byte load per token (32 lanes on 32 banks), two tokens paired by one prmt; keys in natural order.
#include <cstdint>

#include "ops/cuda/sm90/decode/handoff_n16.cuh"
#include "ops/cuda/sm90/decode/params.h"
#include "ops/cuda/sm90/decode/ptx.h"
#include "ops/cuda/sm90/decode/scheduler.cuh"
#include "ops/cuda/sm90/decode/tma.h"
#include "ops/cuda/sm90/decode/wgmma.h"
#include "ops/cuda/sm90/decode_fp8ds/config_ws16.h"
#include "ops/cuda/sm90/decode_fp8ds/fragments.cuh"
#include "ops/cuda/sm90/decode_fp8ds/wgmma_f16_n16.h"

namespace mla::sm90::decode_fp8ds::ws16 {

using decode::DecodeKernelParams;
using decode::mbar_arrive;
using decode::mbar_wait;
using decode::PartCursor;

using Bars = decode::n16::RingBars<kStages>;
__device__ __forceinline__ uint32_t phase_of(int n) { return decode::n16::phase_of(n, kStages); }

// Byte offset of (row, byte) in a 16-row slab of 128-byte rows, 128B swizzle.
__device__ __forceinline__ int slab_byte(int row, int byte) { return row * 128 + ((((byte >> 4) ^ row) & 7) << 4) + (byte & 15); }

// The page stream: page j into raw slot j % kStages (one bulk copy on full[slot]) once all 8 warps released the
// slot's previous page. Run by one thread: warp 8's lane 0 (Opts::inline_producer false) or accumulator thread 0,
// which steps it right after its own release of page j (page j + kStages). No L2 promotion question here: a page
// is one contiguous 41 KB 1D bulk copy (no tensor map, no box rows), unlike the fp8 kernel's 2D boxes.
struct PageStream {
  PartCursor c;
  int j = 0;
  __device__ __forceinline__ void init(const DecodeKernelParams& p, PartCursor cur) {
    c = cur;
    c.fetch_page(p);
  }
  __device__ __forceinline__ void step(const DecodeKernelParams& p, const Bars& bars, uint32_t s_raw0) {
    if (!c.valid()) return;
    const int slot = j % kStages;
    if (j >= kStages) mbar_wait(bars.empty(slot), phase_of(j - kStages));
    decode::mbar_expect_tx(bars.full(slot), kPageBytes);
    decode::bulk_load(s_raw0 + slot * kPageBytes,
                      static_cast<const uint8_t*>(p.kv_cache) + static_cast<int64_t>(c.page) * kPageBytes, kPageBytes,
                      bars.full(slot));
    c.advance(p);
    c.fetch_page(p);  // the next block-table entry loads while this thread waits / computes
    ++j;
  }
};

// RoPE chunk kb of a query row (bf16, 8 dims) into slab 8 in the permuted k order of the bf16 RoPE wgmmas: dims
// 8kb + 2w, +1: t = kb / 2, 4i + 2h' = 8(kb % 2) + 2w -> byte 32i + 4t + 16h'.
__device__ __forceinline__ void store_rope_q(uint8_t* s_q, int row, int kb, const uint4& r) {
  uint8_t* rs = s_q + 8 * kSlabBytes;
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    const int i = 2 * (kb & 1) + (w >> 1);
    *reinterpret_cast<uint32_t*>(rs + slab_byte(row, 32 * i + 4 * (kb >> 1) + 16 * (w & 1))) = word_of(r, w);
  }
}

// Q of sequence b -> Q' (scorer thread tid < 128: row tid / 8, 64-dim block kb = tid % 8 and RoPE chunk kb).
// Latent: f16 of q * 2^k_row (row_exponent: exact), step i of block kb = 16-byte chunks 2i (slots 0-7) and
// 2i + 1 (slots 8-15) of slab kb; slot 2t + e + 8h' holds dim 64kb + 16t + 4i + 2h' + e. RoPE: bf16, same order.
__device__ __forceinline__ void convert_q(const DecodeKernelParams& p, int b, uint8_t* s_q, float* s_qdiv, int tid) {
  const int row = tid >> 3, kb = tid & 7;
  const uint4* src = reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p.q) + (static_cast<int64_t>(b) * kRows + row) * kDimQK);
  uint4 c[8];
#pragma unroll
  for (int x = 0; x < 8; ++x) c[x] = src[8 * kb + x];
  float amax = 0.f;
#pragma unroll
  for (int x = 0; x < 8; ++x)
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const uint32_t v = word_of(c[x], w);
      amax = fmaxf(amax, fmaxf(fabsf(bf16_lo(v)), fabsf(bf16_hi(v))));
    }
#pragma unroll
  for (int x = 1; x < 8; x <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, x));  // the row's 8 threads
  const int k = row_exponent(amax);
  const float mul = pow2(k);
  uint8_t* slab = s_q + kb * kSlabBytes;
  // Dims 16t + 4i + {0,1} are word 2(i % 2) of input chunk 2t + i / 2; {2,3} the next word.
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint4 lo, hi;
    lo.x = bf16x2_to_f16x2(word_of(c[0 + (i >> 1)], 2 * (i & 1)), mul);
    lo.y = bf16x2_to_f16x2(word_of(c[2 + (i >> 1)], 2 * (i & 1)), mul);
    lo.z = bf16x2_to_f16x2(word_of(c[4 + (i >> 1)], 2 * (i & 1)), mul);
    lo.w = bf16x2_to_f16x2(word_of(c[6 + (i >> 1)], 2 * (i & 1)), mul);
    hi.x = bf16x2_to_f16x2(word_of(c[0 + (i >> 1)], 2 * (i & 1) + 1), mul);
    hi.y = bf16x2_to_f16x2(word_of(c[2 + (i >> 1)], 2 * (i & 1) + 1), mul);
    hi.z = bf16x2_to_f16x2(word_of(c[4 + (i >> 1)], 2 * (i & 1) + 1), mul);
    hi.w = bf16x2_to_f16x2(word_of(c[6 + (i >> 1)], 2 * (i & 1) + 1), mul);
    *reinterpret_cast<uint4*>(slab + slab_byte(row, 32 * i)) = lo;
    *reinterpret_cast<uint4*>(slab + slab_byte(row, 32 * i + 16)) = hi;
  }
  store_rope_q(s_q, row, kb, src[kDimLatent / 8 + kb]);
  if (kb == 0) s_qdiv[row] = pow2(-k);
}

// Q of sequence b -> Q' for Opts::k_e4m3 (thread roles and RoPE as convert_q). Latent: hi / lo e4m3 parts of
// q * 2^k_row (row_exponent_e4m3, split_e4m3x2: lo carries 16x the residual); tile c = kb / 2, k slot 32s + 16h + 4t + q of slab 2c (hi) and
// 2c + 1 (lo) holds tile dim 64(s / 2) + 16t + 8(s % 2) + 4h + q: a K thread's two loaded 16-byte chunks (dims
// 16t .. + 15 of each 64-dim half of the tile) are then the A registers of steps 2half, 2half + 1 as loaded.
__device__ __forceinline__ void convert_q_e4m3(const DecodeKernelParams& p, int b, uint8_t* s_q, float* s_qdiv, int tid) {
  const int row = tid >> 3, kb = tid & 7;
  const uint4* src = reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p.q) + (static_cast<int64_t>(b) * kRows + row) * kDimQK);
  uint4 c[8];
#pragma unroll
  for (int x = 0; x < 8; ++x) c[x] = src[8 * kb + x];
  float amax = 0.f;
#pragma unroll
  for (int x = 0; x < 8; ++x)
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const uint32_t v = word_of(c[x], w);
      amax = fmaxf(amax, fmaxf(fabsf(bf16_lo(v)), fabsf(bf16_hi(v))));
    }
#pragma unroll
  for (int x = 1; x < 8; x <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, x));  // the row's 8 threads
  const int k = row_exponent_e4m3(amax);
  const float mul = pow2(k);
  uint8_t* hi_slab = s_q + 2 * (kb >> 1) * kSlabBytes;
  uint8_t* lo_slab = hi_slab + kSlabBytes;
#pragma unroll
  for (int t = 0; t < 4; ++t)
#pragma unroll
    for (int s1 = 0; s1 < 2; ++s1)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        // Dims 16t + 8s1 + 4h .. + 3 of block kb: words 2h, 2h + 1 of input chunk 2t + s1.
        const uint32_t w0 = word_of(c[2 * t + s1], 2 * h), w1 = word_of(c[2 * t + s1], 2 * h + 1);
        uint32_t h01, l01, h23, l23;
        split_e4m3x2(bf16_lo(w0) * mul, bf16_hi(w0) * mul, h01, l01);
        split_e4m3x2(bf16_lo(w1) * mul, bf16_hi(w1) * mul, h23, l23);
        const int kap = 64 * (kb & 1) + 32 * s1 + 16 * h + 4 * t;
        *reinterpret_cast<uint32_t*>(hi_slab + slab_byte(row, kap)) = h01 | (h23 << 16);
        *reinterpret_cast<uint32_t*>(lo_slab + slab_byte(row, kap)) = l01 | (l23 << 16);
      }
  store_rope_q(s_q, row, kb, src[kDimLatent / 8 + kb]);
  if (kb == 0) s_qdiv[row] = pow2(-k);
}

// A fragments of one code word pair (tokens of M rows g and g + 8, dims 16t + 4i .. + 3 each).
__device__ __forceinline__ void k_frag(uint32_t (&a)[4], uint32_t wa, uint32_t wb) {
  e4m3x4_to_f16x2x2(wa, a[0], a[2]);
  e4m3x4_to_f16x2x2(wb, a[1], a[3]);
}
__device__ __forceinline__ void pin_frags(uint32_t (&f)[8][4]) {
#pragma unroll
  for (int s = 0; s < 8; ++s) pin(f[s]);
}

// The codes of tile c (blocks 2c, 2c + 1) at k0 / k1 (this thread's two tokens + 16t): a[half] / b[half].
struct KWords {
  uint4 a[2], b[2];
};
__device__ __forceinline__ void load_k(KWords& k, const uint8_t* k0, const uint8_t* k1, int c) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    k.a[half] = *reinterpret_cast<const uint4*>(k0 + 128 * c + 64 * half);
    k.b[half] = *reinterpret_cast<const uint4*>(k1 + 128 * c + 64 * half);
  }
}
// S^T of tile c: 8 k16 steps on the codes in `k`.
__device__ __forceinline__ void issue_tile_s(float (&acc)[8], uint32_t (&f)[8][4], const KWords& k, uint32_t s_q, int c) {
#pragma unroll
  for (int half = 0; half < 2; ++half)
#pragma unroll
    for (int i = 0; i < 4; ++i) k_frag(f[4 * half + i], word_of(k.a[half], i), word_of(k.b[half], i));
  pin_frags(f);
  decode::wgmma_fence();
#pragma unroll
  for (int s = 0; s < 8; ++s)
    wgmma_m64n16k16_f16_rs(acc, f[s], decode::make_smem_desc(s_q + (2 * c + (s >> 2)) * kSlabBytes, 16, 1024) + 2 * (s & 3));
  decode::wgmma_commit();
}

// S^T of tile c on e4m3 (Opts::k_e4m3): step s's A registers are words 2(s % 2), 2(s % 2) + 1 of the codes
// loaded for half s / 2, unconverted; each step runs on the hi (slab 2c, into acc) and the lo (slab 2c + 1, into
// acc_lo: 16x the residual) parts of Q', two independent chains. `k` must stay unchanged until this group has been
// waited for.
__device__ __forceinline__ void issue_tile_s8(float (&acc)[8], float (&acc_lo)[8], const KWords& k, uint32_t s_q, int c) {
  uint32_t f[4][4];
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    const int half = s >> 1, wd = 2 * (s & 1);
    f[s][0] = word_of(k.a[half], wd);
    f[s][1] = word_of(k.b[half], wd);
    f[s][2] = word_of(k.a[half], wd + 1);
    f[s][3] = word_of(k.b[half], wd + 1);
    pin(f[s]);
  }
  decode::wgmma_fence();
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    wgmma_m64n16k32_e4m3_rs(acc, f[s], decode::make_smem_desc(s_q + 2 * c * kSlabBytes, 16, 1024) + 2 * s);
    wgmma_m64n16k32_e4m3_rs(acc_lo, f[s], decode::make_smem_desc(s_q + (2 * c + 1) * kSlabBytes, 16, 1024) + 2 * s);
  }
  decode::wgmma_commit();
}

template <Opts O>
__device__ __forceinline__ void scorer(const DecodeKernelParams& p, PartCursor c, const Bars& bars, uint8_t* smem, int w,
                                       int lane) {
  constexpr Layout L = layout();
  const uint8_t* raw0 = smem + L.raw;
  const uint32_t s_q = decode::smem_u32(smem + L.q), s_p0 = decode::smem_u32(smem + L.p);
  float* s_red = reinterpret_cast<float*>(smem + L.red);       // [2][16][4]
  float4* s_smax = reinterpret_cast<float4*>(smem + L.smax);   // [2][4]
  float* s_alpha = reinterpret_cast<float*>(smem + L.alpha);   // [2][16]
  float* s_unit = reinterpret_cast<float*>(smem + L.unit);     // [2][4]
  float* s_lsum = reinterpret_cast<float*>(smem + L.lsum);     // [2][16][4]
  float* s_mfin = reinterpret_cast<float*>(smem + L.mfin);     // [2][16]
  float* s_qdiv = reinterpret_cast<float*>(smem + L.qdiv);     // [16]
  const int g = lane >> 2, t = lane & 3;
  const int f = 8 * (g >> 1) + 2 * (g & 1) + (w & 1) + 4 * (w >> 1);
  const int tok[2] = {2 * f, 2 * f + 1};  // M rows 16w + g, 16w + g + 8
  float m[4], l[4], qdiv[4], u_keep[kTiles];  // u_keep: Opts::sticky_u, the sequence's largest unit so far (0: none)
  auto reset = [&] {
#pragma unroll
    for (int r = 0; r < 4; ++r) m[r] = -INFINITY, l[r] = 0.f;
#pragma unroll
    for (int cc = 0; cc < kTiles; ++cc) u_keep[cc] = 0.f;
  };
  reset();
  bool new_seq = true;
  int j = 0;
  while (c.valid()) {
    const int slot = j % kStages, buf = j & 1;
    const bool seg_end = c.last_of_sequence();
    if (new_seq) {
      // Every scorer warp finished its S of the previous page (waited wgmma) before that page's exchange barrier.
      if constexpr (O.k_e4m3)
        convert_q_e4m3(p, c.b, smem + L.q, s_qdiv, 32 * w + lane);
      else
        convert_q(p, c.b, smem + L.q, s_qdiv, 32 * w + lane);
      decode::fence_proxy_async();  // Q' (generic stores) is read by wgmma (async proxy)
      decode::named_sync(kBarScorer, 32 * kScorerWarps);
#pragma unroll
      for (int r = 0; r < 4; ++r) qdiv[r] = s_qdiv[8 * (r >> 1) + 2 * t + (r & 1)];
      new_seq = false;
    }
    mbar_wait(bars.full(slot), phase_of(j));
    const uint8_t* raw = raw0 + slot * kPageBytes;
    const uint8_t* k0 = raw + tok[0] * kTokenBytes + 16 * t;
    const uint8_t* k1 = raw + tok[1] * kTokenBytes + 16 * t;
    float acc[kTiles][8], acc_lo[kTiles][8], rp[8];  // acc_lo: Opts::k_e4m3 only
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      rp[e] = 0.f;
#pragma unroll
      for (int cc = 0; cc < kTiles; ++cc) acc[cc][e] = 0.f, acc_lo[cc][e] = 0.f;
    }
#pragma unroll
    for (int cc = 0; cc < kTiles; ++cc) {
      decode::fence_operands(acc[cc]);
      if (O.k_e4m3) decode::fence_operands(acc_lo[cc]);
    }
    decode::fence_operands(rp);
    if (O.knock != 2) {
      // Two fragment buffers: tile c + 1 converts while tile c's wgmmas run. (Loading tile c + 1's codes before
      // tile c's conversion was measured 1-2.5 % slower on the large rows at the 168-register cap, run F3.)
      uint32_t fa[8][4], fb[8][4];
      if constexpr (O.k_e4m3 && O.scorer_ahead) {
        // Codes two tiles ahead of their wgmmas (three buffers): a tile's loads land during the previous tiles'
        // wgmmas instead of in front of its own. Buffer (cc + 2) % 3 is free once tile cc - 1 is waited for.
        KWords kw[3];
        load_k(kw[0], k0, k1, 0);
        load_k(kw[1], k0, k1, 1);
#pragma unroll
        for (int cc = 0; cc < kTiles; ++cc) {
          issue_tile_s8(acc[cc], acc_lo[cc], kw[cc % 3], s_q, cc);
          if (cc > 0) wgmma_wait<1>();
          if (cc + 2 < kTiles) load_k(kw[(cc + 2) % 3], k0, k1, cc + 2);
        }
      } else if constexpr (O.k_e4m3) {
        KWords kw[2];
#pragma unroll
        for (int cc = 0; cc < kTiles; ++cc) {
          load_k(kw[cc & 1], k0, k1, cc);
          issue_tile_s8(acc[cc], acc_lo[cc], kw[cc & 1], s_q, cc);
          if (cc > 0) wgmma_wait<1>();
        }
      } else if (O.scorer_ahead) {
        KWords kw[2];
        load_k(kw[0], k0, k1, 0);
#pragma unroll
        for (int cc = 0; cc < kTiles; ++cc) {
          if (cc + 1 < kTiles) load_k(kw[(cc + 1) & 1], k0, k1, cc + 1);
          issue_tile_s(acc[cc], (cc & 1) ? fb : fa, kw[cc & 1], s_q, cc);
          if (cc > 0) wgmma_wait<1>();
        }
      } else {
        KWords kw;
#pragma unroll
        for (int cc = 0; cc < kTiles; ++cc) {
          load_k(kw, k0, k1, cc);
          issue_tile_s(acc[cc], (cc & 1) ? fb : fa, kw, s_q, cc);
          if (cc > 0) wgmma_wait<1>();
        }
      }
      // RoPE: bf16 as stored; k0 / k1 already include 16t, so the thread reads bytes 528 + 32t .. + 31 of its tokens,
      // dims 16t + 2w', +1 in word w'.
      uint32_t fr[4][4];
      const uint4 a0 = *reinterpret_cast<const uint4*>(k0 + kRopeOffset + 16 * t);
      const uint4 a1 = *reinterpret_cast<const uint4*>(k0 + kRopeOffset + 16 * t + 16);
      const uint4 b0 = *reinterpret_cast<const uint4*>(k1 + kRopeOffset + 16 * t);
      const uint4 b1 = *reinterpret_cast<const uint4*>(k1 + kRopeOffset + 16 * t + 16);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const uint4& a = i < 2 ? a0 : a1;
        const uint4& b = i < 2 ? b0 : b1;
        fr[i][0] = word_of(a, 2 * (i & 1));
        fr[i][1] = word_of(b, 2 * (i & 1));
        fr[i][2] = word_of(a, 2 * (i & 1) + 1);
        fr[i][3] = word_of(b, 2 * (i & 1) + 1);
        pin(fr[i]);
      }
      decode::wgmma_fence();
#pragma unroll
      for (int i = 0; i < 4; ++i)
        wgmma_m64n16k16_bf16_rs(rp, fr[i], decode::make_smem_desc(s_q + 8 * kSlabBytes, 16, 1024) + 2 * i);
      decode::wgmma_commit();
    }
    float4 sc[2];
    sc[0] = *reinterpret_cast<const float4*>(raw + tok[0] * kTokenBytes + kScalesOffset);
    sc[1] = *reinterpret_cast<const float4*>(raw + tok[1] * kTokenBytes + kScalesOffset);
    wgmma_wait<0>();
#pragma unroll
    for (int cc = 0; cc < kTiles; ++cc) {
      decode::fence_operands(acc[cc]);
      if (O.k_e4m3) decode::fence_operands(acc_lo[cc]);
    }
    decode::fence_operands(rp);
    if (O.k_e4m3) {  // S_c = code . hi + (code . lo) / 16 (exact scaling by a power of two)
#pragma unroll
      for (int cc = 0; cc < kTiles; ++cc)
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[cc][e] = fmaf(acc_lo[cc][e], 0.0625f, acc[cc][e]);
    }
    __syncwarp();
    if (lane == 0) mbar_arrive(bars.empty(slot));  // every code, scale and RoPE of this warp is in registers
    const int valid = c.seqlen - c.blk * kBlockN;
#pragma unroll
    for (int h = 0; h < 2; ++h)
      if (tok[h] >= valid) sc[h] = make_float4(0.f, 0.f, 0.f, 0.f);  // garbage slots: neither P' nor u_c
    float s[8], mx[4];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int h = (i >> 1) & 1, r = 2 * (i >> 2) + (i & 1);
      const float4& q = sc[h];
      const float lat = q.x * acc[0][i] + q.y * acc[1][i] + q.z * acc[2][i] + q.w * acc[3][i];
      s[i] = tok[h] < valid ? fmaf(lat, qdiv[r], rp[i]) : -INFINITY;  // s_q 1: only the sequence end masks
    }
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int i = 4 * (r >> 1) + (r & 1);
      float v = fmaxf(s[i], s[i + 2]);
      v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 4));
      v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 8));
      mx[r] = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 16));
    }
    float4 sm = make_float4(fmaxf(sc[0].x, sc[1].x), fmaxf(sc[0].y, sc[1].y), fmaxf(sc[0].z, sc[1].z), fmaxf(sc[0].w, sc[1].w));
#pragma unroll
    for (int x = 4; x <= 16; x <<= 1) {
      sm.x = fmaxf(sm.x, __shfl_xor_sync(0xffffffffu, sm.x, x));
      sm.y = fmaxf(sm.y, __shfl_xor_sync(0xffffffffu, sm.y, x));
      sm.z = fmaxf(sm.z, __shfl_xor_sync(0xffffffffu, sm.z, x));
      sm.w = fmaxf(sm.w, __shfl_xor_sync(0xffffffffu, sm.w, x));
    }
    // Exchange across the 4 warps, double-buffered by page: a warp writing page j + 1's entries has passed page j's
    // barrier, so nobody still reads page j - 1's.
    float* red = s_red + buf * kRows * 4;
    decode::n16::store_row_max(red, mx, w, g, t);
    if (lane == 0) s_smax[buf * 4 + w] = sm;
    decode::named_sync(kBarScorer, 32 * kScorerWarps);
    float alpha[4], m_scaled[4], pr[8];
    decode::n16::update_row_max(red, m, alpha, m_scaled, p.scale_log2, t);
    decode::n16::exp_and_row_sums(s, pr, l, alpha, m_scaled, p.scale_log2);
    float4 pm = s_smax[buf * 4];
#pragma unroll
    for (int x = 1; x < 4; ++x) {
      const float4 v = s_smax[buf * 4 + x];
      pm = make_float4(fmaxf(pm.x, v.x), fmaxf(pm.y, v.y), fmaxf(pm.z, v.z), fmaxf(pm.w, v.w));
    }
    const float pmc[kTiles] = {pm.x, pm.y, pm.z, pm.w};
    float u[kTiles];
#pragma unroll
    for (int cc = 0; cc < kTiles; ++cc) {
      if (O.sticky_u) {  // never smaller than an earlier page's: the accumulator's ratio stays 1 (P' <= 2 still)
        u_keep[cc] = fmaxf(u_keep[cc], pmc[cc] > 0.f ? scale_unit(pmc[cc]) : 0.f);
        u[cc] = u_keep[cc] > 0.f ? u_keep[cc] : 1.f;  // all of tile c's scales 0 so far: any unit is exact
      } else {
        u[cc] = scale_unit(pmc[cc]);
      }
    }
    // P buffer `buf` is free once the accumulator finished P.V of page j - 2 (pre-armed for pages 0 and 1).
    decode::named_sync(kBarPEmpty + buf, kBarPair);
    uint8_t* pb = smem + L.p + buf * kPBufBytes;
#pragma unroll
    for (int cc = 0; cc < kTiles; ++cc) {
      // scale / u is exact (power of two); P * it rounds once in fp32, then once to f16.
      const float iu = inv_pow2(u[cc]);
      const float f0 = (cc == 0 ? sc[0].x : cc == 1 ? sc[0].y : cc == 2 ? sc[0].z : sc[0].w) * iu;
      const float f1 = (cc == 0 ? sc[1].x : cc == 1 ? sc[1].y : cc == 2 ? sc[1].z : sc[1].w) * iu;
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int i = 4 * (r >> 1) + (r & 1), row = 8 * (r >> 1) + 2 * t + (r & 1);
        const __half2 two = __floats2half2_rn(pr[i] * f0, pr[i + 2] * f1);  // keys 2f, 2f + 1
        *reinterpret_cast<__half2*>(pb + cc * kSlabBytes + slab_byte(row, 4 * f)) = two;
      }
    }
    if (w == 0 && g == 0) {
#pragma unroll
      for (int r = 0; r < 4; ++r) s_alpha[buf * kRows + 8 * (r >> 1) + 2 * t + (r & 1)] = alpha[r];
    }
    if (w == 0 && lane == 0) {
#pragma unroll
      for (int cc = 0; cc < kTiles; ++cc) s_unit[buf * kTiles + cc] = u[cc];
    }
    if (seg_end) {
      decode::n16::publish_segment_totals(l, m, s_lsum, s_mfin, buf, w, g, t);
      reset();
      new_seq = true;
    }
    decode::fence_proxy_async();  // P' (generic stores) is read by wgmma (async proxy) after P_full
    decode::named_arrive(kBarPFull + buf, kBarPair);
    c.advance(p);
    ++j;
  }
}

// The V codes of tile c for this thread: one 4-byte load per token (dims 128c + 32w + 4g .. + 3); w[s][e][h2] is
// token 16s + 2t + e + 8h2. Keys past `valid` read as code 0 (garbage slots, NaN in the tests; 0 * NaN would poison
// O). The compares cost ~100 instructions per page (SASS, run F2), but zeroing a last page's tail codes once in the
// scorer instead (with the scorer's codes loaded a tile ahead) measured 1-2.5 % slower on the large rows (run F3).
struct VWords {
  uint32_t w[4][2][2];
};
__device__ __forceinline__ void load_v(VWords& x, const uint8_t* v, int valid, int t) {
#pragma unroll
  for (int s = 0; s < 4; ++s)
#pragma unroll
    for (int e = 0; e < 2; ++e)
#pragma unroll
      for (int h2 = 0; h2 < 2; ++h2) {
        const int tk = 16 * s + 2 * t + e + 8 * h2;
        const uint32_t* src = reinterpret_cast<const uint32_t*>(v + tk * kTokenBytes);
        x.w[s][e][h2] = tk < valid ? *src : 0u;
      }
}
// V^T A fragments of tile c (4 k16 steps x m-blocks 2c, 2c + 1) from its codes.
__device__ __forceinline__ void v_frags(uint32_t (&f)[4][2][4], const VWords& x) {
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    const uint32_t(&wd)[2][2] = x.w[s];
    const uint32_t ab01 = byte_perm(wd[0][0], wd[1][0], 0x5140), ab23 = byte_perm(wd[0][0], wd[1][0], 0x7362);
    const uint32_t cd01 = byte_perm(wd[0][1], wd[1][1], 0x5140), cd23 = byte_perm(wd[0][1], wd[1][1], 0x7362);
    // [0] / [1]: dim +0 (row g) / +1 (row g + 8), keys 2t, 2t + 1; [2] / [3]: the same dims, keys 2t + 8, 2t + 9.
    // m-block 2c + 1 (f[s][1]): dims +2 / +3.
    e4m3x4_to_f16x2x2(ab01, f[s][0][0], f[s][0][1]);
    e4m3x4_to_f16x2x2(cd01, f[s][0][2], f[s][0][3]);
    e4m3x4_to_f16x2x2(ab23, f[s][1][0], f[s][1][1]);
    e4m3x4_to_f16x2x2(cd23, f[s][1][2], f[s][1][3]);
    pin(f[s][0]);
    pin(f[s][1]);
  }
}
__device__ __forceinline__ void issue_tile_pv(float (&o)[8][8], const uint32_t (&f)[4][2][4], uint32_t s_pc, int c) {
  decode::wgmma_fence();
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    const uint64_t db = decode::make_smem_desc(s_pc, 16, 1024) + 2 * s;
    wgmma_m64n16k16_f16_rs(o[2 * c], f[s][0], db);
    wgmma_m64n16k16_f16_rs(o[2 * c + 1], f[s][1], db);
  }
  decode::wgmma_commit();
}

// V^T A fragments of tile c by ldmatrix.x4.trans (Opts::v_ldsm). Lane L addresses row L % 8 of matrix m = L / 8:
// token 16s + 8(m % 2) + L % 8, bytes 64(m / 2) + 16w (+ 128c) of it, so matrix m of step s is 8 tokens x 16 dims
// 128c + 64bb + 16w .. + 15 (bb = m / 2); 16-byte rows 656 bytes apart start on banks 0, 4, .., 28: conflict-free.
// .trans gives this thread tokens 2t, 2t + 1 (low / high 16 bits) of the matrix, both with dims 2g, 2g + 1 of the
// chunk; one prmt makes (2g: keys 2t, 2t + 1 | 2g + 1: the same keys), so O^T M row 16w + g + 8hm of m-block 2c + bb
// is dim 128c + 64bb + 16w + 2g + hm. kTail: a sequence's partial last page, keys past `valid` masked to code 0.
template <bool kTail>
__device__ __forceinline__ void v_frags_ldsm(uint32_t (&f)[4][2][4], uint32_t v_lane, const uint32_t (&mask)[4][2]) {
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    uint32_t r[4];
    decode::ldmatrix_x4_trans(r, v_lane + 16 * s * kTokenBytes);
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const uint32_t x = kTail ? (r[m] & mask[s][m & 1]) : r[m];
      // a0 / a1 (h = 0) or a2 / a3 (h = 1) of m-block bb: rows g / g + 8 = dims 2g / 2g + 1.
      e4m3x4_to_f16x2x2(byte_perm(x, 0u, 0x3120), f[s][m >> 1][2 * (m & 1)], f[s][m >> 1][2 * (m & 1) + 1]);
    }
    pin(f[s][0]);
    pin(f[s][1]);
  }
}

// Where this accumulator thread's V codes live (the layout of Opts::v_ldsm or of the 4-byte loads).
struct VSource {
  const uint8_t* v;  // 4-byte loads: the slot + dim0 (this thread's 4 dims of tile 0)
  uint32_t v_lane;   // ldmatrix: the slot + this lane's row address of tile 0, step 0
  int valid;         // keys of this page before the sequence end
};

// The P.V of one page (accumulate_page); `release` after the last codes are in registers.
template <Opts O, bool kTail, class Release>
__device__ __forceinline__ void accumulate_tiles(float (&o)[8][8], float (&u_run)[kTiles], const VSource& vs, uint32_t s_pb,
                                                 const float* s_alpha, const float* s_unit, int buf, int lane,
                                                 const Release& release) {
  const int t = lane & 3;
  uint32_t mask[4][2];
#pragma unroll
  for (int s = 0; s < 4; ++s)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int tk = 16 * s + 8 * h + 2 * t;
      mask[s][h] = (tk < vs.valid ? 0xffffu : 0u) | (tk + 1 < vs.valid ? 0xffff0000u : 0u);
    }
  auto frags = [&](uint32_t (&f)[4][2][4], int cc) {
    if constexpr (O.v_ldsm) {
      v_frags_ldsm<kTail>(f, vs.v_lane + 128 * cc, mask);
    } else {
      VWords x;
      load_v(x, vs.v + 128 * cc, vs.valid, t);
      v_frags(f, x);
    }
  };
  uint32_t fa[4][2][4], fb[4][2][4];
  frags(fa, 0);
  decode::named_sync(kBarPFull + buf, kBarPair);
  // O's rows 8jn + 2t + e rescale by alpha; tile c's columns move from units u_run[c] to this page's u_c (both
  // powers of two: exact).
  float alpha[4], ratio[kTiles];
  bool ones = true;
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    alpha[r] = s_alpha[buf * kRows + 8 * (r >> 1) + 2 * t + (r & 1)];
    ones = ones && alpha[r] == 1.f;
  }
#pragma unroll
  for (int cc = 0; cc < kTiles; ++cc) {
    const float un = s_unit[buf * kTiles + cc];
    ratio[cc] = u_run[cc] * inv_pow2(un);
    u_run[cc] = un;
    ones = ones && ratio[cc] == 1.f;
  }
  // Opts::sticky_u: once the row maxima and the units settle, most pages need no rescale (64 FMUL); warp-uniform.
  if (!(O.sticky_u && __all_sync(0xffffffffu, ones))) {
#pragma unroll
    for (int cc = 0; cc < kTiles; ++cc)
#pragma unroll
      for (int bb = 0; bb < 2; ++bb)
#pragma unroll
        for (int i = 0; i < 8; ++i) o[2 * cc + bb][i] *= alpha[2 * (i >> 2) + (i & 1)] * ratio[cc];
  }
  issue_tile_pv(o, fa, s_pb + 0 * kSlabBytes, 0);
  frags(fb, 1);
  issue_tile_pv(o, fb, s_pb + 1 * kSlabBytes, 1);
  wgmma_wait<1>();
  frags(fa, 2);
  issue_tile_pv(o, fa, s_pb + 2 * kSlabBytes, 2);
  wgmma_wait<1>();
  frags(fb, 3);
  release();
  issue_tile_pv(o, fb, s_pb + 3 * kSlabBytes, 3);
  wgmma_wait<0>();
#pragma unroll
  for (int i = 0; i < 8; ++i) decode::fence_operands(o[i]);
}

// One page of the accumulator after its full barrier: tile 0's fragments (before P' exists), P_full, O rescale, then
// per tile c the wgmmas of c while c + 1 converts; the stage is released after the last codes, and the page stream
// thread (if this is it) issues page j + kStages into it.
template <Opts O, bool kTail>
__device__ __forceinline__ void accumulate_page(float (&o)[8][8], float (&u_run)[kTiles], const VSource& vs, uint32_t s_pb,
                                                const float* s_alpha, const float* s_unit, int buf, uint32_t empty_bar,
                                                int lane, PageStream& ps, bool is_stream, const DecodeKernelParams& p,
                                                const Bars& bars, uint32_t s_raw0) {
  auto release = [&] {
    __syncwarp();
    if (lane == 0) mbar_arrive(empty_bar);  // this warp's codes are all in registers
    if (O.inline_producer && is_stream) ps.step(p, bars, s_raw0);
    __syncwarp();
  };
  if constexpr (O.knock == 1) {  // bench-only: the hand-off and the release, no P.V
    decode::named_sync(kBarPFull + buf, kBarPair);
    release();
  } else {
    accumulate_tiles<O, kTail>(o, u_run, vs, s_pb, s_alpha, s_unit, buf, lane, release);
  }
}

template <Opts O>
__device__ __forceinline__ void accumulator(const DecodeKernelParams& p, PartCursor c, const Bars& bars, uint8_t* smem,
                                            int w, int lane) {
  constexpr Layout L = layout();
  const uint8_t* raw0 = smem + L.raw;
  const uint32_t s_raw0 = decode::smem_u32(raw0);
  const uint32_t s_p0 = decode::smem_u32(smem + L.p);
  const float* s_alpha = reinterpret_cast<const float*>(smem + L.alpha);
  const float* s_unit = reinterpret_cast<const float*>(smem + L.unit);
  const float* s_lsum = reinterpret_cast<const float*>(smem + L.lsum);
  const float* s_mfin = reinterpret_cast<const float*>(smem + L.mfin);
  const int g = lane >> 2, t = lane & 3;
  const int32_t* rec = p.parts + static_cast<int64_t>(blockIdx.x) * kPlanPartInts;
  const int first_batch = rec[kPartBeginBatch], first_split = rec[kPartFirstSplit];
  // This thread's first dim of each tile's O^T columns (+ 128c; the ldmatrix layout adds 64bb for m-block 2c + bb).
  const int dim0 = O.v_ldsm ? 16 * w + 2 * g : 32 * w + 4 * g;
  const uint32_t lane_row = (8 * ((lane >> 3) & 1) + (lane & 7)) * kTokenBytes + 64 * (lane >> 4) + 16 * w;
  decode::named_arrive(kBarPEmpty + 0, kBarPair);  // both P' buffers start free
  decode::named_arrive(kBarPEmpty + 1, kBarPair);
  const bool is_stream = O.inline_producer && w == 0 && lane == 0;
  PageStream ps;
  if (is_stream) {
    ps.init(p, c);
    for (int k = 0; k < kStages; ++k) ps.step(p, bars, s_raw0);
  }
  __syncwarp();
  float o[8][8], u_run[kTiles];
  auto reset = [&] {
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int e = 0; e < 8; ++e) o[i][e] = 0.f;
#pragma unroll
    for (int cc = 0; cc < kTiles; ++cc) u_run[cc] = 1.f;
  };
  reset();
  int j = 0;
  while (c.valid()) {
    const int slot = j % kStages, buf = j & 1;
    mbar_wait(bars.full(slot), phase_of(j));
    const VSource vs{raw0 + slot * kPageBytes + dim0, s_raw0 + slot * kPageBytes + lane_row,
                     c.seqlen - c.blk * kBlockN};
    const uint32_t s_pb = s_p0 + buf * kPBufBytes;
    if (vs.valid < kBlockN)
      accumulate_page<O, true>(o, u_run, vs, s_pb, s_alpha, s_unit, buf, bars.empty(slot), lane, ps, is_stream, p, bars,
                               s_raw0);
    else
      accumulate_page<O, false>(o, u_run, vs, s_pb, s_alpha, s_unit, buf, bars.empty(slot), lane, ps, is_stream, p, bars,
                                s_raw0);
    const bool seg_end = c.last_of_sequence();
    float lsum[4], mfin[4];
    if (seg_end) decode::n16::read_segment_totals(s_lsum, s_mfin, buf, t, lsum, mfin);
    decode::named_arrive(kBarPEmpty + buf, kBarPair);
    if (seg_end) {
      const int b = c.b;
      const decode::n16::SegmentDest d = decode::n16::segment_dest(p, b, first_batch, first_split);
      const int n_splits = d.n_splits, out_slot = d.slot;
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int row = 8 * (r >> 1) + 2 * t + (r & 1), i0 = 4 * (r >> 1) + (r & 1);
        const float total = lsum[r];
        const float inv = total > 0.f ? 1.f / total : 0.f;
        const float lse = total > 0.f ? mfin[r] * p.softmax_scale + logf(total) : -INFINITY;
        uint16_t* out = static_cast<uint16_t*>(p.out) + (static_cast<int64_t>(b) * p.rows + row) * kDimV + dim0;
        float* acc = p.o_accum + (static_cast<int64_t>(out_slot) * p.rows + row) * kDimV + dim0;
#pragma unroll
        for (int cc = 0; cc < kTiles; ++cc) {
          const float k = inv * u_run[cc];
          // (m-block 2c, rows g / g + 8), (m-block 2c + 1, rows g / g + 8)
          const float x0 = o[2 * cc][i0] * k, x1 = o[2 * cc][i0 + 2] * k;
          const float x2 = o[2 * cc + 1][i0] * k, x3 = o[2 * cc + 1][i0 + 2] * k;
          const __nv_bfloat162 lo = __floats2bfloat162_rn(x0, x1), hi = __floats2bfloat162_rn(x2, x3);
          if (O.v_ldsm) {  // dims 128c + dim0 + {0, 1} and 128c + 64 + dim0 + {0, 1}
            if (n_splits == 1) {
              *reinterpret_cast<__nv_bfloat162*>(out + 128 * cc) = lo;
              *reinterpret_cast<__nv_bfloat162*>(out + 128 * cc + 64) = hi;
            } else {
              *reinterpret_cast<float2*>(acc + 128 * cc) = make_float2(x0, x1);
              *reinterpret_cast<float2*>(acc + 128 * cc + 64) = make_float2(x2, x3);
            }
          } else if (n_splits == 1) {  // dims 128c + dim0 + {0, 1, 2, 3}
            uint2 pk;
            pk.x = *reinterpret_cast<const uint32_t*>(&lo);
            pk.y = *reinterpret_cast<const uint32_t*>(&hi);
            *reinterpret_cast<uint2*>(out + 128 * cc) = pk;
          } else {
            *reinterpret_cast<float4*>(acc + 128 * cc) = make_float4(x0, x1, x2, x3);
          }
        }
        if (w == 0 && g == 0) {
          if (n_splits == 1)
            p.lse[static_cast<int64_t>(b) * p.h_q + row] = lse;  // s_q = 1: row = head
          else
            p.lse_accum[static_cast<int64_t>(out_slot) * p.rows + row] = lse;
        }
      }
      reset();
    }
    c.advance(p);
    ++j;
  }
}

template <int V>
__global__ void __launch_bounds__(threads<V>(), 1) mla_decode_fp8ds_ws16_kernel(const __grid_constant__ DecodeKernelParams p) {
  constexpr Layout L = layout();
  constexpr Opts O = kVariants[V];
  extern __shared__ __align__(1024) uint8_t smem[];
  PartCursor c;
  if (!decode::n16::begin_part(p, c)) return;
  const Bars bars{decode::smem_u32(smem + L.bar)};
  if (threadIdx.x == 0) {
    bars.init(kScorerWarps + kAccWarps);
    decode::mbar_init_fence();
  }
  __syncthreads();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (warp == kProducerWarp) {  // only with a producer warp (!O.inline_producer)
    if (lane == 0) {
      PageStream ps;
      ps.init(p, c);
      while (ps.c.valid()) ps.step(p, bars, decode::smem_u32(smem + L.raw));
    }
  } else if (warp < kScorerWarps) {
    scorer<O>(p, c, bars, smem, warp, lane);
  } else {
    accumulator<O>(p, c, bars, smem, warp - kScorerWarps, lane);
  }
}

}  // namespace mla::sm90::decode_fp8ds::ws16
