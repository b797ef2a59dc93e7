// Built-in configurations, so dummy-weight runs and tests need no files.
#include <string>

#include "mla/model/config.h"

namespace mla::model {
namespace {

// DeepSeek-V2-Lite's published config.json (15.7B total, 2.4B active).
ModelConfig v2_lite() {
  ModelConfig c;
  c.name = "deepseek-v2-lite";
  c.vocab_size = 102400;
  c.hidden_size = 2048;
  c.num_hidden_layers = 27;
  c.num_attention_heads = 16;
  c.max_position_embeddings = 163840;
  c.q_lora_rank = 0;
  c.intermediate_size = 10944;
  c.moe_intermediate_size = 1408;
  c.n_routed_experts = 64;
  c.n_shared_experts = 2;
  c.num_experts_per_tok = 6;
  c.first_k_dense_replace = 1;
  c.moe_layer_freq = 1;
  c.routed_scaling_factor = 1.0;
  c.topk_method = TopkMethod::kGreedy;
  c.n_group = 1;
  c.topk_group = 1;
  c.norm_topk_prob = false;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 10000.0;
  c.rope_scaling = {.enabled = true, .factor = 40.0, .original_max_position_embeddings = 4096,
                    .beta_fast = 32.0, .beta_slow = 1.0, .mscale = 0.707, .mscale_all_dim = 0.707};
  c.bos_token_id = 100000;
  c.eos_token_ids = {100001};
  return c;
}

// DeepSeek-V2 (236B): q_lora_rank and group-limited routing.
ModelConfig v2() {
  ModelConfig c = v2_lite();
  c.name = "deepseek-v2";
  c.hidden_size = 5120;
  c.num_hidden_layers = 60;
  c.num_attention_heads = 128;
  c.q_lora_rank = 1536;
  c.intermediate_size = 12288;
  c.moe_intermediate_size = 1536;
  c.n_routed_experts = 160;
  c.topk_method = TopkMethod::kGroupLimitedGreedy;
  c.n_group = 8;
  c.topk_group = 3;
  c.routed_scaling_factor = 16.0;
  return c;
}

// Small enough for CPU tests, but with the real latent (512 + 64) and head dims (d_qk 192, d_v 128), so
// the decode and prefill kernels apply unchanged. Matches tests/fixtures/tiny (scripts/make_fixtures.py).
ModelConfig tiny() {
  ModelConfig c = v2_lite();
  c.name = "tiny";
  c.vocab_size = 512;
  c.hidden_size = 128;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.max_position_embeddings = 2048;
  c.intermediate_size = 256;
  c.moe_intermediate_size = 64;
  c.n_routed_experts = 8;
  c.n_shared_experts = 2;
  c.num_experts_per_tok = 3;
  c.rope_scaling.factor = 4.0;
  c.rope_scaling.original_max_position_embeddings = 512;
  c.bos_token_id = 0;
  c.eos_token_ids = {1};
  return c;
}

// tiny with V2's shape of attention and routing (matches tests/fixtures/tiny-qlora).
ModelConfig tiny_qlora() {
  ModelConfig c = tiny();
  c.name = "tiny-qlora";
  c.q_lora_rank = 96;
  c.topk_method = TopkMethod::kGroupLimitedGreedy;
  c.n_group = 4;
  c.topk_group = 2;
  c.routed_scaling_factor = 2.5;
  c.max_position_embeddings = 4096;
  c.rope_scaling.factor = 8.0;  // mscale != mscale_all_dim: cos/sin carry a YaRN factor != 1
  c.rope_scaling.mscale = 1.0;
  c.rope_scaling.mscale_all_dim = 0.8;
  return c;
}

}  // namespace

std::vector<std::string> preset_names() { return {"deepseek-v2-lite", "deepseek-v2", "tiny", "tiny-qlora"}; }

Status preset_config(std::string_view name, ModelConfig* out) {
  ModelConfig c;
  if (name == "deepseek-v2-lite") c = v2_lite();
  else if (name == "deepseek-v2") c = v2();
  else if (name == "tiny") c = tiny();
  else if (name == "tiny-qlora") c = tiny_qlora();
  else {
    std::string all;
    for (const auto& n : preset_names()) all += (all.empty() ? "" : ", ") + n;
    return Status::invalid("config", "unknown preset \"" + std::string(name) + "\" (known: " + all + ")");
  }
  MLA_TRY(validate_config(c));
  *out = std::move(c);
  return Status::ok();
}

}  // namespace mla::model
