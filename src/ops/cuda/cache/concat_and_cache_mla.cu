// Launcher of concat_and_cache_mla: validate on the host, pick the (input dtype, format) instantiation.
#include <cuda_runtime.h>

#include "mla/core/cuda_check.h"
#include "mla/ops/concat_and_cache_mla.h"
#include "ops/cuda/cache/concat_and_cache_mla_kernel.cuh"

namespace mla::cuda {
namespace {

template <class In, KvFormat F>
Status launch(const cache::ConcatKernelParams& kp, Stream stream) {
  const int64_t blocks = (kp.num_tokens + cache::kWarpsPerBlock - 1) / cache::kWarpsPerBlock;
  cache::concat_and_cache_mla_kernel<In, F>
      <<<static_cast<unsigned>(blocks), cache::kWarpsPerBlock * 32, 0, stream>>>(kp);
  MLA_CUDA_TRY_LAUNCH("concat_and_cache_mla");
  return Status::ok();
}

template <class In>
Status dispatch_format(const cache::ConcatKernelParams& kp, KvFormat f, Stream stream) {
  switch (f) {
    case KvFormat::kBf16: return launch<In, KvFormat::kBf16>(kp, stream);
    case KvFormat::kFp16: return launch<In, KvFormat::kFp16>(kp, stream);
    case KvFormat::kFp8: return launch<In, KvFormat::kFp8>(kp, stream);
    case KvFormat::kFp8Ds: return launch<In, KvFormat::kFp8Ds>(kp, stream);
  }
  return Status::internal("concat_and_cache_mla", "unknown format");
}

}  // namespace

Status concat_and_cache_mla(const ConcatAndCacheMlaParams& p, Stream stream) {
  MLA_TRY(validate_concat_and_cache_mla(p));
  if (p.kv_c.shape[0] == 0) return Status::ok();
  const cache::ConcatKernelParams kp{
      .kv_c = p.kv_c.data,
      .k_pe = p.k_pe.data,
      .slot_mapping = p.slot_mapping.ptr<const int64_t>(),
      .cache = p.kv_cache.ptr<uint8_t>(),
      .kv_c_stride = p.kv_c.stride[0],
      .k_pe_stride = p.k_pe.stride[0],
      .capacity = p.kv_cache.shape[0] * p.kv_cache.shape[1],
      .num_tokens = p.kv_c.shape[0],
      .k_scale = p.k_scale,
  };
  switch (p.kv_c.dtype) {
    case DType::kBf16: return dispatch_format<cache::Bf16>(kp, p.format, stream);
    case DType::kFp16: return dispatch_format<cache::Fp16>(kp, p.format, stream);
    default: return dispatch_format<cache::Fp32>(kp, p.format, stream);
  }
}

}  // namespace mla::cuda
