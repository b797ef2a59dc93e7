#pragma once
// One fp8 KV page (64 tokens x 576 bytes) into five 128-byte-swizzled slabs of shared memory ([slab][64 rows][128 B],
// the layout the 16-row kernel's wgmma descriptors read). Unhinted (a long part's pages): ONE 3D TMA copy, the cache
// map tmap_kv viewing the cache as (128 bytes, row, slab) with strides (576, 128) (tma_encode.h encode_kv_slabs_3d).
// Five 2D boxes, the form before, stream slower when every SM streams: h16 b128 s8192 -1.7..-2.2 us, s4096
// -0.4..-0.7 (NOTES_plan.md session 16; bench_stream's one-copy-per-page finding of session 14). The 64-row kernel
// lost with it (+0.4..+1.3 us on the h_q 128 rows; no gain again in session 54) and loads its pages as four 2D boxes
// and a rope box (mainloop_ws.cuh issue_page_tma). The fifth slab covers bytes 512..639 of a row, i.e. also the next
// token's first 64 bytes (never read: S stops at byte 576, V at 512); for the cache's very last row that is 64 bytes
// past the tensor, so the cache's last page goes as the five 2D boxes of tmap_kv_rope (the plain [rows, 576] map, its
// fifth box zero-filled by the TMA unit past byte 576), as do the evict-first pages of short parts (tma_page_hint).
#include <cstdint>

#include "ops/cuda/sm90/decode/params.h"
#include "ops/cuda/sm90/decode/tma.h"
#include "ops/cuda/sm90/decode_fp8/config.h"

namespace mla::sm90::decode_fp8 {

// page: the physical page; last_page: the cache's last page (Fp8DecodeParams::last_page). The caller arms `bar`
// for kSlabTileBytes (both forms deliver all five slabs).
__device__ __forceinline__ void tma_page(const decode::DecodeKernelParams& p, int page, int last_page, uint32_t dst,
                                         uint32_t bar) {
  if (page != last_page) {
    decode::tma_load_3d(dst, &p.tmap_kv, bar, 0, page * kBlockN, 0);
  } else {
#pragma unroll
    for (int slab = 0; slab < kSlabs; ++slab)
      decode::tma_load_2d(dst + slab * kSlabBytes, &p.tmap_kv_rope, bar, slab * 128, page * kBlockN);
  }
}

// The same page with an L2 cache policy (ptx.h l2_evict_first_fraction: the short parts' evict-first), as the five
// 2D boxes: with the hint the one 3D copy measured +0.1..+0.6 us on the b32 / b128 s512 rows against these (and
// -0.1 on b1), both forms in one call (NOTES_plan.md session 16, new vs new4).
__device__ __forceinline__ void tma_page_hint(const decode::DecodeKernelParams& p, int page, uint32_t dst, uint32_t bar,
                                              uint64_t policy) {
#pragma unroll
  for (int slab = 0; slab < kSlabs; ++slab)
    decode::tma_load_2d_hint(dst + slab * kSlabBytes, &p.tmap_kv_rope, bar, slab * 128, page * kBlockN, policy);
}

}  // namespace mla::sm90::decode_fp8
