// Launcher of gather_and_maybe_dequant_cache_mla: validate on the host, pick the (format, out dtype) kernel.
#include <cuda_runtime.h>

#include <cstdint>

#include "mla/core/cuda_check.h"
#include "mla/ops/gather_cache_mla.h"
#include "ops/cuda/cache/gather_cache_mla_kernel.cuh"

namespace mla::cuda {
namespace {

template <KvFormat F, class Out>
Status launch(const cache::GatherKernelParams& kp, Stream stream) {
  cache::gather_cache_mla_kernel<F, Out>
      <<<cache::gather_blocks(kp.n_rows), cache::kWarpsPerBlock * 32, 0, stream>>>(kp);
  MLA_CUDA_TRY_LAUNCH("gather_and_maybe_dequant_cache_mla");
  return Status::ok();
}

template <class Out>
Status dispatch_format(const cache::GatherKernelParams& kp, KvFormat f, Stream stream) {
  switch (f) {
    case KvFormat::kBf16: return launch<KvFormat::kBf16, Out>(kp, stream);
    case KvFormat::kFp16: return launch<KvFormat::kFp16, Out>(kp, stream);
    case KvFormat::kFp8: return launch<KvFormat::kFp8, Out>(kp, stream);
    case KvFormat::kFp8Ds: return launch<KvFormat::kFp8Ds, Out>(kp, stream);
  }
  return Status::internal("gather_and_maybe_dequant_cache_mla", "unknown format");
}

}  // namespace

Status gather_and_maybe_dequant_cache_mla(const GatherCacheMlaParams& p, Stream stream) {
  MLA_TRY(validate_gather_cache_mla(p));
  if (p.dst.shape[0] == 0 || p.block_table.shape[0] == 0) return Status::ok();
  // The kernel passes cache slots between lanes as int32 (one shuffle per step); a cache of 2^31 slots
  // (>= 1.2 TB at 576 B a token) cannot exist on one GPU, but say so rather than wrap.
  if (p.kv_cache.shape[0] * p.kv_cache.shape[1] > INT32_MAX)
    return Status::unsupported("gather_and_maybe_dequant_cache_mla",
                               "kv_cache holds 2^31 or more token slots: " + p.kv_cache.str());
  const cache::GatherKernelParams kp{
      .cache = p.kv_cache.ptr<const uint8_t>(),
      .dst = p.dst.data,
      .block_table = p.block_table.ptr<const int32_t>(),
      .cu_seq_lens = p.cu_seq_lens.ptr<const int32_t>(),
      .seq_starts = p.seq_starts.defined() ? p.seq_starts.ptr<const int32_t>() : nullptr,
      .n_rows = p.dst.shape[0],
      .batch = static_cast<int>(p.block_table.shape[0]),
      .max_pages = static_cast<int>(p.block_table.shape[1]),
      .page_size = static_cast<int>(p.kv_cache.shape[1]),
      .num_pages = static_cast<int>(p.kv_cache.shape[0]),
      .k_scale = p.k_scale,
  };
  return p.dst.dtype == DType::kBf16 ? dispatch_format<cache::Bf16>(kp, p.format, stream)
                                     : dispatch_format<cache::Fp32>(kp, p.format, stream);
}

}  // namespace mla::cuda
