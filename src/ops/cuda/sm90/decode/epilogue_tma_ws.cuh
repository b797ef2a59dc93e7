#pragma once
// The 64-row kernel's direct output (a sequence with one split: `out` + lse) through shared memory and TMA tensor
// stores, instead of 64 four-byte global stores per thread (write_segment_ws's direct branch). The fp8 64-row kernel
// has its own form of it (../decode_fp8/epilogue_out_ws.cuh: where it has room to stage), on this file's TMA helpers.
//
// Why (bench/decode/NOTES.md session 9, h128s, run 3): without its output stores the h_q 128 b128 s512 row runs in
// 48 us instead of 59.5 (b32 s512 25.3 instead of 29.8): the stores and their drain cost ~4.5-5.5 us per epilogue, all
// CTAs storing at once; 8-byte whole-sector stores did not recover it. FlashMLA writes O through shared memory
// with a TMA store.
//
// Where: the stage of the segment's last page. In P.V a consumer warpgroup reads only its own V slabs (4 wg ..
// 4 wg + 3, pv_issue / pv_page_rs) and P (slab 8), and S of that page finished before its P existed, so once this
// warpgroup's own P.V of the page is done it may overwrite its V slabs while the other warpgroup may still read
// its own. Each 64-column box is a slab-shaped 64 rows x 128 B, 128B-swizzled like the TMA-loaded K slabs, so the
// quad's 4-byte writes hit 8 distinct 16-byte bank groups per warp store (as PStoreAddrs's P writes), and the TMA
// unit un-swizzles on the way out. The caller releases the stage only after this returns: the stores have read it.
//
// Rows of the tile past the sequence's rows (valid_rows < 64) are not staged; the tensor map is [batch][rows][512],
// so the store clips them instead of writing the next sequence's rows.
#include <cstdint>

#include "ops/cuda/sm90/decode/epilogue.cuh"  // ws_publish_row_sums, ws_row_total
#include "ops/cuda/sm90/decode/mainloop_ws.cuh"
#include "ops/cuda/sm90/decode/params.h"
#include "ops/cuda/sm90/decode/ptx.h"
#include "ops/cuda/sm90/decode/row_end.cuh"

namespace mla::sm90::decode {

// The 16-bit formats write their direct segments with write_segment_ws_tma (the stage is released after the
// epilogue); fp8_ds's 64-row kernels too since session 49 (-DMLA_FP8DS_TMA_OUT=0: write_segment_ws's global stores,
// for A/B builds). Its stage holds the dequantized bf16 V slabs as the 16-bit formats' does, and its raw bytes land
// there only after the release.
#ifndef MLA_FP8DS_TMA_OUT
#define MLA_FP8DS_TMA_OUT 1
#endif
template <class Traits>
constexpr bool kTmaOutFor = Traits::kFormat != KvFormat::kFp8Ds || MLA_FP8DS_TMA_OUT != 0;

// 3-D tiled TMA store of the box at (c0 column, c1 row, c2 sequence) of `map` from shared memory at src.
__device__ __forceinline__ void tma_store_3d(const CUtensorMap* map, uint32_t src, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(src), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}
__device__ __forceinline__ void bulk_commit_group() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Waits until every committed bulk store of this thread has read its shared-memory source.
__device__ __forceinline__ void bulk_wait_read_all() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }

// write_segment_ws for a direct segment, staged in the stage at s_stage (both consumer warpgroups, same order: it
// contains the 256-thread row-sum exchange, ws_publish_row_sums, and a 128-thread barrier per warpgroup).
template <class Traits>
__device__ __forceinline__ void write_segment_ws_tma(const DecodeKernelParams& p, const WsState& st, float* s_l,
                                                     int parity, int b, int tile_row0, int valid_rows, int wg, int warp,
                                                     int lane, uint32_t s_stage) {
  const int g = lane >> 2, t4 = lane & 3;
  float l[2];
  ws_publish_row_sums(st, s_l, parity, wg, warp, lane, l);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row_local = warp * kRowGroup + g + 8 * h;  // row_local & 7 == g
    if (row_local >= valid_rows) continue;
    const float total = ws_row_total(l[h], s_l, parity, wg, row_local);
    const bool seen = total > 0.f;
    const float inv = row_inv(seen, total);
    // Column 8t + 2 t4 of this warpgroup's 256: box 4 wg + t / 8 (a V slab of the stage), 16-byte chunk t % 8.
    const uint32_t base = s_stage + 4 * wg * kSlabBytes + row_local * 128 + 4 * t4;
#pragma unroll
    for (int t = 0; t < 32; ++t) {
      const uint32_t a = base + (t >> 3) * kSlabBytes + (((t & 7) ^ g) << 4);
      // Every format; fp8_ds: the converters wrote these V slabs, which the warpgroup not owning the page sees through
      // the owner's full-barrier waits and the P-ready bar.arrive -> bar.sync. racecheck: hand-off
      asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(a), "r"(Traits::pack(st.o[t][2 * h] * inv, st.o[t][2 * h + 1] * inv))
                   : "memory");
    }
    if (wg == 0 && t4 == 0)
      store_lse(p, b, tile_row0 + row_local, row_lse(seen, total, st.m[h] * p.softmax_scale));
  }
  fence_proxy_async();  // the staged values (generic proxy) before the TMA unit reads them
  named_sync(kBarWg + wg, 128);
  if ((threadIdx.x & 127) == 0) {
#pragma unroll
    for (int k = 0; k < 4; ++k) tma_store_3d(&p.tmap_out, s_stage + (4 * wg + k) * kSlabBytes, (4 * wg + k) * 64, tile_row0, b);
    bulk_commit_group();
    bulk_wait_read_all();
  }
  named_sync(kBarWg + wg, 128);  // no thread (or warp) releases the stage before the stores read it
}

}  // namespace mla::sm90::decode
