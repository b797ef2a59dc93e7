// Core types: TensorView, check_tensor messages, Status, KV formats, bf16/fp16 rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "mla/core/check.h"
#include "mla/core/half.h"
#include "mla/core/kv_format.h"
#include "mla/core/tensor.h"

namespace mla {
namespace {

TEST(Tensor, ContiguousStridesAndStr) {
  float x[24] = {};
  auto t = TensorView::contiguous(x, DType::kFp32, {2, 3, 4});
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.stride[0], 12);
  EXPECT_EQ(t.stride[2], 1);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.str(), "fp32[2, 3, 4]");
  t.stride[0] = 13;
  EXPECT_FALSE(t.is_contiguous());
}

TEST(Check, RejectionsNameOpArgumentAndShapes) {
  float x[24] = {};
  auto t = TensorView::contiguous(x, DType::kFp32, {2, 3, 4});
  EXPECT_TRUE(check_tensor("op", "x", t, DType::kFp32, {2, kAnyDim, 4}).is_ok());
  Status s = check_tensor("myop", "q", t, DType::kBf16, {2, 3, 4});
  EXPECT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.to_string().find("myop"), std::string::npos);
  EXPECT_NE(s.to_string().find("expected bf16[2, 3, 4]"), std::string::npos);
  EXPECT_NE(s.to_string().find("got fp32[2, 3, 4]"), std::string::npos);
  EXPECT_FALSE(check_tensor("op", "x", t, DType::kFp32, {2, 3}).is_ok());      // rank
  EXPECT_FALSE(check_tensor("op", "x", t, DType::kFp32, {2, 3, 5}).is_ok());   // dim
  auto n = t;
  n.data = nullptr;
  EXPECT_NE(check_tensor("op", "x", n, DType::kFp32, {2, 3, 4}).to_string().find("null"), std::string::npos);
  EXPECT_FALSE(check_tensor("op", "x", TensorView{}, DType::kFp32, {2}).is_ok());  // missing
}

TEST(KvFormat, BytesPerTokenAndParse) {
  EXPECT_EQ(kv_bytes_per_token(KvFormat::kBf16), 1152);
  EXPECT_EQ(kv_bytes_per_token(KvFormat::kFp16), 1152);
  EXPECT_EQ(kv_bytes_per_token(KvFormat::kFp8), 576);
  EXPECT_EQ(kv_bytes_per_token(KvFormat::kFp8Ds), 656);
  KvFormat f;
  EXPECT_TRUE(parse_kv_format("auto", &f).is_ok());
  EXPECT_EQ(f, KvFormat::kBf16);
  EXPECT_TRUE(parse_kv_format("fp8_e4m3", &f).is_ok());
  EXPECT_EQ(f, KvFormat::kFp8);
  EXPECT_TRUE(parse_kv_format("fp8_ds", &f).is_ok());
  EXPECT_EQ(f, KvFormat::kFp8Ds);
  Status s = parse_kv_format("int4", &f);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.to_string().find("int4"), std::string::npos);
}

// bf16/fp16 rounding against a float64 nearest-even oracle on random floats.
double oracle_round(double x, int mant_bits, int min_exp, double max_finite) {
  int e;
  std::frexp(max_finite, &e);
  // Values at or past the midpoint between max_finite and the next power-of-two step overflow (ties go
  // to the even neighbour, which is infinity's encoding).
  if (std::fabs(x) >= max_finite + std::ldexp(1.0, e - 1 - mant_bits - 1)) return std::copysign(INFINITY, x);
  std::frexp(x, &e);
  e = std::max(e - 1, min_exp);
  const double ulp = std::ldexp(1.0, e - mant_bits);
  return std::nearbyint(x / ulp) * ulp;  // default rounding mode: to nearest even
}

TEST(Half, Bf16RoundingMatchesOracle) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> e(-130.f, 127.f);
  for (int i = 0; i < 200000; ++i) {
    const float x = std::exp2(e(rng)) * ((i & 1) ? -1.f : 1.f);
    const double r = oracle_round(x, 7, -126, 3.3895313892515355e38);
    ASSERT_EQ(static_cast<double>(round_bf16(x)), r) << std::hexfloat << x;
  }
  EXPECT_TRUE(std::isnan(round_bf16(std::numeric_limits<float>::quiet_NaN())));
}

TEST(Half, Fp16RoundingMatchesOracle) {
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> e(-26.f, 16.5f);
  for (int i = 0; i < 200000; ++i) {
    const float x = std::exp2(e(rng)) * ((i & 1) ? -1.f : 1.f);
    const double r = oracle_round(x, 10, -14, 65504.0);
    ASSERT_EQ(static_cast<double>(round_fp16(x)), r) << std::hexfloat << x;
  }
  EXPECT_EQ(float_to_fp16(65519.f), 0x7BFF);
  EXPECT_EQ(float_to_fp16(65520.f), 0x7C00);
  EXPECT_TRUE(std::isnan(round_fp16(std::numeric_limits<float>::quiet_NaN())));
}

}  // namespace
}  // namespace mla
