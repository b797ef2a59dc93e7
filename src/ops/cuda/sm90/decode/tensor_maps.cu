// Host side of the warp-specialized (TMA) variant: tensor maps for the KV cache and q, encoded per call (they hold the
// base addresses) through the driver entry point, so nothing links against libcuda directly.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cudaTypedefs.h>

#include <string>

#include "mla/core/cuda_check.h"
#include "mla/core/mla_shapes.h"
#include "ops/cuda/sm90/decode/config.h"
#include "ops/cuda/sm90/decode/launch.h"
#include "ops/cuda/sm90/tma_encode.h"

namespace mla::sm90::decode {
namespace {

// 2D map [rows, cols] of `type` elements, rows `row_bytes` apart, boxes of `box_rows` rows x `box_cols`.
struct MapSpec {
  CUtensorMapDataType type;
  int64_t cols, row_bytes;
  uint32_t box_cols;
  CUtensorMapSwizzle swizzle;
  uint32_t box_rows = kBlockN;
};

Status encode(CUtensorMap* map, const void* base, int64_t rows, const MapSpec& m, const char* what,
              CUtensorMapL2promotion promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_256B) {
  auto fn = tensor_map_encode_fn();
  if (fn == nullptr) return Status::cuda("mla_decode", "cuTensorMapEncodeTiled is not available from the driver");
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(m.cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(m.row_bytes)};
  const cuuint32_t box[2] = {m.box_cols, m.box_rows};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = fn(map, m.type, 2, const_cast<void*>(base), dims, strides, box, elem_strides,
                        CU_TENSOR_MAP_INTERLEAVE_NONE, m.swizzle, promotion, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return Status::cuda("mla_decode", std::string("cuTensorMapEncodeTiled(") + what + ") failed with CUresult " +
                                          std::to_string(static_cast<int>(r)));
  return Status::ok();
}

// [rows, 576] 16-bit, boxes of 64 rows x 64 columns (128 bytes: the swizzle span), 128-byte swizzle.
constexpr MapSpec kRows16{CU_TENSOR_MAP_DATA_TYPE_UINT16, kDimQK, kRowBytes, 64, CU_TENSOR_MAP_SWIZZLE_128B};
// The same with boxes of 16 rows: a 16-row tile's Q slabs (kernel_n16ws.cuh).
constexpr MapSpec kRows16Box16{CU_TENSOR_MAP_DATA_TYPE_UINT16, kDimQK, kRowBytes, 64, CU_TENSOR_MAP_SWIZZLE_128B, 16};
// fp8_ds tokens as bytes: 64-byte boxes land as 64 rows x 64 bytes, unswizzled (raw latent slab, scale box).
constexpr MapSpec kFp8DsBytes{CU_TENSOR_MAP_DATA_TYPE_UINT8, kFp8DsTokenBytes, kFp8DsTokenBytes, 64,
                              CU_TENSOR_MAP_SWIZZLE_NONE};
// fp8_ds tokens as 16-bit words: the 64 bf16 RoPE values (word 264 on) land as one 128B-swizzled slab.
constexpr MapSpec kFp8DsWords{CU_TENSOR_MAP_DATA_TYPE_UINT16, kFp8DsTokenBytes / 2, kFp8DsTokenBytes, 64,
                              CU_TENSOR_MAP_SWIZZLE_128B};

}  // namespace

// 16-bit out [batch, rows, 512] as a 3-D map (columns, rows, sequence), boxes of 64 columns x 64 rows x 1 sequence,
// 128-byte swizzle: a 64-row tile's TMA store clips at its sequence's last row (epilogue_tma_ws.cuh).
Status encode_tensor_map_out(DecodeKernelParams* p) {
  const int64_t rows = p->rows, batch = p->batch;
  auto fn = tensor_map_encode_fn();
  if (fn == nullptr) return Status::cuda("mla_decode", "cuTensorMapEncodeTiled is not available from the driver");
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(kDimV), static_cast<cuuint64_t>(rows),
                              static_cast<cuuint64_t>(batch)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(kDimV) * 2, static_cast<cuuint64_t>(rows) * kDimV * 2};
  const cuuint32_t box[3] = {64, static_cast<cuuint32_t>(kBlockN), 1};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  const CUresult r = fn(&p->tmap_out, CU_TENSOR_MAP_DATA_TYPE_UINT16, 3, p->out, dims, strides, box, elem_strides,
                        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return Status::cuda("mla_decode", "cuTensorMapEncodeTiled(out) failed with CUresult " +
                                          std::to_string(static_cast<int>(r)));
  return Status::ok();
}

// The 16-bit cache map promotes L2 fills to 128 bytes (its box rows: 64 tokens x 128 bytes, each token's 1152 bytes
// whole lines): with 256-byte fills the h_q 128 rows ran 1.2-4 % slower (bf16 b128 s8192 493.2 -> 487.1 us, b32
// s4096 78.5 -> 75.3; session 12, MLA_DECODE_KV_L2_PROMOTION A/B in one binary), and the no-math stream of such boxes
// (bench_stream --copy box, 128 CTAs, h16 b128 s8192's bytes) 298.2 against 278.4 us.
Status encode_tensor_maps(DecodeKernelParams* p, int64_t num_pages, int64_t q_rows) {
  CUtensorMapL2promotion kv_promotion;
  MLA_TRY(kv_l2_promotion(CU_TENSOR_MAP_L2_PROMOTION_L2_128B, &kv_promotion));
  MLA_TRY(encode(&p->tmap_kv, p->kv_cache, num_pages * kBlockN, kRows16, "kv_cache", kv_promotion));
  MLA_TRY(encode_tensor_map_out(p));
  return encode(&p->tmap_q, p->q, q_rows, kRows16, "q");
}

// A page as one 3D box of its 9 slabs (tma_encode.h encode_kv_slabs_3d): 9 x 128 bytes are exactly a 1152-byte token,
// so no byte outside the page is read.
Status encode_tensor_map_kv_slabs16(DecodeKernelParams* p, int64_t num_pages, int group_slabs) {
  CUtensorMapL2promotion promotion;
  MLA_TRY(kv_l2_promotion(CU_TENSOR_MAP_L2_PROMOTION_L2_128B, &promotion));
  MLA_TRY(encode_kv_slabs_3d(&p->tmap_kv, p->kv_cache, num_pages * kBlockN, CU_TENSOR_MAP_DATA_TYPE_UINT16, kRowBytes,
                             kChunksPerRow / 8, kBlockN, promotion, "mla_decode"));
  if (group_slabs <= 0) return Status::ok();
  return encode_kv_slabs_3d(&p->tmap_kv_rope, p->kv_cache, num_pages * kBlockN, CU_TENSOR_MAP_DATA_TYPE_UINT16,
                            kRowBytes, kChunksPerRow / 8, kBlockN, promotion, "mla_decode", group_slabs);
}

Status encode_tensor_map_q16(DecodeKernelParams* p, int64_t q_rows) {
  return encode(&p->tmap_q, p->q, q_rows, kRows16Box16, "q (16-row boxes)");
}

Status encode_tensor_maps_fp8ds(DecodeKernelParams* p, int64_t num_pages, int64_t q_rows) {
  CUtensorMapL2promotion kv_promotion;
  MLA_TRY(kv_l2_promotion(CU_TENSOR_MAP_L2_PROMOTION_L2_256B, &kv_promotion));
  MLA_TRY(encode(&p->tmap_kv, p->kv_cache, num_pages * kBlockN, kFp8DsBytes, "kv_cache fp8_ds bytes", kv_promotion));
  MLA_TRY(encode(&p->tmap_kv_rope, p->kv_cache, num_pages * kBlockN, kFp8DsWords, "kv_cache fp8_ds rope",
                 kv_promotion));
  MLA_TRY(encode_tensor_map_out(p));  // bf16 out: the 64-row kernels' TMA-stored direct segments
  return encode(&p->tmap_q, p->q, q_rows, kRows16, "q");
}

}  // namespace mla::sm90::decode
