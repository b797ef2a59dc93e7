// Our host E4M3 codec (mla/core/fp8.h) against the H200's own conversion instructions, bit for bit:
// float -> e4m3 via __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3) (cvt.rn.satfinite.e4m3x2.f32)
// over >= 10^7 random floats plus every edge input, and e4m3 -> float over all 256 codes.
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstring>
#include <random>
#include <vector>

#include "common/fp8_cases.h"
#include "common/random.h"
#include "harness/device_buffer.h"
#include "harness/registry.h"
#include "mla/core/cuda_check.h"
#include "mla/core/fp8.h"

namespace mla::test {
namespace {

__global__ void encode_kernel(const float* __restrict__ x, uint8_t* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = __nv_cvt_float_to_fp8(x[i], __NV_SATFINITE, __NV_E4M3);
}

__global__ void decode_kernel(uint32_t* __restrict__ y) {
  const int c = threadIdx.x;  // 256 threads: every code
  const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(c), __NV_E4M3);
  const float f = __half2float(__half(h));
  y[c] = __float_as_uint(f);
}

// Exact-match tolerance: the codec is specified bit for bit.
constexpr Tolerance kBitExact{0.0, 0.0, "bit-exact by specification: any differing code is a bug"};

Status run_encode(const std::vector<float>& xs, CaseReport* rep) {
  const int64_t n = static_cast<int64_t>(xs.size());
  DeviceBuffer dx, dy;
  MLA_TRY(dx.alloc(n * sizeof(float)));
  MLA_TRY(dy.alloc(n));
  MLA_TRY(dx.upload(xs));
  encode_kernel<<<1024, 256>>>(dx.as<float>(), dy.as<uint8_t>(), n);
  MLA_CUDA_TRY_LAUNCH("fp8_convert");
  MLA_CUDA_TRY("fp8_convert", cudaDeviceSynchronize());
  std::vector<uint8_t> got(n);
  MLA_TRY(dy.download(&got));
  MLA_TRY(dx.check_guards("x"));
  MLA_TRY(dy.check_guards("y"));
  size_t bad = 0;
  rep->add("codes", compare(static_cast<size_t>(n), [&](size_t i) { return double(got[i]); },
                            [&](size_t i) {
                              const uint8_t r = float_to_e4m3(xs[i]);
                              if (r != got[i] && bad++ < 8) {
                                uint32_t b;
                                std::memcpy(&b, &xs[i], 4);
                                std::printf("  mismatch: x=%a (0x%08x) device=0x%02x host=0x%02x\n", xs[i], b, got[i],
                                            r);
                              }
                              return double(r);
                            }));
  return Status::ok();
}

MLA_GPU_CASES([](std::vector<GpuCase>& cases) {
  cases.push_back({"fp8_convert", "encode_edge_values", kBitExact,
                   [](CaseReport* rep) { return run_encode(e4m3_edge_inputs(), rep); }});
  cases.push_back({"fp8_convert", "encode_random_bits_8M", kBitExact, [](CaseReport* rep) {
                     // Uniform bit patterns: every exponent, NaNs, infinities, float subnormals.
                     auto rng = case_rng("encode_random_bits");
                     std::vector<float> xs(8u << 20);
                     for (auto& x : xs) {
                       const uint32_t b = static_cast<uint32_t>(rng());
                       std::memcpy(&x, &b, 4);
                     }
                     return run_encode(xs, rep);
                   }});
  cases.push_back({"fp8_convert", "encode_random_in_range_4M", kBitExact, [](CaseReport* rep) {
                     // Where the data lives: magnitudes 2^-12 .. 2^10, dense in the rounding decisions.
                     auto rng = case_rng("encode_random_in_range");
                     std::uniform_real_distribution<float> e(-12.f, 10.f);
                     std::vector<float> xs(4u << 20);
                     for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::exp2(e(rng)) * ((i & 1) ? -1.f : 1.f);
                     return run_encode(xs, rep);
                   }});
  cases.push_back({"fp8_convert", "decode_all_256_codes", kBitExact, [](CaseReport* rep) {
                     DeviceBuffer dy;
                     MLA_TRY(dy.alloc(256 * 4));
                     decode_kernel<<<1, 256>>>(dy.as<uint32_t>());
                     MLA_CUDA_TRY_LAUNCH("fp8_convert");
                     MLA_CUDA_TRY("fp8_convert", cudaDeviceSynchronize());
                     std::vector<uint32_t> got(256);
                     MLA_TRY(dy.download(&got));
                     MLA_TRY(dy.check_guards("y"));
                     // Compare bit patterns (NaN payloads aside: both must be NaN for 0x7F/0xFF).
                     rep->add("values", compare(256, [&](size_t c) {
                                const float f = bits_float(got[c]);
                                return std::isnan(f) ? -1.0 : double(got[c]);
                              }, [&](size_t c) {
                                const float f = e4m3_to_float(static_cast<uint8_t>(c));
                                return std::isnan(f) ? -1.0 : double(float_bits(f));
                              }));
                     return Status::ok();
                   }});
});

}  // namespace
}  // namespace mla::test
