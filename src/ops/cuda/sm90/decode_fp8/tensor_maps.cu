// Host side of the warp-specialized fp8 kernel: TMA tensor maps of the e4m3 cache and q, encoded per call
// (they hold the base addresses) through the driver entry point, so nothing links against libcuda.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cudaTypedefs.h>

#include <string>

#include "mla/core/cuda_check.h"
#include "mla/core/mla_shapes.h"
#include "ops/cuda/sm90/decode/launch.h"
#include "ops/cuda/sm90/decode_fp8/config.h"
#include "ops/cuda/sm90/decode_fp8/launch.h"
#include "ops/cuda/sm90/tma_encode.h"

namespace mla::sm90::decode_fp8 {
namespace {

// [rows, 576] bytes, boxes of box_rows rows x 128 bytes (the swizzle span: one slab), 128-byte swizzle. The box
// at column 512 reaches 64 bytes past the row: the TMA unit fills them with zeros (OOB_FILL_NONE). box_cols 64 with
// the 64-byte swizzle: the rope map (bytes 512..575 of each row in one box, nothing past the row).
Status encode_u8(CUtensorMap* map, const void* base, int64_t rows, const char* what, int box_rows = kBlockN,
                 CUtensorMapL2promotion promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_256B, int box_cols = 128,
                 CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B) {
  auto fn = tensor_map_encode_fn();
  if (fn == nullptr) return Status::cuda("mla_decode (fp8)", "cuTensorMapEncodeTiled is not available from the driver");
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(kTokenBytes), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(kTokenBytes)};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_cols), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r =
      fn(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void*>(base), dims, strides, box, elem_strides,
         CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, promotion,
         CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return Status::cuda("mla_decode (fp8)", std::string("cuTensorMapEncodeTiled(") + what + ") failed with CUresult " +
                                                std::to_string(static_cast<int>(r)));
  return Status::ok();
}

}  // namespace

Status encode_tensor_maps_fp8(decode::DecodeKernelParams* p, int64_t num_pages, int64_t q_rows) {
  CUtensorMapL2promotion kv_promotion;
  MLA_TRY(kv_l2_promotion(CU_TENSOR_MAP_L2_PROMOTION_L2_256B, &kv_promotion));
  // Pages: dims 0..511 in the 128-byte boxes of tmap_kv, the rope dims as one 64 x 64-byte box of tmap_kv_rope
  // (64-byte swizzle; mainloop_ws.cuh issue_page_tma). Q tiles: five 128-byte boxes (issue_tile_tma).
  MLA_TRY(encode_u8(&p->tmap_kv, p->kv_cache, num_pages * kBlockN, "kv_cache", kBlockN, kv_promotion));
  MLA_TRY(encode_u8(&p->tmap_kv_rope, p->kv_cache, num_pages * kBlockN, "kv_cache rope", kBlockN, kv_promotion,
                    kTokenBytes - kDimV, CU_TENSOR_MAP_SWIZZLE_64B));
  MLA_TRY(decode::encode_tensor_map_out(p));  // bf16 out: kernel_ws.cuh's TMA-stored direct segments
  return encode_u8(&p->tmap_q, p->q, q_rows, "q");
}

// The 16-row kernel's cache map promotes L2 fills to 128 bytes, not 256: its box rows are 128 bytes, half of them
// straddling two lines (576-byte tokens), and the 256-byte fills cost it 8 % at h16 b128 s8192 (177 -> 163 µs,
// NOTES_fp8.md run H5; no promotion: 166).
Status encode_tensor_maps_fp8_h16(decode::DecodeKernelParams* p, int64_t num_pages, int64_t q_rows) {
  CUtensorMapL2promotion kv_promotion;
  MLA_TRY(kv_l2_promotion(CU_TENSOR_MAP_L2_PROMOTION_L2_128B, &kv_promotion));
  // KV pages: one 3D box each (the five slabs: the fifth covers bytes 512..639 of a row, i.e. also the next token's
  // first 64 bytes, never read, and past the tensor on its last row); evict-first pages and the cache's last page:
  // five 2D boxes (page_tma.cuh).
  MLA_TRY(encode_kv_slabs_3d(&p->tmap_kv, p->kv_cache, num_pages * kBlockN, CU_TENSOR_MAP_DATA_TYPE_UINT8, kTokenBytes,
                             kSlabs, kBlockN, kv_promotion, "mla_decode (fp8)"));
  MLA_TRY(encode_u8(&p->tmap_kv_rope, p->kv_cache, num_pages * kBlockN, "kv_cache", kBlockN, kv_promotion));
  return encode_u8(&p->tmap_q, p->q, q_rows, "q (16-row boxes)", 16);
}

}  // namespace mla::sm90::decode_fp8
