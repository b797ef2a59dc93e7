#pragma once
// The weights of a DeepSeek-V2 model, as views (nn.Linear layout: W[out, in], y = x·Wᵀ), plus the
// table that maps each Hugging Face tensor name to its slot, our name and its expected shape.
#include <any>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mla/core/status.h"
#include "mla/core/tensor.h"
#include "mla/model/config.h"

namespace mla::model {

struct MlpWeights {
  TensorView gate_proj;  // [inter, hidden]
  TensorView up_proj;    // [inter, hidden]
  TensorView down_proj;  // [hidden, inter]
};

struct AttentionWeights {
  TensorView q_proj;              // [h·192, hidden]        (q_lora_rank == 0)
  TensorView q_a_proj;            // [q_lora, hidden]        (q_lora_rank > 0)
  TensorView q_a_layernorm;       // [q_lora]
  TensorView q_b_proj;            // [h·192, q_lora]
  TensorView kv_a_proj_with_mqa;  // [512 + 64, hidden]: kv_c then k_pe
  TensorView kv_a_layernorm;      // [512]
  TensorView kv_b_proj;           // [h·(128 + v), 512]: per head W_UK rows then W_UV rows
  TensorView o_proj;              // [hidden, h·v]
};

struct MoeWeights {
  TensorView gate;                  // [n_routed, hidden] router
  std::vector<MlpWeights> experts;  // n_routed, inter = moe_intermediate_size
  MlpWeights shared;                // inter = moe_intermediate_size · n_shared (absent when n_shared == 0)
};

struct LayerWeights {
  TensorView input_layernorm;           // [hidden]
  TensorView post_attention_layernorm;  // [hidden]
  AttentionWeights attn;
  bool is_moe = false;
  MlpWeights mlp;  // dense layers (inter = intermediate_size)
  MoeWeights moe;  // MoE layers
};

struct ModelWeights {
  ModelConfig config;
  TensorView embed_tokens;  // [vocab, hidden]
  TensorView norm;          // [hidden]
  TensorView lm_head;       // [vocab, hidden] (= embed_tokens when tied)
  std::vector<LayerWeights> layers;
  // Whatever keeps the views' memory alive: mapped files, owned buffers.
  std::vector<std::shared_ptr<const void>> storage;
};

// One expected tensor: its Hugging Face name, our name, shape, and where the view goes.
struct WeightSpec {
  std::string hf_name;   // "model.layers.3.self_attn.kv_a_proj_with_mqa.weight"
  std::string our_name;  // "layers.3.attn.kv_a_proj"
  std::vector<int64_t> shape;
  TensorView* slot;
};

// Sizes `w->layers` for `c` and lists every tensor the model needs, in checkpoint order (layers
// ascending). lm_head is left out when the embeddings are tied (it aliases embed_tokens).
std::vector<WeightSpec> weight_specs(const ModelConfig& c, ModelWeights* w);
// The same list for weights already sized by weight_specs (slots keep their views).
std::vector<WeightSpec> list_weights(ModelWeights* w);
int64_t num_parameters(const ModelConfig& c);

// What every backend accepts as a host weight: present, non-null, contiguous, fp32 or bf16, of its spec's
// shape. The error names `op` and the Hugging Face tensor name.
Status check_host_weight(const WeightSpec& spec, const char* op);

// Checkpoint tensors a loader may skip without error (buffers some exports include, e.g. RoPE inv_freq).
bool is_ignorable_checkpoint_tensor(const std::string& hf_name);

}  // namespace mla::model
