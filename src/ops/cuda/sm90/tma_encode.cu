#include "ops/cuda/sm90/tma_encode.h"

#include <cuda_runtime_api.h>

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

}  // namespace mla::sm90
