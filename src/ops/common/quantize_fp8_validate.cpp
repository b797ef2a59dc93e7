#include <cmath>
#include <string>

#include "mla/core/check.h"
#include "mla/ops/quantize_fp8.h"

namespace mla {

namespace {
Status check_input(std::string_view op, const TensorView& x) {
  if (!x.defined()) return Status::invalid(std::string(op), "x: missing");
  if (x.dtype != DType::kBf16 && x.dtype != DType::kFp16 && x.dtype != DType::kFp32)
    return Status::invalid(std::string(op), "x: expected bf16|fp16|fp32, got " + x.str());
  for (int i = 0; i < x.rank; ++i)
    if (x.shape[i] < 0) return Status::invalid(std::string(op), "x: negative dim in " + x.str());
  if (x.data == nullptr && x.numel() > 0) return Status::invalid(std::string(op), "x: null data pointer, " + x.str());
  if (!x.is_contiguous()) return Status::invalid(std::string(op), "x: must be contiguous, got " + x.str());
  return Status::ok();
}
}  // namespace

Status validate_quantize_fp8_per_tensor(const QuantizeFp8Params& p) {
  constexpr std::string_view op = "quantize_fp8_per_tensor";
  MLA_TRY(check_input(op, p.x));
  const std::string shapes = "x " + p.x.str() + ", out " + p.out.str();
  if (!p.out.defined() || p.out.dtype != DType::kE4m3 || p.out.rank != p.x.rank)
    return Status::invalid(std::string(op), "out must be e4m3 of x's shape: " + shapes);
  for (int i = 0; i < p.x.rank; ++i)
    if (p.out.shape[i] != p.x.shape[i]) return Status::invalid(std::string(op), "out must have x's shape: " + shapes);
  if (!p.out.is_contiguous()) return Status::invalid(std::string(op), "out must be contiguous: " + shapes);
  if (p.out.data == nullptr && p.out.numel() > 0) return Status::invalid(std::string(op), "out: null data pointer");
  if (!(std::isfinite(p.scale) && p.scale > 0.f))
    return Status::invalid(std::string(op), "scale must be finite and > 0, got " + std::to_string(p.scale));
  return Status::ok();
}

Status validate_fp8_absmax(const TensorView& x, const float* amax) {
  constexpr std::string_view op = "fp8_absmax";
  MLA_TRY(check_input(op, x));
  if (amax == nullptr) return Status::invalid(std::string(op), "amax: null pointer (x " + x.str() + ")");
  return Status::ok();
}

}  // namespace mla
