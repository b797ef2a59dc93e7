#pragma once
// Host entry points of the sm90 decode variants (one explicit instantiation per .cu in instantiations/)
// and of the combine kernel. Called by src/ops/cuda/mla_decode.cu after validation.
#include <cuda_runtime_api.h>

#include "mla/core/status.h"
#include "ops/cuda/sm90/decode/params.h"

namespace mla::sm90::decode {

struct Bf16Traits;
struct Fp16Traits;
struct Fp8DsTraits;

// grid = (num_parts, num_head_tiles); RG = active 16-row groups per CTA (1, 2 or 4); kWg: wgmma math
// (RG == 4 only).
template <class Traits, int RG, bool kWg>
Status launch_decode(const DecodeKernelParams& p, dim3 grid, cudaStream_t stream);

// Warp-specialized 64-row variant (kernel_ws.cuh): TMA producer warp + two ping-pong wgmma consumer
// warpgroups. p.tmap_* must be encoded first (encode_tensor_maps). <kPvFirst, kSlabBars> must be <true, true>,
// the one schedule kept (kernel_ws.cuh; the parameters stay so callers name the schedule they rely on).
// plain_out (bf16 / fp16 only, p.merge_counters null): the form that writes direct segments with plain stores instead
// of the TMA-store epilogue (mla_decode.cu, MLA_DECODE_WS64_OUT: `auto` takes it on steps that cut nearly every
// sequence).
template <class Traits, bool kPvFirst, bool kSlabBars>
Status launch_decode_ws(const DecodeKernelParams& p, dim3 grid, cudaStream_t stream, bool plain_out = false);

// Warp-specialized 16-row tiles (kernel_n16ws.cuh; h_q 16, s_q 1: one 16-row tile per CTA). p.tmap_kv from
// encode_tensor_map_kv_slabs16, p.tmap_q from encode_tensor_map_q16 first.
template <class Traits>
Status launch_decode_n16ws(const DecodeKernelParams& p, dim3 grid, cudaStream_t stream);
// p->tmap_q over q as [q_rows, 576] 16-bit, boxes of 16 rows x 64 columns, 128-byte swizzle (the n16ws Q slabs).
Status encode_tensor_map_q16(DecodeKernelParams* p, int64_t q_rows);

// Fills p->tmap_kv ([num_pages * 64, 576]), p->tmap_out and p->tmap_q ([q_rows, 576]) for the warp-specialized variant.
Status encode_tensor_maps(DecodeKernelParams* p, int64_t num_pages, int64_t q_rows);
// p->tmap_out over the 16-bit out [batch, rows, 512] (epilogue_tma_ws.cuh's TMA stores; the fp8 64-row kernel's too).
Status encode_tensor_map_out(DecodeKernelParams* p);
// 16-bit 16-row tiles (pages.cuh TmaPages, kernel_n16ws.cuh): p->tmap_kv over the cache as 3D (64 columns, row, slab),
// a page one box landing slab-major ([9 slabs][64 rows][128 B], 128B swizzle); group_slabs > 0: also p->tmap_kv_rope,
// the same view in boxes of group_slabs slabs (kernel_n16ws.cuh's slab groups, kN16WsGroupSlabs).
Status encode_tensor_map_kv_slabs16(DecodeKernelParams* p, int64_t num_pages, int group_slabs = 0);
// fp8_ds: p->tmap_kv over the cache as bytes [num_pages * 64, 656] (64 x 64-byte boxes, no swizzle: raw
// latent slabs and the scale box), p->tmap_kv_rope over it as 16-bit [num_pages * 64, 328] (64 x 64 boxes,
// 128B swizzle: the RoPE slab), p->tmap_q as above.
Status encode_tensor_maps_fp8ds(DecodeKernelParams* p, int64_t num_pages, int64_t q_rows);

// Merges split partials for sequences with >= 2 splits and writes zeros / -inf for those with none.
// partials_bf16: the decode kernel wrote bf16 partial values (the fp8 64-row kernel; Bf16Traits only, an error for
// Fp16Traits), else fp32.
template <class Traits>
Status launch_combine(const DecodeKernelParams& p, cudaStream_t stream, bool partials_bf16 = false);

}  // namespace mla::sm90::decode
