#pragma once
// gather_and_maybe_dequant_cache_mla: copies the cached context of each sequence out of the paged KV cache
// into one contiguous [Σ len, 576] array (bf16 or fp32), dequantizing fp8 formats on the way. Chunked
// prefill uses it to run kv_b_proj over context that is already cached.
//
//   for sequence b, i in [0, cu_seq_lens[b+1] - cu_seq_lens[b]):
//     t = seq_starts[b] + i   (seq_starts absent: t = i)
//     dst[cu_seq_lens[b] + i, :] = decode_format(cache[block_table[b][t / page_size]][t % page_size])
//
//   bf16 / fp16 : the stored values, converted with round-to-nearest-even (a bit copy when dtypes agree)
//   fp8         : e4m3_to_float(code) * k_scale, then rounded to the output dtype
//   fp8_ds      : kv_c = e4m3_to_float(code) * tile_scale, k_pe = the stored bf16, rounded to the output dtype
//
// dst rows outside [cu_seq_lens[0], cu_seq_lens[b]) are not written.
#include "mla/core/kv_format.h"
#include "mla/core/status.h"
#include "mla/core/stream.h"
#include "mla/core/tensor.h"

namespace mla {

struct GatherCacheMlaParams {
  TensorView kv_cache;     // [pages, page_size, 576] bf16 | fp16 | e4m3, or uint8 [..., 656] (fp8_ds); contiguous
  TensorView dst;          // [n_rows >= Σ len, 576] bf16 | fp32, contiguous
  TensorView block_table;  // [b, max_pages] int32, contiguous
  TensorView cu_seq_lens;  // [b + 1] int32, non-decreasing, cu_seq_lens[b] <= n_rows
  TensorView seq_starts;   // [b] int32 >= 0, optional (rank 0 = absent): first cached token to gather
  KvFormat format = KvFormat::kBf16;
  float k_scale = 1.f;     // fp8 only: finite and > 0
};

// Host-side checks shared by every backend: dtypes, ranks, shapes, contiguity, page size (16, 32, 64), null
// pointers, k_scale. Data checks (cu_seq_lens order, seq_starts >= 0, pages in the block table and in the
// cache) run in the reference; the kernel, which cannot report them, skips rows whose page is out of range.
Status validate_gather_cache_mla(const GatherCacheMlaParams& p);

namespace ref {
Status gather_and_maybe_dequant_cache_mla(const GatherCacheMlaParams& p);  // host pointers
}  // namespace ref

namespace cuda {
// Device pointers; one warp per 32 dst rows; no allocation, no host sync (graph-capturable).
Status gather_and_maybe_dequant_cache_mla(const GatherCacheMlaParams& p, Stream stream);
}  // namespace cuda

}  // namespace mla
