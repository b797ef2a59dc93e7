#pragma once
// Per-page math of the 16-row wgmma kernel (kernel_h16.cuh, constants in config_h16.h).
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

#include "ops/cuda/sm90/decode/handoff_n16.cuh"
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
__device__ __forceinline__ void issue_scores_t(float (&s)[8], uint32_t s_k, uint32_t s_q) {
#pragma unroll
  for (int i = 0; i < 8; ++i) s[i] = 0.f;
  decode::fence_operands(s);
  decode::wgmma_fence();
  uint64_t da = decode::make_smem_desc(s_k, 16, 1024);
  uint64_t db = decode::make_smem_desc(s_q, 16, 1024);
#pragma unroll
  for (int slab = 0; slab < kDimQK / 128; ++slab) {
#pragma unroll
    for (int k = 0; k < 4; ++k) wgmma_m64n16k32_ss(s, da + 2 * k, db + 2 * k);
    da += kSlabBytes >> 4;
    db += kQSlabBytes >> 4;
  }
  static_assert(kDimQK % 128 == 64, "the fifth slab holds 64 bytes: two k32 steps");
  wgmma_m64n16k32_ss(s, da, db);
  wgmma_m64n16k32_ss(s, da + 2, db + 2);
  decode::wgmma_commit();
}

// issue_scores_t with the 18 k32 steps alternating between two accumulators (even steps into s, odd into s2), so
// consecutive wgmmas do not depend on each other's result; the caller waits, then adds s2 into s.
__device__ __forceinline__ void issue_scores_t2(float (&s)[8], float (&s2)[8], uint32_t s_k, uint32_t s_q) {
#pragma unroll
  for (int i = 0; i < 8; ++i) s[i] = 0.f, s2[i] = 0.f;
  decode::fence_operands(s);
  decode::fence_operands(s2);
  decode::wgmma_fence();
  uint64_t da = decode::make_smem_desc(s_k, 16, 1024);
  uint64_t db = decode::make_smem_desc(s_q, 16, 1024);
#pragma unroll
  for (int slab = 0; slab < kDimQK / 128; ++slab) {
    wgmma_m64n16k32_ss(s, da, db);
    wgmma_m64n16k32_ss(s2, da + 2, db + 2);
    wgmma_m64n16k32_ss(s, da + 4, db + 4);
    wgmma_m64n16k32_ss(s2, da + 6, db + 6);
    da += kSlabBytes >> 4;
    db += kQSlabBytes >> 4;
  }
  wgmma_m64n16k32_ss(s, da, db);
  wgmma_m64n16k32_ss(s2, da + 2, db + 2);
  decode::wgmma_commit();
}

// issue_scores_t with the descriptors built inside one asm block from two 32-bit bases: the 18 descriptors of a
// page differ from the stage's / Q slot's first ones only in the address field (low 14 bits of the low word, no
// carry: shared addresses < 228 KB), and their high word (sbo 1024, 128B swizzle) is one constant. Written in C++
// (64-bit desc + offset), ptxas re-built both 64-bit descriptors per wgmma in vector registers (LOP3, MOV of the
// high word, four R2UR: ~10 instructions per wgmma, ~45 % of the scorer's instructions; run H7's ncu).
__device__ __forceinline__ void issue_scores_t_fast(float (&s)[8], uint32_t s_k, uint32_t s_q) {
#pragma unroll
  for (int i = 0; i < 8; ++i) s[i] = 0.f;
  decode::fence_operands(s);
  decode::wgmma_fence();
  const uint32_t lo_k = ((s_k & 0x3FFFFu) >> 4) | (1u << 16), lo_q = ((s_q & 0x3FFFFu) >> 4) | (1u << 16);
  static_assert(kSlabBytes == 8192 && kQSlabBytes == 2048 && kDimQK == 576, "offsets below: 512 / 128 per slab");
  asm volatile(
      "{\n.reg .b32 la, lb, hi;\n.reg .b64 da, db;\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\nmov.b32 hi, 0x40000040;\n"
      "add.u32 la, %8, 0; add.u32 lb, %9, 0; mov.b64 da, {la, hi}; mov.b64 db, {lb, hi};\n"
      "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7}, da, db, p, 1, 1;\n"
      "add.u32 la, %8, 2; add.u32 lb, %9, 2; mov.b64 da, {la, hi}; mov.b64 db, {lb, hi};\n"
      "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7}, da, db, p, 1, 1;\n"
      "add.u32 la, %8, 4; add.u32 lb, %9, 4; mov.b64 da, {la, hi}; mov.b64 db, {lb, hi};\n"
      "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7}, da, db, p, 1, 1;\n"
      "add.u32 la, %8, 6; add.u32 lb, %9, 6; mov.b64 da, {la, hi}; mov.b64 db, {lb, hi};\n"
      "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7}, da, db, p, 1, 1;\n"
      "add.u32 la, %8, 512; add.u32 lb, %9, 128; mov.b64 da, {la, hi}; mov.b64 db, {lb, hi};\n"
      "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7}, da, db, p, 1, 1;\n"
      "add.u32 la, %8, 514; add.u32 lb, %9, 130; mov.b64 da, {la, hi}; mov.b64 db, {lb, hi};\n"
      "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7}, da, db, p, 1, 1;\n"
      "add.u32 la, %8, 516; add.u32 lb, %9, 132; mov.b64 da, {la, hi}; mov.b64 db, {lb, hi};\n"
      "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7}, da, db, p, 1, 1;\n"
      "add.u32 la, %8, 518; add.u32 lb, %9, 134; mov.b64 da, {la, hi}; mov.b64 db, {lb, hi};\n"
      "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7}, da, db, p, 1, 1;\n"
      "add.u32 la, %8, 1024; add.u32 lb, %9, 256; mov.b64 da, {la, hi}; mov.b64 db, {lb, hi};\n"
      "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7}, da, db, p, 1, 1;\n"
      "add.u32 la, %8, 1026; add.u32 lb, %9, 258; mov.b64 da, {la, hi}; mov.b64 db, {lb, hi};\n"
      "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7}, da, db, p, 1, 1;\n"
      "add.u32 la, %8, 1028; add.u32 lb, %9, 260; mov.b64 da, {la, hi}; mov.b64 db, {lb, hi};\n"
      "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7}, da, db, p, 1, 1;\n"
      "add.u32 la, %8, 1030; add.u32 lb, %9, 262; mov.b64 da, {la, hi}; mov.b64 db, {lb, hi};\n"
      "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7}, da, db, p, 1, 1;\n"
      "add.u32 la, %8, 1536; add.u32 lb, %9, 384; mov.b64 da, {la, hi}; mov.b64 db, {lb, hi};\n"
      "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7}, da, db, p, 1, 1;\n"
      "add.u32 la, %8, 1538; add.u32 lb, %9, 386; mov.b64 da, {la, hi}; mov.b64 db, {lb, hi};\n"
      "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7}, da, db, p, 1, 1;\n"
      "add.u32 la, %8, 1540; add.u32 lb, %9, 388; mov.b64 da, {la, hi}; mov.b64 db, {lb, hi};\n"
      "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7}, da, db, p, 1, 1;\n"
      "add.u32 la, %8, 1542; add.u32 lb, %9, 390; mov.b64 da, {la, hi}; mov.b64 db, {lb, hi};\n"
      "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7}, da, db, p, 1, 1;\n"
      "add.u32 la, %8, 2048; add.u32 lb, %9, 512; mov.b64 da, {la, hi}; mov.b64 db, {lb, hi};\n"
      "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7}, da, db, p, 1, 1;\n"
      "add.u32 la, %8, 2050; add.u32 lb, %9, 514; mov.b64 da, {la, hi}; mov.b64 db, {lb, hi};\n"
      "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7}, da, db, p, 1, 1;\n"
      "}\n"
      : "+f"(s[0]), "+f"(s[1]), "+f"(s[2]), "+f"(s[3]), "+f"(s[4]), "+f"(s[5]), "+f"(s[6]), "+f"(s[7])
      : "r"(lo_k), "r"(lo_q), "r"(1));
  decode::wgmma_commit();
}

// Scorer state of one thread: running max (raw scores) and its share of the running sum, for rows r = 2j + e.
struct ScorerState {
  float m[4];
  float l[4];
  __device__ __forceinline__ void reset() {
#pragma unroll
    for (int r = 0; r < 4; ++r) m[r] = -INFINITY, l[r] = 0.f;
  }
};

// 2^x with subnormal results flushed to zero: exp2f compiles to ex2.approx.f32 plus a range fix for results below
// 2^-126 (three more instructions per call, 12 calls per page and thread). A P below 2^-126 is 0 in e4m3 anyway
// (smallest subnormal 2^-9), and an alpha that small is 0 against the page's new terms (>= 2^-8 with the lazy max).
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// decode::n16::exp_and_row_sums with exp2_ftz.
__device__ __forceinline__ void exp_and_row_sums_ftz(const float (&s)[8], float (&pr)[8], float (&l)[4],
                                                     const float (&alpha)[4], const float (&m_scaled)[4],
                                                     float scale_log2) {
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int i = decode::n16::elem_of(r);
    pr[i] = exp2_ftz(fmaf(s[i], scale_log2, -m_scaled[r]));
    pr[i + 2] = exp2_ftz(fmaf(s[i + 2], scale_log2, -m_scaled[r]));
    l[r] = l[r] * alpha[r] + (pr[i] + pr[i + 2]);
  }
}

// update_row_max (handoff_n16.cuh) with a lazy max: a row keeps its max until a page raises it by more than
// kLazyMaxLog2 in the exp2 domain, so its P values are at most 2^kLazyMaxLog2 = 256 (< 448, e4m3's largest finite:
// no saturation; a larger P only moves values away from e4m3's subnormals) and alpha stays exactly 1 on most
// pages, which lets the accumulator skip its O rescale. l and the segment's mfin use the kept max consistently.
constexpr float kLazyMaxLog2 = 8.f;
template <bool kFtz>
__device__ __forceinline__ void update_row_max_lazy(const float* red, float (&m)[4], float (&alpha)[4],
                                                    float (&m_scaled)[4], float scale_log2, int t) {
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const float4 v = *reinterpret_cast<const float4*>(red + decode::n16::row_of(r, t) * 4);
    const float m_new = fmaxf(fmaxf(m[r], fmaxf(v.x, v.y)), fmaxf(v.z, v.w));
    // -inf (no key seen yet) never keeps: the first finite max is taken as in update_row_max.
    const bool keep = m[r] != -INFINITY && !(m_new * scale_log2 > fmaf(m[r], scale_log2, kLazyMaxLog2));
    const float m_use = keep ? m[r] : m_new;
    m_scaled[r] = m_use == -INFINITY ? 0.f : m_use * scale_log2;
    const float x = m[r] * scale_log2 - m_scaled[r];
    alpha[r] = keep ? 1.f : (kFtz ? exp2_ftz(x) : exp2f(x));
    m[r] = m_use;
  }
}

// Masks keys at or past `limit` (page-local) to -inf and returns this thread's row maxima over the warp's 16 keys.
__device__ __forceinline__ void mask_and_warp_max(float (&s)[8], float (&mx)[4], int limit, int w, int g) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (16 * w + g + 8 * h >= limit) {
#pragma unroll
      for (int j = 0; j < 2; ++j) s[4 * j + 2 * h] = s[4 * j + 2 * h + 1] = -INFINITY;
    }
  }
#pragma unroll
  for (int j = 0; j < 2; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      float v = fmaxf(s[4 * j + e], s[4 * j + 2 + e]);
      v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 4));
      v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 8));
      mx[2 * j + e] = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 16));
    }
}

// Byte address of P^T(row, key) in a P buffer: row-major 128-byte rows, 128B swizzle (chunk ^ row % 8), the key at
// its kappa position.
__device__ __forceinline__ uint32_t p_byte(uint32_t s_p, int row, int key) {
  const int pos = p_position(key);
  return s_p + row * 128 + ((((pos >> 4) ^ row) & 7) << 4) + (pos & 15);
}

__device__ __forceinline__ void st_shared_u8(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.u8 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}

// P^T of one page into a P buffer as two 32-bit stores per thread (instead of 8 byte stores): a row's word at
// kappa 4m .. 4m + 3 holds keys 16w + 2m, 16w + 2m + 1, 16w + 2m + 8, 16w + 2m + 9, i.e. the low / high bytes of
// the pairs of the lanes g = 2m and 2m + 1 (lane ^ 4). One shuffle swaps halves: the even lane writes the rows
// 8j + 2t, the odd lane the rows 8j + 2t + 1. Per store the warp covers 8 rows (8 distinct chunks after the
// swizzle) x 4 words: 32 distinct banks.
__device__ __forceinline__ void store_p_packed(uint32_t s_pb, const float (&pr)[8], int w, int g, int t) {
  uint32_t two[4];  // [2 j + e]: keys 16w + g (low byte), 16w + g + 8 (high byte) of row 8j + 2t + e
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

// O^T (this thread's 8 M tiles) += V^T . P^T for one page. vf: A fragments [k32 step][M tile], built by
// load_v_frags; s_pb: the P buffer.
// Split in issue / wait so that the caller can run other work (the page stream) while the tensor cores work.
__device__ __forceinline__ void issue_pv_t(float (&o)[8][8], const uint32_t (&vf)[2][8][4], uint32_t s_pb) {
  decode::wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < 2; ++ks) {
    const uint64_t db = decode::make_smem_desc(s_pb + ks * 32, 16, 1024);
#pragma unroll
    for (int i = 0; i < 8; ++i) wgmma_m64n16k32_rs(o[i], vf[ks][i], db);
  }
  decode::wgmma_commit();
}
__device__ __forceinline__ void wait_pv_t(float (&o)[8][8]) {
  decode::wgmma_wait_all();
#pragma unroll
  for (int i = 0; i < 8; ++i) decode::fence_operands(o[i]);
}
__device__ __forceinline__ void accumulate_pv_t(float (&o)[8][8], const uint32_t (&vf)[2][8][4], uint32_t s_pb) {
  issue_pv_t(o, vf, s_pb);
  wait_pv_t(o);
}

// Pins the fragments' computation before this point: a prmt the compiler sinks past wgmma_fence would make ptxas
// inject a warpgroup.arrive between the P.V wgmmas (serializing them).
__device__ __forceinline__ void fence_frags(uint32_t (&vf)[2][8][4]) {
#pragma unroll
  for (int ks = 0; ks < 2; ++ks)
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int r = 0; r < 4; ++r) asm volatile("" : "+r"(vf[ks][i][r])::"memory");
}

// V^T A fragments of a page in the slab layout: for k32 step ks and M tile i, one ldmatrix.x4.trans of keys
// 32ks + lane at chunk 4i + w (matrix q = keys 32ks + 8q ..), then the even/odd selects. Keys at or past
// `limit` become zeros (their cache slots hold garbage, and P = 0 times NaN would still be NaN).
__device__ __forceinline__ void load_v_frags(uint32_t (&vf)[2][8][4], uint32_t s_stage, int limit, int w, int lane) {
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
    for (int i = 0; i < 8; ++i) {
      uint32_t v[4];
      decode::ldmatrix_x4_trans(v, s_stage + slab_offset(key, 4 * i + w));
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
