// The shared MLA_HD codecs (mla/core/fp8.h, half.h) compiled for the device — where they use the hardware
// conversion instructions — against the same functions compiled for the host, bit for bit: every fp16 and
// e4m3 pattern, and >= 8M random float bit patterns (NaNs, infinities, subnormals included) for the
// float -> bf16 / fp16 / e4m3 directions. Kernels and references then agree on every byte they write.
#include <cstring>
#include <vector>

#include "common/fp8_cases.h"
#include "common/random.h"
#include "harness/device_buffer.h"
#include "harness/registry.h"
#include "mla/core/cuda_check.h"
#include "mla/core/fp8.h"
#include "mla/core/half.h"

namespace mla::test {
namespace {

enum class Conv { kF32ToBf16, kF32ToFp16, kF32ToE4m3, kFp16ToF32, kE4m3ToF32, kBf16ToF32 };

__host__ __device__ uint32_t apply(Conv c, uint32_t in) {
  switch (c) {
    case Conv::kF32ToBf16: return float_to_bf16(bits_float(in));
    case Conv::kF32ToFp16: return float_to_fp16(bits_float(in));
    case Conv::kF32ToE4m3: return float_to_e4m3(bits_float(in));
    case Conv::kFp16ToF32: return float_bits(fp16_to_float(static_cast<uint16_t>(in)));
    case Conv::kE4m3ToF32: return float_bits(e4m3_to_float(static_cast<uint8_t>(in)));
    case Conv::kBf16ToF32: return float_bits(bf16_to_float(static_cast<uint16_t>(in)));
  }
  return 0;
}

__global__ void apply_kernel(Conv c, const uint32_t* __restrict__ in, uint32_t* __restrict__ out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = apply(c, in[i]);
}

constexpr Tolerance kBitExact{0.0, 0.0, "bit-exact by construction: host and device must write identical bytes"};

Status run(Conv c, const std::vector<uint32_t>& in, CaseReport* rep) {
  const int64_t n = static_cast<int64_t>(in.size());
  DeviceBuffer din, dout;
  MLA_TRY(din.alloc(n * 4));
  MLA_TRY(dout.alloc(n * 4));
  MLA_TRY(din.upload(in));
  apply_kernel<<<1024, 256>>>(c, din.as<uint32_t>(), dout.as<uint32_t>(), n);
  MLA_CUDA_TRY_LAUNCH("codecs");
  MLA_CUDA_TRY("codecs", cudaDeviceSynchronize());
  std::vector<uint32_t> got(n);
  MLA_TRY(dout.download(&got));
  MLA_TRY(dout.check_guards("out"));
  size_t shown = 0;
  // Compare the output bit patterns as integers (exact equality, NaN payloads included).
  rep->add("bits", compare(static_cast<size_t>(n), [&](size_t i) { return double(got[i]); },
                           [&](size_t i) {
                             const uint32_t r = apply(c, in[i]);
                             if (r != got[i] && shown++ < 8)
                               std::printf("  mismatch: in=0x%08x device=0x%08x host=0x%08x\n", in[i], got[i], r);
                             return double(r);
                           }));
  return Status::ok();
}

std::vector<uint32_t> random_float_bits(const char* name, size_t n) {
  auto rng = case_rng(name);
  std::vector<uint32_t> v(n);
  for (auto& x : v) x = static_cast<uint32_t>(rng());
  for (float f : e4m3_edge_inputs()) v.push_back(float_bits(f));
  // Half-way cases of the 16-bit formats: low 13 / 16 bits exactly at the midpoint, both parities.
  for (uint32_t hi = 0; hi < 4096; ++hi) {
    v.push_back((hi << 20) | 0x00008000u);
    v.push_back((hi << 20) | 0x00001000u);
    v.push_back((hi << 20) | 0x00011000u);
  }
  return v;
}

std::vector<uint32_t> all_patterns(uint32_t count) {
  std::vector<uint32_t> v(count);
  for (uint32_t i = 0; i < count; ++i) v[i] = i;
  return v;
}

MLA_GPU_CASES([](std::vector<GpuCase>& cases) {
  cases.push_back({"codecs", "float_to_bf16_8M", kBitExact,
                   [](CaseReport* r) { return run(Conv::kF32ToBf16, random_float_bits("f2bf", 8u << 20), r); }});
  cases.push_back({"codecs", "float_to_fp16_8M", kBitExact,
                   [](CaseReport* r) { return run(Conv::kF32ToFp16, random_float_bits("f2h", 8u << 20), r); }});
  cases.push_back({"codecs", "float_to_e4m3_4M", kBitExact,
                   [](CaseReport* r) { return run(Conv::kF32ToE4m3, random_float_bits("f2e", 4u << 20), r); }});
  cases.push_back({"codecs", "fp16_to_float_all", kBitExact,
                   [](CaseReport* r) { return run(Conv::kFp16ToF32, all_patterns(1u << 16), r); }});
  cases.push_back({"codecs", "bf16_to_float_all", kBitExact,
                   [](CaseReport* r) { return run(Conv::kBf16ToF32, all_patterns(1u << 16), r); }});
  cases.push_back({"codecs", "e4m3_to_float_all", kBitExact,
                   [](CaseReport* r) { return run(Conv::kE4m3ToF32, all_patterns(256), r); }});
});

}  // namespace
}  // namespace mla::test
