// Sampler (CPU reference): greedy, temperature, top-k, top-p frequencies against the exact
// distribution, and the determinism contract (same seed + logits + draw index -> same token, whatever
// else is in the batch).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "mla/engine/sampler.h"

namespace mla::engine {
namespace {

SamplingParams params(float temperature, int top_k = 0, float top_p = 1.0f) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  return p;
}

int32_t one(const std::vector<float>& logits, const SamplingParams& p, uint64_t seed, int index) {
  std::vector<int32_t> scratch;
  int32_t t = -1;
  EXPECT_TRUE(sample_row(logits.data(), int(logits.size()), {&p, seed, index}, &scratch, &t).is_ok());
  return t;
}

// Frequencies over n draws (draw indices 0..n-1 of one seed) must match `expect` within 5 sigma.
void expect_frequencies(const std::vector<float>& logits, const SamplingParams& p, const std::vector<double>& expect) {
  const int n = 40000;
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < n; ++i) ++counts[size_t(one(logits, p, 7, i))];
  for (size_t v = 0; v < logits.size(); ++v) {
    const double sigma = std::sqrt(std::max(expect[v] * (1 - expect[v]), 1e-9) / n);
    EXPECT_NEAR(double(counts[v]) / n, expect[v], 5 * sigma + 1e-12) << "token " << v;
  }
}

TEST(Sampler, GreedyTakesTheArgmaxLowestIdOnTies) {
  const SamplingParams g = params(0);
  EXPECT_EQ(one({0.1f, 3.0f, -1.0f, 3.0f}, g, 1, 0), 1);
  EXPECT_EQ(one({-INFINITY, -5.0f, -INFINITY}, g, 1, 0), 1);
  EXPECT_EQ(one({0.1f, 3.0f, 9.0f}, params(1.0f, 1), 1, 0), 2);  // top_k = 1 is greedy
}

TEST(Sampler, TemperatureFollowsTheSoftmax) {
  const std::vector<float> logits = {0.0f, std::log(2.0f), std::log(3.0f), -INFINITY};
  expect_frequencies(logits, params(1.0f), {1 / 6.0, 2 / 6.0, 3 / 6.0, 0});
  expect_frequencies(logits, params(0.5f), {1 / 14.0, 4 / 14.0, 9 / 14.0, 0});  // p^(1/T), renormalized
}

TEST(Sampler, TopKAndTopPTruncate) {
  const std::vector<float> logits = {std::log(0.05f), std::log(0.5f), std::log(0.15f), std::log(0.3f)};
  expect_frequencies(logits, params(1.0f, 2), {0, 0.5 / 0.8, 0, 0.3 / 0.8});
  expect_frequencies(logits, params(1.0f, 0, 0.7f), {0, 0.5 / 0.8, 0, 0.3 / 0.8});   // 0.5 < 0.7 <= 0.8
  expect_frequencies(logits, params(1.0f, 0, 0.45f), {0, 1, 0, 0});                  // the top token alone
  expect_frequencies(logits, params(1.0f, 3, 0.9f), {0, 0.5 / 0.95, 0.15 / 0.95, 0.3 / 0.95});  // p over top-k
}

TEST(Sampler, SameSeedSameTokenWhateverTheBatch) {
  std::vector<float> a(100), b(100);
  for (int v = 0; v < 100; ++v) a[size_t(v)] = float(std::sin(v)), b[size_t(v)] = float(std::cos(v * 0.3));
  const SamplingParams p = params(0.8f, 50, 0.9f), q = params(1.3f);
  auto batch = [&](std::vector<std::vector<float>> rows, std::vector<SampleRequest> reqs) {
    Logits l{.num_rows = int(rows.size()), .vocab = 100, .data = {}};
    for (auto& r : rows) l.data.insert(l.data.end(), r.begin(), r.end());
    std::vector<int32_t> out;
    EXPECT_TRUE(sample(l, reqs, &out).is_ok());
    return out;
  };
  for (int i = 0; i < 50; ++i) {
    const int32_t alone = batch({a}, {{&p, 42, i}})[0];
    EXPECT_EQ(batch({b, a}, {{&q, 3, 0}, {&p, 42, i}})[1], alone);
    EXPECT_EQ(batch({a, a, b}, {{&p, 42, i}, {&p, 43, i}, {&q, 42, i}})[0], alone);
    EXPECT_EQ(one(a, p, 42, i), alone);
  }
  int differ = 0;  // different seeds are different streams
  for (int i = 0; i < 50; ++i) differ += one(a, q, 1, i) != one(a, q, 2, i);
  EXPECT_GT(differ, 25);
}

TEST(Sampler, UniformDrawsAreInRangeAndUnbiased) {
  double sum = 0;
  for (int i = 0; i < 100000; ++i) {
    const double u = uniform_draw(5, uint64_t(i));
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 100000, 0.5, 0.005);
}

TEST(Sampler, BadLogitsAreErrors) {
  const SamplingParams p = params(1.0f);
  std::vector<int32_t> scratch;
  int32_t t = 0;
  const float nan_row[] = {0.0f, NAN}, inf_row[] = {INFINITY, 0.0f}, masked[] = {-INFINITY, -INFINITY};
  EXPECT_FALSE(sample_row(nan_row, 2, {&p, 0, 0}, &scratch, &t).is_ok());
  EXPECT_FALSE(sample_row(inf_row, 2, {&p, 0, 0}, &scratch, &t).is_ok());
  EXPECT_FALSE(sample_row(masked, 2, {&p, 0, 0}, &scratch, &t).is_ok());
  Logits l{.num_rows = 2, .vocab = 2, .data = {0, 1}};  // says 2 rows, holds 1
  std::vector<int32_t> out;
  EXPECT_FALSE(sample(l, {{&p, 0, 0}, {&p, 0, 0}}, &out).is_ok());
}

TEST(Sampler, ParamsAreValidated) {
  EXPECT_TRUE(validate(params(0.7f, 5, 0.9f)).is_ok());
  EXPECT_FALSE(validate(params(-1.0f)).is_ok());
  EXPECT_FALSE(validate(params(NAN)).is_ok());
  EXPECT_FALSE(validate(params(1.0f, -1)).is_ok());
  EXPECT_FALSE(validate(params(1.0f, 0, 0.0f)).is_ok());
  EXPECT_FALSE(validate(params(1.0f, 0, 1.5f)).is_ok());
  SamplingParams p;
  p.max_tokens = 0;
  EXPECT_FALSE(validate(p).is_ok());
}

}  // namespace
}  // namespace mla::engine
