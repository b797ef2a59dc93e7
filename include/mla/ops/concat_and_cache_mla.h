#pragma once
// concat_and_cache_mla: writes each new token's latent (kv_c, 512) and RoPE key (k_pe, 64) into its slot
// of the paged KV cache, in the cache's format (DESIGN.md §3, bytes in docs/kv_cache_formats.md).
//
//   slot = slot_mapping[i]; slot < 0: token i is padding and nothing is written.
//   page = slot / page_size, row = slot % page_size
//   cache[page][row] = encode_format([kv_c[i, :] | k_pe[i, :]])
//
//   bf16 / fp16 : 576 values converted with round-to-nearest-even (a bit copy when the dtypes agree)
//   fp8         : 576 x e4m3 = satfinite_rne(x / k_scale), the division an IEEE float division
//   fp8_ds      : per 128-value tile of kv_c: amax = max |x| over the tile's finite values,
//                 scale = amax / 448 (1.0 when that is 0), code = satfinite_rne(x / scale); the four fp32
//                 scales at byte 512; k_pe as 64 x bf16 at byte 528
#include "mla/core/kv_format.h"
#include "mla/core/status.h"
#include "mla/core/stream.h"
#include "mla/core/tensor.h"

namespace mla {

struct ConcatAndCacheMlaParams {
  TensorView kv_c;          // [t, 512] bf16 | fp16 | fp32; rows may be strided (a split of [t, 576]), dim 1 packed
  TensorView k_pe;          // [t, 64], same dtype as kv_c; rows may be strided, last dim unit stride
  TensorView kv_cache;      // [pages, page_size, 576] bf16 | fp16 | e4m3, or uint8 [..., 656] (fp8_ds); contiguous
  TensorView slot_mapping;  // [t] int64: page * page_size + row, or < 0 to skip
  KvFormat format = KvFormat::kBf16;
  float k_scale = 1.f;      // fp8 only: finite and > 0
};

// Host-side checks shared by every backend: dtypes, ranks, shapes, strides, 16-byte alignment of the rows,
// page size (16, 32 or 64), null pointers, k_scale. Slot values are data: the reference rejects a slot
// >= num_pages * page_size; the kernel cannot report it and skips such a slot instead of writing out of bounds.
Status validate_concat_and_cache_mla(const ConcatAndCacheMlaParams& p);

namespace ref {
// All pointers are host pointers.
Status concat_and_cache_mla(const ConcatAndCacheMlaParams& p);
}  // namespace ref

namespace cuda {
// All pointers are device pointers. One warp per token; no allocation, no host sync (graph-capturable).
Status concat_and_cache_mla(const ConcatAndCacheMlaParams& p, Stream stream);
}  // namespace cuda

}  // namespace mla
