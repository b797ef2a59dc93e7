#include <string>

#include "mla/core/check.h"
#include "mla/ops/gather_cache_mla.h"
#include "ops/common/cache_args.h"

namespace mla {

Status validate_gather_cache_mla(const GatherCacheMlaParams& p) {
  constexpr std::string_view op = "gather_and_maybe_dequant_cache_mla";
  MLA_TRY(cache::check_paged_cache(op, p.kv_cache, p.format));
  MLA_TRY(check_tensor2(op, "dst", p.dst, DType::kBf16, DType::kFp32, {kAnyDim, kDimQK}));
  if (!cache::aligned16(p.dst.data))
    return Status::invalid(std::string(op), "dst: data pointer must be 16-byte aligned, got " + p.dst.str());
  MLA_TRY(check_tensor(op, "block_table", p.block_table, DType::kInt32, {kAnyDim, kAnyDim}));
  const int64_t b = p.block_table.shape[0];
  MLA_TRY(check_tensor(op, "cu_seq_lens", p.cu_seq_lens, DType::kInt32, {b + 1}));
  if (p.seq_starts.defined()) MLA_TRY(check_tensor(op, "seq_starts", p.seq_starts, DType::kInt32, {b}));
  MLA_TRY(cache::check_k_scale(op, p.format, p.k_scale));
  if (p.dst.shape[0] > INT32_MAX || b > INT32_MAX || p.block_table.shape[1] > INT32_MAX)
    return Status::unsupported(std::string(op), "sizes must fit in int32: dst " + p.dst.str() + ", block_table " +
                                                    p.block_table.str());
  return Status::ok();
}

}  // namespace mla
