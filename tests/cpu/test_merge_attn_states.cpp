// merge_attn_states reference against a float64 oracle: bf16/fp16/fp32, random lse, one side empty (-inf or
// +inf, with NaN in the empty side's out that must not leak), both empty, NaN lse; then rejections.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>

#include "common/random.h"
#include "mla/ops/merge_attn_states.h"
#include "test_kv_cache_data.h"

namespace mla {
namespace {

using test::RawArray;
namespace oracle = test::oracle;
constexpr float kInf = std::numeric_limits<float>::infinity();

struct MergeData {
  int n, h, d;
  RawArray a, b, out;
  std::vector<float> la, lb, lse;
  MergeAttnStatesParams p;
  MergeData(DType dt, int n_, int h_, int d_)
      : n(n_), h(h_), d(d_), a(dt, size_t(n_) * h_ * d_), b(dt, size_t(n_) * h_ * d_), out(dt, size_t(n_) * h_ * d_),
        la(size_t(n_) * h_), lb(size_t(n_) * h_), lse(size_t(n_) * h_) {}
  void bind() {
    const DType dt = a.dtype;
    p.out = TensorView::contiguous(out.data(), dt, {n, h, d});
    p.out_a = TensorView::contiguous(a.data(), dt, {n, h, d});
    p.out_b = TensorView::contiguous(b.data(), dt, {n, h, d});
    p.lse = TensorView::contiguous(lse.data(), DType::kFp32, {h, n});
    p.lse_a = TensorView::contiguous(la.data(), DType::kFp32, {h, n});
    p.lse_b = TensorView::contiguous(lb.data(), DType::kFp32, {h, n});
  }
};

// Random states with the special rows: token 0 head 0: a empty (-inf), token 1: b empty (+inf),
// token 2: both empty, token 3 head 0: NaN lse_a. Empty sides' outs are NaN.
MergeData make_data(DType dt, std::mt19937_64& rng) {
  MergeData m(dt, 9, 3, 24);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (size_t i = 0; i < m.a.bytes.size() / m.a.esize(); ++i) { m.a.set(i, nd(rng)); m.b.set(i, nd(rng)); }
  for (auto& x : m.la) x = 3.f * nd(rng);
  for (auto& x : m.lb) x = 3.f * nd(rng);
  auto l = [&](int t, int k) { return size_t(k) * m.n + t; };
  auto poison_out = [&](RawArray& o, int t, int k) {
    for (int j = 0; j < m.d; ++j) o.set((size_t(t) * m.h + k) * m.d + j, std::nanf(""));
  };
  m.la[l(0, 0)] = -kInf; poison_out(m.a, 0, 0);
  for (int k = 0; k < m.h; ++k) { m.lb[l(1, k)] = kInf; poison_out(m.b, 1, k); }
  m.la[l(2, 1)] = -kInf; m.lb[l(2, 1)] = -kInf; poison_out(m.a, 2, 1); poison_out(m.b, 2, 1);
  m.la[l(3, 0)] = std::nanf("");
  m.lb[l(4, 2)] = m.la[l(4, 2)] + 80.f;  // one side dominates by e^80
  m.bind();
  return m;
}

// Float64 oracle of one (token, head): returns {out_j..., lse} via callbacks.
struct OracleRow {
  std::vector<double> out;
  std::vector<double> mag;  // max(|a|, |b|) of each output: float error scales with it under cancellation
  double lse;
};
OracleRow oracle_row(const MergeData& m, int t, int k) {
  double la = m.la[size_t(k) * m.n + t], lb = m.lb[size_t(k) * m.n + t];
  if (std::isinf(la)) la = -INFINITY;
  if (std::isinf(lb)) lb = -INFINITY;
  OracleRow r{std::vector<double>(m.d, 0.0), std::vector<double>(m.d, 0.0), -INFINITY};
  const size_t base = (size_t(t) * m.h + k) * m.d;
  if (std::isnan(la) || std::isnan(lb)) {
    for (auto& x : r.out) x = NAN;
    r.lse = NAN;
    return r;
  }
  if (la == -INFINITY && lb == -INFINITY) return r;
  const double mx = std::max(la, lb);
  const double wa = la == -INFINITY ? 0 : std::exp(la - mx), wb = lb == -INFINITY ? 0 : std::exp(lb - mx);
  for (int j = 0; j < m.d; ++j) {
    const double va = wa > 0 ? m.a.get(base + j) : 0, vb = wb > 0 ? m.b.get(base + j) : 0;
    r.out[j] = (va * wa + vb * wb) / (wa + wb);
    r.mag[j] = std::max(std::fabs(va), std::fabs(vb));
  }
  r.lse = mx + std::log(wa + wb);
  return r;
}

// Float arithmetic then one rounding to the output dtype: within one output ulp of the exact value plus a
// few float ulps.
double tolerance(DType dt, double want, double mag) {
  const double a = std::fabs(want);
  const int mant = dt == DType::kBf16 ? 7 : (dt == DType::kFp16 ? 10 : 23);
  const double ulp = a > 0 ? std::ldexp(1.0, std::ilogb(a) - mant) : 0;
  return ulp + 8 * std::ldexp(std::max(a, mag), -24) + 1e-30;
}

class MergeAttnStatesRef : public ::testing::TestWithParam<DType> {};

TEST_P(MergeAttnStatesRef, MatchesFloat64Oracle) {
  const DType dt = GetParam();
  auto rng = test::case_rng("merge_" + std::string(dtype_name(dt)));
  MergeData m = make_data(dt, rng);
  ASSERT_TRUE(ref::merge_attn_states(m.p).is_ok());
  int bad = 0;
  for (int t = 0; t < m.n; ++t) {
    for (int k = 0; k < m.h; ++k) {
      const OracleRow r = oracle_row(m, t, k);
      const double got_lse = m.lse[size_t(k) * m.n + t];
      const bool lse_ok = std::isnan(r.lse) ? std::isnan(got_lse)
                          : std::isinf(r.lse) ? got_lse == r.lse
                                              : std::fabs(got_lse - r.lse) <= 1e-6 * (1 + std::fabs(r.lse));
      if (!lse_ok && bad++ < 5) ADD_FAILURE() << "lse t " << t << " h " << k << ": " << got_lse << " vs " << r.lse;
      for (int j = 0; j < m.d; ++j) {
        const double got = m.out.get((size_t(t) * m.h + k) * m.d + j), want = r.out[j];
        const bool ok = std::isnan(want) ? std::isnan(got) : std::fabs(got - want) <= tolerance(dt, want, r.mag[j]);
        if (!ok && bad++ < 5)
          ADD_FAILURE() << "out t " << t << " h " << k << " j " << j << ": " << got << " vs " << want;
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, MergeAttnStatesRef, ::testing::Values(DType::kBf16, DType::kFp16, DType::kFp32),
                         [](const ::testing::TestParamInfo<DType>& tp) { return std::string(dtype_name(tp.param)); });

TEST(MergeAttnStates, OneEmptySideCopiesTheOtherExactly) {
  auto rng = test::case_rng("merge_copy");
  MergeData m = make_data(DType::kBf16, rng);
  ASSERT_TRUE(ref::merge_attn_states(m.p).is_ok());
  for (int k = 0; k < m.h; ++k) {  // token 1: b empty in every head
    for (int j = 0; j < m.d; ++j) {
      const size_t i = (size_t(1) * m.h + k) * m.d + j;
      EXPECT_EQ(m.out.bits(i), m.a.bits(i));
    }
    EXPECT_EQ(m.lse[size_t(k) * m.n + 1], m.la[size_t(k) * m.n + 1]);
  }
  // Both empty: zeros and -inf.
  for (int j = 0; j < m.d; ++j) EXPECT_EQ(m.out.get((size_t(2) * m.h + 1) * m.d + j), 0.0);
  EXPECT_EQ(m.lse[size_t(1) * m.n + 2], -kInf);
}

TEST(MergeAttnStates, LseIsOptional) {
  auto rng = test::case_rng("merge_nolse");
  MergeData m = make_data(DType::kFp32, rng);
  m.p.lse = TensorView{};
  EXPECT_TRUE(ref::merge_attn_states(m.p).is_ok());
}

TEST(MergeAttnStates, RejectsBadArguments) {
  auto rng = test::case_rng("merge_reject");
  MergeData m = make_data(DType::kBf16, rng);
  ASSERT_TRUE(validate_merge_attn_states(m.p).is_ok());
  const std::vector<std::pair<std::string, std::function<void(MergeAttnStatesParams&)>>> bad = {
      {"out", [](auto& p) { p.out.dtype = DType::kE4m3; }},
      {"out", [](auto& p) { p.out.rank = 2; }},
      {"out", [](auto& p) { p.out.data = nullptr; }},
      {"head_dim", [](auto& p) { p.out.shape[2] = 20; p.out.stride[1] = 20; p.out.stride[0] = 60; }},
      {"out_a", [](auto& p) { p.out_a.dtype = DType::kFp16; }},
      {"out_a", [](auto& p) { p.out_a.shape[0] = 8; }},
      {"out_b", [](auto& p) { p.out_b.stride[0] = 100; }},
      {"lse_a", [](auto& p) { p.lse_a.shape[0] = 9; p.lse_a.shape[1] = 3; p.lse_a.stride[0] = 3; }},  // [n, h]
      {"lse_b", [](auto& p) { p.lse_b.dtype = DType::kBf16; }},
      {"lse", [](auto& p) { p.lse.shape[1] = 8; }},
  };
  for (const auto& [what, mutate] : bad) {
    MergeAttnStatesParams p = m.p;
    mutate(p);
    const Status st = ref::merge_attn_states(p);
    EXPECT_FALSE(st.is_ok()) << what;
    EXPECT_NE(st.to_string().find("merge_attn_states"), std::string::npos) << st.to_string();
    EXPECT_NE(st.to_string().find(what), std::string::npos) << st.to_string();
  }
}

}  // namespace
}  // namespace mla
