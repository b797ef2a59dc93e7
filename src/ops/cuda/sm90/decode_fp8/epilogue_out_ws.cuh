#pragma once
// The fp8 64-row kernel's direct output (a sequence with one split: bf16 `out` + lse) through shared memory and TMA
// tensor stores (session 49), the fp8 form of ../decode/epilogue_tma_ws.cuh: the 4-byte global stores of
// write_segment_ws cost the 16-bit kernel ~4.5-5.5 us per epilogue before it staged them (NOTES.md session 9).
//
// Room: the 16-bit kernel stages in the stage of the segment's last page, which it releases after the epilogue. This
// kernel releases a K stage right after S, so at a sequence switch both K stages already hold the next segment's
// pages, and no 64 KB are free. So:
//   rounds 1: the part's last segment. All 8 boxes in the K stages (kernel_ws.cuh passes them once the part is done),
//     warpgroup w's in slots 4 w .. 4 w + 3; one round of stores.
//   rounds 2: a segment followed by another. Each warpgroup has two 8 KB slots of its own (kernel_ws.cuh's out_stage
//     says which) and fills and stores them twice: boxes 0-1 of its 256 columns, then 2-3 once the first two stores
//     have read the slots.
// A box is 64 columns x 64 rows of bf16 (128 B rows, 128B-swizzled like a K slab), as the 16-bit kernel's.
//
// Registers: one staging loop serves both forms (rounds is a run-time value), and the swizzle is an XOR with an
// immediate on the row's address (its bits 4-6 are the chunk's), so the loop keeps one address live, not eight.
#include <cstdint>

#include "ops/cuda/sm90/decode/epilogue.cuh"         // ws_publish_row_sums, ws_row_total
#include "ops/cuda/sm90/decode/epilogue_tma_ws.cuh"  // tma_store_3d, bulk_commit_group, bulk_wait_read_all
#include "ops/cuda/sm90/decode/mainloop_ws.cuh"      // WsState, kBarWg, kSlabBytes (a 64 x 64 bf16 box)
#include "ops/cuda/sm90/decode/params.h"             // store_lse
#include "ops/cuda/sm90/decode/row_end.cuh"          // row_inv, row_lse
#include "ops/cuda/sm90/decode/tma.h"                // named_sync
#include "ops/cuda/sm90/decode/traits.h"             // Bf16Traits
#include "ops/cuda/sm90/decode/wgmma.h"              // fence_proxy_async
#include "ops/cuda/sm90/decode_fp8/config_ws.h"       // MLA_FP8_WS_KO

namespace mla::sm90::decode_fp8 {

// write_segment_ws for a direct segment of the fp8 kernel (both consumer warpgroups, same order: the 256-thread
// row-sum exchange of ws_publish_row_sums, then 128-thread barriers per warpgroup). s_stage: the 8 slots of rounds 1,
// or this warpgroup's 2 slots of rounds 2 (1024-byte aligned). out = O / l * out_scale (k_scale).
// Knock-outs of a switch's epilogue (rounds 2 only; kernel_ws.cuh MLA_FP8_WS_KO, wrong results by design): 1024 the
// issuing thread does not wait for the stores' reads of the slots (what the two read latencies on the path cost);
// 2048 nothing is staged or stored (the row-sum exchange, the lse and every barrier kept: what the staging and the
// stores cost beyond the exchange).
__device__ __forceinline__ void write_out_staged(const decode::DecodeKernelParams& p, const decode::WsState& st,
                                                 float* s_l, int parity, int b, int tile_row0, int valid_rows, int wg,
                                                 int warp, int lane, uint32_t s_stage, int rounds,
                                                 float out_scale) {
  using decode::kSlabBytes;
  const int g = lane >> 2, t4 = lane & 3;
  const uint32_t slots = rounds == 1 ? s_stage + 4 * wg * kSlabBytes : s_stage;
  const int slot_mask = rounds == 1 ? 3 : 1;  // box k's slot: k & slot_mask
  float l[2], inv[2];
  decode::ws_publish_row_sums(st, s_l, parity, wg, warp, lane, l);
#pragma unroll
  for (int half = 0; half < 2; ++half) {  // boxes 2 half and 2 half + 1
    if (half == 1 && rounds == 2) decode::named_sync(decode::kBarWg + wg, 128);  // first half's stores read the slots
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row_local = warp * decode::kRowGroup + g + 8 * h;  // row_local & 7 == g
      if (row_local >= valid_rows) continue;
      const float total = half == 0 ? decode::ws_row_total(l[h], s_l, parity, wg, row_local) : 0.f;
      // k_scale folded in (O holds P times raw V)
      if (half == 0) inv[h] = decode::row_inv(total > 0.f, total, out_scale);
      // Column 8t + 2 t4 of this warpgroup's 256: box t / 8, at chunk (t % 8) ^ g of its row.
      const uint32_t row = slots + row_local * 128 + 4 * t4 + (g << 4);
#pragma unroll
      for (int t = 16 * half; t < 16 * half + 16; ++t) {
        if ((MLA_FP8_WS_KO & 2048) != 0 && rounds == 2) break;
        const uint32_t a = (row + ((t >> 3) & slot_mask) * kSlabBytes) ^ ((t & 7) << 4);
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(a),
                     "r"(decode::Bf16Traits::pack(st.o[t][2 * h] * inv[h], st.o[t][2 * h + 1] * inv[h]))
                     : "memory");
      }
      if (half == 0 && wg == 0 && t4 == 0)
        decode::store_lse(p, b, tile_row0 + row_local,
                          decode::row_lse(total > 0.f, total, st.m[h] * p.softmax_scale));
    }
    if (half == 0 && rounds == 1) continue;  // both halves go out together
    decode::fence_proxy_async();  // the staged values (generic proxy) before the TMA unit reads them
    decode::named_sync(decode::kBarWg + wg, 128);
    if ((threadIdx.x & 127) == 0 && ((MLA_FP8_WS_KO & 2048) == 0 || rounds == 1)) {
      for (int k = rounds == 1 ? 0 : 2 * half; k < 2 * half + 2; ++k)
        decode::tma_store_3d(&p.tmap_out, slots + (k & slot_mask) * kSlabBytes, (4 * wg + k) * 64, tile_row0, b);
      decode::bulk_commit_group();
      if ((MLA_FP8_WS_KO & 1024) == 0 || rounds == 1) decode::bulk_wait_read_all();
    }
  }
  decode::named_sync(decode::kBarWg + wg, 128);  // no warp reuses the slots before the stores have read them
}

}  // namespace mla::sm90::decode_fp8
