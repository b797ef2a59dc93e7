#include "ops/common/cache_args.h"

#include <cmath>

#include "mla/core/check.h"

namespace mla::cache {

Status check_paged_cache(std::string_view op, const TensorView& cache, KvFormat format) {
  MLA_TRY(check_tensor(op, "kv_cache", cache, kv_cache_dtype(format), {kAnyDim, kAnyDim, kv_token_elems(format)}));
  if (!is_supported_page_size(cache.shape[1]))
    return Status::unsupported(std::string(op), "kv_cache: page size must be 16, 32 or 64, got " + cache.str() +
                                                    " (format " + std::string(kv_format_name(format)) + ")");
  if (cache.shape[0] > INT32_MAX)
    return Status::unsupported(std::string(op), "kv_cache: more than 2^31 - 1 pages: " + cache.str());
  if (!aligned16(cache.data))
    return Status::invalid(std::string(op), "kv_cache: data pointer must be 16-byte aligned, got " + cache.str());
  return Status::ok();
}

Status check_vector_rows(std::string_view op, std::string_view name, const TensorView& t) {
  const int64_t esize = static_cast<int64_t>(dtype_size(t.dtype));
  const std::string what = std::string(name) + " " + t.str();
  if (t.stride[1] != 1) return Status::invalid(std::string(op), what + ": last dim must have unit stride");
  if (t.shape[0] > 1 && t.stride[0] < t.shape[1])
    return Status::invalid(std::string(op), what + ": rows overlap (row stride < row length)");
  if (!aligned16(t.data) || (t.stride[0] * esize) % 16 != 0)
    return Status::invalid(std::string(op), what + ": base pointer and row stride must be multiples of 16 bytes");
  return Status::ok();
}

Status check_k_scale(std::string_view op, KvFormat format, float k_scale) {
  if (format == KvFormat::kFp8 && !(std::isfinite(k_scale) && k_scale > 0.f))
    return Status::invalid(std::string(op), "k_scale must be finite and > 0 for the fp8 format, got " +
                                                std::to_string(k_scale));
  return Status::ok();
}

}  // namespace mla::cache
