// Host validation of mla_decode arguments, shared by the CPU reference and the CUDA launcher, so both
// reject exactly the same inputs with the same messages.
#include <cmath>
#include <string>

#include "mla/core/check.h"
#include "mla/ops/mla_decode.h"

namespace mla {

Status validate_mla_decode(const MlaDecodeParams& p) {
  constexpr const char* kOp = "mla_decode";
  if (!p.q.defined() || p.q.rank != 4)
    return Status::invalid(kOp, "q: expected [b, s_q, h_q, 576], got " + p.q.str());
  const int64_t b = p.q.shape[0], s_q = p.q.shape[1], h_q = p.q.shape[2];
  const DType qd = kv_query_dtype(p.format);
  const DType od = p.format == KvFormat::kFp16 ? DType::kFp16 : DType::kBf16;
  MLA_TRY(check_tensor(kOp, "q", p.q, qd, {kAnyDim, kAnyDim, kAnyDim, kDimQK}));
  if (b < 1) return Status::invalid(kOp, "q: batch must be >= 1, got " + p.q.str());
  if (s_q < 1 || s_q > kMaxDecodeSq)
    return Status::unsupported(kOp, "q: s_q must be in 1.." + std::to_string(kMaxDecodeSq) + ", got " + p.q.str());
  if (!is_supported_decode_heads(static_cast<int>(h_q)))
    return Status::unsupported(kOp, "q: h_q must be 16, 32, 64 or 128, got " + p.q.str());
  MLA_TRY(check_tensor(kOp, "kv_cache", p.kv_cache, kv_cache_dtype(p.format),
                       {kAnyDim, kDecodePageSize, kv_token_elems(p.format)}));
  if (p.kv_cache.shape[0] < 1)
    return Status::invalid(kOp, "kv_cache: needs at least one page, got " + p.kv_cache.str());
  MLA_TRY(check_tensor(kOp, "block_table", p.block_table, DType::kInt32, {b, kAnyDim}));
  if (p.block_table.shape[1] < 1)
    return Status::invalid(kOp, "block_table: needs at least one column, got " + p.block_table.str());
  MLA_TRY(check_tensor(kOp, "seqlens", p.seqlens, DType::kInt32, {b}));
  MLA_TRY(check_tensor(kOp, "out", p.out, od, {b, s_q, h_q, kDimV}));
  MLA_TRY(check_tensor(kOp, "lse", p.lse, DType::kFp32, {b, h_q, s_q}));
  if (!(p.softmax_scale > 0.f) || !std::isfinite(p.softmax_scale))
    return Status::invalid(kOp, "softmax_scale must be finite and > 0, got " + std::to_string(p.softmax_scale));
  if (p.format == KvFormat::kFp8) {
    if (!(p.q_scale > 0.f) || !std::isfinite(p.q_scale) || !(p.k_scale > 0.f) || !std::isfinite(p.k_scale))
      return Status::invalid(kOp, "fp8: q_scale and k_scale must be finite and > 0, got q_scale " +
                                      std::to_string(p.q_scale) + ", k_scale " + std::to_string(p.k_scale));
  }
  return Status::ok();
}

}  // namespace mla
