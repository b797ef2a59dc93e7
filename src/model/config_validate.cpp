// Checks shared by parsed and built-in configs, and the YaRN softmax-scale rule.
#include <cmath>
#include <string>

#include "mla/model/config.h"

namespace mla::model {
namespace {

constexpr const char* kOp = "config";

// DeepSeek's yarn_get_mscale: 0.1 * m * ln(s) + 1 for s > 1.
double yarn_mscale(double scale, double m) { return scale <= 1.0 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; }

Status need(bool ok, const ModelConfig& c, const std::string& what) {
  if (ok) return Status::ok();
  return Status::invalid(kOp, c.name + ": " + what);
}

}  // namespace

double ModelConfig::softmax_scale() const {
  double s = 1.0 / std::sqrt(static_cast<double>(qk_head_dim()));
  if (rope_scaling.enabled && rope_scaling.mscale_all_dim != 0.0) {
    const double m = yarn_mscale(rope_scaling.factor, rope_scaling.mscale_all_dim);
    s *= m * m;
  }
  return s;
}

Status validate_config(const ModelConfig& c) {
  // The latent cache layout (576 = 512 + 64) is fixed by the decode kernels and KV formats.
  if (c.kv_lora_rank != 512)
    return Status::unsupported(kOp, c.name + ": kv_lora_rank " + std::to_string(c.kv_lora_rank) + " (must be 512)");
  if (c.qk_rope_head_dim != 64)
    return Status::unsupported(kOp,
                               c.name + ": qk_rope_head_dim " + std::to_string(c.qk_rope_head_dim) + " (must be 64)");
  MLA_TRY(need(c.vocab_size > 0, c, "vocab_size must be > 0"));
  MLA_TRY(need(c.hidden_size > 0, c, "hidden_size must be > 0"));
  MLA_TRY(need(c.num_hidden_layers > 0, c, "num_hidden_layers must be > 0"));
  MLA_TRY(need(c.num_attention_heads > 0, c, "num_attention_heads must be > 0"));
  MLA_TRY(need(c.qk_nope_head_dim > 0 && c.v_head_dim > 0, c, "qk_nope_head_dim and v_head_dim must be > 0"));
  MLA_TRY(need(c.q_lora_rank >= 0, c, "q_lora_rank must be >= 0 (or null)"));
  MLA_TRY(need(c.max_position_embeddings > 0, c, "max_position_embeddings must be > 0"));
  MLA_TRY(need(c.rms_norm_eps > 0, c, "rms_norm_eps must be > 0"));
  MLA_TRY(need(c.rope_theta > 1.0, c, "rope_theta must be > 1"));
  MLA_TRY(need(c.first_k_dense_replace >= 0, c, "first_k_dense_replace must be >= 0"));
  MLA_TRY(need(c.moe_layer_freq >= 1, c, "moe_layer_freq must be >= 1"));
  bool any_dense = false;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) any_dense |= !c.is_moe_layer(l);
  MLA_TRY(need(!any_dense || c.intermediate_size > 0, c, "intermediate_size must be > 0 (dense layers exist)"));
  if (c.n_routed_experts > 0) {
    MLA_TRY(need(c.moe_intermediate_size > 0, c, "moe_intermediate_size must be > 0"));
    MLA_TRY(need(c.n_shared_experts >= 0, c, "n_shared_experts must be >= 0"));
    MLA_TRY(need(c.num_experts_per_tok >= 1 && c.num_experts_per_tok <= c.n_routed_experts, c,
                 "num_experts_per_tok must be in [1, n_routed_experts]"));
    MLA_TRY(need(c.routed_scaling_factor > 0, c, "routed_scaling_factor must be > 0"));
    if (c.topk_method == TopkMethod::kGroupLimitedGreedy) {
      MLA_TRY(need(c.n_group >= 1 && c.n_routed_experts % c.n_group == 0, c,
                   "n_group must divide n_routed_experts"));
      MLA_TRY(need(c.topk_group >= 1 && c.topk_group <= c.n_group, c, "topk_group must be in [1, n_group]"));
      MLA_TRY(need(c.topk_group * (c.n_routed_experts / c.n_group) >= c.num_experts_per_tok, c,
                   "topk_group groups hold fewer experts than num_experts_per_tok"));
    }
  }
  if (c.rope_scaling.enabled) {
    const YarnScaling& y = c.rope_scaling;
    MLA_TRY(need(y.factor >= 1.0, c, "rope_scaling.factor must be >= 1"));
    MLA_TRY(
        need(y.original_max_position_embeddings > 0, c, "rope_scaling.original_max_position_embeddings must be > 0"));
    MLA_TRY(need(y.beta_fast > 0 && y.beta_slow > 0, c, "rope_scaling.beta_fast/beta_slow must be > 0"));
  }
  for (int64_t id : c.eos_token_ids)
    MLA_TRY(need(id >= 0 && id < c.vocab_size, c, "eos_token_id " + std::to_string(id) + " outside the vocabulary"));
  MLA_TRY(need(c.bos_token_id < c.vocab_size, c, "bos_token_id outside the vocabulary"));
  return Status::ok();
}

}  // namespace mla::model
