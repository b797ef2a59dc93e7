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
// One CTA per plan part, 256 threads (no producer warp: a 9th warp capped ptxas at 168 registers and spilled):
//   warpgroup 0 (scorer): at a sequence start Q -> Q' slabs (f16 of q * 2^k_row, permuted dims); per page:
//     K codes (loaded a tile ahead) -> A fragments -> S^T_c (4 accumulators) + RoPE (bf16) -> release the slot ->
//     scales, mask, row max and page max tile scales (one 128-thread exchange) -> P, then P'_c for the 4 tiles into
//     P buffer j % 2 -> P_full;
//   warpgroup 1 (accumulator): V codes of tile 0 -> A fragments (ldmatrix.trans, before P' exists), P_full, O^T
//     rescale, then per tile c: wgmma on tile c while tile c + 1 converts; release the slot after the last codes,
//     P_empty, epilogue. Its thread 0 also runs the page stream: page j + kStages into the slot once its warpgroup
//     released page j (the last of the 8 warps' releases, as the scorer is a page ahead) and issued tile 3's wgmmas.
// Layouts (warp w of a warpgroup, lane = 4g + t):
//  - S^T M row 16w + g + 8h is token 2f + h, f = 8w + 4(g/4) + 2(g%2) + (g/2)%2: a thread's two keys are adjacent
//    (one f16x2 store of P' per row and tile); the two tokens of a quarter warp's 16-byte code loads are 4 apart
//    (16 words mod 32: conflict-free); and a warp's P' stores of one row slot hit 32 banks: the 128B swizzle XORs
//    chunk bits 1-2 with the row's 2t, g spans the low 3 bits of f (chunk bit 0 and the word). (Run F9: the map
//    8(g/2) + 2(g%2) + w%2 + 4(w/2) made those 16 stores per thread and page 4-way conflicts, the scorer's largest MIO
//    stall; this one is 4.8 % faster at h16 b128 s8192.) k order inside each 64-dim block: the thread's 16 contiguous
//    code bytes dims 16t + 4i + {0,1,2,3} are k16 step i, slots 2t, 2t+1, 2t+8, 2t+9; Q' is stored in that order.
//  - RoPE: thread t holds dims 8t + 2i, +1 (k slots 2t, 2t + 1 of k16 step i) and 32 + 8t + 2i, +1 (slots 2t + 8,
//    2t + 9): two 16-byte loads 64 bytes apart per token, conflict-free (32 contiguous bytes were 2-way; run F9).
//  - O^T M row 16w + g + 8h of m-block 2c + bb is dim 128c + 64bb + 16w + 2g + h (v_frags); keys in natural order.
// kFused: a second instantiation whose accumulator warpgroup merges the split sequences it completes
// (decode/fused_merge.cuh; session 25: h16 b128 s512 -1.3 us, s4096 -0.7, s8192 within the spread); the combine-mode
// instantiation's SASS is the kernel's as before.
#include <cstdint>

#include "ops/cuda/sm90/decode/fused_merge.cuh"
#include "ops/cuda/sm90/decode/handoff_n16.cuh"
#include "ops/cuda/sm90/decode/params.h"
#include "ops/cuda/sm90/decode/partials.h"
#include "ops/cuda/sm90/decode/ptx.h"
#include "ops/cuda/sm90/decode/row_end.cuh"
#include "ops/cuda/sm90/decode/scheduler.cuh"
#include "ops/cuda/sm90/decode/tma.h"
#include "ops/cuda/sm90/decode/traits.h"
#include "ops/cuda/sm90/decode/wait_for_loads.h"
#include "ops/cuda/sm90/decode/wgmma.h"
#include "ops/cuda/sm90/decode_fp8ds/config_ws16.h"
#include "ops/cuda/sm90/decode_fp8ds/fragments.cuh"
#include "ops/cuda/sm90/decode_fp8ds/wgmma_f16_n16.h"

namespace mla::sm90::decode_fp8ds::ws16 {

using decode::DecodeKernelParams;
using decode::mbar_arrive_warp;
using decode::mbar_wait;
using decode::PartCursor;
using decode::wgmma_wait_group;

using Bars = decode::n16::RingBars<kStages>;
__device__ __forceinline__ uint32_t phase_of(int n) { return decode::n16::phase_of(n, kStages); }

// Byte offset of (row, byte) in a 16-row slab of 128-byte rows, 128B swizzle.
__device__ __forceinline__ int slab_byte(int row, int byte) { return row * 128 + ((((byte >> 4) ^ row) & 7) << 4) + (byte & 15); }

// The page stream: page j into raw slot j % kStages (one bulk copy on full[slot]) once all 8 warps released the
// slot's previous page. Run by accumulator thread 0, which steps it (page j + kStages) after its own release of
// page j and the issue of page j's last wgmmas. No L2 promotion question here: a page is one contiguous 41 KB 1D bulk copy (no tensor map, no box
// rows fetched twice), unlike the fp8 kernel's 2D boxes.
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
    // Evict-first at every length: these 1D bulk copies gain with it on every h16 row (b32 / b128 -1.7..-3.8 us) or,
    // at b128 s8192 on some machines, break even (session 15), unlike the 2D boxes and cp.async of the other formats,
    // which lose on long parts (decode/config.h kKvEvictFirstPartBytes).
    decode::bulk_load_hint(s_raw0 + slot * kPageBytes,
                           static_cast<const uint8_t*>(p.kv_cache) + static_cast<int64_t>(c.page) * kPageBytes,
                           kPageBytes, bars.full(slot), decode::l2_evict_first_fraction(1.f));
    c.advance(p);
    c.fetch_page(p);  // the next block-table entry loads while this thread waits / computes
    ++j;
  }
};

// RoPE chunk kb of a query row (bf16, 8 dims) into slab 8 in the k order of the bf16 RoPE wgmmas (layouts above):
// dims 8kb + 2w, +1 are k16 step w, slots 2(kb % 4), +1 (+ 8 for kb >= 4) -> byte 32w + 4(kb % 4) + 16(kb / 4).
__device__ __forceinline__ void store_rope_q(uint8_t* s_q, int row, int kb, const uint4& r) {
  uint8_t* rs = s_q + 8 * kSlabBytes;
#pragma unroll
  for (int w = 0; w < 4; ++w)
    *reinterpret_cast<uint32_t*>(rs + slab_byte(row, 32 * w + 4 * (kb & 3) + 16 * (kb >> 2))) = word_of(r, w);
}

// Q of sequence b -> Q' (scorer thread tid < 128: row tid / 8, 64-dim block kb = tid % 8 and RoPE chunk kb).
// Latent: f16 of q * 2^k_row (row_exponent: exact), step i of block kb = 16-byte chunks 2i (slots 0-7) and
// 2i + 1 (slots 8-15) of slab kb; slot 2t + e + 8h' holds dim 64kb + 16t + 4i + 2h' + e. RoPE: bf16, same order.
__device__ __forceinline__ void convert_q(const DecodeKernelParams& p, int b, uint8_t* s_q, float* s_qdiv, int tid) {
  const int row = tid >> 3, kb = tid & 7;
  // The tile's rows of sequence b: q is [b, rows] (rows = h_q at s_q 1; 16 of them per narrow tile).
  const int64_t q_row = static_cast<int64_t>(b) * p.rows + decode::n16::tile_row0() + row;
  const uint4* src = reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p.q) + q_row * kDimQK);
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

// A fragments of one code word pair (tokens of M rows g and g + 8, dims 16t + 4i .. + 3 each).
__device__ __forceinline__ void k_frag(uint32_t (&a)[4], uint32_t wa, uint32_t wb) {
  e4m3x4_to_f16x2x2(wa, a[0], a[2]);
  e4m3x4_to_f16x2x2(wb, a[1], a[3]);
}
__device__ __forceinline__ void pin_frags(uint32_t (&f)[8][4]) {
#pragma unroll
  for (int s = 0; s < 8; ++s) fence_operands(f[s]);
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
  const int f = 8 * w + 4 * (g >> 2) + 2 * (g & 1) + ((g >> 1) & 1);
  const int tok[2] = {2 * f, 2 * f + 1};  // M rows 16w + g, 16w + g + 8
  float m[4], l[4], qdiv[4];
  auto reset = [&] {
#pragma unroll
    for (int r = 0; r < 4; ++r) m[r] = -INFINITY, l[r] = 0.f;
  };
  reset();
  bool new_seq = true;
  int j = 0;
  while (c.valid()) {
    const int slot = j % kStages, buf = j & 1;
    const bool seg_end = c.last_of_sequence();
    if (new_seq) {
      // Every scorer warp finished its S of the previous page (waited wgmma) before that page's exchange barrier.
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
    float acc[kTiles][8], rp[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      rp[e] = 0.f;
#pragma unroll
      for (int cc = 0; cc < kTiles; ++cc) acc[cc][e] = 0.f;
    }
#pragma unroll
    for (int cc = 0; cc < kTiles; ++cc) decode::fence_operands(acc[cc]);
    decode::fence_operands(rp);
    {
      // Two fragment buffers: tile c + 1 converts while tile c's wgmmas run, and tile c + 1's codes load before tile
      // c converts (run F4: -3.4 % at b128 s8192; it lost 1-2.5 % in F3 under the 168-register cap of 9 warps).
      uint32_t fa[8][4], fb[8][4];
      KWords kw[2];
      load_k(kw[0], k0, k1, 0);
#pragma unroll
      for (int cc = 0; cc < kTiles; ++cc) {
        if (cc + 1 < kTiles) load_k(kw[(cc + 1) & 1], k0, k1, cc + 1);
        issue_tile_s(acc[cc], (cc & 1) ? fb : fa, kw[cc & 1], s_q, cc);
        if (cc > 0) wgmma_wait_group<1>();
      }
      // RoPE: bf16 as stored; k0 / k1 already include 16t, so the thread reads bytes 528 + 16t and 592 + 16t of its
      // tokens: dims 8t + 2i, +1 and 32 + 8t + 2i, +1 in word i.
      uint32_t fr[4][4];
      const uint4 a0 = *reinterpret_cast<const uint4*>(k0 + kRopeOffset);
      const uint4 a1 = *reinterpret_cast<const uint4*>(k0 + kRopeOffset + 64);
      const uint4 b0 = *reinterpret_cast<const uint4*>(k1 + kRopeOffset);
      const uint4 b1 = *reinterpret_cast<const uint4*>(k1 + kRopeOffset + 64);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        fr[i][0] = word_of(a0, i);
        fr[i][1] = word_of(b0, i);
        fr[i][2] = word_of(a1, i);
        fr[i][3] = word_of(b1, i);
        fence_operands(fr[i]);
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
    wgmma_wait_group<0>();
#pragma unroll
    for (int cc = 0; cc < kTiles; ++cc) decode::fence_operands(acc[cc]);
    decode::fence_operands(rp);
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
    // Codes and RoPE went into the wgmmas (waited above); the scales' loads are waited for here, where the scores
    // need them anyway (right after the wgmma wait it cost ~1 % at h_q 16 b128, session 31).
    decode::wait_for_loads(sc);
    mbar_arrive_warp(bars.empty(slot));  // every code, scale and RoPE of this warp is in registers
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
    const float u[kTiles] = {scale_unit(pm.x), scale_unit(pm.y), scale_unit(pm.z), scale_unit(pm.w)};
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
      // racecheck: hand-off (s_alpha / s_unit for the accumulator, ordered by the P_full named barrier)
#pragma unroll
      for (int r = 0; r < 4; ++r) s_alpha[buf * kRows + 8 * (r >> 1) + 2 * t + (r & 1)] = alpha[r];
    }
    if (w == 0 && lane == 0) {
      // racecheck: hand-off (ordered by the P_full named barrier)
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

// V^T A fragments of tile c by ldmatrix.x4.trans. Lane L addresses row L % 8 of matrix m = L / 8: token
// 16s + 8(m % 2) + L % 8, bytes 64(m / 2) + 16w (+ 128c) of it, so matrix m of step s is 8 tokens x 16 dims
// 128c + 64bb + 16w .. + 15 (bb = m / 2); 16-byte rows 656 bytes apart start on banks 0, 4, .., 28: conflict-free.
// .trans gives this thread tokens 2t, 2t + 1 (low / high 16 bits) of the matrix, both with dims 2g, 2g + 1 of the
// chunk; one prmt makes (2g: keys 2t, 2t + 1 | 2g + 1: the same keys), so O^T M row 16w + g + 8hm of m-block 2c + bb
// is dim 128c + 64bb + 16w + 2g + hm. 4 ldmatrix per tile replace run F2's 16 key-masked 4-byte loads (run F4:
// -4.3 % at b128 s8192). kTail (a sequence's partial last page): keys past the end are masked to code 0 (their
// slots hold garbage, NaN in the tests, and 0 * NaN would poison O); full pages skip the mask.
// ptx.h's ldmatrix_x4_trans, here so that racecheck names this file for the ring's reads: a slot is refilled after
// lane 0 of each warp arrived on its empty barrier (after __syncwarp, once the wgmma these registers feed issued), which
// racecheck does not take as ordering the other lanes' reads (MLA_RC_ALL_ARRIVE=1 clears the report: bench/decode/
// NOTES.md "Session 66" 2).
__device__ __forceinline__ void ring_ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {  // racecheck: hand-off
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));  // racecheck: hand-off (above)
}
template <bool kTail>
__device__ __forceinline__ void v_frags(uint32_t (&f)[4][2][4], uint32_t v_lane, const uint32_t (&mask)[4][2]) {
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    uint32_t r[4];
    ring_ldmatrix_x4_trans(r, v_lane + 16 * s * kTokenBytes);
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const uint32_t x = kTail ? (r[m] & mask[s][m & 1]) : r[m];
      // a0 / a1 (h = 0) or a2 / a3 (h = 1) of m-block bb: rows g / g + 8 = dims 2g / 2g + 1.
      e4m3x4_to_f16x2x2(byte_perm(x, 0u, 0x3120), f[s][m >> 1][2 * (m & 1)], f[s][m >> 1][2 * (m & 1) + 1]);
    }
    fence_operands(f[s][0]);
    fence_operands(f[s][1]);
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

// One page of the accumulator after its full barrier: tile 0's fragments (before P' exists), P_full, O rescale, then
// per tile c the wgmmas of c while c + 1 converts. After the last codes are in registers the warp releases the slot
// and the page stream thread (ps, accumulator thread 0) issues page j + kStages into it.
template <bool kTail>
__device__ __forceinline__ void accumulate_page(float (&o)[8][8], float (&u_run)[kTiles], uint32_t v_lane, int valid,
                                                uint32_t s_pb, const float* s_alpha, const float* s_unit, int buf,
                                                uint32_t empty_bar, int lane, PageStream& ps, bool is_stream,
                                                const DecodeKernelParams& p, const Bars& bars, uint32_t s_raw0) {
  const int t = lane & 3;
  uint32_t mask[4][2];  // tokens 16s + 8h + 2t (low half), + 1 (high half); only kTail uses them
#pragma unroll
  for (int s = 0; s < 4; ++s)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int tk = 16 * s + 8 * h + 2 * t;
      mask[s][h] = (tk < valid ? 0xffffu : 0u) | (tk + 1 < valid ? 0xffff0000u : 0u);
    }
  uint32_t fa[4][2][4], fb[4][2][4];
  v_frags<kTail>(fa, v_lane, mask);
  decode::named_sync(kBarPFull + buf, kBarPair);
  // O's rows 8jn + 2t + e rescale by alpha; tile c's columns move from units u_run[c] to this page's u_c (both
  // powers of two: exact). (Skipping it when every factor is 1, with units kept from page to page, measured 2.7 %
  // slower: run F5, k8s.)
  float alpha[4];
  // racecheck: hand-off (s_alpha / s_unit read after the P_full named barrier)
#pragma unroll
  for (int r = 0; r < 4; ++r) alpha[r] = s_alpha[buf * kRows + 8 * (r >> 1) + 2 * t + (r & 1)];
#pragma unroll
  for (int cc = 0; cc < kTiles; ++cc) {
    // racecheck: hand-off (read after the P_full named barrier)
    const float un = s_unit[buf * kTiles + cc];
    const float ratio = u_run[cc] * inv_pow2(un);
    u_run[cc] = un;
#pragma unroll
    for (int bb = 0; bb < 2; ++bb)
#pragma unroll
      for (int i = 0; i < 8; ++i) o[2 * cc + bb][i] *= alpha[2 * (i >> 2) + (i & 1)] * ratio;
  }
  issue_tile_pv(o, fa, s_pb + 0 * kSlabBytes, 0);
  v_frags<kTail>(fb, v_lane + 128, mask);
  issue_tile_pv(o, fb, s_pb + 1 * kSlabBytes, 1);
  wgmma_wait_group<1>();
  v_frags<kTail>(fa, v_lane + 256, mask);
  issue_tile_pv(o, fa, s_pb + 2 * kSlabBytes, 2);
  wgmma_wait_group<1>();
  v_frags<kTail>(fb, v_lane + 384, mask);
  issue_tile_pv(o, fb, s_pb + 3 * kSlabBytes, 3);
  // Released once the last codes' wgmmas are issued: a wgmma issues only with its A registers loaded, so the
  // ldmatrix reads of the slot are done (an arrive right after them could overtake them: wait_for_loads.h; waiting
  // for them before the arrive instead cost 1-2 % at h_q 16 b32-b128, session 31).
  mbar_arrive_warp(empty_bar);
  // The page stream runs while tile 3's wgmmas do (before them, the other 3 warps waited at that wgmma for warp 0's
  // empty-barrier wait and copy; run F9: -0.4 %).
  if (is_stream) ps.step(p, bars, s_raw0);
  __syncwarp();
  wgmma_wait_group<0>();
#pragma unroll
  for (int i = 0; i < 8; ++i) decode::fence_operands(o[i]);
}

// kFused: the fused merge (decode/fused_merge.cuh: the split sequences this CTA completes are merged after its part).
template <bool kFused>
__device__ __forceinline__ void accumulator(const DecodeKernelParams& p, PartCursor c, const Bars& bars, uint8_t* smem,
                                            int w, int lane) {
  constexpr Layout L = layout();
  const uint32_t s_raw0 = decode::smem_u32(smem + L.raw);
  const uint32_t s_p0 = decode::smem_u32(smem + L.p);
  const float* s_alpha = reinterpret_cast<const float*>(smem + L.alpha);
  const float* s_unit = reinterpret_cast<const float*>(smem + L.unit);
  const float* s_lsum = reinterpret_cast<const float*>(smem + L.lsum);
  const float* s_mfin = reinterpret_cast<const float*>(smem + L.mfin);
  const int g = lane >> 2, t = lane & 3;
  const int32_t* rec = decode::part_record(p);
  const int first_batch = rec[kPartBeginBatch], first_split = rec[kPartFirstSplit];
  const int dim0 = 16 * w + 2 * g;  // + 128c (+ 64 for m-block 2c + 1): this thread's 2 dims per m-block
  const uint32_t lane_row = (8 * ((lane >> 3) & 1) + (lane & 7)) * kTokenBytes + 64 * (lane >> 4) + 16 * w;
  decode::named_arrive(kBarPEmpty + 0, kBarPair);  // both P' buffers start free
  decode::named_arrive(kBarPEmpty + 1, kBarPair);
  decode::FusedMerges<kFused>::zero_empty(p, 32 * w + lane, 32 * kAccWarps);
  decode::FusedMerges<kFused> merges;  // split sequences this CTA merges after its part (fused mode)
  const bool is_stream = w == 0 && lane == 0;
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
    const uint32_t v_lane = s_raw0 + slot * kPageBytes + lane_row;
    const int valid = c.seqlen - c.blk * kBlockN;
    const uint32_t s_pb = s_p0 + buf * kPBufBytes;
    if (valid < kBlockN)
      accumulate_page<true>(o, u_run, v_lane, valid, s_pb, s_alpha, s_unit, buf, bars.empty(slot), lane, ps, is_stream, p,
                            bars, s_raw0);
    else
      accumulate_page<false>(o, u_run, v_lane, valid, s_pb, s_alpha, s_unit, buf, bars.empty(slot), lane, ps, is_stream, p,
                             bars, s_raw0);
    const bool seg_end = c.last_of_sequence();
    float lsum[4], mfin[4];
    if (seg_end) decode::n16::read_segment_totals(s_lsum, s_mfin, buf, t, lsum, mfin);
    decode::named_arrive(kBarPEmpty + buf, kBarPair);
    if (seg_end) {
      const int b = c.b;
      const decode::n16::SegmentDest d = decode::n16::segment_dest(p, b, first_batch, first_split);
      const int row0 = decode::n16::tile_row0();
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int row = row0 + 8 * (r >> 1) + 2 * t + (r & 1), i0 = 4 * (r >> 1) + (r & 1);
        const float total = lsum[r];
        const bool seen = total > 0.f;
        const float inv = decode::row_inv(seen, total);
        const float lse = decode::row_lse(seen, total, mfin[r] * p.softmax_scale);
        uint16_t* out = static_cast<uint16_t*>(p.out) + (static_cast<int64_t>(b) * p.rows + row) * kDimV + dim0;
        float* acc = p.o_accum + (static_cast<int64_t>(d.slot) * p.rows + row) * kDimV +
                     decode::partial_pair_offset(dim0);  // partials.h: dim0's pair, + 128 c (+ 64) in every tile
#pragma unroll
        for (int cc = 0; cc < kTiles; ++cc) {
          const float k = inv * u_run[cc];
          // m-block 2c (dims 128c + dim0 + {0, 1}: rows g / g + 8) and 2c + 1 (the same + 64)
          const float x0 = o[2 * cc][i0] * k, x1 = o[2 * cc][i0 + 2] * k;
          const float x2 = o[2 * cc + 1][i0] * k, x3 = o[2 * cc + 1][i0 + 2] * k;
          if (d.n_splits == 1) {
            *reinterpret_cast<__nv_bfloat162*>(out + 128 * cc) = __floats2bfloat162_rn(x0, x1);
            *reinterpret_cast<__nv_bfloat162*>(out + 128 * cc + 64) = __floats2bfloat162_rn(x2, x3);
          } else {
            *reinterpret_cast<float2*>(acc + 128 * cc) = make_float2(x0, x1);
            *reinterpret_cast<float2*>(acc + 128 * cc + 64) = make_float2(x2, x3);
          }
        }
        if (w == 0 && g == 0) {
          if (d.n_splits == 1)
            p.lse[static_cast<int64_t>(b) * p.h_q + row] = lse;  // s_q = 1: row = head
          else
            p.lse_accum[static_cast<int64_t>(d.slot) * p.rows + row] = lse;
        }
      }
      merges.note(b, d.n_splits);
      reset();
    }
    c.advance(p);
    ++j;
  }
  merges.template finish<decode::Bf16Traits, float, 32 * kAccWarps>(p, 32 * w + lane);
}

// kFused: the fused merge (decode/fused_merge.cuh; the combine-mode instantiation has none of its code).
template <bool kFused>
__global__ void __launch_bounds__(kThreads, 1) mla_decode_fp8ds_ws16_kernel(const __grid_constant__ DecodeKernelParams p) {
  constexpr Layout L = layout();
  extern __shared__ __align__(1024) uint8_t smem[];
  PartCursor c;
  if (!decode::n16::begin_part(p, c)) {  // an empty part: uniform across the CTA
    decode::FusedMerges<kFused>::zero_empty(p, threadIdx.x, blockDim.x);
    return;
  }
  const Bars bars{decode::smem_u32(smem + L.bar)};
  if (threadIdx.x == 0) {
    bars.init(kScorerWarps + kAccWarps);
    decode::mbar_init_fence();
  }
  __syncthreads();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (warp < kScorerWarps)
    scorer(p, c, bars, smem, warp, lane);
  else
    accumulator<kFused>(p, c, bars, smem, warp - kScorerWarps, lane);
}

}  // namespace mla::sm90::decode_fp8ds::ws16
