#pragma once
// fp8_ds decode for 16-row tiles (h_q 16, s_q 1: the engine's shape) on exact 16-bit codes.
//
// Why: dequantizing every value to bf16(e4m3 x scale) into a bf16 stage (decode/pages.cuh) put ~3
// instructions per value and a 74 KB shared-memory round trip on each step's critical path, and made
// fp8_ds slower than bf16 (NOTES_fp8_ds.md run 1). Here the raw page is the only copy in shared memory
// and the MMAs read the stored codes themselves:
//  - e4m3 -> f16 is exact (one cvt per pair), so S and P.V run on f16 mma.sync and the fp32 tile scales
//    are applied outside the MMA:
//      S[r][t]   = 2^-k_r * sum_c scale[t][c] * (Q'_c[r] . code_c[t]) + Q_rope[r] . K_rope[t]
//      O_c[r][:] = u_c * sum_t P'_c[r][t] * code_c[t][:],   P'_c[r][t] = f16(P[r][t] * scale[t][c] / u_c)
//    with Q' = f16(q * 2^k_r) (a per-row power of two makes the bf16 query exact in f16), four tile
//    accumulators for S, and u_c the page's largest tile-c scale rounded down to a power of two (O's
//    tile-c columns are kept in units of u_c; a new page rescales them by alpha * u_old / u_new, exact).
//    RoPE stays bf16 x bf16. Compared with the CPU reference (fp32 e4m3 x scale), K is exact and P is
//    rounded once to f16 (2^-11) instead of bf16 (2^-8).
//  - Codes go from the raw token-major page straight into B fragments (no ldmatrix, no staging): the MMA's
//    k order is permuted so each thread loads 16 contiguous code bytes for S (Q's fragments use the same
//    permutation) and 8 contiguous dims of 4 tokens for P.V (paired into keys with one prmt).
//
// Roles (8 warps, 16 query rows): warp w computes S for 8 keys (tokens 4n + w%4 + 32(w/4), n < 8: 16-byte
// loads of 8 tokens 4 apart are bank-conflict free) and writes its P' for all four tiles; it accumulates
// output columns [64w, 64w + 64) (tile w/2) over all 64 keys.
//
// Pipeline per step j (page j in raw slot j % 4, each slot one bulk copy on its mbarrier, 4 pages in
// flight): wait page j [and a new segment's Q tile -> Q fragments] -> S, row maxima, per-warp max tile
// scales -> barrier A -> [thread 0: page j + 3 into the slot of page j - 1, which every warp has finished]
// -> P, P' for 4 tiles -> barrier B -> O = O * alpha' + P'_c V -> [segment end: epilogue].
#include <cstdint>

#include "ops/cuda/sm90/decode/mainloop.cuh"
#include "ops/cuda/sm90/decode/params.h"
#include "ops/cuda/sm90/decode/ptx.h"
#include "ops/cuda/sm90/decode/scheduler.cuh"
#include "ops/cuda/sm90/decode/tma.h"
#include "ops/cuda/sm90/decode_fp8ds/config.h"
#include "ops/cuda/sm90/decode_fp8ds/fragments.cuh"

namespace mla::sm90::decode_fp8ds {

using decode::DecodeKernelParams;
using decode::PartCursor;

// Q fragments of one sequence, in the permuted k order of the S loads. Latent: step s = 4kb + i (kb < 8
// blocks of 64 dims, i < 4) has a0/a2 = row g, dims 64kb + 16t4 + 4i + {0,1} / {2,3}; a1/a3 the same for
// row g + 8; f16 of q * 2^k_row. RoPE (bf16, unscaled): step i has a0/a2 = row g, dims
// 512 + 8(t4 + 4(i/2)) + 4(i%2) + {0,1} / {2,3}.
struct QFrags {
  uint32_t lat[32][4];
  uint32_t rope[4][4];
  float inv_mul[2];  // 2^-k of rows g and g + 8
};

// Byte offset of fragment word `word` (0-3 = a0..a3) of step `step` for lane 4g + t4 in the fragment-major
// buffer: each lane's four words are one 16-byte load, and a warp's 32 loads are contiguous.
__device__ __forceinline__ int frag_offset(int step, int g, int t4, int word) { return ((step * 32 + 4 * g + t4) * 4 + word) * 4; }

// Rewrites the Q tile (bf16, swizzled rows) into `s_frag` in fragment-major order: latent as f16 of
// q * 2^k_row (row_exponent), RoPE as is; stores 2^-k_row in s_qdiv[16]. One pass for the CTA (16 threads
// per row, 16 conversions per thread) instead of every warp converting the tile for its fragments, and the
// fragments then load as whole registers quads (no per-MMA register moves). Called by all threads between
// two barriers.
__device__ __forceinline__ void convert_q_tile(const uint8_t* s_q, uint8_t* s_frag, float* s_qdiv) {
  using decode::swizzle;
  const int row = threadIdx.x >> 4, part = threadIdx.x & 15;
  const int g = row & 7, h = row >> 3;
  uint4 c[4];
  float amax = 0.f;
#pragma unroll
  for (int x = 0; x < 4; ++x) {
    c[x] = *reinterpret_cast<const uint4*>(s_q + swizzle(row, 4 * part + x, kQRowBytes));
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const uint32_t v = word_of(c[x], w);
      amax = fmaxf(amax, fmaxf(fabsf(bf16_lo(v)), fabsf(bf16_hi(v))));
    }
  }
#pragma unroll
  for (int x = 1; x < 16; x <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, x));  // the row's 16 threads
  const int k = row_exponent(amax);
  const float mul = pow2(k);
  // Latent chunk 4 part + x holds dims d = 8(4 part + x) + 2w, +1: block kb = d / 64, offset o = d % 64 =
  // 16 t4 + 4 i + 2 j -> step 4 kb + i, lane 4 g + t4, word 2 j + h.
#pragma unroll
  for (int x = 0; x < 4; ++x)
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const int d = 8 * (4 * part + x) + 2 * w, o = d & 63;
      *reinterpret_cast<uint32_t*>(s_frag + frag_offset(4 * (d >> 6) + ((o & 15) >> 2), g, o >> 4, 2 * ((o >> 1) & 1) + h)) =
          bf16x2_to_f16x2(word_of(c[x], w), mul);
    }
  // RoPE chunk cc = part (< 8) holds dims 8cc + 2w, +1: step 2(cc / 4) + w / 2, lane 4g + cc % 4, word 2(w % 2) + h.
  if (part < 8) {
    const uint4 r = *reinterpret_cast<const uint4*>(s_q + swizzle(row, kDimLatent / 8 + part, kQRowBytes));
#pragma unroll
    for (int w = 0; w < 4; ++w)
      *reinterpret_cast<uint32_t*>(s_frag + kQFragLatentBytes + frag_offset(2 * (part >> 2) + (w >> 1), g, part & 3, 2 * (w & 1) + h)) =
          word_of(r, w);
  }
  if (part == 0) s_qdiv[row] = pow2(-k);
}

__device__ __forceinline__ void load_q_frags(QFrags& q, const uint8_t* s_frag, const float* s_qdiv, int lane) {
#pragma unroll
  for (int s = 0; s < 32; ++s) {
    const uint4 v = *reinterpret_cast<const uint4*>(s_frag + (s * 32 + lane) * 16);
    q.lat[s][0] = v.x;
    q.lat[s][1] = v.y;
    q.lat[s][2] = v.z;
    q.lat[s][3] = v.w;
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint4 v = *reinterpret_cast<const uint4*>(s_frag + kQFragLatentBytes + (i * 32 + lane) * 16);
    q.rope[i][0] = v.x;
    q.rope[i][1] = v.y;
    q.rope[i][2] = v.z;
    q.rope[i][3] = v.w;
  }
  q.inv_mul[0] = s_qdiv[lane >> 2];
  q.inv_mul[1] = s_qdiv[(lane >> 2) + 8];
}

// S of the warp's 8 keys: acc[c] = Q'_c . code_c (per scale tile), rope = Q_rope . K_rope. k_tok points at
// this thread's B-fragment token (n = g).
__device__ __forceinline__ void scores(float (&acc)[kTiles][4], float (&rope)[4], const QFrags& q, const uint8_t* k_tok,
                                       int t4) {
#pragma unroll
  for (int c = 0; c < kTiles; ++c)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[c][e] = 0.f;
#pragma unroll
  for (int e = 0; e < 4; ++e) rope[e] = 0.f;
  // Blocks kb = 2c + half: one 16-byte load per tile, then the four tiles' MMAs interleaved (independent
  // accumulators back to back).
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    uint4 kw[kTiles];
#pragma unroll
    for (int c = 0; c < kTiles; ++c) kw[c] = *reinterpret_cast<const uint4*>(k_tok + 64 * (2 * c + half) + 16 * t4);
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int c = 0; c < kTiles; ++c) {
        const uint32_t w = word_of(kw[c], i);
        mma_f16(acc[c], q.lat[4 * (2 * c + half) + i], lo16_f16x2(w), hi16_f16x2(w));
      }
  }
  const uint4 r0 = *reinterpret_cast<const uint4*>(k_tok + kRopeOffset + 16 * t4);
  const uint4 r1 = *reinterpret_cast<const uint4*>(k_tok + kRopeOffset + 16 * (t4 + 4));
  mma_bf16(rope, q.rope[0], r0.x, r0.y);
  mma_bf16(rope, q.rope[1], r0.z, r0.w);
  mma_bf16(rope, q.rope[2], r1.x, r1.y);
  mma_bf16(rope, q.rope[3], r1.z, r1.w);
}

// O (16 x 64 columns [64w, 64w+64)) += P'_c (16 x 64) . code_c (64 x 64). B fragment of n-tile j: n = g is
// dim 64w + 8g + j, keys k = 2t4, 2t4+1, 2t4+8, 2t4+9 of each 16-key step are tokens in natural order, so
// P' is read with the usual ldmatrix. Tokens at or past `valid` read as code 0 (their slots hold garbage,
// NaN in the tests, and 0 * NaN would poison O). o[j][0] / [1] = row g, dims 64w + 16t4 + j / + 8 + j.
__device__ __forceinline__ void accumulate_pv(float (&o)[8][4], uint32_t s_p_tile, const uint8_t* raw, int warp, int lane,
                                              int valid) {
  const int g = (lane >> 2) & 7, t4 = lane & 3;
  const uint8_t* v = raw + 64 * warp + 8 * g;
#pragma unroll
  for (int ks = 0; ks < kBlockN / 16; ++ks) {
    uint32_t a[4];
    decode::ldmatrix_x4(a, s_p_tile + decode::swizzle(lane & 15, 2 * ks + (lane >> 4), kPRowBytes));
    const int t0 = 16 * ks + 2 * t4;
    uint2 w[4];
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      const int t = t0 + (x & 1) + 8 * (x >> 1);
      w[x] = t < valid ? *reinterpret_cast<const uint2*>(v + t * kTokenBytes) : make_uint2(0u, 0u);
    }
#pragma unroll
    for (int hw = 0; hw < 2; ++hw) {  // dims 0-3 (.x) and 4-7 (.y) of the thread's 8
      const uint32_t ab = hw ? w[0].y : w[0].x, bb = hw ? w[1].y : w[1].x;
      const uint32_t cb = hw ? w[2].y : w[2].x, db = hw ? w[3].y : w[3].x;
      const uint32_t ab01 = byte_perm(ab, bb, 0x5140), ab23 = byte_perm(ab, bb, 0x7362);  // [a0 b0 a1 b1], [a2 b2 a3 b3]
      const uint32_t cd01 = byte_perm(cb, db, 0x5140), cd23 = byte_perm(cb, db, 0x7362);
      mma_f16(o[4 * hw + 0], a, lo16_f16x2(ab01), lo16_f16x2(cd01));
      mma_f16(o[4 * hw + 1], a, hi16_f16x2(ab01), hi16_f16x2(cd01));
      mma_f16(o[4 * hw + 2], a, lo16_f16x2(ab23), lo16_f16x2(cd23));
      mma_f16(o[4 * hw + 3], a, hi16_f16x2(ab23), hi16_f16x2(cd23));
    }
  }
}

__global__ void __launch_bounds__(kThreads, 1) mla_decode_fp8ds_rg1_kernel(const __grid_constant__ DecodeKernelParams p) {
  constexpr Layout L = layout();
  extern __shared__ __align__(1024) uint8_t smem[];
  // The combine grid (programmatic stream serialization) may be scheduled as SMs free up; it waits on
  // griddepcontrol.wait for this grid before reading any result.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
  const uint8_t* raw0 = smem + L.raw;
  const uint32_t s_raw0 = decode::smem_u32(raw0), s_q = decode::smem_u32(smem + L.q), s_p = decode::smem_u32(smem + L.p);
  uint8_t* p_ptr = smem + L.p;
  float* s_max = reinterpret_cast<float*>(smem + L.max);    // [warp][16]
  float4* s_smax = reinterpret_cast<float4*>(smem + L.smax);  // [warp]
  float* s_sum = reinterpret_cast<float*>(smem + L.sum);    // [warp][16]
  float* s_qdiv = reinterpret_cast<float*>(smem + L.qdiv);  // [16]
  const uint32_t bar0 = decode::smem_u32(smem + L.bar);

  const int32_t* rec = p.parts + static_cast<int64_t>(blockIdx.x) * kPlanPartInts;
  const int first_batch = rec[kPartBeginBatch], first_split = rec[kPartFirstSplit];
  PartCursor comp;
  comp.init(p, rec);
  if (!comp.valid()) return;  // an empty part (more CTAs than work)
  if (threadIdx.x == 0) {
    for (int s = 0; s < kSlots; ++s) decode::mbar_init(bar0 + 8 * s, 1);
    decode::mbar_init_fence();
  }
  __syncthreads();
  PartCursor load = comp;
  load.fetch_page(p);
  auto issue = [&](int slot) {  // thread 0: the page under `load` into raw slot `slot`
    const uint32_t bar = bar0 + 8 * slot;
    decode::mbar_expect_tx(bar, kPageBytes);
    decode::bulk_load(s_raw0 + slot * kPageBytes,
                      static_cast<const uint8_t*>(p.kv_cache) + static_cast<int64_t>(load.page) * kPageBytes, kPageBytes,
                      bar);
  };
  decode::load_q_tile<1, false>(p, comp.b, 0, kRows, s_q);
  decode::cp_async_commit();
  if (threadIdx.x == 0) {
    for (int s = 0; s < kSlots && load.valid(); ++s) {
      issue(s);
      load.advance(p);
      load.fetch_page(p);
    }
  }

  // Per-thread constants. S: this thread's B-fragment token (n = g) and its two C-fragment keys
  // (n = 2t4 + e). P.V: tile c_own of columns [64w, 64w + 64).
  const int tok_base = (warp & 3) + 32 * (warp >> 2);
  const uint8_t* k_off = raw0 + (4 * g + tok_base) * kTokenBytes;
  const int tok_c[2] = {8 * t4 + tok_base, 8 * t4 + 4 + tok_base};
  const int c_own = warp >> 1;

  QFrags q;
  float o[8][4];
  float m[2], l[2], u_own;
  auto reset = [&] {
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[j][e] = 0.f;
    m[0] = m[1] = -INFINITY;
    l[0] = l[1] = 0.f;
    u_own = 1.f;
  };
  reset();
  bool q_fresh = true;
  int slot = 0, step = 0;
  uint32_t phase = 0;
  while (comp.valid()) {
    if (q_fresh) {
      decode::cp_async_wait<0>();
      __syncthreads();
      convert_q_tile(smem + L.q, smem + L.qfrag, s_qdiv);
      __syncthreads();
      load_q_frags(q, smem + L.qfrag, s_qdiv, lane);
      q_fresh = false;
    }
    decode::mbar_wait(bar0 + 8 * slot, phase);
    const uint8_t* raw = raw0 + slot * kPageBytes;
    const int valid = comp.seqlen - comp.blk * kBlockN;  // tokens of this page inside the sequence

    float acc[kTiles][4], rope[4];
    scores(acc, rope, q, k_off + slot * kPageBytes, t4);
    // Tile scales of the two C-fragment keys; slots past the sequence end count as scale 0 (garbage there
    // must neither reach P' nor the page's scale unit).
    float4 sc[2];
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      sc[e] = *reinterpret_cast<const float4*>(raw + tok_c[e] * kTokenBytes + kScalesOffset);
      if (tok_c[e] >= valid) sc[e] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    float s[4], mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float4& f = sc[e & 1];
      const float lat = f.x * acc[0][e] + f.y * acc[1][e] + f.z * acc[2][e] + f.w * acc[3][e];
      s[e] = fmaf(lat, q.inv_mul[e >> 1], rope[e]);
      // 16-row tiles have s_q = 1 (rows = h_q = 16): no causal diagonal, only the sequence end.
      if (tok_c[e & 1] >= valid) s[e] = -INFINITY;
      mx[e >> 1] = fmaxf(mx[e >> 1], s[e]);
    }
    float4 smax = make_float4(fmaxf(sc[0].x, sc[1].x), fmaxf(sc[0].y, sc[1].y), fmaxf(sc[0].z, sc[1].z),
                              fmaxf(sc[0].w, sc[1].w));
#pragma unroll
    for (int x = 1; x <= 2; x <<= 1) {
      mx[0] = fmaxf(mx[0], __shfl_xor_sync(0xffffffffu, mx[0], x));
      mx[1] = fmaxf(mx[1], __shfl_xor_sync(0xffffffffu, mx[1], x));
      smax.x = fmaxf(smax.x, __shfl_xor_sync(0xffffffffu, smax.x, x));
      smax.y = fmaxf(smax.y, __shfl_xor_sync(0xffffffffu, smax.y, x));
      smax.z = fmaxf(smax.z, __shfl_xor_sync(0xffffffffu, smax.z, x));
      smax.w = fmaxf(smax.w, __shfl_xor_sync(0xffffffffu, smax.w, x));
    }
    if (t4 == 0) {
      s_max[warp * kRows + g] = mx[0];
      s_max[warp * kRows + g + 8] = mx[1];
    }
    if (lane == 0) s_smax[warp] = smax;
    __syncthreads();  // A: maxima visible; every warp is done with page j - 1 and the previous P'

    if (threadIdx.x == 0 && step > 0 && load.valid()) {
      issue(slot == 0 ? kSlots - 1 : slot - 1);
      load.advance(p);
      load.fetch_page(p);
    }
    float alpha[2], pr[4];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float m_new = m[h];
#pragma unroll
      for (int w = 0; w < kWarps; ++w) m_new = fmaxf(m_new, s_max[w * kRows + g + 8 * h]);
      // A row that has seen no key yet keeps m = -inf; subtract 0 then so exp2 gives 0, not NaN.
      const float m_scaled = m_new == -INFINITY ? 0.f : m_new * p.scale_log2;
      alpha[h] = exp2f(m[h] * p.scale_log2 - m_scaled);
      m[h] = m_new;
      pr[2 * h] = exp2f(fmaf(s[2 * h], p.scale_log2, -m_scaled));
      pr[2 * h + 1] = exp2f(fmaf(s[2 * h + 1], p.scale_log2, -m_scaled));
      l[h] = l[h] * alpha[h] + pr[2 * h] + pr[2 * h + 1];
    }
    float4 pmax = s_smax[0];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) {
      const float4 x = s_smax[w];
      pmax = make_float4(fmaxf(pmax.x, x.x), fmaxf(pmax.y, x.y), fmaxf(pmax.z, x.z), fmaxf(pmax.w, x.w));
    }
    const float u[kTiles] = {scale_unit(pmax.x), scale_unit(pmax.y), scale_unit(pmax.z), scale_unit(pmax.w)};
    const float u_new = c_own == 0 ? u[0] : c_own == 1 ? u[1] : c_own == 2 ? u[2] : u[3];  // (no local array)
    // P'_c = f16(P * (scale_c / u_c)) for every tile, at the P.V logical position of each key (natural
    // token order). scale / u is exact (power of two); P * it rounds once in fp32, then once to f16.
#pragma unroll
    for (int c = 0; c < kTiles; ++c) {
      const float iu = inv_pow2(u[c]);
      const float f0 = (c == 0 ? sc[0].x : c == 1 ? sc[0].y : c == 2 ? sc[0].z : sc[0].w) * iu;
      const float f1 = (c == 0 ? sc[1].x : c == 1 ? sc[1].y : c == 2 ? sc[1].z : sc[1].w) * iu;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = g + 8 * (e >> 1), tok = tok_c[e & 1];
        *reinterpret_cast<__half*>(p_ptr + c * kPTileBytes + decode::swizzle(row, tok >> 3, kPRowBytes) + (tok & 7) * 2) =
            __float2half_rn(pr[e] * ((e & 1) ? f1 : f0));
      }
    }
    // O's tile-c_own columns move from units u_own to u[c_own] (both powers of two: the ratio is exact).
    const float ratio = u_own * inv_pow2(u_new);
    u_own = u_new;
    const float a0 = alpha[0] * ratio, a1 = alpha[1] * ratio;
    __syncthreads();  // B: P' visible

#pragma unroll
    for (int j = 0; j < 8; ++j) {
      o[j][0] *= a0;
      o[j][1] *= a0;
      o[j][2] *= a1;
      o[j][3] *= a1;
    }
    accumulate_pv(o, s_p + c_own * kPTileBytes, raw, warp, lane, valid);

    const bool seg_end = comp.last_of_sequence();
    if (seg_end) {
      const int b = comp.b;
      const int n_splits = p.split_offsets[b + 1] - p.split_offsets[b];
      const int out_slot = p.split_offsets[b] + (b == first_batch ? first_split : 0);
      float lt[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        lt[h] = l[h];
        lt[h] += __shfl_xor_sync(0xffffffffu, lt[h], 1);
        lt[h] += __shfl_xor_sync(0xffffffffu, lt[h], 2);
        if (t4 == 0) s_sum[warp * kRows + g + 8 * h] = lt[h];
      }
      __syncthreads();
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = g + 8 * h;
        float total = 0.f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) total += s_sum[w * kRows + row];
        const float inv = total > 0.f ? u_own / total : 0.f;
        const float lse = total > 0.f ? m[h] * p.softmax_scale + logf(total) : -INFINITY;
        const int col0 = 64 * warp + 16 * t4;
        if (n_splits == 1) {
          uint4 v[2];
          uint32_t* vw = reinterpret_cast<uint32_t*>(v);
#pragma unroll
          for (int j = 0; j < 8; j += 2) {
            const __nv_bfloat162 lo = __floats2bfloat162_rn(o[j][2 * h] * inv, o[j + 1][2 * h] * inv);
            const __nv_bfloat162 hi = __floats2bfloat162_rn(o[j][2 * h + 1] * inv, o[j + 1][2 * h + 1] * inv);
            vw[j / 2] = *reinterpret_cast<const uint32_t*>(&lo);
            vw[4 + j / 2] = *reinterpret_cast<const uint32_t*>(&hi);
          }
          uint4* out = reinterpret_cast<uint4*>(static_cast<uint16_t*>(p.out) +
                                                (static_cast<int64_t>(b) * p.rows + row) * kDimV + col0);
          out[0] = v[0];
          out[1] = v[1];
          if (warp == 0 && t4 == 0) p.lse[static_cast<int64_t>(b) * p.h_q + row] = lse;  // s_q = 1: row = head
        } else {
          float4* dst = reinterpret_cast<float4*>(p.o_accum + (static_cast<int64_t>(out_slot) * p.rows + row) * kDimV + col0);
#pragma unroll
          for (int x = 0; x < 2; ++x) {
            const int e = 2 * h + x;  // x = 0: dims col0 + j; x = 1: col0 + 8 + j
            dst[2 * x] = make_float4(o[0][e] * inv, o[1][e] * inv, o[2][e] * inv, o[3][e] * inv);
            dst[2 * x + 1] = make_float4(o[4][e] * inv, o[5][e] * inv, o[6][e] * inv, o[7][e] * inv);
          }
          if (warp == 0 && t4 == 0) p.lse_accum[static_cast<int64_t>(out_slot) * p.rows + row] = lse;
        }
      }
      reset();
    }
    comp.advance(p);
    if (seg_end && comp.valid()) {
      // Every warp read the Q tile into registers at this segment's first step, before barrier A.
      decode::load_q_tile<1, false>(p, comp.b, 0, kRows, s_q);
      decode::cp_async_commit();
      q_fresh = true;
    }
    if (++slot == kSlots) {
      slot = 0;
      phase ^= 1;
    }
    ++step;
  }
  decode::cp_async_wait<0>();
}

}  // namespace mla::sm90::decode_fp8ds
