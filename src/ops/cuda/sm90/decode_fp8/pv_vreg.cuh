#pragma once
// P.V of the warp-specialized 64-row fp8 kernel without a V^T copy (WsSchedule::kVreg, kernel_ws.cuh).
//
// 8-bit wgmma has no transposed operands, so O = P V needs V K-major in shared memory (the transpose warps'
// V^T, transpose_ws.cuh: 32 KB read + 32 KB written per page). Computed transposed instead,
//   O^T (256 dims x 64 rows, per consumer warpgroup) = V^T (A: 64 dims x 32 keys, registers) . P^T (B: smem),
// V^T's A fragment is what ldmatrix.trans + two byte permutes give straight from the K page (the mma.sync
// kernel's trick, traits.h), and P (64 rows x 64 keys, K-major) is a valid B operand as it stands. Per page and
// warpgroup: 8 ldmatrix.x4.trans + 32 prmt per thread and 8 wgmma m64n64k32 (A from registers); no transpose
// warps, no V^T stages.
//
// Fragments (warp w of the warpgroup, lane (g, t), m-tile i = dims 256 wg + 64 i .. + 63, k step ks = keys
// 32 ks .. 32 ks + 31):
//   ldmatrix.x4.trans, lane l addressing key 32 ks + l at the 16-byte chunk of dims 256 wg + 64 i + 16 w ..+ 15:
//     r0..r3 = keys +0..7, +8..15, +16..23, +24..31, lane (g, t) holding [V[2t][2g], V[2t][2g+1], V[2t+1][2g],
//     V[2t+1][2g+1]] of each (traits.h);
//   A: a0 = select_even(r0, r1) = dim 2g, keys {2t, 2t+1, 8+2t, 9+2t} at k 4t..4t+3 (the order P is stored in,
//     mainloop_ws.cuh store_p_e4m3), a1 = select_odd(r0, r1) = dim 2g + 1, a2 / a3 the same for keys 16..31:
//     A row g <-> dim 16 w + 2g, row g + 8 <-> dim 16 w + 2g + 1 of the m-tile;
//   D (m64n64, fp32): o[i][4 jn + e] = (dim 256 wg + 64 i + 16 w + 2g, q row 8 jn + 2t + e),
//                     o[i][4 jn + 2 + e] = (the same dim + 1, the same q row).
// So each thread holds 16 q rows (8 jn + 2t + e) and rescales them with 16 alphas per page, read from shared
// memory (s_alpha: exp(m_{j-1} - m_j) per row, written by the page's owner next to its maxima; both warpgroups
// add every page of a segment in order, so their O is always relative to the previous page's max).
#include <cstdint>

#include "ops/cuda/sm90/decode/epilogue.cuh"
#include "ops/cuda/sm90/decode/ptx.h"
#include "ops/cuda/sm90/decode/tma.h"
#include "ops/cuda/sm90/decode/wgmma.h"
#include "ops/cuda/sm90/decode_fp8/config_ws.h"
#include "ops/cuda/sm90/decode_fp8/traits.h"
#include "ops/cuda/sm90/decode_fp8/transpose_ws.cuh"
#include "ops/cuda/sm90/decode_fp8/wgmma_e4m3.h"

namespace mla::sm90::decode_fp8 {

// Per-thread state of a consumer warpgroup in the transposed layout.
struct WsStateT {
  float o[4][32];  // O^T, see above
  float m[2];      // running max of the S-layout rows 16 w + g + 8h (lse)
  float l[2];      // row sums of those rows over the pages this warpgroup computed P for (as WsState)
  __device__ __forceinline__ void reset() {
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int e = 0; e < 32; ++e) o[i][e] = 0.f;
    m[0] = m[1] = -INFINITY;
    l[0] = l[1] = 0.f;
  }
};

// alpha = exp(m_old - m_new) in the exp2 domain; a row that has seen no key (m_new = -inf) subtracts 0, so
// alpha = exp2(-inf) = 0, not NaN.
__device__ __forceinline__ float rescale_factor(float m_old, float m_new, float scale_log2) {
  const float ms = m_new == -INFINITY ? 0.f : m_new * scale_log2;
  return exp2f(m_old * scale_log2 - ms);
}

// O^T_half = O^T_half * alpha + V^T_half P^T for page jj; l likewise plus this warpgroup's own row sums (zero
// for the other warpgroup's page). m_page: the page's running max of the S-layout rows (as its owner used
// it); s_alpha_page: the page's rescale factors of all 64 rows; s_k: the page's K stage; valid_keys: keys of the page below
// seqlen (keys at or past it are zeroed in A: their cache slots may hold NaN codes, and P = 0 times NaN is
// NaN); k_empty: released as soon as V is in registers. Returns after the products are complete.
__device__ __forceinline__ void pv_page_vreg(WsStateT& st, const float (&m_page)[2], const float (&rowsum)[2],
                                             const float* s_alpha_page, uint32_t s_p_page, uint32_t s_k, int valid_keys,
                                             uint32_t k_empty, int wg, int warp, int lane, float scale_log2) {
  const int t = lane & 3;
  // V^T fragments first: their shared-memory reads overlap the rescale below.
  uint32_t a[2][4][4];
#pragma unroll
  for (int ks = 0; ks < 2; ++ks)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      uint32_t r[4];
      decode::ldmatrix_x4_trans(r, s_k + slab_offset(32 * ks + lane, 16 * wg + 4 * i + warp));
      a[ks][i][0] = select_even(r[0], r[1]);
      a[ks][i][1] = select_odd(r[0], r[1]);
      a[ks][i][2] = select_even(r[2], r[3]);
      a[ks][i][3] = select_odd(r[2], r[3]);
    }
  if (valid_keys < kBlockN) {  // the sequence's last page: zero the keys past its end
    uint32_t keep[4];
    tail_keep<true>(keep, valid_keys, t);
#pragma unroll
    for (int ks = 0; ks < 2; ++ks)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        a[ks][i][0] &= keep[2 * ks];
        a[ks][i][1] &= keep[2 * ks];
        a[ks][i][2] &= keep[2 * ks + 1];
        a[ks][i][3] &= keep[2 * ks + 1];
      }
  }
  decode::mbar_arrive(k_empty);  // V is in registers (the owner's S read the page before it signalled P)

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float alpha = rescale_factor(st.m[h], m_page[h], scale_log2);
    st.m[h] = m_page[h];
    st.l[h] = st.l[h] * alpha + rowsum[h];
  }
#pragma unroll
  for (int jn = 0; jn < 8; ++jn) {
    const float2 alpha = *reinterpret_cast<const float2*>(s_alpha_page + 8 * jn + 2 * t);
    const float alpha0 = alpha.x, alpha1 = alpha.y;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      st.o[i][4 * jn] *= alpha0;
      st.o[i][4 * jn + 2] *= alpha0;
      st.o[i][4 * jn + 1] *= alpha1;
      st.o[i][4 * jn + 3] *= alpha1;
    }
  }
  float(&d)[128] = reinterpret_cast<float(&)[128]>(st.o);
  decode::fence_operands(d);
  decode::wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < 2; ++ks)
#pragma unroll
    for (int i = 0; i < 4; ++i)
      wgmma_m64n64k32_e4m3_rs(st.o[i], a[ks][i], decode::make_smem_desc(s_p_page + 32 * ks, 16, 1024));
  decode::wgmma_commit();
  decode::wgmma_wait_all();
  decode::fence_operands(d);
}

// Epilogue of one segment in the transposed layout (both consumer warpgroups, same order: a 256-thread named
// barrier; s_l as in decode::write_segment_ws). out (or the fp32 partial) = O / l * out_scale; lse from the
// S-layout rows.
template <class Traits>
__device__ __forceinline__ void write_segment_vreg(const decode::DecodeKernelParams& p, const WsStateT& st, float* s_l,
                                                   int parity, int b, int slot, bool direct, int tile_row0,
                                                   int valid_rows, float out_scale, int wg, int warp, int lane) {
  const int g = lane >> 2, t = lane & 3;
  float l[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] = st.l[h];
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    if (t == 0) s_l[(parity * 2 + wg) * kRowsPerCta + warp * kRowGroup + g + 8 * h] = l[h];
  }
  decode::named_sync(decode::kBarEpilogue, kWsConsumerThreads);
  if (wg == 0 && t == 0) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row_local = warp * kRowGroup + g + 8 * h;
      if (row_local >= valid_rows) continue;
      const float total = l[h] + s_l[(parity * 2 + 1) * kRowsPerCta + row_local];
      const float lse = total > 0.f ? st.m[h] * p.softmax_scale + logf(total) : -INFINITY;
      const int row = tile_row0 + row_local;
      if (direct) {
        const int i = row / p.h_q, hh = row % p.h_q;
        p.lse[(static_cast<int64_t>(b) * p.h_q + hh) * p.s_q + i] = lse;
      } else {
        p.lse_accum[static_cast<int64_t>(slot) * p.rows + row] = lse;
      }
    }
  }
  const int dim0 = wg * (kDimV / 2) + 16 * warp + 2 * g;  // + 64 i: this thread's dim pair in m-tile i
#pragma unroll
  for (int jn = 0; jn < 8; ++jn)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int n = 8 * jn + 2 * t + e;
      if (n >= valid_rows) continue;
      const float total = s_l[(parity * 2) * kRowsPerCta + n] + s_l[(parity * 2 + 1) * kRowsPerCta + n];
      const float inv = total > 0.f ? out_scale / total : 0.f;
      const int64_t row = tile_row0 + n;
      if (direct) {
        uint16_t* out = static_cast<uint16_t*>(p.out) + (static_cast<int64_t>(b) * p.rows + row) * kDimV + dim0;
#pragma unroll
        for (int i = 0; i < 4; ++i)
          *reinterpret_cast<uint32_t*>(out + 64 * i) =
              Traits::pack(st.o[i][4 * jn + e] * inv, st.o[i][4 * jn + 2 + e] * inv);
      } else {
        float* o = p.o_accum + (static_cast<int64_t>(slot) * p.rows + row) * kDimV + dim0;
#pragma unroll
        for (int i = 0; i < 4; ++i)
          *reinterpret_cast<float2*>(o + 64 * i) = make_float2(st.o[i][4 * jn + e] * inv, st.o[i][4 * jn + 2 + e] * inv);
      }
    }
}

}  // namespace mla::sm90::decode_fp8
