// The CPU model on dummy weights: the absorbed (decode) and expanded (prefill) MLA formulations agree,
// prefill-then-decode equals one prefill, batching is invisible, activations stay finite through deep
// stacks, and bad batches are errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "common/metrics.h"
#include "test_model_helpers.h"

namespace mla::model {
namespace {

using mla::test::all_finite;
using mla::test::chunk;
using mla::test::compare_vec;
using mla::test::dummy_backend;
using mla::test::step;

// Both sides are float32 sums of the same products in a different association (e.g. W_UKᵀq·c vs
// q·W_UK c over 128 × 512 terms, then ~2 more layers): observed ~1e-6; 2e-5 leaves room, and a real
// bug (a wrong head slice, a missing scale) is > 1e-2.
constexpr double kReassocTol = 2e-5;

std::vector<int32_t> prompt(size_t n, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> ids(n);
  for (auto& x : ids) x = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
  return ids;
}

class ModelForward : public ::testing::TestWithParam<const char*> {
 protected:
  ModelConfig cfg() const {
    ModelConfig c;
    EXPECT_TRUE(preset_config(GetParam(), &c).is_ok());
    return c;
  }
};

TEST_P(ModelForward, AbsorbedEqualsExpandedPrefill) {
  const ModelConfig c = cfg();
  const auto ids = prompt(13, c.vocab_size, 5);
  auto a = dummy_backend(c, DType::kBf16), b = dummy_backend(c, DType::kBf16);
  const auto ex = step(*a, chunk(ids, 0, ids.size(), 0, AttnPath::kExpanded));
  const auto ab = step(*b, chunk(ids, 0, ids.size(), 0, AttnPath::kAbsorbed));
  ASSERT_TRUE(all_finite(ex));
  const auto s = compare_vec(ab, ex);
  EXPECT_LE(s.rel_l2, kReassocTol) << s.str();
}

TEST_P(ModelForward, PrefillThenDecodeEqualsOnePrefill) {
  const ModelConfig c = cfg();
  const auto ids = prompt(11, c.vocab_size, 6);
  auto a = dummy_backend(c, DType::kFp32), b = dummy_backend(c, DType::kFp32);
  const auto full = step(*a, chunk(ids, 0, ids.size()));
  const auto inc = mla::test::prefill_then_decode(*b, ids, 4);  // 4-token prefill, 7 absorbed decode steps
  EXPECT_EQ(b->cached_tokens(0), 11);
  const auto s = compare_vec(inc, full);
  EXPECT_LE(s.rel_l2, kReassocTol) << s.str();
  // A chunked prefill (cached context + new tokens, expanded) lands on the same logits too.
  auto d = dummy_backend(c, DType::kFp32);
  auto first = step(*d, chunk(ids, 0, 6));
  auto rest = step(*d, chunk(ids, 6, ids.size()));
  first.insert(first.end(), rest.begin(), rest.end());
  EXPECT_LE(compare_vec(first, full).rel_l2, kReassocTol);
}

TEST_P(ModelForward, BatchedSequencesEqualSeparateRuns) {
  const ModelConfig c = cfg();
  const auto p0 = prompt(5, c.vocab_size, 7), p1 = prompt(9, c.vocab_size, 8);
  auto solo = dummy_backend(c, DType::kBf16), both = dummy_backend(c, DType::kBf16);
  auto r0 = step(*solo, chunk(p0, 0, p0.size(), 0));
  auto r1 = step(*solo, chunk(p1, 0, p1.size(), 1));
  ForwardBatch b;
  b.token_ids = p0;
  b.token_ids.insert(b.token_ids.end(), p1.begin(), p1.end());
  b.seqs = {{.seq_id = 10, .start_pos = 0, .num_tokens = 5}, {.seq_id = 11, .start_pos = 0, .num_tokens = 9}};
  auto rb = step(*both, b);
  r0.insert(r0.end(), r1.begin(), r1.end());
  EXPECT_EQ(rb, r0);  // rows are independent: bit-identical
  // Only the last row of each sequence (what a sampler reads): the same rows of the full logits.
  auto sel = dummy_backend(c, DType::kBf16);
  b.logits_rows = {13, 4};
  const auto rs = step(*sel, b);
  const size_t V = static_cast<size_t>(c.vocab_size);
  ASSERT_EQ(rs.size(), 2 * V);
  EXPECT_TRUE(std::equal(rs.begin(), rs.begin() + V, r0.begin() + 13 * V));
  EXPECT_TRUE(std::equal(rs.begin() + V, rs.end(), r0.begin() + 4 * V));
}

INSTANTIATE_TEST_SUITE_P(Model, ModelForward, ::testing::Values("tiny", "tiny-qlora"));

TEST(ModelDummy, DeepStackStaysFinite) {
  // V2-Lite's depth and routing over the tiny width: 27 layers, 64 experts, 6 per token.
  ModelConfig c;
  ASSERT_TRUE(preset_config("tiny", &c).is_ok());
  c.num_hidden_layers = 27;
  c.n_routed_experts = 64;
  c.num_experts_per_tok = 6;
  auto be = dummy_backend(c, DType::kBf16, 42);
  const auto ids = prompt(8, c.vocab_size, 9);
  const auto logits = step(*be, chunk(ids, 0, ids.size()));
  ASSERT_TRUE(all_finite(logits));
  double ss = 0;
  for (float x : logits) ss += double(x) * x;
  const double rms = std::sqrt(ss / double(logits.size()));
  // Logits of unit-scale hidden states through a 1/sqrt(fan_in) head are O(1); far from overflow.
  EXPECT_GT(rms, 0.05);
  EXPECT_LT(rms, 20.0);
}

TEST(ModelDummy, BadBatchesAreErrors) {
  ModelConfig c;
  ASSERT_TRUE(preset_config("tiny", &c).is_ok());
  auto be = dummy_backend(c, DType::kFp32);
  DeepseekV2 m(be.get());
  TensorView logits;
  ForwardBatch b = chunk({3, 4, 5}, 0, 3);
  b.seqs[0].start_pos = 2;  // nothing cached yet
  EXPECT_NE(m.forward(b, &logits).message().find("start_pos 2"), std::string::npos);
  b = chunk({3, 4, 999}, 0, 3);
  EXPECT_NE(m.forward(b, &logits).message().find("token id 999"), std::string::npos);
  b = chunk({3, 4, 5}, 0, 3);
  b.logits_rows = {3};
  EXPECT_NE(m.forward(b, &logits).message().find("logits row 3"), std::string::npos);
  b = chunk({3, 4, 5}, 0, 3);
  b.seqs[0].num_tokens = 2;
  EXPECT_FALSE(m.forward(b, &logits).is_ok());
  ASSERT_TRUE(m.forward(chunk({3, 4, 5}, 0, 3), &logits).is_ok());
  EXPECT_EQ(be->cached_tokens(0), 3);
  be->release_sequence(0);
  EXPECT_EQ(be->cached_tokens(0), 0);
}

TEST(ModelDummy, CreateRejectsMissingWeights) {
  ModelConfig c;
  ASSERT_TRUE(preset_config("tiny", &c).is_ok());
  ModelWeights w;
  ASSERT_TRUE(loader::make_dummy_weights(c, 1, DType::kFp32, &w).is_ok());
  w.layers[1].attn.kv_b_proj = TensorView{};
  std::unique_ptr<CpuBackend> be;
  Status s = CpuBackend::create(std::move(w), &be);
  EXPECT_NE(s.message().find("model.layers.1.self_attn.kv_b_proj.weight"), std::string::npos) << s.to_string();
}

}  // namespace
}  // namespace mla::model
