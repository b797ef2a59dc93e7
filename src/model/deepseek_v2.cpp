// DeepSeek-V2 forward step over any Backend. Shapes: t tokens, H hidden, h heads, d_qk = 192.
#include "mla/model/deepseek_v2.h"

namespace mla::model {
namespace {

// Columns [c0, c0 + n) of a 2-d activation, as a strided view.
TensorView cols(TensorView v, int64_t c0, int64_t n) {
  v.data = static_cast<uint8_t*>(v.data) + c0 * static_cast<int64_t>(dtype_size(v.dtype));
  v.shape[1] = n;
  return v;
}

// q_a_layernorm and kv_a_layernorm are built without the config's eps in DeepSeek's reference code and
// in transformers (DeepseekV2RMSNorm(rank) → 1e-6), whatever rms_norm_eps says.
constexpr float kLatentNormEps = 1e-6f;

}  // namespace

Status DeepseekV2::attention(int layer, const TensorView& h, AttnPath path, TensorView out) {
  const ModelWeights& W = be_->weights();
  const ModelConfig& c = W.config;
  const AttentionWeights& w = W.layers[static_cast<size_t>(layer)].attn;
  const int64_t t = h.shape[0], nh = c.num_attention_heads;

  TensorView q = be_->alloc(t, nh * c.qk_head_dim());  // [t, h·192]: per head q_nope (128) | q_pe (64)
  if (c.q_lora_rank == 0) {
    MLA_TRY(be_->linear(h, w.q_proj, q));
  } else {
    TensorView qa = be_->alloc(t, c.q_lora_rank);
    MLA_TRY(be_->linear(h, w.q_a_proj, qa));
    MLA_TRY(be_->rmsnorm(qa, w.q_a_layernorm, kLatentNormEps, qa));
    MLA_TRY(be_->linear(qa, w.q_b_proj, q));
  }
  TensorView latent = be_->alloc(t, c.latent_dim());  // [t, 576]: kv_c (512) | k_pe (64)
  MLA_TRY(be_->linear(h, w.kv_a_proj_with_mqa, latent));
  TensorView kv_c = cols(latent, 0, c.kv_lora_rank);
  MLA_TRY(be_->rmsnorm(kv_c, w.kv_a_layernorm, kLatentNormEps, kv_c));
  MLA_TRY(be_->rope(q, latent));
  TensorView o = be_->alloc(t, nh * c.v_head_dim);  // [t, h·v]
  MLA_TRY(be_->mla_attention(layer, q, latent, w, path, o));
  return be_->linear(o, w.o_proj, out);
}

Status DeepseekV2::mlp(const MlpWeights& w, const TensorView& h, TensorView out) {
  const int64_t t = h.shape[0], inter = w.gate_proj.shape[0];
  TensorView g = be_->alloc(t, inter), u = be_->alloc(t, inter);
  MLA_TRY(be_->linear(h, w.gate_proj, g));
  MLA_TRY(be_->linear(h, w.up_proj, u));
  MLA_TRY(be_->silu_mul(g, u, g));
  return be_->linear(g, w.down_proj, out);
}

Status DeepseekV2::forward(const ForwardBatch& batch, TensorView* logits) {
  MLA_TRY(be_->begin_step(batch));
  const ModelWeights& W = be_->weights();
  const ModelConfig& c = W.config;
  const int64_t t = batch.num_tokens(), H = c.hidden_size;
  const float eps = static_cast<float>(c.rms_norm_eps);

  TensorView residual = be_->alloc_fp32(t, H), h = be_->alloc(t, H), y = be_->alloc(t, H);
  MLA_TRY(be_->embed(residual));
  MLA_TRY(be_->rmsnorm(residual, W.layers[0].input_layernorm, eps, h));
  for (int l = 0; l < static_cast<int>(c.num_hidden_layers); ++l) {
    const LayerWeights& L = W.layers[static_cast<size_t>(l)];
    if (l > 0) MLA_TRY(be_->add_rmsnorm(y, residual, L.input_layernorm, eps, h));  // y: previous MLP output
    MLA_TRY(attention(l, h, batch.attn_path, y));
    MLA_TRY(be_->add_rmsnorm(y, residual, L.post_attention_layernorm, eps, h));
    if (L.is_moe) MLA_TRY(be_->moe(h, L.moe, y));
    else MLA_TRY(mlp(L.mlp, h, y));
  }
  MLA_TRY(be_->add_rmsnorm(y, residual, W.norm, eps, h));
  if (!batch.logits_rows.empty()) {
    TensorView sel = be_->alloc(static_cast<int64_t>(batch.logits_rows.size()), H);
    MLA_TRY(be_->gather_logit_rows(h, sel));
    h = sel;
  }
  *logits = be_->alloc_fp32(h.shape[0], c.vocab_size);
  return be_->linear(h, W.lm_head, *logits);
}

}  // namespace mla::model
