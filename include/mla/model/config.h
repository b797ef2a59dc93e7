#pragma once
// DeepSeek-V2 family model configuration: what config.json says, validated against what mlaserve runs.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mla/core/status.h"

namespace mla::model {

enum class TopkMethod : uint8_t { kGreedy, kGroupLimitedGreedy };

// YaRN context extension (DeepSeek's variant: mscale / mscale_all_dim fold into cos/sin and the softmax
// scale). `enabled == false` means plain RoPE with rope_theta.
struct YarnScaling {
  bool enabled = false;
  double factor = 1.0;
  int64_t original_max_position_embeddings = 4096;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double mscale = 1.0;
  double mscale_all_dim = 0.0;
};

struct ModelConfig {
  std::string name;  // preset name or the config.json path it came from (for messages)
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t max_position_embeddings = 0;

  // MLA. q_lora_rank == 0: a single q_proj (V2-Lite); otherwise q_a_proj → q_a_layernorm → q_b_proj (V2).
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 512;
  int64_t qk_nope_head_dim = 128;
  int64_t qk_rope_head_dim = 64;
  int64_t v_head_dim = 128;

  // MLPs: layers [0, first_k_dense_replace) and those with (layer % moe_layer_freq != 0) are dense.
  int64_t intermediate_size = 0;
  int64_t moe_intermediate_size = 0;
  int64_t n_routed_experts = 0;
  int64_t n_shared_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t first_k_dense_replace = 0;
  int64_t moe_layer_freq = 1;
  double routed_scaling_factor = 1.0;
  TopkMethod topk_method = TopkMethod::kGreedy;
  int64_t n_group = 1;
  int64_t topk_group = 1;
  bool norm_topk_prob = false;

  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  YarnScaling rope_scaling;

  bool tie_word_embeddings = false;
  int64_t bos_token_id = -1;             // -1: not given
  std::vector<int64_t> eos_token_ids;    // config.json allows one id or a list

  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  int64_t latent_dim() const { return kv_lora_rank + qk_rope_head_dim; }  // 576: one cached "head"
  bool is_moe_layer(int64_t layer) const {
    return n_routed_experts > 0 && layer >= first_k_dense_replace && layer % moe_layer_freq == 0;
  }
  // 1/sqrt(d_qk), times YaRN's mscale(factor, mscale_all_dim)^2 when scaling is on (DeepSeek's rule).
  double softmax_scale() const;
};

// Parses the text of a Hugging Face config.json (DeepseekV2 family) and validates it.
Status parse_config_json(std::string_view json_text, ModelConfig* out, std::string_view source = "config.json");
// Reads and parses `path` (a config.json file, or a directory that holds one).
Status load_config(const std::string& path, ModelConfig* out);
// Built-in configurations: "deepseek-v2-lite", "deepseek-v2", "tiny", "tiny-qlora".
Status preset_config(std::string_view name, ModelConfig* out);
std::vector<std::string> preset_names();
// The checks parse_config_json applies (also useful for hand-built configs in tests).
Status validate_config(const ModelConfig& c);

}  // namespace mla::model
