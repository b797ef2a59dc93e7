#pragma once
// Host kernels behind CpuBackend: fp32 activations, weights fp32 or bf16, float accumulation.
// Matrices are row-major with a row stride (`ld*`, in elements).
#include <cmath>
#include <cstdint>
#include <vector>

#include "mla/core/tensor.h"
#include "mla/model/config.h"
#include "mla/model/weights.h"

namespace mla::model::cpu {

// Row n of weight W[N, K] as floats: a pointer into W when fp32, else widened into `buf` (K floats).
const float* weight_row(const TensorView& w, int64_t n, float* buf);

float dot(const float* a, const float* b, int64_t n);

// out[t, n] = x[t, :] · W[n, :]  for t < rows.
void linear(const float* x, int64_t ldx, int64_t rows, const TensorView& w, float* out, int64_t ldo);

// out = x / sqrt(mean(x²) + eps) * w, one row of n values (out may equal x).
void rmsnorm_row(const float* x, const TensorView& w, float eps, int64_t n, float* out);

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }

// SwiGLU MLP on rows [rows, hidden] → out (overwritten).
void mlp(const float* x, int64_t rows, int64_t hidden, const MlpWeights& w, float* out);

// Routing of one token: `k` experts and their weights, DeepSeek-V2's rule (softmax scores; greedy or
// group-limited top-k; normalized when norm_topk_prob, else × routed_scaling_factor).
void route(const float* scores_in, const ModelConfig& c, int* experts, float* weights);

// MoE for rows [rows, hidden] → out (overwritten).
void moe(const float* x, int64_t rows, const ModelConfig& c, const MoeWeights& w, float* out);

}  // namespace mla::model::cpu

namespace mla::model::cpu {

// Causal MLA attention of one sequence chunk: query rows i < n at positions start + i, over the
// sequence's latent cache [L = start + n, 576] (kv_c | roped k_pe). q [n, h·192] (ld ldq) → out [n, h·v].
struct MlaChunk {
  const float* q;
  int64_t ldq;
  int64_t n;
  int64_t start;
  const float* cache;  // [start + n, 576]
  float* out;
  int64_t ldo;
};

// kv_b_proj expands the cache to K [L, h, 192] and V [L, h, v] (prefill formulation).
void mla_attention_expanded(const MlaChunk& a, const ModelConfig& c, const TensorView& kv_b, float scale);
// Weight absorption: q_nope·W_UK → [h, 512], attention over the 576-wide latent, then ·W_UV (decode).
void mla_attention_absorbed(const MlaChunk& a, const ModelConfig& c, const TensorView& kv_b, float scale);

}  // namespace mla::model::cpu
