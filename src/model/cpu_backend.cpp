// CpuBackend: argument checks, the step's state and the KV cache; the math is in cpu_*.cpp.
#include "mla/model/cpu_backend.h"

#include "cpu_kernels.h"
#include "mla/core/half.h"

namespace mla::model {
namespace {

constexpr const char* kOp = "cpu_backend";

// A host fp32 activation [rows, cols] with a contiguous last dim.
Status check_act(const char* op, const char* name, const TensorView& v, int64_t rows, int64_t cols) {
  if (v.dtype == DType::kFp32 && v.rank == 2 && v.data && v.stride[1] == 1 && v.stride[0] >= v.shape[1] &&
      (rows < 0 || v.shape[0] == rows) && (cols < 0 || v.shape[1] == cols))
    return Status::ok();
  return Status::invalid(op, std::string(name) + ": expected fp32[" + (rows < 0 ? "?" : std::to_string(rows)) + ", " +
                                 (cols < 0 ? "?" : std::to_string(cols)) + "] with unit column stride, got " + v.str());
}

}  // namespace

CpuBackend::CpuBackend(ModelWeights w)
    : w_(std::move(w)),
      rope_(make_rope_table(w_.config)),
      softmax_scale_(static_cast<float>(w_.config.softmax_scale())) {}

Status CpuBackend::create(ModelWeights weights, std::unique_ptr<CpuBackend>* out) {
  MLA_TRY(validate_config(weights.config));
  ModelWeights copy = weights;
  for (const auto& s : list_weights(&copy)) MLA_TRY(check_host_weight(s, kOp));
  if (!weights.lm_head.defined()) return Status::invalid(kOp, "lm_head is not set");
  out->reset(new CpuBackend(std::move(weights)));
  return Status::ok();
}

// The last layer is written last: a step that failed part-way has not reached it, so its length is
// what every layer held before that step (begin_step trims the others back to it).
int64_t CpuBackend::cached_tokens(int64_t seq_id) const {
  auto it = cache_.find(seq_id);
  return it == cache_.end() ? 0 : static_cast<int64_t>(it->second.back().size()) / w_.config.latent_dim();
}

Status CpuBackend::begin_step(const ForwardBatch& b) {
  MLA_TRY(validate_forward_batch(b, w_.config, [this](int64_t id) { return cached_tokens(id); }, kOp));
  // Trim every layer back to the last layer's length (a step that failed part-way left the early layers
  // longer).
  for (const auto& s : b.seqs) {
    auto it = cache_.find(s.seq_id);
    if (it == cache_.end()) continue;
    for (auto& layer : it->second) layer.resize(static_cast<size_t>(s.start_pos * w_.config.latent_dim()));
  }
  batch_ = b;
  positions_ = b.positions();
  arena_.clear();
  return Status::ok();
}

TensorView CpuBackend::alloc(int64_t rows, int64_t cols) {
  arena_.emplace_back(new float[static_cast<size_t>(rows * cols)]());
  return TensorView::contiguous(arena_.back().get(), DType::kFp32, {rows, cols});
}

Status CpuBackend::embed(TensorView out) {
  const int64_t H = w_.config.hidden_size;
  MLA_TRY(check_act("embed", "out", out, batch_.num_tokens(), H));
  std::vector<float> buf(static_cast<size_t>(H));
  for (int64_t t = 0; t < out.shape[0]; ++t) {
    const float* row = cpu::weight_row(w_.embed_tokens, batch_.token_ids[static_cast<size_t>(t)], buf.data());
    std::copy(row, row + H, out.ptr<float>() + t * out.stride[0]);
  }
  return Status::ok();
}

Status CpuBackend::rmsnorm(const TensorView& x, const TensorView& w, float eps, TensorView out) {
  MLA_TRY(check_act("rmsnorm", "x", x, -1, w.numel()));
  MLA_TRY(check_act("rmsnorm", "out", out, x.shape[0], x.shape[1]));
  for (int64_t t = 0; t < x.shape[0]; ++t)
    cpu::rmsnorm_row(x.ptr<float>() + t * x.stride[0], w, eps, x.shape[1], out.ptr<float>() + t * out.stride[0]);
  return Status::ok();
}

Status CpuBackend::add_rmsnorm(const TensorView& x, TensorView residual, const TensorView& w, float eps,
                               TensorView out) {
  MLA_TRY(check_act("add_rmsnorm", "x", x, -1, w.numel()));
  MLA_TRY(check_act("add_rmsnorm", "residual", residual, x.shape[0], x.shape[1]));
  for (int64_t t = 0; t < x.shape[0]; ++t) {
    float* r = residual.ptr<float>() + t * residual.stride[0];
    const float* xr = x.ptr<float>() + t * x.stride[0];
    for (int64_t i = 0; i < x.shape[1]; ++i) r[i] += xr[i];
  }
  return rmsnorm(residual, w, eps, out);
}

Status CpuBackend::linear(const TensorView& x, const TensorView& w, TensorView out) {
  MLA_TRY(check_act("linear", "x", x, -1, w.shape[1]));
  MLA_TRY(check_act("linear", "out", out, x.shape[0], w.shape[0]));
  cpu::linear(x.ptr<float>(), x.stride[0], x.shape[0], w, out.ptr<float>(), out.stride[0]);
  return Status::ok();
}

Status CpuBackend::rope(TensorView q, TensorView latent) {
  const ModelConfig& c = w_.config;
  const int64_t t = batch_.num_tokens(), dq = c.qk_head_dim();
  MLA_TRY(check_act("rope", "q", q, t, c.num_attention_heads * dq));
  MLA_TRY(check_act("rope", "latent", latent, t, c.latent_dim()));
  for (int64_t i = 0; i < t; ++i) {
    const int64_t pos = positions_[static_cast<size_t>(i)];
    for (int64_t h = 0; h < c.num_attention_heads; ++h)
      apply_rope_interleaved(q.ptr<float>() + i * q.stride[0] + h * dq + c.qk_nope_head_dim, pos, rope_);
    apply_rope_interleaved(latent.ptr<float>() + i * latent.stride[0] + c.kv_lora_rank, pos, rope_);
  }
  return Status::ok();
}

Status CpuBackend::mla_attention(int layer, const TensorView& q, const TensorView& latent, const AttentionWeights& w,
                                 AttnPath path, TensorView out) {
  const ModelConfig& c = w_.config;
  const int64_t t = batch_.num_tokens(), D = c.latent_dim();
  MLA_TRY(check_act("mla_attention", "q", q, t, c.num_attention_heads * c.qk_head_dim()));
  MLA_TRY(check_act("mla_attention", "latent", latent, t, D));
  MLA_TRY(check_act("mla_attention", "out", out, t, c.num_attention_heads * c.v_head_dim));
  if (layer < 0 || layer >= c.num_hidden_layers) return Status::invalid("mla_attention", "layer out of range");
  int64_t row = 0;
  for (const auto& s : batch_.seqs) {
    auto& layers = cache_[s.seq_id];
    if (layers.empty()) layers.resize(static_cast<size_t>(c.num_hidden_layers));
    std::vector<float>& kv = layers[static_cast<size_t>(layer)];
    if (static_cast<int64_t>(kv.size()) != s.start_pos * D)
      return Status::internal("mla_attention", "cache of sequence " + std::to_string(s.seq_id) + " out of step");
    for (int64_t i = 0; i < s.num_tokens; ++i) {
      const float* src = latent.ptr<float>() + (row + i) * latent.stride[0];
      kv.insert(kv.end(), src, src + D);
    }
    const cpu::MlaChunk chunk{.q = q.ptr<float>() + row * q.stride[0], .ldq = q.stride[0], .n = s.num_tokens,
                              .start = s.start_pos, .cache = kv.data(), .out = out.ptr<float>() + row * out.stride[0],
                              .ldo = out.stride[0]};
    const bool absorbed = path == AttnPath::kAbsorbed || (path == AttnPath::kAuto && s.num_tokens == 1);
    if (absorbed) cpu::mla_attention_absorbed(chunk, c, w.kv_b_proj, softmax_scale_);
    else cpu::mla_attention_expanded(chunk, c, w.kv_b_proj, softmax_scale_);
    row += s.num_tokens;
  }
  return Status::ok();
}

Status CpuBackend::silu_mul(const TensorView& gate, const TensorView& up, TensorView out) {
  MLA_TRY(check_act("silu_mul", "gate", gate, -1, -1));
  MLA_TRY(check_act("silu_mul", "up", up, gate.shape[0], gate.shape[1]));
  MLA_TRY(check_act("silu_mul", "out", out, gate.shape[0], gate.shape[1]));
  for (int64_t t = 0; t < gate.shape[0]; ++t)
    for (int64_t i = 0; i < gate.shape[1]; ++i)
      out.ptr<float>()[t * out.stride[0] + i] =
          cpu::silu(gate.ptr<float>()[t * gate.stride[0] + i]) * up.ptr<float>()[t * up.stride[0] + i];
  return Status::ok();
}

Status CpuBackend::gather_logit_rows(const TensorView& x, TensorView out) {
  const int64_t s = static_cast<int64_t>(batch_.logits_rows.size());
  MLA_TRY(check_act("gather_logit_rows", "x", x, batch_.num_tokens(), -1));
  MLA_TRY(check_act("gather_logit_rows", "out", out, s, x.shape[1]));
  for (int64_t i = 0; i < s; ++i) {
    const float* src = x.ptr<float>() + batch_.logits_rows[static_cast<size_t>(i)] * x.stride[0];
    std::copy(src, src + x.shape[1], out.ptr<float>() + i * out.stride[0]);
  }
  return Status::ok();
}

Status CpuBackend::moe(const TensorView& x, const MoeWeights& w, TensorView out) {
  const int64_t H = w_.config.hidden_size;
  MLA_TRY(check_act("moe", "x", x, -1, H));
  MLA_TRY(check_act("moe", "out", out, x.shape[0], H));
  if (!x.is_contiguous() || !out.is_contiguous()) return Status::invalid("moe", "x and out must be contiguous");
  cpu::moe(x.ptr<float>(), x.shape[0], w_.config, w, out.ptr<float>());
  return Status::ok();
}

}  // namespace mla::model
