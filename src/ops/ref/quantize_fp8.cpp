// CPU reference of per-tensor FP8 quantization and of the calibration amax.
#include <algorithm>

#include "mla/ops/quantize_fp8.h"
#include "ops/common/cache_codec.h"

namespace mla {
namespace {

template <class T>
void quantize(const QuantizeFp8Params& p) {
  const auto* x = p.x.ptr<const typename T::raw>();
  auto* y = p.out.ptr<uint8_t>();
  const int64_t n = p.x.numel();
  for (int64_t i = 0; i < n; ++i) y[i] = cache::encode_e4m3(cache::to_float(T{}, x[i]), p.scale);
}

template <class T>
float absmax(const TensorView& x) {
  const auto* v = x.ptr<const typename T::raw>();
  float m = 0.f;
  for (int64_t i = 0; i < x.numel(); ++i) m = std::max(m, cache::finite_abs(cache::to_float(T{}, v[i])));
  return m;
}

}  // namespace

namespace ref {
Status quantize_fp8_per_tensor(const QuantizeFp8Params& p) {
  MLA_TRY(validate_quantize_fp8_per_tensor(p));
  switch (p.x.dtype) {
    case DType::kBf16: quantize<cache::Bf16>(p); break;
    case DType::kFp16: quantize<cache::Fp16>(p); break;
    default: quantize<cache::Fp32>(p); break;
  }
  return Status::ok();
}

Status fp8_absmax(const TensorView& x, float* amax) {
  MLA_TRY(validate_fp8_absmax(x, amax));
  switch (x.dtype) {
    case DType::kBf16: *amax = absmax<cache::Bf16>(x); break;
    case DType::kFp16: *amax = absmax<cache::Fp16>(x); break;
    default: *amax = absmax<cache::Fp32>(x); break;
  }
  return Status::ok();
}
}  // namespace ref

}  // namespace mla
