// The mla_decode CPU reference against a float64 oracle written from the definition (no blocks, no
// online softmax, no rounding of P), for every format, causal and not, mixed lengths; the split-KV path
// against the unsplit one; and each rejection of bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "common/decode_data.h"
#include "common/metrics.h"
#include "mla/core/fp8.h"
#include "mla/core/half.h"
#include "mla/core/page_table.h"
#include "mla/ops/decode_running_max.h"
#include "mla/ops/mla_decode.h"
#include "ops/common/cache_codec.h"

namespace mla {
namespace {

using test::DecodeHostData;
using test::DecodeShape;

struct Outputs {
  std::vector<uint16_t> out;
  std::vector<float> lse;
  float out_at(size_t i, KvFormat f) const {
    return f == KvFormat::kFp16 ? fp16_to_float(out[i]) : bf16_to_float(out[i]);
  }
};

float softmax_scale_for_test() { return 1.f / std::sqrt(192.f); }

// float64 oracle over the stored (quantized) inputs, dequantized exactly.
void oracle(const DecodeHostData& h, std::vector<double>* out, std::vector<double>* lse) {
  const DecodeShape& s = h.shape;
  out->assign(h.out_elems(), 0.0);
  lse->assign(h.lse_elems(), -std::numeric_limits<double>::infinity());
  auto qv = [&](size_t i) -> double {
    switch (s.format) {
      case KvFormat::kFp8: return double(e4m3_to_float(h.q[i])) * s.q_scale;
      case KvFormat::kFp16: return fp16_to_float(uint16_t(h.q[2 * i] | (h.q[2 * i + 1] << 8)));
      default: return bf16_to_float(uint16_t(h.q[2 * i] | (h.q[2 * i + 1] << 8)));
    }
  };
  auto kv = [&](int b, int t, int d) -> double {
    const uint8_t* tok = h.token(b, t);
    switch (s.format) {
      case KvFormat::kFp8: return double(e4m3_to_float(tok[d])) * s.k_scale;
      case KvFormat::kFp16: return fp16_to_float(uint16_t(tok[2 * d] | (tok[2 * d + 1] << 8)));
      case KvFormat::kBf16: return bf16_to_float(uint16_t(tok[2 * d] | (tok[2 * d + 1] << 8)));
      case KvFormat::kFp8Ds:
        return d < kDimLatent ? cache::fp8_ds_latent(tok, d)
                              : bf16_to_float(cache::fp8_ds_rope_bits(tok, d - kDimLatent));
    }
    return NAN;
  };
  for (int b = 0; b < s.batch; ++b)
    for (int i = 0; i < s.s_q; ++i)
      for (int hh = 0; hh < s.h_q; ++hh) {
        const int visible = s.causal ? s.seqlens[b] - s.s_q + 1 + i : s.seqlens[b];
        if (visible <= 0) continue;
        const size_t qoff = ((size_t(b) * s.s_q + i) * s.h_q + hh) * kDimQK;
        std::vector<double> sc(visible);
        double mx = -INFINITY;
        for (int t = 0; t < visible; ++t) {
          double acc = 0;
          for (int d = 0; d < kDimQK; ++d) acc += qv(qoff + d) * kv(b, t, d);
          sc[t] = acc * softmax_scale_for_test();
          mx = std::max(mx, sc[t]);
        }
        double sum = 0;
        for (int t = 0; t < visible; ++t) sum += std::exp(sc[t] - mx);
        const size_t ooff = ((size_t(b) * s.s_q + i) * s.h_q + hh) * kDimV;
        for (int t = 0; t < visible; ++t) {
          const double p = std::exp(sc[t] - mx) / sum;
          for (int d = 0; d < kDimV; ++d) (*out)[ooff + d] += p * kv(b, t, d);
        }
        (*lse)[(size_t(b) * s.h_q + hh) * s.s_q + i] = mx + std::log(sum);
      }
}

Status run_ref(const DecodeHostData& h, Outputs* o, PRounding r, const DecodePlanView* plan = nullptr) {
  o->out.assign(h.out_elems(), 0xFFFF);  // NaN-poisoned: every element must be written
  o->lse.assign(h.lse_elems(), std::numeric_limits<float>::quiet_NaN());
  auto p = h.host_params(o->out.data(), o->lse.data(), softmax_scale_for_test());
  MlaDecodeRefOptions opts;
  opts.p_rounding = r;
  if (!plan) return ref::mla_decode(p, opts);
  DecodePlanGeometry g;
  MLA_TRY(decode_plan_geometry(h.shape.batch, h.shape.s_q, h.shape.h_q, 132, &g));
  std::vector<float> oacc(size_t(g.max_splits) * h.shape.s_q * h.shape.h_q * kDimV, NAN);
  std::vector<float> lacc(size_t(g.max_splits) * h.shape.s_q * h.shape.h_q, NAN);
  return ref::mla_decode_split(p, *plan, oacc.data(), lacc.data(), opts);
}

struct RefCase {
  const char* name;
  DecodeShape shape;
  // Tolerance vs the float64 oracle with P unrounded: dominated by rounding the output to bf16/fp16
  // (relative 2^-9 / 2^-12 per element, ~1.1e-3 / 1.4e-4 RMS), float accumulation adds ~1e-6.
  double tol_exact;
  // With P rounded like the kernel: bf16 P adds ~2^-9 relative per term, averaged over many keys;
  // e4m3 P adds up to 2^-4 per term (measured ~1-2e-2 over a row of keys).
  double tol_rounded;
};

class MlaDecodeRef : public ::testing::TestWithParam<RefCase> {};

TEST_P(MlaDecodeRef, MatchesFloat64Oracle) {
  const RefCase& c = GetParam();
  std::mt19937_64 rng(std::hash<std::string>{}(c.name) ^ 0x5eed);
  const DecodeHostData h = test::make_decode_data(c.shape, rng);
  std::vector<double> oo, ol;
  oracle(h, &oo, &ol);
  for (PRounding r : {PRounding::kNone, PRounding::kFormatDefault}) {
    Outputs o;
    ASSERT_TRUE(run_ref(h, &o, r).is_ok());
    const auto so = test::compare(oo.size(), [&](size_t i) { return double(o.out_at(i, c.shape.format)); },
                                  [&](size_t i) { return oo[i]; });
    const auto sl = test::compare(
        ol.size(), [&](size_t i) { return double(o.lse[i]); }, [&](size_t i) { return ol[i]; });
    const double tol = r == PRounding::kNone ? c.tol_exact : c.tol_rounded;
    EXPECT_EQ(so.nonfinite_got + so.mismatched_nan, 0u) << so.str();
    EXPECT_LE(so.rel_l2, tol) << (r == PRounding::kNone ? "exact P: " : "rounded P: ") << so.str();
    // lse does not depend on P rounding: float accumulation only.
    EXPECT_EQ(sl.nonfinite_got + sl.mismatched_nan, 0u) << sl.str();
    EXPECT_LE(sl.max_abs, 1e-4) << sl.str();
  }
}

TEST_P(MlaDecodeRef, SplitEqualsUnsplit) {
  const RefCase& c = GetParam();
  std::mt19937_64 rng(std::hash<std::string>{}(c.name) ^ 0x5717u);
  const DecodeHostData h = test::make_decode_data(c.shape, rng);
  DecodePlanGeometry g;
  ASSERT_TRUE(decode_plan_geometry(c.shape.batch, c.shape.s_q, c.shape.h_q, 132, &g).is_ok());
  std::vector<int32_t> parts(size_t(g.num_parts) * kPlanPartInts), off(c.shape.batch + 1);
  DecodePlanView plan{parts.data(), off.data(), g.num_parts};
  auto sl = TensorView::contiguous(h.seqlens.data(), DType::kInt32, {c.shape.batch});
  // seq_cost 0, no split price and a tiny share force many splits per sequence.
  g.split_price = 0;
  ASSERT_TRUE(ref::plan_decode(sl, g, plan, {0, 1}).is_ok());
  Outputs a, b;
  ASSERT_TRUE(run_ref(h, &a, PRounding::kNone).is_ok());
  ASSERT_TRUE(run_ref(h, &b, PRounding::kNone, &plan).is_ok());
  const auto so = test::compare(a.out.size(), [&](size_t i) { return double(b.out_at(i, c.shape.format)); },
                                [&](size_t i) { return double(a.out_at(i, c.shape.format)); });
  const auto sl2 = test::compare_vec(b.lse, a.lse);
  // Same math, different summation order, then output rounding: a few outputs flip by one ulp.
  EXPECT_LE(so.rel_l2, 2e-3) << so.str();
  EXPECT_EQ(so.nonfinite_got + so.mismatched_nan, 0u);
  EXPECT_LE(sl2.max_abs, 1e-4) << sl2.str();
  EXPECT_EQ(sl2.nonfinite_got + sl2.mismatched_nan, 0u);
  int most = 0;
  for (int i = 0; i < c.shape.batch; ++i) most = std::max(most, off[i + 1] - off[i]);
  EXPECT_GT(most, 1) << "the plan should have split some sequence";
}

DecodeShape shape(int b, int s_q, int h_q, std::vector<int> sl, KvFormat f, bool causal = false, float qs = 1.f,
                  float ks = 1.f) {
  DecodeShape s;
  s.batch = b;
  s.s_q = s_q;
  s.h_q = h_q;
  s.seqlens = std::move(sl);
  s.format = f;
  s.causal = causal;
  s.q_scale = qs;
  s.k_scale = ks;
  return s;
}

INSTANTIATE_TEST_SUITE_P(
    Formats, MlaDecodeRef,
    ::testing::Values(
        RefCase{"bf16_mixed", shape(4, 1, 16, {1, 63, 130, 200}, KvFormat::kBf16), 3e-3, 5e-3},
        RefCase{"bf16_h128", shape(2, 1, 128, {65, 192}, KvFormat::kBf16), 3e-3, 5e-3},
        RefCase{"bf16_causal_sq4", shape(3, 4, 16, {2, 64, 150}, KvFormat::kBf16, true), 3e-3, 5e-3},
        RefCase{"bf16_zero_len", shape(3, 2, 32, {0, 70, 1}, KvFormat::kBf16, true), 3e-3, 5e-3},
        RefCase{"fp16_mixed", shape(3, 2, 16, {5, 64, 129}, KvFormat::kFp16, true), 5e-4, 1e-3},
        RefCase{"fp8_unit_scales", shape(3, 1, 32, {33, 128, 180}, KvFormat::kFp8), 3e-3, 4e-2},
        RefCase{"fp8_scales", shape(2, 2, 16, {100, 257}, KvFormat::kFp8, true, 0.02f, 3.0f), 3e-3, 4e-2},
        RefCase{"fp8_ds", shape(3, 1, 64, {1, 90, 255}, KvFormat::kFp8Ds), 3e-3, 5e-3}),
    [](const auto& pinfo) { return std::string(pinfo.param.name); });

TEST(MlaDecodeRefEdge, EmptyRowsGiveZerosAndNegInfLse) {
  // seqlen 0, and causal rows that see nothing (seqlen 1 < s_q 3 for rows 0 and 1).
  std::mt19937_64 rng(3);
  const DecodeHostData h = test::make_decode_data(shape(2, 3, 16, {0, 1}, KvFormat::kBf16, true), rng);
  Outputs o;
  ASSERT_TRUE(run_ref(h, &o, PRounding::kFormatDefault).is_ok());
  for (int hh = 0; hh < 16; ++hh) {
    for (int i = 0; i < 3; ++i) EXPECT_EQ(o.lse[(0 * 16 + hh) * 3 + i], -INFINITY);
    EXPECT_EQ(o.lse[(1 * 16 + hh) * 3 + 0], -INFINITY);
    EXPECT_EQ(o.lse[(1 * 16 + hh) * 3 + 1], -INFINITY);
    EXPECT_TRUE(std::isfinite(o.lse[(1 * 16 + hh) * 3 + 2]));
  }
  for (int d = 0; d < kDimV; ++d) {
    EXPECT_EQ(o.out[d], 0u);                                   // b 0
    EXPECT_EQ(o.out[(size_t(1) * 3 * 16 + 0) * kDimV + d], 0u);  // b 1, row 0, head 0
  }
}

// The running-max rule the kernels and the reference share: exact for slack 0, lazy (moves only past the slack, in
// log2 units of P) for fp8; -inf (no key yet) always takes the page max, a fully masked page (-inf) never moves it.
TEST(DecodeRunningMax, ExactAndLazyRules) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(decode_running_max(1.f, 3.f, 1.f, 0.f), 3.f);
  EXPECT_EQ(decode_running_max(3.f, 1.f, 1.f, 0.f), 3.f);
  for (float slack : {0.f, kDecodeFp8MaxSlackLog2}) {
    EXPECT_EQ(decode_running_max(-inf, 2.5f, 0.3f, slack), 2.5f);
    EXPECT_EQ(decode_running_max(2.5f, -inf, 0.3f, slack), 2.5f);
    EXPECT_EQ(decode_running_max(-inf, -inf, 0.3f, slack), -inf);
  }
  // Slack 8 with to_log2 0.5: a page max up to 16 above the running one keeps it (P <= 2^8), beyond moves it.
  EXPECT_EQ(decode_running_max(1.f, 17.f, 0.5f, 8.f), 1.f);
  EXPECT_EQ(decode_running_max(1.f, 17.5f, 0.5f, 8.f), 17.5f);
  EXPECT_EQ(decode_running_max(1.f, -5.f, 0.5f, 8.f), 1.f);
  EXPECT_LE(kDecodeFp8MaxSlackLog2, 8.f);  // P <= 2^slack must stay inside e4m3's 448 (P is cast without a scale)
}

TEST(MlaDecodeRefEdge, Fp8SaturatedInputsStayFinite) {
  DecodeShape s = shape(2, 1, 16, {64, 100}, KvFormat::kFp8, false, 0.02f, 0.02f);
  s.data_scale = 50.f;  // |x| / 0.02 far beyond 448: the stored codes saturate at +-448
  std::mt19937_64 rng(4);
  const DecodeHostData h = test::make_decode_data(s, rng);
  int saturated = 0;
  for (uint8_t c : h.q) saturated += (c & 0x7F) == 0x7E;
  EXPECT_GT(saturated, 100);
  Outputs o;
  ASSERT_TRUE(run_ref(h, &o, PRounding::kFormatDefault).is_ok());
  for (size_t i = 0; i < o.out.size(); ++i) ASSERT_TRUE(std::isfinite(o.out_at(i, KvFormat::kFp8))) << i;
}

// make_decode_data without the float copy of K (DecodeShape::keep_kv_float false, the 16-bit GPU suite's) draws the
// same bytes: the copy is only where the draws land before the cache-op reference writes them.
TEST(DecodeData, WithoutTheFloatCopySameBytes) {
  for (KvFormat f : {KvFormat::kBf16, KvFormat::kFp16, KvFormat::kFp8, KvFormat::kFp8Ds}) {
    DecodeShape s = shape(3, 2, 16, {130, 0, 64}, f, true);
    std::mt19937_64 rng_a(11), rng_b(11);
    const DecodeHostData a = test::make_decode_data(s, rng_a);
    s.keep_kv_float = false;
    const DecodeHostData b = test::make_decode_data(s, rng_b);
    EXPECT_FALSE(a.kv_float.empty());
    EXPECT_TRUE(b.kv_float.empty());
    EXPECT_EQ(a.q, b.q) << kv_format_name(f);
    EXPECT_EQ(a.cache, b.cache) << kv_format_name(f);
    EXPECT_EQ(a.block_table, b.block_table) << kv_format_name(f);
    EXPECT_EQ(rng_a(), rng_b()) << kv_format_name(f);  // the same draws, in the same order
  }
}

// ---- bad input ---------------------------------------------------------------------------------------
class MlaDecodeRefRejects : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937_64 rng(5);
    h = test::make_decode_data(shape(2, 1, 16, {70, 10}, KvFormat::kBf16), rng);
    out.assign(h.out_elems(), 0);
    lse.assign(h.lse_elems(), 0);
    p = h.params(h.q.data(), h.cache.data(), h.block_table.data(), h.seqlens.data(), out.data(), lse.data(), 0.1f);
  }
  void expect_reject(const MlaDecodeParams& bad, const char* needle) {
    Status s = ref::mla_decode(bad);
    ASSERT_FALSE(s.is_ok()) << "accepted: " << needle;
    EXPECT_NE(s.to_string().find("mla_decode"), std::string::npos) << s.to_string();
    EXPECT_NE(s.to_string().find(needle), std::string::npos) << s.to_string();
  }
  DecodeHostData h;
  std::vector<uint16_t> out;
  std::vector<float> lse;
  MlaDecodeParams p;
};

TEST_F(MlaDecodeRefRejects, Accepts) { EXPECT_TRUE(ref::mla_decode(p).is_ok()); }

TEST_F(MlaDecodeRefRejects, WrongQDtype) {
  auto bad = p;
  bad.q.dtype = DType::kFp16;
  expect_reject(bad, "q: expected bf16");
}

TensorView reshaped(const TensorView& t, std::initializer_list<int64_t> dims) {
  return TensorView::contiguous(t.data, t.dtype, dims);
}

TEST_F(MlaDecodeRefRejects, UnsupportedHeadCount) {
  auto bad = p;
  bad.q = reshaped(p.q, {2, 1, 8, 576});
  expect_reject(bad, "h_q must be 16, 32, 64 or 128");
}

TEST_F(MlaDecodeRefRejects, UnsupportedSq) {
  auto bad = p;
  bad.q = reshaped(p.q, {2, 5, 16, 576});
  expect_reject(bad, "s_q must be in 1..4");
}

TEST_F(MlaDecodeRefRejects, WrongHeadDim) {
  auto bad = p;
  bad.q = reshaped(p.q, {2, 1, 16, 512});
  expect_reject(bad, "576");
}

TEST_F(MlaDecodeRefRejects, WrongPageSize) {
  auto bad = p;
  bad.kv_cache = reshaped(p.kv_cache, {p.kv_cache.shape[0] * 2, 32, 576});
  expect_reject(bad, "kv_cache");
}

TEST_F(MlaDecodeRefRejects, BlockTableTooShortForSeqlen) {
  h.seqlens[1] = 64 * int(h.max_pages) + 1;
  expect_reject(p, "needs");
}

TEST_F(MlaDecodeRefRejects, PageIdOutOfRange) {
  h.block_table[0] = h.num_pages + 5;
  expect_reject(p, "outside kv_cache");
}

TEST_F(MlaDecodeRefRejects, NullPointerAndBadScale) {
  auto bad = p;
  bad.out.data = nullptr;
  expect_reject(bad, "null");
  bad = p;
  bad.softmax_scale = 0.f;
  expect_reject(bad, "softmax_scale");
  bad = p;
  bad.lse = reshaped(p.lse, {2, 16, 2});
  expect_reject(bad, "lse");
}

}  // namespace
}  // namespace mla
