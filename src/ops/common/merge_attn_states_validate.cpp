#include <string>

#include "mla/core/check.h"
#include "mla/ops/merge_attn_states.h"

namespace mla {

Status validate_merge_attn_states(const MergeAttnStatesParams& p) {
  constexpr std::string_view op = "merge_attn_states";
  const DType dt = p.out.dtype;
  if (p.out.defined() && dt != DType::kBf16 && dt != DType::kFp16 && dt != DType::kFp32)
    return Status::invalid(std::string(op), "out: expected bf16|fp16|fp32[?, ?, ?], got " + p.out.str());
  MLA_TRY(check_tensor(op, "out", p.out, dt, {kAnyDim, kAnyDim, kAnyDim}));
  const int64_t n = p.out.shape[0], h = p.out.shape[1], d = p.out.shape[2];
  if (d % 8 != 0 || d == 0)
    return Status::unsupported(std::string(op), "head_dim must be a positive multiple of 8, got out " + p.out.str());
  MLA_TRY(check_tensor(op, "out_a", p.out_a, dt, {n, h, d}));
  MLA_TRY(check_tensor(op, "out_b", p.out_b, dt, {n, h, d}));
  MLA_TRY(check_tensor(op, "lse_a", p.lse_a, DType::kFp32, {h, n}));
  MLA_TRY(check_tensor(op, "lse_b", p.lse_b, DType::kFp32, {h, n}));
  if (p.lse.defined()) MLA_TRY(check_tensor(op, "lse", p.lse, DType::kFp32, {h, n}));
  if (n * h * d > (int64_t{1} << 40))
    return Status::unsupported(std::string(op), "too large: out " + p.out.str());
  return Status::ok();
}

}  // namespace mla
