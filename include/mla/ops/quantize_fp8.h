#pragma once
// Per-tensor FP8 quantization (of Q for the fp8 KV format) and scale calibration.
//
//   quantize_fp8_per_tensor: out[i] = satfinite_rne(x[i] / scale) in e4m3 (IEEE float division; NaN -> NaN,
//                            |x / scale| >= 448 and ±inf -> ±448)
//   fp8_absmax             : max |x[i]| over the finite elements (NaN and ±inf ignored; 0 for none)
//   fp8_scale_from_amax    : amax / kFp8CalibDivisor, so the calibration batch's largest value lands at
//                            224 = 448 / 2 and later batches may grow 2x before saturating (vLLM's
//                            --calculate-kv-scales divides by 200 for the same reason). 1.0 when amax is
//                            0 or not finite, so an all-zero batch never yields a zero scale.
#include "mla/core/status.h"
#include "mla/core/stream.h"
#include "mla/core/tensor.h"

namespace mla {

constexpr float kFp8CalibDivisor = 224.f;  // = 448 / 2: 2x headroom over the calibration batch

inline float fp8_scale_from_amax(float amax) {
  const float s = amax / kFp8CalibDivisor;
  return (s > 0.f && s < 3.0e38f) ? s : 1.f;
}

struct QuantizeFp8Params {
  TensorView x;      // [...] bf16 | fp16 | fp32, contiguous, rank 1..6
  TensorView out;    // same shape, e4m3, contiguous
  float scale = 1.f; // finite and > 0
};

Status validate_quantize_fp8_per_tensor(const QuantizeFp8Params& p);
// x: [...] bf16 | fp16 | fp32 contiguous; amax: where the result goes (host or device, per backend).
Status validate_fp8_absmax(const TensorView& x, const float* amax);

namespace ref {
Status quantize_fp8_per_tensor(const QuantizeFp8Params& p);    // host pointers
Status fp8_absmax(const TensorView& x, float* amax);            // host pointers
}  // namespace ref

namespace cuda {
Status quantize_fp8_per_tensor(const QuantizeFp8Params& p, Stream stream);  // device pointers
// amax: device fp32 [1]; zeroed then reduced on `stream` (no host sync). An engine calibrating on its first
// batch copies it back once and calls fp8_scale_from_amax.
Status fp8_absmax(const TensorView& x, float* amax, Stream stream);
}  // namespace cuda

}  // namespace mla
