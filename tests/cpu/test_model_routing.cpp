// DeepSeek-V2 routing rules on hand-made router logits: greedy and group-limited top-k, and the V2
// weighting (renormalize when norm_topk_prob, else scale by routed_scaling_factor; never both).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/cpu_kernels.h"  // src/ is on the include path (internal kernels)
#include "mla/model/rope.h"

namespace mla::model {
namespace {

ModelConfig router_config(TopkMethod m, int groups, int topk_group, bool norm, double scale) {
  ModelConfig c;
  EXPECT_TRUE(preset_config("tiny", &c).is_ok());
  c.n_routed_experts = 8;
  c.num_experts_per_tok = 2;
  c.topk_method = m;
  c.n_group = groups;
  c.topk_group = topk_group;
  c.norm_topk_prob = norm;
  c.routed_scaling_factor = scale;
  EXPECT_TRUE(validate_config(c).is_ok());
  return c;
}

std::vector<float> softmax(const std::vector<float>& x) {
  double s = 0;
  for (float v : x) s += std::exp(double(v));
  std::vector<float> p;
  for (float v : x) p.push_back(float(std::exp(double(v)) / s));
  return p;
}

TEST(ModelRouting, GreedyPicksTheTopScoresScaled) {
  const std::vector<float> logits = {0.1f, 2.0f, -1.0f, 1.5f, 0.0f, 1.9f, -3.0f, 0.2f};
  const auto p = softmax(logits);
  int ex[2];
  float w[2];
  cpu::route(logits.data(), router_config(TopkMethod::kGreedy, 1, 1, false, 2.5), ex, w);
  EXPECT_EQ(ex[0], 1);
  EXPECT_EQ(ex[1], 5);
  EXPECT_NEAR(w[0], 2.5f * p[1], 1e-6f);
  EXPECT_NEAR(w[1], 2.5f * p[5], 1e-6f);
  // norm_topk_prob: weights sum to 1 and the scaling factor is not applied on top (V2's rule).
  cpu::route(logits.data(), router_config(TopkMethod::kGreedy, 1, 1, true, 2.5), ex, w);
  EXPECT_NEAR(w[0] + w[1], 1.0f, 1e-6f);
  EXPECT_NEAR(w[0] / w[1], p[1] / p[5], 1e-5f);
}

TEST(ModelRouting, GroupLimitedOnlyLooksInsideTheBestGroups) {
  // 4 groups of 2: group bests are 2.0 (g0), 1.9 (g1), 1.95 (g2), 0.0 (g3); with topk_group 2 only
  // groups 0 and 2 stay, so expert 2 (1.9, group 1) loses to expert 4 (1.95) and then to expert 5 (1.8).
  const std::vector<float> logits = {2.0f, -1.0f, 1.9f, 1.85f, 1.95f, 1.8f, 0.0f, -2.0f};
  int ex[2];
  float w[2];
  cpu::route(logits.data(), router_config(TopkMethod::kGreedy, 1, 1, false, 1.0), ex, w);
  EXPECT_EQ(std::vector<int>({ex[0], ex[1]}), std::vector<int>({0, 4}));
  const auto c = router_config(TopkMethod::kGroupLimitedGreedy, 4, 2, false, 1.0);
  cpu::route(logits.data(), c, ex, w);
  EXPECT_EQ(std::vector<int>({ex[0], ex[1]}), std::vector<int>({0, 4}));
  const std::vector<float> l2 = {2.0f, -1.0f, 1.97f, 1.85f, 1.95f, 1.8f, 0.0f, -2.0f};  // now g1 beats g2
  cpu::route(l2.data(), c, ex, w);
  EXPECT_EQ(std::vector<int>({ex[0], ex[1]}), std::vector<int>({0, 2}));
  const std::vector<float> l3 = {2.0f, 1.99f, 1.9f, 1.85f, 1.95f, 1.8f, 0.0f, -2.0f};
  cpu::route(l3.data(), c, ex, w);  // both picks from group 0; the weights are the unmasked softmax
  EXPECT_EQ(std::vector<int>({ex[0], ex[1]}), std::vector<int>({0, 1}));
  EXPECT_NEAR(w[0], softmax(l3)[0], 1e-6f);
}

TEST(ModelRope, PlainRopeWithoutScalingAndRotationIsNormPreserving) {
  ModelConfig c;
  ASSERT_TRUE(preset_config("tiny", &c).is_ok());
  c.rope_scaling.enabled = false;
  const RopeTable t = make_rope_table(c);
  ASSERT_EQ(t.inv_freq.size(), 32u);
  EXPECT_FLOAT_EQ(t.inv_freq[0], 1.0f);
  EXPECT_NEAR(t.inv_freq[31], std::pow(10000.0, -62.0 / 64.0), 1e-9);
  EXPECT_EQ(t.attention_factor, 1.0f);
  // Pairs (x[2i], x[2i+1]) rotate by pos·inv_freq[i]: pair 0 at position 1 turns by 1 radian.
  std::vector<float> x(64, 0.0f);
  x[0] = 1.0f;
  x[62] = 3.0f;
  x[63] = 4.0f;
  apply_rope_interleaved(x.data(), 1, t);
  EXPECT_NEAR(x[0], std::cos(1.0), 1e-6);
  EXPECT_NEAR(x[1], std::sin(1.0), 1e-6);
  EXPECT_NEAR(std::hypot(x[62], x[63]), 5.0, 1e-5);
}

}  // namespace
}  // namespace mla::model
