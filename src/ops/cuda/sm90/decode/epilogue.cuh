#pragma once
// Epilogue of one (part, sequence) segment: finish the row sums across the slices of a row group, then
// write either the final result (the sequence has a single split: out + lse directly) or a normalized
// fp32 partial (in the accumulator-following column order of partials.h) and its lse into the split slot,
// for the combine kernel.
#include <cstdint>
#include <type_traits>

#include "ops/cuda/sm90/decode/mainloop.cuh"
#include "ops/cuda/sm90/decode/mainloop_ws.cuh"
#include "ops/cuda/sm90/decode/partials.h"
#include "ops/cuda/sm90/decode/row_end.cuh"

namespace mla::sm90::decode {

// One row half (h) of a 64-row epilogue thread's normalized accumulator tiles into its split slot row o (offset by
// partial_pair_offset of the thread's first column): the pairs of tiles 2c and 2c + 1 as one float4 of the fp32 form
// (partials.h), stored as PT values (PartialValue).
template <int kTiles, class PT>
__device__ __forceinline__ void store_partial_row(PT* o, const float (&acc)[kTiles][4], int h, float inv) {
  static_assert(kTiles % 2 == 0, "tiles pair up into float4 stores");
#pragma unroll
  for (int c = 0; c < kTiles / 2; ++c)
    PartialValue<PT>::st4(o + 16 * c, make_float4(acc[2 * c][2 * h] * inv, acc[2 * c][2 * h + 1] * inv,
                                                  acc[2 * c + 1][2 * h] * inv, acc[2 * c + 1][2 * h + 1] * inv));
}

// Called by every thread of the CTA (contains a barrier). s_sum: [kSlices][64] floats.
template <class Traits, int RG>
__device__ __forceinline__ void write_segment(const DecodeKernelParams& p, RowState<RG>& st, float* s_sum, int b,
                                              int slot, bool direct, int tile_row0, bool active, int rg, int ws,
                                              int lane) {
  using WS = WarpShape<RG>;
  const int g = lane >> 2, t4 = lane & 3;
  float l[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] = st.l[h];
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    if (active && t4 == 0) s_sum[ws * kRowsPerCta + rg * kRowGroup + g + 8 * h] = l[h];
  }
  __syncthreads();
  if (!active) return;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row_local = rg * kRowGroup + g + 8 * h;
    float total = 0.f;
#pragma unroll
    for (int w = 0; w < WS::kSlices; ++w) total += s_sum[w * kRowsPerCta + row_local];
    const bool seen = total > 0.f;
    const float inv = row_inv(seen, total);
    const float lse = row_lse(seen, total, st.m[h] * p.softmax_scale);
    const int row = tile_row0 + row_local;
    const int col0 = ws * WS::kCols + 2 * t4;
    if (direct) {
      uint32_t* out = reinterpret_cast<uint32_t*>(static_cast<uint16_t*>(p.out) +
                                                  (static_cast<int64_t>(b) * p.rows + row) * kDimV + col0);
#pragma unroll
      for (int t = 0; t < WS::kOTiles; ++t) out[t * 4] = Traits::pack(st.o[t][2 * h] * inv, st.o[t][2 * h + 1] * inv);
      if (ws == 0 && t4 == 0) store_lse(p, b, row, lse);
    } else {
      store_partial_row(p.o_accum + (static_cast<int64_t>(slot) * p.rows + row) * kDimV + partial_pair_offset(col0),
                        st.o, h, inv);
      if (ws == 0 && t4 == 0) p.lse_accum[static_cast<int64_t>(slot) * p.rows + row] = lse;
    }
  }
}

// The warp-specialized epilogues (write_segment_ws, write_segment_ws_tma): both consumer warpgroups hold 256
// output columns each and the row sum of the pages they computed P for, both relative to the same final max; the
// two sums add up through s_l ([parity][warpgroup][64], alternating by segment so a fast warpgroup never
// overwrites sums the other has not read yet). This publishes the warpgroup's quad-reduced sums of its two rows
// per thread and waits (a 256-thread named barrier) until the other's are there: both warpgroups call it once per
// segment, in the same order.
__device__ __forceinline__ void ws_publish_row_sums(const WsState& st, float* s_l, int parity, int wg, int warp, int lane,
                                                    float (&l)[2]) {
  const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] = st.l[h];
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    // racecheck: hand-off (s_l for the other warpgroup, ordered by the kBarEpilogue named barrier)
    if (t4 == 0) s_l[(parity * 2 + wg) * kRowsPerCta + warp * kRowGroup + g + 8 * h] = l[h];
  }
  named_sync(kBarEpilogue, kWsConsumerThreads);
}
// Row row_local's sum over both warpgroups, after ws_publish_row_sums (own is this thread's l[h] for that row).
__device__ __forceinline__ float ws_row_total(float own, const float* s_l, int parity, int wg, int row_local) {
  // racecheck: hand-off (read after the kBarEpilogue named barrier)
  return own + s_l[(parity * 2 + (wg ^ 1)) * kRowsPerCta + row_local];
}

// Warp-specialized variant (see ws_publish_row_sums): a direct segment to out / lse, a split one to its slot (bf16
// values with kPartialsBf16: the fp8 kernel, whose combine reads them so).
template <class Traits, bool kPartialsBf16 = false>
__device__ __forceinline__ void write_segment_ws(const DecodeKernelParams& p, const WsState& st, float* s_l, int parity,
                                                 int b, int slot, bool direct, int tile_row0, int valid_rows, int wg,
                                                 int warp, int lane) {
  const int g = lane >> 2, t4 = lane & 3;
  float l[2];
  ws_publish_row_sums(st, s_l, parity, wg, warp, lane, l);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row_local = warp * kRowGroup + g + 8 * h;
    if (row_local >= valid_rows) continue;
    const float total = ws_row_total(l[h], s_l, parity, wg, row_local);
    const bool seen = total > 0.f;
    const float inv = row_inv(seen, total);
    const float lse = row_lse(seen, total, st.m[h] * p.softmax_scale);
    const int row = tile_row0 + row_local;
    const int col0 = wg * (kDimV / 2) + 2 * t4;
    if (direct) {
      uint32_t* out = reinterpret_cast<uint32_t*>(static_cast<uint16_t*>(p.out) +
                                                  (static_cast<int64_t>(b) * p.rows + row) * kDimV + col0);
#pragma unroll
      for (int t = 0; t < 32; ++t) out[t * 4] = Traits::pack(st.o[t][2 * h] * inv, st.o[t][2 * h + 1] * inv);
      if (wg == 0 && t4 == 0) store_lse(p, b, row, lse);
    } else {
      // 16 float4 stores, not the column order's 32 float2.
      using PT = std::conditional_t<kPartialsBf16, __nv_bfloat16, float>;
      store_partial_row(reinterpret_cast<PT*>(p.o_accum) + (static_cast<int64_t>(slot) * p.rows + row) * kDimV +
                            partial_pair_offset(col0),
                        st.o, h, inv);
      if (wg == 0 && t4 == 0) p.lse_accum[static_cast<int64_t>(slot) * p.rows + row] = lse;
    }
  }
}

}  // namespace mla::sm90::decode
