// quantize_fp8_per_tensor and fp8_absmax kernels + launchers. Quantization moves 8 elements per thread
// (one 16-byte load, one 8-byte store) when the pointers allow it; the remainder goes element by element.
#include <cuda_runtime.h>

#include "mla/core/cuda_check.h"
#include "mla/ops/quantize_fp8.h"
#include "ops/common/cache_args.h"
#include "ops/common/cache_codec.h"
#include "ops/cuda/cache/vec.cuh"

namespace mla::cuda {
namespace {

struct QuantKernelParams {
  const void* x;   // [n] T
  uint8_t* out;    // [n] e4m3
  int64_t n;
  int64_t n_vec;   // packs of 8 handled vectorized (0 when unaligned)
  float scale;
};

template <class T>
__global__ void __launch_bounds__(256) quantize_fp8_kernel(const __grid_constant__ QuantKernelParams p) {
  using R = typename T::raw;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const R* x = static_cast<const R*>(p.x);
  for (int64_t i = tid; i < p.n_vec; i += stride) {
    const cache::Pack8<R> v = cache::load8(x + i * 8);
    uint8_t c[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) c[j] = cache::encode_e4m3(cache::to_float(T{}, v.v[j]), p.scale);
    cache::store_bytes<8>(p.out + i * 8, c);
  }
  for (int64_t i = p.n_vec * 8 + tid; i < p.n; i += stride)
    p.out[i] = cache::encode_e4m3(cache::to_float(T{}, x[i]), p.scale);
}

// Max of finite |x| into *amax (zeroed by the launcher): non-negative floats order like their bit
// patterns, so an integer atomicMax is an exact float max.
template <class T>
__global__ void __launch_bounds__(256) absmax_kernel(const typename T::raw* __restrict__ x, int64_t n,
                                                     float* __restrict__ amax) {
  float m = 0.f;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    m = fmaxf(m, cache::finite_abs(cache::to_float(T{}, x[i])));
#pragma unroll
  for (int off = 16; off >= 1; off /= 2) m = fmaxf(m, __shfl_xor_sync(cache::kFullMask, m, off));
  if (threadIdx.x % 32 == 0 && m > 0.f) atomicMax(reinterpret_cast<unsigned int*>(amax), __float_as_uint(m));
}

constexpr int64_t kMaxBlocks = 132 * 16;  // enough to fill an H200 many times over; grid-stride past that

unsigned grid_for(int64_t work) {
  const int64_t b = (work + 255) / 256;
  return static_cast<unsigned>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

template <class T>
Status launch_quant(const QuantKernelParams& kp, Stream stream) {
  quantize_fp8_kernel<T><<<grid_for(kp.n_vec > 0 ? kp.n_vec : kp.n), 256, 0, stream>>>(kp);
  MLA_CUDA_TRY_LAUNCH("quantize_fp8_per_tensor");
  return Status::ok();
}

template <class T>
Status launch_absmax(const TensorView& x, float* amax, Stream stream) {
  absmax_kernel<T><<<grid_for(x.numel()), 256, 0, stream>>>(x.ptr<const typename T::raw>(), x.numel(), amax);
  MLA_CUDA_TRY_LAUNCH("fp8_absmax");
  return Status::ok();
}

}  // namespace

Status quantize_fp8_per_tensor(const QuantizeFp8Params& p, Stream stream) {
  MLA_TRY(validate_quantize_fp8_per_tensor(p));
  const int64_t n = p.x.numel();
  if (n == 0) return Status::ok();
  const bool vec = cache::aligned16(p.x.data) && (reinterpret_cast<uintptr_t>(p.out.data) % 8 == 0);
  const QuantKernelParams kp{.x = p.x.data, .out = p.out.ptr<uint8_t>(), .n = n, .n_vec = vec ? n / 8 : 0,
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
