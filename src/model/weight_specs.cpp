// Hugging Face DeepseekV2 tensor names → our weight slots, with the shape each must have.
#include <string>

#include "mla/model/weights.h"

namespace mla::model {
namespace {

struct Lister {
  std::vector<WeightSpec>* out;
  void add(std::string hf, std::string ours, std::vector<int64_t> shape, TensorView* slot) {
    out->push_back({std::move(hf), std::move(ours), std::move(shape), slot});
  }
  void mlp(const std::string& hf, const std::string& ours, int64_t hidden, int64_t inter, MlpWeights* m) {
    add(hf + ".gate_proj.weight", ours + ".gate_proj", {inter, hidden}, &m->gate_proj);
    add(hf + ".up_proj.weight", ours + ".up_proj", {inter, hidden}, &m->up_proj);
    add(hf + ".down_proj.weight", ours + ".down_proj", {hidden, inter}, &m->down_proj);
  }
};

}  // namespace

std::vector<WeightSpec> weight_specs(const ModelConfig& c, ModelWeights* w) {
  w->config = c;
  w->layers.assign(static_cast<size_t>(c.num_hidden_layers), LayerWeights{});
  return list_weights(w);
}

std::vector<WeightSpec> list_weights(ModelWeights* w) {
  const ModelConfig& c = w->config;
  std::vector<WeightSpec> specs;
  Lister l{&specs};
  const int64_t H = c.hidden_size, nh = c.num_attention_heads;
  l.add("model.embed_tokens.weight", "embed_tokens", {c.vocab_size, H}, &w->embed_tokens);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    LayerWeights& L = w->layers[static_cast<size_t>(i)];
    const std::string hf = "model.layers." + std::to_string(i), ours = "layers." + std::to_string(i);
    l.add(hf + ".input_layernorm.weight", ours + ".attn_norm", {H}, &L.input_layernorm);
    const std::string a = hf + ".self_attn", oa = ours + ".attn";
    if (c.q_lora_rank == 0) {
      l.add(a + ".q_proj.weight", oa + ".q_proj", {nh * c.qk_head_dim(), H}, &L.attn.q_proj);
    } else {
      l.add(a + ".q_a_proj.weight", oa + ".q_a_proj", {c.q_lora_rank, H}, &L.attn.q_a_proj);
      l.add(a + ".q_a_layernorm.weight", oa + ".q_a_norm", {c.q_lora_rank}, &L.attn.q_a_layernorm);
      l.add(a + ".q_b_proj.weight", oa + ".q_b_proj", {nh * c.qk_head_dim(), c.q_lora_rank}, &L.attn.q_b_proj);
    }
    l.add(a + ".kv_a_proj_with_mqa.weight", oa + ".kv_a_proj", {c.latent_dim(), H}, &L.attn.kv_a_proj_with_mqa);
    l.add(a + ".kv_a_layernorm.weight", oa + ".kv_a_norm", {c.kv_lora_rank}, &L.attn.kv_a_layernorm);
    l.add(a + ".kv_b_proj.weight", oa + ".kv_b_proj", {nh * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank},
          &L.attn.kv_b_proj);
    l.add(a + ".o_proj.weight", oa + ".o_proj", {H, nh * c.v_head_dim}, &L.attn.o_proj);
    l.add(hf + ".post_attention_layernorm.weight", ours + ".mlp_norm", {H}, &L.post_attention_layernorm);
    L.is_moe = c.is_moe_layer(i);
    if (!L.is_moe) {
      l.mlp(hf + ".mlp", ours + ".mlp", H, c.intermediate_size, &L.mlp);
      continue;
    }
    l.add(hf + ".mlp.gate.weight", ours + ".moe.router", {c.n_routed_experts, H}, &L.moe.gate);
    if (L.moe.experts.size() != static_cast<size_t>(c.n_routed_experts))
      L.moe.experts.resize(static_cast<size_t>(c.n_routed_experts));
    for (int64_t e = 0; e < c.n_routed_experts; ++e)
      l.mlp(hf + ".mlp.experts." + std::to_string(e), ours + ".moe.expert." + std::to_string(e), H,
            c.moe_intermediate_size, &L.moe.experts[static_cast<size_t>(e)]);
    if (c.n_shared_experts > 0)
      l.mlp(hf + ".mlp.shared_experts", ours + ".moe.shared", H, c.moe_intermediate_size * c.n_shared_experts,
            &L.moe.shared);
  }
  l.add("model.norm.weight", "final_norm", {H}, &w->norm);
  if (!c.tie_word_embeddings) l.add("lm_head.weight", "lm_head", {c.vocab_size, H}, &w->lm_head);
  return specs;
}

Status check_host_weight(const WeightSpec& spec, const char* op) {
  const TensorView& v = *spec.slot;
  const std::vector<int64_t> shape(v.shape.begin(), v.shape.begin() + v.rank);
  if (!v.defined() || !v.data || shape != spec.shape || !v.is_contiguous() ||
      (v.dtype != DType::kFp32 && v.dtype != DType::kBf16))
    return Status::invalid(op, "weight \"" + spec.hf_name +
                                   "\": expected fp32 or bf16 contiguous of its spec's shape, got " +
                                   (v.defined() ? v.str() : std::string("nothing")));
  return Status::ok();
}

int64_t num_parameters(const ModelConfig& c) {
  ModelWeights w;
  int64_t n = 0;
  for (const auto& s : weight_specs(c, &w)) {
    int64_t k = 1;
    for (int64_t d : s.shape) k *= d;
    n += k;
  }
  return n;
}

bool is_ignorable_checkpoint_tensor(const std::string& hf_name) {
  const std::string suffix = "rotary_emb.inv_freq";
  return hf_name.size() >= suffix.size() && hf_name.compare(hf_name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace mla::model
