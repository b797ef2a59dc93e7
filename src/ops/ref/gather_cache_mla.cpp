// CPU reference of gather_and_maybe_dequant_cache_mla: one token at a time through the shared codecs.
#include <string>

#include "mla/core/page_table.h"
#include "mla/ops/gather_cache_mla.h"
#include "ops/common/cache_codec.h"

namespace mla {
namespace {

constexpr const char* kOp = "gather_and_maybe_dequant_cache_mla";

// Decodes one cached token into 576 values of storage type Out.
template <class Out>
void decode_token(KvFormat format, float k_scale, const uint8_t* src, typename Out::raw* dst) {
  switch (format) {
    case KvFormat::kBf16: {
      const auto* s = reinterpret_cast<const uint16_t*>(src);
      for (int j = 0; j < kDimQK; ++j) dst[j] = cache::convert<cache::Bf16, Out>(s[j]);
      break;
    }
    case KvFormat::kFp16: {
      const auto* s = reinterpret_cast<const uint16_t*>(src);
      for (int j = 0; j < kDimQK; ++j) dst[j] = cache::convert<cache::Fp16, Out>(s[j]);
      break;
    }
    case KvFormat::kFp8:
      for (int j = 0; j < kDimQK; ++j) dst[j] = cache::from_float(Out{}, cache::decode_e4m3(src[j], k_scale));
      break;
    case KvFormat::kFp8Ds:
      for (int j = 0; j < kDimLatent; ++j) dst[j] = cache::from_float(Out{}, cache::fp8_ds_latent(src, j));
      for (int j = 0; j < kDimRope; ++j)
        dst[kDimLatent + j] = cache::convert<cache::Bf16, Out>(cache::fp8_ds_rope_bits(src, j));
      break;
  }
}

// Every data-dependent condition the kernel cannot report, checked before anything is written.
Status check_data(const GatherCacheMlaParams& p) {
  const int batch = static_cast<int>(p.block_table.shape[0]);
  const int64_t max_pages = p.block_table.shape[1];
  const int64_t page_size = p.kv_cache.shape[1];
  const int32_t* cu = p.cu_seq_lens.ptr<const int32_t>();
  const int32_t* starts = p.seq_starts.defined() ? p.seq_starts.ptr<const int32_t>() : nullptr;
  const int32_t* bt = p.block_table.ptr<const int32_t>();
  if (cu[0] < 0) return Status::invalid(kOp, "cu_seq_lens[0] = " + std::to_string(cu[0]) + " < 0");
  if (cu[batch] > p.dst.shape[0])
    return Status::invalid(kOp, "cu_seq_lens[" + std::to_string(batch) + "] = " + std::to_string(cu[batch]) +
                                    " exceeds dst " + p.dst.str());
  for (int b = 0; b < batch; ++b) {
    const std::string at = "sequence " + std::to_string(b);
    if (cu[b + 1] < cu[b]) return Status::invalid(kOp, "cu_seq_lens must be non-decreasing (" + at + ")");
    const int64_t start = starts ? starts[b] : 0;
    if (start < 0) return Status::invalid(kOp, "seq_starts[" + std::to_string(b) + "] < 0");
    const int64_t end = start + (cu[b + 1] - cu[b]);
    if (end > max_pages * page_size)
      return Status::invalid(kOp, at + " needs tokens up to " + std::to_string(end) + " but block_table " +
                                      p.block_table.str() + " holds " + std::to_string(max_pages * page_size));
    for (int64_t blk = start / page_size; blk < (end + page_size - 1) / page_size; ++blk) {
      const int32_t page = bt[b * max_pages + blk];
      if (page < 0 || page >= p.kv_cache.shape[0])
        return Status::invalid(kOp, at + ": block_table[" + std::to_string(b) + "][" + std::to_string(blk) + "] = " +
                                        std::to_string(page) + " is not a page of kv_cache " + p.kv_cache.str());
    }
  }
  return Status::ok();
}

template <class Out>
Status run(const GatherCacheMlaParams& p) {
  MLA_TRY(check_data(p));
  const int batch = static_cast<int>(p.block_table.shape[0]);
  PagedKvView view;
  view.cache = p.kv_cache.ptr<const uint8_t>();
  view.block_table = p.block_table.ptr<const int32_t>();
  view.token_bytes = kv_bytes_per_token(p.format);
  view.page_size = static_cast<int>(p.kv_cache.shape[1]);
  view.page_stride_bytes = static_cast<int64_t>(view.page_size) * view.token_bytes;
  view.block_table_stride = static_cast<int>(p.block_table.shape[1]);
  view.num_pages = static_cast<int>(p.kv_cache.shape[0]);
  const int32_t* cu = p.cu_seq_lens.ptr<const int32_t>();
  const int32_t* starts = p.seq_starts.defined() ? p.seq_starts.ptr<const int32_t>() : nullptr;
  auto* dst = p.dst.ptr<typename Out::raw>();
  for (int b = 0; b < batch; ++b) {
    const int start = starts ? starts[b] : 0;
    for (int i = 0; i < cu[b + 1] - cu[b]; ++i)
      decode_token<Out>(p.format, p.k_scale, view.token(b, start + i), dst + int64_t(cu[b] + i) * kDimQK);
  }
  return Status::ok();
}

}  // namespace

namespace ref {
Status gather_and_maybe_dequant_cache_mla(const GatherCacheMlaParams& p) {
  MLA_TRY(validate_gather_cache_mla(p));
  return p.dst.dtype == DType::kBf16 ? run<cache::Bf16>(p) : run<cache::Fp32>(p);
}
}  // namespace ref

}  // namespace mla
