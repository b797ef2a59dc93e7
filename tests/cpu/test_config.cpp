// ModelConfig: config.json parsing (V2-Lite and V2 as published, transformers 5.x rope_parameters),
// presets, and clear errors for unsupported values and unknown fields.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "mla/model/config.h"

namespace mla::model {
namespace {

// DeepSeek-V2-Lite's config.json as published (auto_map trimmed).
const char* kV2LiteJson = R"({
  "architectures": ["DeepseekV2ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "auto_map": {"AutoConfig": "configuration_deepseek.DeepseekV2Config"}, "aux_loss_alpha": 0.001,
  "bos_token_id": 100000, "eos_token_id": 100001, "first_k_dense_replace": 1, "hidden_act": "silu",
  "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 10944, "kv_lora_rank": 512,
  "max_position_embeddings": 163840, "model_type": "deepseek_v2", "moe_intermediate_size": 1408,
  "moe_layer_freq": 1, "n_group": 1, "n_routed_experts": 64, "n_shared_experts": 2,
  "norm_topk_prob": false, "num_attention_heads": 16, "num_experts_per_tok": 6, "num_hidden_layers": 27,
  "num_key_value_heads": 16, "pretraining_tp": 1, "q_lora_rank": null, "qk_nope_head_dim": 128,
  "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06,
  "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 0.707, "mscale_all_dim": 0.707,
                   "original_max_position_embeddings": 4096, "type": "yarn"},
  "rope_theta": 10000, "routed_scaling_factor": 1.0, "scoring_func": "softmax", "seq_aux": true,
  "tie_word_embeddings": false, "topk_group": 1, "topk_method": "greedy", "torch_dtype": "bfloat16",
  "transformers_version": "4.33.1", "use_cache": true, "v_head_dim": 128, "vocab_size": 102400})";

std::string replace(std::string s, const std::string& from, const std::string& to) {
  const size_t p = s.find(from);
  EXPECT_NE(p, std::string::npos) << from;
  if (p != std::string::npos) s.replace(p, from.size(), to);
  return s;
}

TEST(Config, ParsesV2LiteAndMatchesPreset) {
  ModelConfig c, p;
  ASSERT_TRUE(parse_config_json(kV2LiteJson, &c).is_ok()) << parse_config_json(kV2LiteJson, &c).to_string();
  ASSERT_TRUE(preset_config("deepseek-v2-lite", &p).is_ok());
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.num_hidden_layers, 27);
  EXPECT_EQ(c.q_lora_rank, 0);
  EXPECT_EQ(c.topk_method, TopkMethod::kGreedy);
  EXPECT_TRUE(c.rope_scaling.enabled);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 4096);
  EXPECT_DOUBLE_EQ(c.rope_scaling.mscale_all_dim, 0.707);
  ASSERT_EQ(c.eos_token_ids.size(), 1u);
  EXPECT_EQ(c.eos_token_ids[0], 100001);
  // Every arithmetic field of the preset equals the published file.
  EXPECT_EQ(c.vocab_size, p.vocab_size);
  EXPECT_EQ(c.intermediate_size, p.intermediate_size);
  EXPECT_EQ(c.moe_intermediate_size, p.moe_intermediate_size);
  EXPECT_EQ(c.n_routed_experts, p.n_routed_experts);
  EXPECT_EQ(c.n_shared_experts, p.n_shared_experts);
  EXPECT_EQ(c.num_experts_per_tok, p.num_experts_per_tok);
  EXPECT_EQ(c.first_k_dense_replace, p.first_k_dense_replace);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, p.rope_scaling.factor);
  EXPECT_DOUBLE_EQ(c.rope_scaling.mscale, p.rope_scaling.mscale);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, p.rms_norm_eps);
  EXPECT_DOUBLE_EQ(c.softmax_scale(), p.softmax_scale());
  EXPECT_FALSE(c.is_moe_layer(0));
  EXPECT_TRUE(c.is_moe_layer(1));
}

TEST(Config, SoftmaxScaleFoldsYarnMscale) {
  ModelConfig c;
  ASSERT_TRUE(preset_config("deepseek-v2-lite", &c).is_ok());
  const double m = 0.1 * 0.707 * std::log(40.0) + 1.0;
  EXPECT_NEAR(c.softmax_scale(), m * m / std::sqrt(192.0), 1e-12);
  c.rope_scaling.enabled = false;
  EXPECT_NEAR(c.softmax_scale(), 1.0 / std::sqrt(192.0), 1e-12);
}

TEST(Config, RopeParametersOfTransformers5) {
  std::string j = replace(kV2LiteJson, R"("rope_theta": 10000,)", "");
  j = replace(j, R"("rope_scaling": {)", R"("rope_parameters": {"rope_type": "yarn", "rope_theta": 5000.0, )");
  j = replace(j, R"("type": "yarn")", R"("truncate": true)");
  ModelConfig c;
  Status s = parse_config_json(j, &c);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_TRUE(c.rope_scaling.enabled);
  EXPECT_DOUBLE_EQ(c.rope_theta, 5000.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 40.0);
}

TEST(Config, V2StyleQLoraAndGroupLimited) {
  std::string j = replace(kV2LiteJson, R"("q_lora_rank": null)", R"("q_lora_rank": 1536)");
  j = replace(j, R"("topk_method": "greedy")", R"("topk_method": "group_limited_greedy")");
  j = replace(j, R"("n_group": 1)", R"("n_group": 8)");
  j = replace(j, R"("topk_group": 1)", R"("topk_group": 3)");
  ModelConfig c;
  Status s = parse_config_json(j, &c);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(c.q_lora_rank, 1536);
  EXPECT_EQ(c.topk_method, TopkMethod::kGroupLimitedGreedy);
  EXPECT_EQ(c.n_group, 8);
  EXPECT_EQ(c.topk_group, 3);
}

// Each rejected input, with a word the message must contain.
TEST(Config, RejectionsAreClear) {
  const std::pair<std::string, std::string> cases[] = {
      {replace(kV2LiteJson, R"("kv_lora_rank": 512)", R"("kv_lora_rank": 256)"), "kv_lora_rank 256"},
      {replace(kV2LiteJson, R"("qk_rope_head_dim": 64)", R"("qk_rope_head_dim": 32)"), "qk_rope_head_dim"},
      {replace(kV2LiteJson, R"("topk_method": "greedy")", R"("topk_method": "noaux_tc")"), "noaux_tc"},
      {replace(kV2LiteJson, R"("scoring_func": "softmax")", R"("scoring_func": "sigmoid")"), "sigmoid"},
      {replace(kV2LiteJson, R"("model_type": "deepseek_v2")", R"("model_type": "deepseek_v3")"), "deepseek_v3"},
      {replace(kV2LiteJson, R"("type": "yarn")", R"("type": "dynamic")"), "dynamic"},
      {replace(kV2LiteJson, R"("hidden_size": 2048)", R"("hidden_size": "2048")"), "hidden_size"},
      {replace(kV2LiteJson, R"("hidden_size": 2048,)", ""), "hidden_size"},
      {replace(kV2LiteJson, R"("seq_aux": true)", R"("seq_aux": true, "mystery_knob": 3)"), "mystery_knob"},
      {replace(kV2LiteJson, R"("num_experts_per_tok": 6)", R"("num_experts_per_tok": 65)"), "num_experts_per_tok"},
      {replace(kV2LiteJson, R"("eos_token_id": 100001)", R"("eos_token_id": 200000)"), "eos_token_id"},
      {replace(kV2LiteJson, R"("v_head_dim": 128)", R"("v_head_dim": 128, "qk_head_dim": 200)"), "qk_head_dim"},
      {replace(kV2LiteJson, R"("v_head_dim": 128)", R"("v_head_dim": 128, "head_dim": 128)"), "head_dim 128"},
      {replace(kV2LiteJson, R"("scoring_func": "softmax")", R"("scoring_func": "softmax", "quantization_config": {})"),
       "quantization_config"},
      {"{ not json", "JSON"},
  };
  for (const auto& [text, word] : cases) {
    ModelConfig c;
    Status s = parse_config_json(text, &c);
    EXPECT_FALSE(s.is_ok()) << word;
    EXPECT_NE(s.to_string().find(word), std::string::npos) << s.to_string();
  }
}

TEST(Config, PresetsValidateAndUnknownPresetFails) {
  for (const auto& n : preset_names()) {
    ModelConfig c;
    EXPECT_TRUE(preset_config(n, &c).is_ok()) << n;
    EXPECT_EQ(c.kv_lora_rank, 512);
    EXPECT_EQ(c.qk_rope_head_dim, 64);
  }
  ModelConfig c;
  Status s = preset_config("gpt2", &c);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.to_string().find("deepseek-v2-lite"), std::string::npos);
}

TEST(Config, LoadConfigMissingFileIsIoError) {
  ModelConfig c;
  Status s = load_config("/nonexistent/dir", &c);
  EXPECT_EQ(s.code(), StatusCode::kIoError);
}

}  // namespace
}  // namespace mla::model
