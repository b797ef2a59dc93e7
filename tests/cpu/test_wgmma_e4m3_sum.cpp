// The reference's model of Hopper's e4m3 wgmma accumulation (src/ops/ref/wgmma_e4m3_sum.h): hand-worked steps, the
// float implementation against a plain double rendering of the same model (the form calibrated against the H200 in
// bench/decode/repro/fp8_acc_emulation.cpp), the P.V step against the scalar step, and the decode reference with it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "common/decode_data.h"
#include "mla/core/fp8.h"
#include "mla/core/half.h"
#include "mla/ops/mla_decode.h"
#include "ops/ref/wgmma_e4m3_sum.h"

namespace mla::ref {
namespace {

TEST(WgmmaE4m3Sum, SmallTermsAddExactly) {
  const float p[3] = {1.f, 2.f, 3.f};
  for (bool rs : {false, true}) EXPECT_EQ(wgmma_e4m3_step(4.f, p, 3, rs), 10.f);
}

TEST(WgmmaE4m3Sum, TermsBelowTheLargestsFourteenBitsAreCut) {
  // 520 is in [2^9, 2^10): every term is cut to a multiple of 2^(9 - 13) = 1/16, toward zero.
  const float a[2] = {520.f, 0.03f};
  const float b[2] = {-520.f, -0.1f};  // -1.6 sixteenths -> -1
  const float c[2] = {520.f, 0.1f};
  for (bool rs : {false, true}) {
    EXPECT_EQ(wgmma_e4m3_step(0.f, a, 2, rs), 520.f);
    EXPECT_EQ(wgmma_e4m3_step(0.f, b, 2, rs), -520.0625f);
    EXPECT_EQ(wgmma_e4m3_step(0.f, c, 2, rs), 520.0625f);
  }
}

TEST(WgmmaE4m3Sum, TheAccumulatorJoinsTheAlignmentAndKeepsThirteenBits) {
  const float small[1] = {0.05f};
  for (bool rs : {false, true}) EXPECT_EQ(wgmma_e4m3_step(1000.f, small, 1, rs), 1000.f);  // < 1/16 of C's scale
  // C = 1000.07 (not on the 1/16 grid) + 520: 1520.07 whole or 1520.0625 cut; 13 mantissa bits in [2^10, 2^11) (steps
  // of 1/8) keep 1520 either way.
  const float big[1] = {520.f};
  for (bool rs : {false, true}) EXPECT_EQ(wgmma_e4m3_step(1000.07f, big, 1, rs), 1520.f);
  EXPECT_EQ(wgmma_e4m3_keep13(1.f + 0x1p-20f), 1.f);
  EXPECT_EQ(wgmma_e4m3_keep13(1.f + 0x1p-13f), 1.f + 0x1p-13f);
  EXPECT_EQ(wgmma_e4m3_keep13(-(1.f + 0x1p-14f)), -1.f);
}

// The step of n1's row 323 of fp8_b7_h128_sq4_causal_tiny_mix_s0p02_ds (session 62): C = -52572 meets a product of
// 78848, whose grid is 8. Cut with the products (RS, the kernel's last S step there) C is -52568 and D 26280; whole
// (SS) D is 26276. n1's lse matched the RS value at that step, and the SS value at the SS steps of two other rows.
TEST(WgmmaE4m3Sum, RegisterAFormCutsTheAccumulatorSharedMemoryFormDoesNot) {
  const float p[1] = {78848.f};
  EXPECT_EQ(wgmma_e4m3_step(-52572.f, p, 1, true), 26280.f);
  EXPECT_EQ(wgmma_e4m3_step(-52572.f, p, 1, false), 26276.f);
}

TEST(WgmmaE4m3Sum, ZeroAndNaNTerms) {
  const float z[2] = {0.f, 0.f};
  const float n[2] = {1.f, std::numeric_limits<float>::quiet_NaN()};
  for (bool rs : {false, true}) {
    EXPECT_EQ(wgmma_e4m3_step(0.f, z, 2, rs), 0.f);
    EXPECT_TRUE(std::isnan(wgmma_e4m3_step(3.f, n, 2, rs)));
  }
}

// The same model in doubles, spelled as the calibration tool spells it.
double model_dot(const std::vector<float>& q, const std::vector<float>& k, int rs_from) {
  double acc = 0;
  for (int k0 = 0; k0 < 576; k0 += 32) {
    double p[32], top = std::fabs(acc);
    for (int d = 0; d < 32; ++d) {
      p[d] = double(q[k0 + d]) * k[k0 + d];
      top = std::max(top, std::fabs(p[d]));
    }
    if (top == 0) continue;
    int e;
    std::frexp(top, &e);  // top in [2^(e-1), 2^e)
    const double ulp = std::ldexp(1.0, e - 14);
    double s = k0 / 32 >= rs_from ? std::trunc(acc / ulp) * ulp : acc;  // C cut in the RS steps only
    for (int d = 0; d < 32; ++d) s += std::trunc(p[d] / ulp) * ulp;
    std::frexp(std::fabs(s), &e);
    const double u13 = std::ldexp(1.0, e - 14);
    acc = s == 0 ? 0 : std::trunc(s / u13) * u13;
  }
  return acc;
}

TEST(WgmmaE4m3Sum, Dot576MatchesTheDoubleModelBitForBit) {
  std::mt19937_64 rng(62);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_int_distribution<int> dim(0, 575);
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<float> q(576), k(576);
    const float sq = trial % 3 == 0 ? 40.f : 1.f, sk = trial % 5 == 0 ? 100.f : 2.f;
    for (int d = 0; d < 576; ++d) {
      q[d] = e4m3_to_float(float_to_e4m3(nd(rng)));
      k[d] = e4m3_to_float(float_to_e4m3(nd(rng)));
    }
    for (int o = 0; o < 4; ++o) {  // outlier channels, as DeepSeek-like data has, up to saturation
      q[dim(rng)] = e4m3_to_float(float_to_e4m3(sq * nd(rng)));
      k[dim(rng)] = e4m3_to_float(float_to_e4m3(sk * nd(rng)));
    }
    const int rs_from = trial % 3 == 0 ? 18 : trial % 3 == 1 ? 12 : 10;  // none, ws_qreg's 6, ws_split's 8
    const float got = wgmma_e4m3_dot576(q.data(), k.data(), rs_from);
    ASSERT_EQ(double(got), model_dot(q, k, rs_from)) << "trial " << trial;
  }
}

TEST(WgmmaE4m3Sum, TruncCutsTowardZeroAndZeroesNaN) {
  EXPECT_EQ(wgmma_e4m3_trunc(2.75f), 2.f);
  EXPECT_EQ(wgmma_e4m3_trunc(-2.75f), -2.f);
  EXPECT_EQ(wgmma_e4m3_trunc(-0.5f), 0.f);
  EXPECT_EQ(wgmma_e4m3_trunc(16383.9f), 16383.f);
  EXPECT_EQ(wgmma_e4m3_trunc(-1073741824.f), -1073741824.f);  // 2^30: still converted
  EXPECT_EQ(wgmma_e4m3_trunc(std::nanf("")), 0.f);              // the callers carry NaN on the side
  EXPECT_EQ(wgmma_e4m3_trunc(3e9f), 0.f);                       // past int32: zeroed, not undefined
}

TEST(WgmmaE4m3Sum, FourScoresSideBySideAreFourScores) {
  std::mt19937_64 rng(66);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> q(576), k(4 * 576);
  for (int trial = 0; trial < 200; ++trial) {
    for (float& x : q) x = e4m3_to_float(float_to_e4m3(nd(rng) * (trial % 7 == 0 ? 30.f : 1.f)));
    for (float& x : k) x = e4m3_to_float(float_to_e4m3(nd(rng)));
    if (trial % 11 == 0) k[576 + trial % 576] = std::nanf("");
    const float* kp[4] = {&k[0], &k[576], &k[2 * 576], &k[3 * 576]};
    const int rs_from = trial % 3 == 0 ? 18 : trial % 3 == 1 ? 12 : 10;
    float got[4];
    wgmma_e4m3_dot576_n<4>(q.data(), kp, rs_from, got);
    for (int n = 0; n < 4; ++n) {
      const float want = wgmma_e4m3_dot576(q.data(), kp[n], rs_from);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got[n])) << "trial " << trial << " key " << n;
      } else {
        EXPECT_EQ(got[n], want) << "trial " << trial << " key " << n;
      }
    }
  }
}

TEST(WgmmaE4m3Sum, TheEightLaneStepIsTheStep) {
  std::mt19937_64 rng(65);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int trial = 0; trial < 5000; ++trial) {
    float prods[32];
    for (float& x : prods) x = e4m3_to_float(float_to_e4m3(nd(rng))) * e4m3_to_float(float_to_e4m3(4.f * nd(rng)));
    if (trial % 4 == 0) prods[trial % 32] = 520.f;
    const float c = trial % 3 == 0 ? 0.f : 300.f * nd(rng);
    const bool rs = trial % 2 == 0;
    ASSERT_EQ(wgmma_e4m3_step32(c, prods, rs), wgmma_e4m3_step(c, prods, 32, rs)) << trial;
  }
}

// One P.V step of 40 columns against the scalar step per column, in either form (rs: C cut with the terms).
void check_pv_step(bool rs) {
  std::mt19937_64 rng(63);
  std::normal_distribution<float> nd(0.f, 1.f);
  constexpr int kCols = 40;
  std::vector<std::vector<float>> v(32, std::vector<float>(kCols));
  for (auto& row : v)
    for (float& x : row) x = e4m3_to_float(float_to_e4m3(8.f * nd(rng)));
  float p[32];
  for (int t = 0; t < 32; ++t)
    p[t] = t % 7 == 3 ? 0.f : e4m3_to_float(float_to_e4m3(std::exp2(-std::fabs(4 * nd(rng)))));
  for (float& x : v[3]) x = std::numeric_limits<float>::quiet_NaN();  // p[3] == 0: a masked key's V is never read
  std::vector<float> o(kCols), want(kCols);
  for (int d = 0; d < kCols; ++d) o[d] = d % 9 == 0 ? 0.f : 37.f * nd(rng);
  for (int d = 0; d < kCols; ++d) {
    float prods[32];
    for (int t = 0; t < 32; ++t) prods[t] = p[t] == 0.f ? 0.f : p[t] * v[t][d];
    want[d] = wgmma_e4m3_step(o[d], prods, 32, rs);
  }
  std::vector<const float*> vp(32);
  for (int t = 0; t < 32; ++t) vp[t] = v[t].data();
  std::vector<float> scratch(3 * kCols);
  wgmma_e4m3_pv_step(o.data(), p, vp.data(), 32, kCols, rs, scratch.data());
  for (int d = 0; d < kCols; ++d) EXPECT_EQ(o[d], want[d]) << "column " << d << " rs " << rs;
}

TEST(WgmmaE4m3Sum, PvStepIsTheScalarStepPerColumn) {
  check_pv_step(false);
  check_pv_step(true);
}

// The decode reference with the model: the same rows masked, and lse off the float reference's by about what the
// H200's wgmma kernels are off it: on N(0, 1) data up to ~5e-3 nats (session 54's fp8 suite: lse max_abs median
// 3.3e-4, p99 5.2e-3), on DeepSeek-like data a few 0.01 (n1's 67 worst rows: 0.005-0.14 nats at |lse| 8-63).
TEST(WgmmaE4m3Sum, DecodeReferenceStaysCloseToFloatSums) {
  for (test::DataKind kind : {test::DataKind::kNormal, test::DataKind::kDeepSeekLike}) {
    test::DecodeShape s = test::decode_shape(KvFormat::kFp8, 2, 16, 2, true, {1, 300});
    s.q_scale = 0.5f;
    s.k_scale = 1.5f;
    s.data = kind;
    std::mt19937_64 rng(64);
    const test::DecodeHostData h = test::make_decode_data(s, rng);
    std::vector<uint16_t> out_f(h.out_elems()), out_w(h.out_elems());
    std::vector<float> lse_f(h.lse_elems()), lse_w(h.lse_elems());
    MlaDecodeRefOptions wg;
    wg.fp8_mma_sum = Fp8MmaSum::kWgmmaE4m3;
    ASSERT_TRUE(mla_decode(h.host_params(out_f.data(), lse_f.data(), 0.0721687836f)).is_ok());
    ASSERT_TRUE(mla_decode(h.host_params(out_w.data(), lse_w.data(), 0.0721687836f), wg).is_ok());
    double num = 0, den = 0, dl = 0;
    for (size_t i = 0; i < out_f.size(); ++i) {
      const double a = bf16_to_float(out_f[i]), b = bf16_to_float(out_w[i]);
      num += (a - b) * (a - b);
      den += a * a;
    }
    for (size_t i = 0; i < lse_f.size(); ++i) {
      ASSERT_EQ(std::isinf(lse_f[i]), std::isinf(lse_w[i])) << i;  // the rows that see no key
      if (!std::isinf(lse_f[i])) dl = std::max(dl, double(std::fabs(lse_f[i] - lse_w[i])));
    }
    EXPECT_LT(std::sqrt(num / den), 3e-2) << int(kind);
    EXPECT_GT(dl, 0.0) << int(kind);  // the model does cut: a float sum would give the float reference's lse exactly
    EXPECT_LT(dl, kind == test::DataKind::kNormal ? 1e-2 : 0.3) << int(kind);
    std::printf("data %d: out rel_l2 %.2e, lse max |diff| %.2e nats\n", int(kind), std::sqrt(num / den), dl);
  }
}

}  // namespace
}  // namespace mla::ref
