#pragma once
// Host entry points of the fp8 decode kernel (one explicit instantiation per .cu in instantiations/)
// and the dispatch the mla_decode launcher calls for KvFormat::kFp8 after validation.
#include <cuda_runtime_api.h>

#include "mla/core/status.h"
#include "mla/ops/plan_decode.h"
#include "ops/cuda/sm90/decode_fp8/config.h"
#include "ops/cuda/sm90/decode_fp8/config_ws.h"
#include "ops/cuda/sm90/decode_fp8/kernel_family.h"
#include "ops/cuda/sm90/decode_fp8/params.h"

namespace mla::sm90::decode_fp8 {

// grid = (num_parts, num_head_tiles); RG = active 16-row groups per CTA (2 or 4; 16-row tiles run
// launch_decode_fp8_h16).
template <int RG>
Status launch_decode_fp8(const Fp8DecodeParams& p, dim3 grid, cudaStream_t stream);

// Warp-specialized 64-row kernel (kernel_ws.cuh), variant S (config_ws.h WsSchedule); p.d.tmap_kv / tmap_kv_rope /
// tmap_q / tmap_out must hold encode_tensor_maps_fp8's maps.
template <class S>
Status launch_decode_fp8_ws(const Fp8DecodeParams& p, dim3 grid, cudaStream_t stream);
// The same kernel without its fused-merge instantiation (p.d.merge_counters must be null: the combine merges), for
// schedules that only run steps merged by the combine (config_ws.h WsSplit).
template <class S>
Status launch_decode_fp8_ws_combined(const Fp8DecodeParams& p, dim3 grid, cudaStream_t stream);

// Scorer-split 64-row kernel (kernel_ws3.cuh, experimental): the same maps as launch_decode_fp8_ws.
Status launch_decode_fp8_ws3(const Fp8DecodeParams& p, dim3 grid, cudaStream_t stream);

// TMA maps of the e4m3 cache ([num_pages * 64, 576] bytes: tmap_kv, and its rope dims as tmap_kv_rope) and q
// ([q_rows, 576] bytes) into p (tensor_maps.cu).
Status encode_tensor_maps_fp8(decode::DecodeKernelParams* p, int64_t num_pages, int64_t q_rows);

// 16-row tiles on wgmma (kernel_h16.cuh; h_q 16, s_q 1): grid = (num_parts, 1); p.d.tmap_kv / tmap_kv_rope / tmap_q
// must hold encode_tensor_maps_fp8_h16's maps (the cache as 3D slabs and as the plain 2D map, page_tma.cuh; q in
// boxes of 16 rows), and p.last_page the cache's last page.
Status launch_decode_fp8_h16(const Fp8DecodeParams& p, dim3 grid, cudaStream_t stream);
Status encode_tensor_maps_fp8_h16(decode::DecodeKernelParams* p, int64_t num_pages, int64_t q_rows);
// 32-row tiles (exactly 32 rows: h_q 32 s_q 1, h_q 16 s_q 2) on the same kernel with two row groups (RG 2): the same
// maps (q in boxes of 16 rows, two per slab of a tile), grid = (num_parts, 1).
Status launch_decode_fp8_n32(const Fp8DecodeParams& p, dim3 grid, cudaStream_t stream);

// Picks the row-group variant from the first head tile's rows, launches decode + the shared combine
// (bf16 output). kp must be filled as for the 16-bit kernel, with softmax_scale / scale_log2 already
// multiplied by q_scale * k_scale; out_scale = k_scale; num_pages = the cache's first dimension; n32: where tiles of
// 32-47 rows run (N32Mode).
Status run_decode_fp8(const decode::DecodeKernelParams& kp, float out_scale, const DecodePlanGeometry& g,
                      int64_t num_pages, N32Mode n32, cudaStream_t stream);

}  // namespace mla::sm90::decode_fp8
