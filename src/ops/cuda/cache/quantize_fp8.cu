// Launchers of quantize_fp8_per_tensor and fp8_absmax: validate, pick the vector path when aligned, launch.
#include <cuda_runtime.h>

#include "mla/core/cuda_check.h"
#include "mla/ops/quantize_fp8.h"
#include "ops/common/cache_args.h"
#include "ops/cuda/cache/quantize_fp8_kernel.cuh"

namespace mla::cuda {
namespace {

constexpr int64_t kMaxBlocks = 132 * 16;  // enough to fill an H200 many times over; grid-stride past that

unsigned grid_for(int64_t work) {
  const int64_t b = (work + 255) / 256;
  return static_cast<unsigned>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

template <class T>
Status launch_quant(const cache::QuantKernelParams& kp, Stream stream) {
  cache::quantize_fp8_kernel<T><<<grid_for(kp.n_vec > 0 ? kp.n_vec : kp.n), 256, 0, stream>>>(kp);
  MLA_CUDA_TRY_LAUNCH("quantize_fp8_per_tensor");
  return Status::ok();
}

template <class T>
Status launch_absmax(const TensorView& x, float* amax, Stream stream) {
  cache::absmax_kernel<T><<<grid_for(x.numel()), 256, 0, stream>>>(x.ptr<const typename T::raw>(), x.numel(), amax);
  MLA_CUDA_TRY_LAUNCH("fp8_absmax");
  return Status::ok();
}

}  // namespace

Status quantize_fp8_per_tensor(const QuantizeFp8Params& p, Stream stream) {
  MLA_TRY(validate_quantize_fp8_per_tensor(p));
  const int64_t n = p.x.numel();
  if (n == 0) return Status::ok();
  const bool vec = cache::aligned16(p.x.data) && (reinterpret_cast<uintptr_t>(p.out.data) % 8 == 0);
  const cache::QuantKernelParams kp{.x = p.x.data, .out = p.out.ptr<uint8_t>(), .n = n, .n_vec = vec ? n / 8 : 0,
                             .scale = p.scale};
  switch (p.x.dtype) {
    case DType::kBf16: return launch_quant<cache::Bf16>(kp, stream);
    case DType::kFp16: return launch_quant<cache::Fp16>(kp, stream);
    default: return launch_quant<cache::Fp32>(kp, stream);
  }
}

Status fp8_absmax(const TensorView& x, float* amax, Stream stream) {
  MLA_TRY(validate_fp8_absmax(x, amax));
  MLA_CUDA_TRY("fp8_absmax", cudaMemsetAsync(amax, 0, sizeof(float), stream));
  if (x.numel() == 0) return Status::ok();
  switch (x.dtype) {
    case DType::kBf16: return launch_absmax<cache::Bf16>(x, amax, stream);
    case DType::kFp16: return launch_absmax<cache::Fp16>(x, amax, stream);
    default: return launch_absmax<cache::Fp32>(x, amax, stream);
  }
}

}  // namespace mla::cuda
