#include <string>

#include "mla/core/check.h"
#include "mla/ops/concat_and_cache_mla.h"
#include "ops/common/cache_args.h"

namespace mla {

Status validate_concat_and_cache_mla(const ConcatAndCacheMlaParams& p) {
  constexpr std::string_view op = "concat_and_cache_mla";
  // Strided rows are fine (kv_c and k_pe are usually column splits of one [t, 576] projection output).
  const DType in = p.kv_c.dtype;
  if (p.kv_c.defined() && in != DType::kBf16 && in != DType::kFp16 && in != DType::kFp32)
    return Status::invalid(std::string(op), "kv_c: expected bf16|fp16|fp32[?, 512], got " + p.kv_c.str());
  MLA_TRY(check_tensor(op, "kv_c", p.kv_c, in, {kAnyDim, kDimLatent}, false));
  const int64_t t = p.kv_c.shape[0];
  MLA_TRY(check_tensor(op, "k_pe", p.k_pe, p.kv_c.dtype, {t, kDimRope}, false));
  MLA_TRY(cache::check_vector_rows(op, "kv_c", p.kv_c));
  MLA_TRY(cache::check_vector_rows(op, "k_pe", p.k_pe));
  MLA_TRY(check_tensor(op, "slot_mapping", p.slot_mapping, DType::kInt64, {t}));
  MLA_TRY(cache::check_paged_cache(op, p.kv_cache, p.format));
  MLA_TRY(cache::check_k_scale(op, p.format, p.k_scale));
  if (t > INT32_MAX) return Status::unsupported(std::string(op), "more than 2^31 - 1 tokens: kv_c " + p.kv_c.str());
  return Status::ok();
}

}  // namespace mla
