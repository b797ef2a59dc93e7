// sample_tokens, CPU reference (the oracle of the GPU sampler): greedy bit-identical to the engine's host
// sampler; error codes; the draws follow softmax(x / T) restricted to top-k / top-p (chi-square over many
// draw indices and seeds); top-k ties keep the lowest ids; draws depend only on (seed, draw index).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "cpu/sampling_test_util.h"
#include "mla/engine/sampler.h"
#include "mla/ops/sampling.h"

namespace mla {
namespace {

std::vector<int32_t> run(const std::vector<float>& logits, int vocab, const std::vector<SamplingRow>& rows) {
  std::vector<int32_t> out(rows.size(), 12345);
  SampleParams p{.logits = TensorView::contiguous(logits.data(), DType::kFp32, {int64_t(rows.size()), vocab}),
                 .rows = rows.data(),
                 .tokens = TensorView::contiguous(out.data(), DType::kInt32, {int64_t(rows.size())})};
  const Status s = ref::sample_tokens(p);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return out;
}

SamplingRow row(float t, int k = 0, float p = 1.f, uint64_t seed = 1, int draw = 0) {
  SamplingRow r;
  r.temperature = t, r.top_k = k, r.top_p = p, r.seed = seed, r.draw_index = draw;
  return r;
}

TEST(SamplingRef, GreedyMatchesTheHostSamplerBitForBit) {
  std::mt19937 rng(3);
  const int vocab = 1000, rows = 64;
  std::vector<float> x(size_t(vocab) * rows);
  // Coarse values so rows hold many exact ties, plus some -inf.
  std::uniform_int_distribution<int> q(-8, 8), hole(0, 9);
  for (float& v : x) v = hole(rng) == 0 ? -INFINITY : float(q(rng)) * 0.25f;
  std::vector<SamplingRow> rs(rows);
  for (int r = 0; r < rows; ++r) rs[size_t(r)] = r % 2 ? row(0.f) : row(0.7f, 1);  // both greedy forms
  const auto got = run(x, vocab, rs);
  engine::SamplingParams gp;
  gp.temperature = 0.f;
  std::vector<int32_t> scratch;
  for (int r = 0; r < rows; ++r) {
    int32_t want = -1;
    ASSERT_TRUE(engine::sample_row(x.data() + size_t(r) * vocab, vocab, {&gp, 0, 0}, &scratch, &want).is_ok());
    EXPECT_EQ(got[size_t(r)], want) << "row " << r;
  }
}

TEST(SamplingRef, BadRowsAreFlagged) {
  const int vocab = 4;
  const std::vector<float> x = {0, NAN, 1, 2, /**/ 0, 1, INFINITY, 2, /**/ -INFINITY, -INFINITY, -INFINITY, -INFINITY,
                                /**/ -INFINITY, -3, -INFINITY, -INFINITY};
  for (float t : {0.f, 1.f}) {
    const auto got = run(x, vocab, {row(t), row(t), row(t), row(t)});
    EXPECT_EQ(got[0], kSampleBadLogit);
    EXPECT_EQ(got[1], kSampleBadLogit);
    EXPECT_EQ(got[2], kSampleAllNegInf);
    EXPECT_EQ(got[3], 1);
  }
}

// One row's logits, `n` draws (draw indices 0..n/4 of four seeds), counts compared with the exact law.
void expect_law(const std::vector<float>& x, SamplingRow r, int n) {
  const int vocab = int(x.size());
  const sampling_test::RepeatedRow rep = sampling_test::repeat_row(x, r, n, 1000);
  std::vector<long> counts(size_t(vocab), 0);
  for (int32_t t : run(rep.logits, vocab, rep.rows)) {
    ASSERT_GE(t, 0);
    ++counts[size_t(t)];
  }
  EXPECT_EQ(sampling_test::chi_square_failure(counts, sampling_test::exact_distribution(x, r)), "")
      << "T " << r.temperature << " top_k " << r.top_k << " top_p " << r.top_p;
}

TEST(SamplingRef, DrawsFollowTheTruncatedSoftmax) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.f, 1.5f);
  std::vector<float> x(12);
  for (float& v : x) v = nd(rng);
  x[3] = -INFINITY;  // never drawn
  for (const SamplingRow& r : {row(1.f), row(0.6f), row(2.5f), row(1.f, 5), row(0.8f, 0, 0.7f), row(1.3f, 6, 0.85f),
                               row(1.f, 11), row(1.f, 0, 0.999f)})
    expect_law(x, r, 60000);
}

TEST(SamplingRef, TopKTiesKeepTheLowestIds) {
  // Values: id 0..7 = {1, 3, 3, 2, 3, 3, 0, 3}; top-3 keeps 3 of the five 3s: ids 1, 2, 4.
  const std::vector<float> x = {1, 3, 3, 2, 3, 3, 0, 3};
  std::vector<float> rep;
  std::vector<SamplingRow> rs;
  for (int i = 0; i < 3000; ++i) rep.insert(rep.end(), x.begin(), x.end()), rs.push_back(row(1.f, 3, 1.f, 9, i));
  std::vector<long> counts(8, 0);
  for (int32_t t : run(rep, 8, rs)) ++counts[size_t(t)];
  EXPECT_EQ(counts[5] + counts[7] + counts[0] + counts[3] + counts[6], 0);
  EXPECT_GT(counts[1], 800);
  EXPECT_GT(counts[2], 800);
  EXPECT_GT(counts[4], 800);
}

TEST(SamplingRef, ADrawDependsOnlyOnSeedAndIndex) {
  std::mt19937 rng(8);
  std::normal_distribution<float> nd(0.f, 1.f);
  const int vocab = 300;
  std::vector<float> x(size_t(vocab) * 3);
  for (float& v : x) v = nd(rng);
  std::copy_n(x.begin(), vocab, x.begin() + 2 * vocab);  // row 2 = row 0
  const auto a = run(x, vocab, {row(1.f, 0, 1.f, 42, 17), row(0.9f, 20, 0.9f, 5, 3), row(1.f, 0, 1.f, 42, 17)});
  EXPECT_EQ(a[0], a[2]);
  const auto b = run(std::vector<float>(x.begin(), x.begin() + vocab), vocab, {row(1.f, 0, 1.f, 42, 17)});
  EXPECT_EQ(a[0], b[0]);
  // Different draw indices of one seed do move (not a constant): 64 draws see more than one token.
  std::vector<SamplingRow> rs;
  std::vector<float> rep;
  for (int i = 0; i < 64; ++i)
    rs.push_back(row(1.f, 0, 1.f, 42, i)), rep.insert(rep.end(), x.begin(), x.begin() + vocab);
  const auto c = run(rep, vocab, rs);
  EXPECT_GT(std::count_if(c.begin(), c.end(), [&](int32_t t) { return t != c[0]; }), 0);
}

}  // namespace
}  // namespace mla
