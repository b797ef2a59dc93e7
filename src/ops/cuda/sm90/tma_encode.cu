#include "ops/cuda/sm90/tma_encode.h"

#include <cuda_runtime_api.h>

#include <string>

#include "mla/core/env_knob.h"

namespace mla::sm90 {

PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encode_fn() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* ptr = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      return static_cast<PFN_cuTensorMapEncodeTiled_v12000>(nullptr);
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(ptr);
  }();
  return fn;
}

Status kv_l2_promotion(CUtensorMapL2promotion dflt, CUtensorMapL2promotion* out) {
  static const EnvKnob k = read_env_knob("MLA_DECODE_KV_L2_PROMOTION", {"none", "64", "128", "256"});
  MLA_TRY(k.status);
  static constexpr CUtensorMapL2promotion kValues[] = {CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_64B,
                                                       CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                                       CU_TENSOR_MAP_L2_PROMOTION_L2_256B};
  *out = k.index < 0 ? dflt : kValues[k.index];
  return Status::ok();
}

Status encode_kv_slabs_3d(CUtensorMap* map, const void* base, int64_t rows, CUtensorMapDataType type, int64_t row_bytes,
                          int slabs, int box_rows, CUtensorMapL2promotion promotion, const char* op, int box_slabs) {
  auto fn = tensor_map_encode_fn();
  if (fn == nullptr) return Status::cuda(op, "cuTensorMapEncodeTiled is not available from the driver");
  const cuuint32_t slab_cols = type == CU_TENSOR_MAP_DATA_TYPE_UINT8 ? 128 : 64;  // 128 bytes of 1- or 2-byte elements
  const cuuint64_t dims[3] = {slab_cols, static_cast<cuuint64_t>(rows), static_cast<cuuint64_t>(slabs)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(row_bytes), 128};
  if (box_slabs <= 0) box_slabs = slabs;
  const cuuint32_t box[3] = {slab_cols, static_cast<cuuint32_t>(box_rows), static_cast<cuuint32_t>(box_slabs)};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  const CUresult r = fn(map, type, 3, const_cast<void*>(base), dims, strides, box, elem_strides,
                        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, promotion,
                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return Status::cuda(op, "cuTensorMapEncodeTiled(kv_cache slabs, 3D) failed with CUresult " +
                                std::to_string(static_cast<int>(r)));
  return Status::ok();
}

}  // namespace mla::sm90
