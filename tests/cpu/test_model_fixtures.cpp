// The CPU model against Hugging Face transformers' DeepseekV2 (fp32 logits saved by
// scripts/make_fixtures.py under tests/fixtures/): full-prompt prefill, and prefill-then-decode token
// by token, which goes through the absorbed path and the KV cache.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "common/metrics.h"
#include "mla/loader/safetensors.h"
#include "mla/model/rope.h"
#include "test_model_helpers.h"

namespace mla::model {
namespace {

std::string fixtures_dir() {
  return std::filesystem::path(__FILE__).parent_path().parent_path().string() + "/fixtures";
}

struct Prompt {
  std::vector<int32_t> ids;
  std::vector<float> logits;  // [len · vocab] from transformers
};

struct Fixture {
  std::unique_ptr<CpuBackend> backend;
  std::vector<Prompt> prompts;
};

// Loads config.json, model.safetensors and logits.safetensors of one fixture model through the same
// code paths a user's checkpoint takes.
Fixture load_fixture(const std::string& name) {
  Fixture f;
  const std::string dir = fixtures_dir() + "/" + name;
  ModelWeights w;
  Status s = loader::load_model(dir, &w, {.progress = loader::ProgressMode::kOff});
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  if (!s.is_ok()) return f;
  s = CpuBackend::create(std::move(w), &f.backend);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  std::shared_ptr<loader::SafetensorsFile> lf;
  s = loader::SafetensorsFile::open(dir + "/logits.safetensors", &lf);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  if (!s.is_ok()) return f;
  for (int i = 0;; ++i) {
    const auto* ids = lf->find("prompt" + std::to_string(i) + ".input_ids");
    const auto* lg = lf->find("prompt" + std::to_string(i) + ".logits");
    if (!ids || !lg) break;
    EXPECT_EQ(ids->dtype, DType::kInt64);
    EXPECT_EQ(lg->dtype, DType::kFp32);
    Prompt p;
    const auto* id_data = static_cast<const int64_t*>(lf->data(*ids));
    for (int64_t j = 0; j < ids->numel(); ++j) p.ids.push_back(static_cast<int32_t>(id_data[j]));
    const auto* l = static_cast<const float*>(lf->data(*lg));
    p.logits.assign(l, l + lg->numel());
    f.prompts.push_back(std::move(p));
  }
  EXPECT_GE(f.prompts.size(), 3u);
  return f;
}

// transformers runs the same fp32 arithmetic in another order (and another exp/sin/cos): the observed
// relative L2 error is ~1e-6; the bar is 1e-3, which any real mistake (RoPE layout, a scale,
// a routing rule) exceeds by orders of magnitude.
constexpr double kTol = 1e-3;

void expect_close(const std::vector<float>& got, const std::vector<float>& ref, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  const auto s = mla::test::compare_vec(got, ref);
  double ref_max = 0;
  for (float x : ref) ref_max = std::max(ref_max, double(std::fabs(x)));
  EXPECT_EQ(s.nonfinite_got, 0u) << what;
  EXPECT_LE(s.rel_l2, kTol) << what << ": " << s.str();
  EXPECT_LE(s.max_abs, kTol * ref_max) << what << ": " << s.str();
  ::testing::Test::RecordProperty(what, s.str());
}

class ModelFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(ModelFixture, PrefillMatchesTransformers) {
  Fixture f = load_fixture(GetParam());
  ASSERT_TRUE(f.backend);
  for (size_t i = 0; i < f.prompts.size(); ++i) {
    const auto& p = f.prompts[i];
    const auto got = mla::test::step(*f.backend, mla::test::chunk(p.ids, 0, p.ids.size(), int64_t(i)));
    expect_close(got, p.logits, std::string(GetParam()) + " prompt" + std::to_string(i) + " prefill");
  }
}

TEST_P(ModelFixture, PrefillThenDecodeMatchesTransformers) {
  Fixture f = load_fixture(GetParam());
  ASSERT_TRUE(f.backend);
  for (size_t i = 0; i < f.prompts.size(); ++i) {
    const auto& p = f.prompts[i];
    // One token of prefill (none for a 1-token prompt), then absorbed decode steps over the cache.
    const size_t n_prefill = p.ids.size() > 1 ? 1 : 0;
    const auto got = mla::test::prefill_then_decode(*f.backend, p.ids, n_prefill, int64_t(100 + i));
    expect_close(got, p.logits, std::string(GetParam()) + " prompt" + std::to_string(i) + " decode");
  }
}

TEST_P(ModelFixture, GreedyNextTokenMatchesTransformers) {
  Fixture f = load_fixture(GetParam());
  ASSERT_TRUE(f.backend);
  const int64_t V = f.backend->weights().config.vocab_size;
  for (size_t i = 0; i < f.prompts.size(); ++i) {
    const auto& p = f.prompts[i];
    const auto got = mla::test::step(*f.backend, mla::test::chunk(p.ids, 0, p.ids.size(), int64_t(i)));
    for (size_t r = 0; r < p.ids.size(); ++r) {
      auto argmax = [&](const std::vector<float>& v) {
        return std::max_element(v.begin() + r * V, v.begin() + (r + 1) * V) - (v.begin() + r * V);
      };
      EXPECT_EQ(argmax(got), argmax(p.logits)) << "prompt " << i << " row " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Model, ModelFixture, ::testing::Values("tiny", "tiny-qlora"));

TEST_P(ModelFixture, YarnTableMatchesTransformers) {
  ModelConfig c;
  const std::string dir = fixtures_dir() + "/" + GetParam();
  ASSERT_TRUE(load_config(dir, &c).is_ok());
  std::shared_ptr<loader::SafetensorsFile> lf;
  ASSERT_TRUE(loader::SafetensorsFile::open(dir + "/logits.safetensors", &lf).is_ok());
  const auto* inv = lf->find("rope.inv_freq");
  const auto* af = lf->find("rope.attention_scaling");
  ASSERT_TRUE(inv && af);
  const RopeTable t = make_rope_table(c);
  ASSERT_EQ(int64_t(t.inv_freq.size()), inv->numel());
  const auto* ref = static_cast<const float*>(lf->data(*inv));
  // Same float32 steps as transformers; the ramp is evaluated in double here, so allow 2 ulp.
  for (size_t i = 0; i < t.inv_freq.size(); ++i) EXPECT_NEAR(t.inv_freq[i], ref[i], 2.4e-7f * ref[i]) << i;
  EXPECT_NEAR(t.attention_factor, static_cast<const float*>(lf->data(*af))[0], 1e-6f);
}

TEST(ModelFixtureConfig, FixtureConfigsEqualTheirPresets) {
  for (const char* name : {"tiny", "tiny-qlora"}) {
    ModelConfig file, preset;
    Status s = load_config(fixtures_dir() + "/" + name, &file);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    ASSERT_TRUE(preset_config(name, &preset).is_ok());
    EXPECT_EQ(file.hidden_size, preset.hidden_size) << name;
    EXPECT_EQ(file.max_position_embeddings, preset.max_position_embeddings) << name;
    EXPECT_DOUBLE_EQ(file.rope_scaling.mscale, preset.rope_scaling.mscale) << name;
    EXPECT_DOUBLE_EQ(file.rope_scaling.mscale_all_dim, preset.rope_scaling.mscale_all_dim) << name;
    EXPECT_EQ(file.q_lora_rank, preset.q_lora_rank) << name;
    EXPECT_EQ(file.topk_method, preset.topk_method) << name;
    EXPECT_EQ(file.n_group, preset.n_group) << name;
    EXPECT_EQ(file.topk_group, preset.topk_group) << name;
    EXPECT_DOUBLE_EQ(file.routed_scaling_factor, preset.routed_scaling_factor) << name;
    EXPECT_DOUBLE_EQ(file.rope_scaling.factor, preset.rope_scaling.factor) << name;
    EXPECT_EQ(file.rope_scaling.original_max_position_embeddings, preset.rope_scaling.original_max_position_embeddings);
    EXPECT_DOUBLE_EQ(file.softmax_scale(), preset.softmax_scale()) << name;
    EXPECT_EQ(num_parameters(file), num_parameters(preset)) << name;
  }
}

}  // namespace
}  // namespace mla::model
