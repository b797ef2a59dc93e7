// config.json (DeepseekV2 family) → ModelConfig. Every key is either read, known to be harmless, or an
// error: a field we do not understand could change the arithmetic, so it is never silently dropped.
#include "mla/model/config.h"

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

namespace mla::model {
namespace {

using json = nlohmann::json;
constexpr const char* kOp = "config";

// Keys that carry no arithmetic (bookkeeping, training-only knobs, or values checked elsewhere).
const std::set<std::string>& ignored_keys() {
  static const std::set<std::string> k = {
      "architectures", "auto_map", "torch_dtype", "dtype", "transformers_version", "use_cache",
      "initializer_range", "pretraining_tp", "attention_dropout", "aux_loss_alpha", "seq_aux", "ep_size",
      "pad_token_id", "_name_or_path", "output_router_logits", "router_aux_loss_coef", "num_key_value_heads",
      "rope_interleave", "id2label", "label2id", "output_attentions", "output_hidden_states",
      "return_dict", "is_encoder_decoder", "tokenizer_class", "quantization_config_ignored", "chunk_size_feed_forward",
      "problem_type", "use_return_dict"};
  return k;
}

// Reads j[key] into *out when present and not null; a wrong JSON type is an error naming the key.
class Reader {
 public:
  Reader(const json& j, std::string_view src) : j_(j), src_(src) {}
  Status integer(const char* key, int64_t* out, bool required) {
    seen_.insert(key);
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return missing(key, required);
    if (!it->is_number_integer()) return bad_type(key, "an integer", *it);
    *out = it->get<int64_t>();
    return Status::ok();
  }
  Status number(const char* key, double* out, bool required) {
    seen_.insert(key);
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return missing(key, required);
    if (!it->is_number()) return bad_type(key, "a number", *it);
    *out = it->get<double>();
    return Status::ok();
  }
  Status boolean(const char* key, bool* out) {
    seen_.insert(key);
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return Status::ok();
    if (!it->is_boolean()) return bad_type(key, "true or false", *it);
    *out = it->get<bool>();
    return Status::ok();
  }
  Status string(const char* key, std::string* out) {
    seen_.insert(key);
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return Status::ok();
    if (!it->is_string()) return bad_type(key, "a string", *it);
    *out = it->get<std::string>();
    return Status::ok();
  }
  void mark(const char* key) { seen_.insert(key); }
  // Keys neither read nor known to be harmless.
  Status no_unknown_keys() const {
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      if (seen_.count(it.key()) || ignored_keys().count(it.key())) continue;
      return Status::unsupported(kOp, std::string(src_) + ": unknown field \"" + it.key() + "\"");
    }
    return Status::ok();
  }

 private:
  Status missing(const char* key, bool required) const {
    if (!required) return Status::ok();
    return Status::invalid(kOp, std::string(src_) + ": missing required field \"" + key + "\"");
  }
  Status bad_type(const char* key, const char* want, const json& v) const {
    return Status::invalid(kOp, std::string(src_) + ": field \"" + key + "\" must be " + want + ", got " + v.dump());
  }
  const json& j_;
  std::string_view src_;
  std::set<std::string> seen_;
};

// Both the legacy `rope_scaling` and transformers 5.x `rope_parameters` objects land here.
Status parse_rope(const json& r, std::string_view src, const char* field, ModelConfig* c) {
  if (!r.is_object()) return Status::invalid(kOp, std::string(src) + ": \"" + field + "\" must be an object");
  const std::string where = std::string(src) + " " + field;
  Reader rd(r, where);
  std::string type;
  MLA_TRY(rd.string("type", &type));
  if (type.empty()) MLA_TRY(rd.string("rope_type", &type));
  rd.mark("rope_type");
  MLA_TRY(rd.number("rope_theta", &c->rope_theta, false));  // rope_parameters carries the base too
  if (type == "default" || type.empty()) {
    c->rope_scaling = YarnScaling{};
    return rd.no_unknown_keys();
  }
  if (type != "yarn") return Status::unsupported(kOp, where + ": rope type \"" + type + "\" (only yarn and default)");
  YarnScaling& y = c->rope_scaling;
  y = YarnScaling{};
  y.enabled = true;
  MLA_TRY(rd.number("factor", &y.factor, true));
  MLA_TRY(rd.integer("original_max_position_embeddings", &y.original_max_position_embeddings, true));
  MLA_TRY(rd.number("beta_fast", &y.beta_fast, false));
  MLA_TRY(rd.number("beta_slow", &y.beta_slow, false));
  MLA_TRY(rd.number("mscale", &y.mscale, false));
  MLA_TRY(rd.number("mscale_all_dim", &y.mscale_all_dim, false));
  // An explicit attention_factor would override the mscale ratio DeepSeek uses; we only do the latter.
  if (r.contains("attention_factor") && !r["attention_factor"].is_null())
    return Status::unsupported(kOp, where + ": explicit attention_factor (DeepSeek derives it from mscale)");
  rd.mark("attention_factor");
  bool truncate = true;
  MLA_TRY(rd.boolean("truncate", &truncate));
  if (!truncate) return Status::unsupported(kOp, where + ": truncate=false (DeepSeek rounds the YaRN ramp bounds)");
  return rd.no_unknown_keys();
}

Status parse_eos(const json& j, std::string_view src, ModelConfig* c) {
  auto it = j.find("eos_token_id");
  if (it == j.end() || it->is_null()) return Status::ok();
  if (it->is_number_integer()) {
    c->eos_token_ids = {it->get<int64_t>()};
    return Status::ok();
  }
  if (it->is_array()) {
    for (const auto& e : *it) {
      if (!e.is_number_integer()) break;
      c->eos_token_ids.push_back(e.get<int64_t>());
    }
    if (c->eos_token_ids.size() == it->size()) return Status::ok();
  }
  return Status::invalid(kOp, std::string(src) + ": eos_token_id must be an integer or a list of integers");
}

Status parse_fields(const json& j, std::string_view src, ModelConfig* c) {
  Reader rd(j, src);
  std::string model_type;
  MLA_TRY(rd.string("model_type", &model_type));
  if (model_type != "deepseek_v2")
    return Status::unsupported(kOp, std::string(src) + ": model_type \"" + model_type + "\" (only deepseek_v2)");
  MLA_TRY(rd.integer("vocab_size", &c->vocab_size, true));
  MLA_TRY(rd.integer("hidden_size", &c->hidden_size, true));
  MLA_TRY(rd.integer("num_hidden_layers", &c->num_hidden_layers, true));
  MLA_TRY(rd.integer("num_attention_heads", &c->num_attention_heads, true));
  MLA_TRY(rd.integer("max_position_embeddings", &c->max_position_embeddings, true));
  MLA_TRY(rd.integer("q_lora_rank", &c->q_lora_rank, false));  // null in V2-Lite
  MLA_TRY(rd.integer("kv_lora_rank", &c->kv_lora_rank, true));
  MLA_TRY(rd.integer("qk_nope_head_dim", &c->qk_nope_head_dim, true));
  MLA_TRY(rd.integer("qk_rope_head_dim", &c->qk_rope_head_dim, true));
  MLA_TRY(rd.integer("v_head_dim", &c->v_head_dim, true));
  // transformers 5.x writes head_dim (= the rotary width its RoPE uses) and qk_head_dim (the sum).
  int64_t head_dim = c->qk_rope_head_dim;
  MLA_TRY(rd.integer("head_dim", &head_dim, false));
  if (head_dim != c->qk_rope_head_dim)
    return Status::invalid(kOp, std::string(src) + ": head_dim " + std::to_string(head_dim) + " != qk_rope_head_dim");
  int64_t qk_head_dim = c->qk_head_dim();
  MLA_TRY(rd.integer("qk_head_dim", &qk_head_dim, false));
  if (qk_head_dim != c->qk_head_dim())
    return Status::invalid(kOp, std::string(src) + ": qk_head_dim " + std::to_string(qk_head_dim) +
                                    " != qk_nope_head_dim + qk_rope_head_dim");
  MLA_TRY(rd.integer("intermediate_size", &c->intermediate_size, true));
  MLA_TRY(rd.integer("moe_intermediate_size", &c->moe_intermediate_size, false));
  MLA_TRY(rd.integer("n_routed_experts", &c->n_routed_experts, false));
  MLA_TRY(rd.integer("n_shared_experts", &c->n_shared_experts, false));
  MLA_TRY(rd.integer("num_experts_per_tok", &c->num_experts_per_tok, false));
  MLA_TRY(rd.integer("first_k_dense_replace", &c->first_k_dense_replace, false));
  MLA_TRY(rd.integer("moe_layer_freq", &c->moe_layer_freq, false));
  MLA_TRY(rd.number("routed_scaling_factor", &c->routed_scaling_factor, false));
  MLA_TRY(rd.integer("n_group", &c->n_group, false));
  MLA_TRY(rd.integer("topk_group", &c->topk_group, false));
  MLA_TRY(rd.boolean("norm_topk_prob", &c->norm_topk_prob));
  MLA_TRY(rd.number("rms_norm_eps", &c->rms_norm_eps, false));
  MLA_TRY(rd.number("rope_theta", &c->rope_theta, false));
  MLA_TRY(rd.boolean("tie_word_embeddings", &c->tie_word_embeddings));
  MLA_TRY(rd.integer("bos_token_id", &c->bos_token_id, false));
  rd.mark("eos_token_id");
  MLA_TRY(parse_eos(j, src, c));

  std::string topk = "greedy", scoring = "softmax", act = "silu";
  MLA_TRY(rd.string("topk_method", &topk));
  if (topk == "greedy") c->topk_method = TopkMethod::kGreedy;
  else if (topk == "group_limited_greedy") c->topk_method = TopkMethod::kGroupLimitedGreedy;
  else
    return Status::unsupported(kOp, std::string(src) + ": topk_method \"" + topk + "\" (greedy, group_limited_greedy)");
  MLA_TRY(rd.string("scoring_func", &scoring));
  if (scoring != "softmax")
    return Status::unsupported(kOp, std::string(src) + ": scoring_func \"" + scoring + "\" (only softmax)");
  MLA_TRY(rd.string("hidden_act", &act));
  if (act != "silu") return Status::unsupported(kOp, std::string(src) + ": hidden_act \"" + act + "\" (only silu)");
  bool attention_bias = false, mlp_bias = false;
  MLA_TRY(rd.boolean("attention_bias", &attention_bias));
  MLA_TRY(rd.boolean("mlp_bias", &mlp_bias));
  if (attention_bias || mlp_bias)
    return Status::unsupported(kOp, std::string(src) + ": attention_bias/mlp_bias = true");

  // Legacy rope_scaling first, then transformers 5.x rope_parameters (which wins when both exist).
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    rd.mark(key);
    auto it = j.find(key);
    if (it != j.end() && !it->is_null()) MLA_TRY(parse_rope(*it, src, key, c));
  }
  if (j.contains("quantization_config"))
    return Status::unsupported(kOp, std::string(src) + ": quantized checkpoints (quantization_config)");
  return rd.no_unknown_keys();
}

}  // namespace

Status parse_config_json(std::string_view json_text, ModelConfig* out, std::string_view source) {
  json j = json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::invalid(kOp, std::string(source) + ": not valid JSON");
  if (!j.is_object()) return Status::invalid(kOp, std::string(source) + ": top level must be an object");
  ModelConfig c;
  c.name = std::string(source);
  try {
    MLA_TRY(parse_fields(j, source, &c));
  } catch (const std::exception& e) {  // e.g. an integer out of range for int64
    return Status::invalid(kOp, std::string(source) + ": " + e.what());
  }
  MLA_TRY(validate_config(c));
  *out = std::move(c);
  return Status::ok();
}

Status load_config(const std::string& path, ModelConfig* out) {
  std::string file = path;
  std::ifstream in(file);
  if (!in.is_open() || (in.peek(), in.fail())) {  // a directory opens but cannot be read
    file = path + "/config.json";
    in = std::ifstream(file);
  }
  if (!in.is_open()) return Status::io(kOp, "cannot open " + path + " (or " + file + ")");
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::io(kOp, "cannot read " + file);
  return parse_config_json(ss.str(), out, file);
}

}  // namespace mla::model
