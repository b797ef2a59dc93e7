// Per-tensor FP8 quantization and calibration references against a float64 oracle; rejections.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>

#include "common/fp8_cases.h"
#include "common/random.h"
#include "mla/ops/quantize_fp8.h"
#include "test_kv_cache_data.h"

namespace mla {
namespace {

using test::RawArray;
namespace oracle = test::oracle;

class QuantFp8PerTensor : public ::testing::TestWithParam<DType> {};

TEST_P(QuantFp8PerTensor, MatchesFloat64Oracle) {
  const DType dt = GetParam();
  auto rng = test::case_rng("quant_" + std::string(dtype_name(dt)));
  // Random data over a wide range plus every e4m3 edge input, scaled by the scale so edges stay edges.
  const float scale = 0.37f;
  std::vector<float> xs = test::randn(rng, 4 * 16 * 576, 30.f);
  for (float e : test::e4m3_edge_inputs()) xs.push_back(e * scale);
  RawArray x(dt, xs.size());
  for (size_t i = 0; i < xs.size(); ++i) x.set(i, xs[i]);
  std::vector<uint8_t> out(xs.size(), 0xAA);
  QuantizeFp8Params p;
  p.x = TensorView::contiguous(x.data(), dt, {int64_t(xs.size())});
  p.out = TensorView::contiguous(out.data(), DType::kE4m3, {int64_t(xs.size())});
  p.scale = scale;
  ASSERT_TRUE(ref::quantize_fp8_per_tensor(p).is_ok());
  int bad = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double want = oracle::e4m3_quant(x.get(i), scale);
    const bool ok = std::isnan(want) ? out[i] == 0x7F : oracle::same(oracle::e4m3_value(out[i]), want);
    if (!ok && bad++ < 5) ADD_FAILURE() << "x=" << x.get(i) << " code " << int(out[i]) << " want " << want;
  }
  EXPECT_EQ(bad, 0);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, QuantFp8PerTensor, ::testing::Values(DType::kBf16, DType::kFp16, DType::kFp32),
                         [](const ::testing::TestParamInfo<DType>& tp) { return std::string(dtype_name(tp.param)); });

TEST(QuantFp8Calibration, AbsmaxIgnoresNonFiniteAndScaleHasHeadroom) {
  auto rng = test::case_rng("quant_absmax");
  std::vector<float> xs = test::randn(rng, 1000, 3.f);
  xs[10] = std::numeric_limits<float>::infinity();
  xs[11] = std::nanf("");
  xs[12] = -77.5f;  // the largest finite magnitude
  std::vector<uint16_t> x = test::to_bf16(xs);
  float amax = -1.f;
  ASSERT_TRUE(ref::fp8_absmax(TensorView::contiguous(x.data(), DType::kBf16, {10, 100}), &amax).is_ok());
  double want = 0;
  for (uint16_t v : x)
    if (std::isfinite(oracle::bf16_value(v))) want = std::max(want, std::fabs(oracle::bf16_value(v)));
  EXPECT_EQ(amax, want);
  EXPECT_EQ(amax, 77.5f);
  // The calibration batch's max lands at 224 = 448 / 2.
  const float s = fp8_scale_from_amax(amax);
  EXPECT_EQ(s, 77.5f / kFp8CalibDivisor);
  EXPECT_EQ(oracle::e4m3_quant(-77.5, s), -224.0);
  EXPECT_EQ(fp8_scale_from_amax(0.f), 1.f);
  EXPECT_EQ(fp8_scale_from_amax(std::numeric_limits<float>::infinity()), 1.f);
  EXPECT_EQ(fp8_scale_from_amax(std::nanf("")), 1.f);
  float zero = 5.f;
  std::vector<float> zeros(64, 0.f);
  ASSERT_TRUE(ref::fp8_absmax(TensorView::contiguous(zeros.data(), DType::kFp32, {64}), &zero).is_ok());
  EXPECT_EQ(zero, 0.f);
}

TEST(QuantFp8PerTensor, RejectsBadArguments) {
  std::vector<uint16_t> x(64);
  std::vector<uint8_t> out(64);
  QuantizeFp8Params good;
  good.x = TensorView::contiguous(x.data(), DType::kBf16, {8, 8});
  good.out = TensorView::contiguous(out.data(), DType::kE4m3, {8, 8});
  ASSERT_TRUE(validate_quantize_fp8_per_tensor(good).is_ok());
  const std::vector<std::pair<std::string, std::function<void(QuantizeFp8Params&)>>> bad = {
      {"x", [](auto& p) { p.x.dtype = DType::kInt32; }},
      {"x", [](auto& p) { p.x = TensorView{}; }},
      {"x", [](auto& p) { p.x.data = nullptr; }},
      {"x", [](auto& p) { p.x.stride[0] = 9; }},
      {"out", [](auto& p) { p.out.dtype = DType::kUint8; }},
      {"out", [](auto& p) { p.out.shape[1] = 4; }},
      {"out", [](auto& p) { p.out.rank = 1; }},
      {"out", [](auto& p) { p.out.data = nullptr; }},
      {"scale", [](auto& p) { p.scale = 0.f; }},
      {"scale", [](auto& p) { p.scale = std::numeric_limits<float>::infinity(); }},
  };
  for (const auto& [what, mutate] : bad) {
    QuantizeFp8Params p = good;
    mutate(p);
    const Status st = ref::quantize_fp8_per_tensor(p);
    EXPECT_FALSE(st.is_ok()) << what;
    EXPECT_NE(st.to_string().find("quantize_fp8_per_tensor"), std::string::npos) << st.to_string();
    EXPECT_NE(st.to_string().find(what), std::string::npos) << st.to_string();
  }
  float amax;
  EXPECT_FALSE(ref::fp8_absmax(good.x, nullptr).is_ok());
  EXPECT_FALSE(ref::fp8_absmax(good.out, &amax).is_ok());  // e4m3 input is not accepted
}

}  // namespace
}  // namespace mla
