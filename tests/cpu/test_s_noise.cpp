// fp8_s_noise (tests/common/s_noise.h), the per-element spread an fp8 decode's score noise gives its outputs, against
// its definition taken numerically: each key's logit nudged on its own, the exact softmax output recomputed, the
// derivative times that key's M_t, summed in squares. Causal rows of several lengths, a row that sees no key, scales
// apart, DeepSeek-like data (the rows the model exists for).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/decode_data.h"
#include "common/s_noise.h"
#include "mla/core/fp8.h"
#include "mla/core/mla_shapes.h"

namespace mla {
namespace {

// A row's exact output (double) with logit t_nudged moved by `nudge` nats.
void row_out(const test::DecodeHostData& h, const std::vector<double>& logits, const std::vector<const uint8_t*>& tok,
             int t_nudged, double nudge, double* o) {
  double mx = -INFINITY;
  for (size_t t = 0; t < logits.size(); ++t) mx = std::max(mx, logits[t] + (int(t) == t_nudged ? nudge : 0.0));
  double z = 0;
  for (int d = 0; d < kDimV; ++d) o[d] = 0;
  for (size_t t = 0; t < logits.size(); ++t) {
    const double w = std::exp(logits[t] + (int(t) == t_nudged ? nudge : 0.0) - mx);
    z += w;
    for (int d = 0; d < kDimV; ++d) o[d] += w * e4m3_to_float(tok[t][d]) * h.shape.k_scale;
  }
  for (int d = 0; d < kDimV; ++d) o[d] /= z;
}

TEST(SNoise, MatchesTheNumericalDerivative) {
  for (test::DataKind kind : {test::DataKind::kNormal, test::DataKind::kDeepSeekLike}) {
    test::DecodeShape s = test::decode_shape(KvFormat::kFp8, 3, 16, 2, true, {1, 70, 130});
    s.q_scale = 0.5f;
    s.k_scale = 3.f;
    s.data = kind;
    std::mt19937_64 rng(61);
    const test::DecodeHostData h = test::make_decode_data(s, rng);
    const float softmax_scale = 0.0721687836f;
    const test::SNoise nz = test::fp8_s_noise(h, softmax_scale, 2);
    const double to_nats = double(softmax_scale) * s.q_scale * s.k_scale;
    double worst = 0;
    for (int row = 0; row < s.batch * s.s_q * s.h_q; ++row) {
      const int b = row / (s.s_q * s.h_q), i = (row / s.h_q) % s.s_q;
      const int vis = s.visible_keys(b, i);
      if (vis == 0) {  // sequence 0's query 0 sees no key: nothing to move
        for (int d = 0; d < kDimV; ++d) EXPECT_EQ(nz.out[size_t(row) * kDimV + d], 0.f);
        EXPECT_EQ(nz.lse[row], 0.f);
        continue;
      }
      std::vector<double> logits(vis), mag(vis);
      std::vector<const uint8_t*> tok(vis);
      for (int t = 0; t < vis; ++t) {
        tok[t] = h.token(b, t);
        double dot = 0, m = 0;
        for (int d = 0; d < kDimQK; ++d) {
          const double p = double(e4m3_to_float(h.q[size_t(row) * kDimQK + d])) * e4m3_to_float(tok[t][d]);
          dot += p;
          m += std::fabs(p);
        }
        logits[t] = dot * to_nats;
        mag[t] = m * to_nats;
      }
      // Central differences of out in each logit; lse's derivative in logit t is its softmax weight.
      std::vector<double> var(kDimV, 0.0);
      double var_lse = 0, mx = -INFINITY, z = 0;
      for (double l : logits) mx = std::max(mx, l);
      for (double l : logits) z += std::exp(l - mx);
      const double eps = 1e-4;
      double up[kDimV], dn[kDimV];
      for (int t = 0; t < vis; ++t) {
        row_out(h, logits, tok, t, eps, up);
        row_out(h, logits, tok, t, -eps, dn);
        for (int d = 0; d < kDimV; ++d) {
          const double g = (up[d] - dn[d]) / (2 * eps) * mag[t];
          var[d] += g * g;
        }
        const double wl = std::exp(logits[t] - mx) / z * mag[t];
        var_lse += wl * wl;
      }
      double scale = 0;  // the row's largest sigma: the unit the comparison is relative to
      for (int d = 0; d < kDimV; ++d) scale = std::max(scale, std::sqrt(var[d]));
      for (int d = 0; d < kDimV; ++d) {
        const double got = nz.out[size_t(row) * kDimV + d], want = std::sqrt(var[d]);
        // float storage (2^-24) and the differences' truncation (eps^2 of the curvature) against a row's scale.
        EXPECT_NEAR(got, want, 1e-4 * scale + 1e-30) << "row " << row << " d " << d;
        worst = std::max(worst, std::fabs(got - want) / scale);
      }
      EXPECT_NEAR(nz.lse[row], std::sqrt(var_lse), 1e-5 * std::sqrt(var_lse)) << "row " << row;
    }
    EXPECT_LT(worst, 1e-4);
  }
}

// A row carried by one key does not move (its weight stays 1 whatever its logit), and a row of two keys at equal
// logits moves the most: sigma = |v1 - v2| / 4 * sqrt(M1^2 + M2^2) per element (w = 1/2 each).
TEST(SNoise, OneKeyRowIsStillTwoKeyRowSwings) {
  test::DecodeShape s = test::decode_shape(KvFormat::kFp8, 2, 16, 1, false, {1, 2});
  std::mt19937_64 rng(7);
  test::DecodeHostData h = test::make_decode_data(s, rng);
  // Sequence 1's two keys: the same K but for dim 0, where V is +1 / -1 and q is 0 (so every row's two logits, and
  // M_t, are equal).
  uint8_t* k0 = &h.cache[size_t(h.block_table[1 * h.max_pages]) * kDecodePageSize * kDimQK];
  uint8_t* k1 = k0 + kDimQK;
  for (int d = 0; d < kDimQK; ++d) k1[d] = k0[d];
  k0[0] = float_to_e4m3(1.f);
  k1[0] = float_to_e4m3(-1.f);
  for (int hq = 0; hq < 16; ++hq) h.q[size_t(16 + hq) * kDimQK] = float_to_e4m3(0.f);
  const test::SNoise nz = test::fp8_s_noise(h, 0.1f, 1);
  for (int hq = 0; hq < 16; ++hq) {
    for (int d = 0; d < kDimV; ++d) EXPECT_EQ(nz.out[size_t(hq) * kDimV + d], 0.f) << hq;  // sequence 0: one key
    const int row = 16 + hq;
    double m0 = 0, m1 = 0;
    for (int d = 0; d < kDimQK; ++d) {
      const double q = e4m3_to_float(h.q[size_t(row) * kDimQK + d]);
      m0 += std::fabs(q * e4m3_to_float(k0[d]));
      m1 += std::fabs(q * e4m3_to_float(k1[d]));
    }
    m0 *= 0.1;
    m1 *= 0.1;
    EXPECT_NEAR(nz.out[size_t(row) * kDimV + 0], 2.0 / 4 * std::sqrt(m0 * m0 + m1 * m1), 1e-5 * (m0 + m1)) << row;
    for (int d = 1; d < kDimV; ++d) EXPECT_EQ(nz.out[size_t(row) * kDimV + d], 0.f) << row << " " << d;
  }
}

// beyond_s_noise takes up to eps x sigma off each difference, towards the reference, and passes non-finite values
// through; s_noise_eps_needed finds the smallest eps at which a check passes.
TEST(SNoise, AllowanceAndTheEpsACheckNeeds) {
  test::SNoise nz;
  nz.out = {1.f, 2.f, 0.f, 4.f, 1.f};
  const std::vector<double> ref = {0.0, 1.0, 0.0, -1.0, 0.0}, got = {0.5, 0.0, 0.0, 1.0, NAN};
  auto g = [&](size_t i) { return got[i]; };
  auto r = [&](size_t i) { return ref[i]; };
  const std::vector<double> v = test::beyond_s_noise(5, g, r, nz, 0.25);
  EXPECT_DOUBLE_EQ(v[0], 0.25);   // 0.5 less 0.25
  EXPECT_DOUBLE_EQ(v[1], 0.5);    // 1 - 1 brought 0.5 closer
  EXPECT_DOUBLE_EQ(v[2], 0.0);    // no difference, no allowance
  EXPECT_DOUBLE_EQ(v[3], 0.0);    // a difference of 2 less an allowance of 1
  EXPECT_TRUE(std::isnan(v[4]));  // non-finite: unchanged
  // Every finite |difference| <= 0.1 after the allowance: (0.5 - 0.1) / 1, (1 - 0.1) / 2, (2 - 0.1) / 4 -> 0.475.
  auto small = [&](const std::vector<double>& x) {
    for (size_t i = 0; i < 4; ++i)
      if (std::fabs(x[i] - ref[i]) > 0.1 + 1e-12) return false;
    return true;
  };
  const double eps = test::s_noise_eps_needed(5, g, r, nz, small);
  EXPECT_GE(eps, 0.475);
  EXPECT_LE(eps, 0.475 * 1.011);
  EXPECT_EQ(test::s_noise_eps_needed(5, r, r, nz, small), 0.0);  // passes as it is
  auto never = [](const std::vector<double>&) { return false; };
  EXPECT_TRUE(std::isinf(test::s_noise_eps_needed(5, g, r, nz, never)));
}

}  // namespace
}  // namespace mla
