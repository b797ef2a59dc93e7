#pragma once
// Kernel parameters of the decode and combine kernels, passed __grid_constant__. Every pointer is a
// device pointer to a contiguous tensor (validated by the launcher).
#include <cuda.h>

#include <cstdint>

namespace mla::sm90::decode {

struct DecodeKernelParams {
  const void* q;                  // [b, s_q, h_q, 576] 16-bit; row r = i * h_q + h of sequence b
  const void* kv_cache;           // [num_pages, 64, 576] 16-bit
  const int32_t* block_table;     // [b, block_table_stride]
  const int32_t* seqlens;         // [b]
  void* out;                      // [b, s_q, h_q, 512] 16-bit
  float* lse;                     // [b, h_q, s_q]
  float* o_accum;                 // [max_splits, rows, 512] fp32 (bf16 from the fp8 64-row kernel, same offsets):
                                  // normalized partial outputs, columns permuted
                                  // within each 16-column group as the accumulator holds them (partials.h)
  float* lse_accum;               // [max_splits, rows] fp32: natural-log partial lse
  const int32_t* parts;           // [num_parts, kPlanPartInts]
  const int32_t* split_offsets;   // [b + 1]
  int32_t* merge_counters;        // [b, num_head_tiles] zeros, or nullptr: split sequences are merged in the decode
                                  // kernel (fused_merge.cuh), or by the combine grid
  int batch;
  int s_q;
  int h_q;
  int rows;                       // s_q * h_q
  int block_table_stride;
  int causal;                     // 1: row i sees keys < seqlen - s_q + 1 + i
  float softmax_scale;
  float scale_log2;               // softmax_scale * log2(e): scores go through exp2
  int l2_prefetch;                // pages ahead of the shared-memory stages to prefetch into L2 (0: off)
  // Warp-specialized 64-row variant only (encoded by the launcher, see tensor_maps.cu): the cache viewed
  // as 2D [num_pages * 64, 576] and q as [b * s_q * h_q, 576], 16-bit elements, 64 x 64 boxes, 128B swizzle.
  CUtensorMap tmap_kv;
  CUtensorMap tmap_q;
  CUtensorMap tmap_kv_rope;       // fp8_ds: the RoPE bytes of the cache (encode_tensor_maps_fp8ds); the fp8 16-row
                                  // kernel: the plain 2D cache map beside its 3D tmap_kv (decode_fp8/page_tma.cuh);
                                  // the fp8 64-row kernels: the rope bytes as 64 x 64-byte boxes, 64B swizzle;
                                  // the 16-bit 16-row ws kernel: the 3D map in boxes of kN16WsGroupSlabs slabs
  CUtensorMap tmap_out;           // 16-bit out (fp8 too: bf16) as [b][s_q * h_q][512], 64 x 64 boxes, 128B swizzle
#ifdef MLA_DECODE_TIMELINE
  unsigned long long* timeline;   // diagnostics, nullptr = off: per-CTA stamps (mla/ops/decode_timeline.h)
#endif
};

// lse [b, h_q, s_q] of query row `row` (= i * h_q + h) of sequence b: every writer of the final lse (the decode
// epilogues of unsplit segments and the combine) indexes it here.
__device__ __forceinline__ void store_lse(const DecodeKernelParams& p, int b, int row, float lse) {
  const int i = row / p.h_q, h = row % p.h_q;
  p.lse[(static_cast<int64_t>(b) * p.h_q + h) * p.s_q + i] = lse;
}

}  // namespace mla::sm90::decode
