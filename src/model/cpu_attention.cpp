// The two formulations of MLA attention on the host. Per head h, with W_UK_h [128, 512] and
// W_UV_h [v, 512] the two halves of kv_b_proj's rows for that head:
//   score(i, j) = scale · (q_nope_i · (W_UK_h kv_c_j) + q_pe_i · k_pe_j)
//               = scale · ((W_UK_hᵀ q_nope_i) · kv_c_j + q_pe_i · k_pe_j)      (absorbed)
//   out_i      = Σ_j p_ij (W_UV_h kv_c_j) = W_UV_h (Σ_j p_ij kv_c_j)          (absorbed)
#include <algorithm>
#include <cmath>

#include "cpu_kernels.h"

namespace mla::model::cpu {
namespace {

// p[0..n) ← softmax(p), in place.
void softmax(float* p, int64_t n) {
  const float mx = *std::max_element(p, p + n);
  float sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += (p[j] = std::exp(p[j] - mx));
  const float inv = 1.0f / sum;
  for (int64_t j = 0; j < n; ++j) p[j] *= inv;
}

// kv_b_proj as fp32 [h·(128 + v), 512].
std::vector<float> kv_b_fp32(const TensorView& kv_b) {
  const int64_t rows = kv_b.shape[0], k = kv_b.shape[1];
  std::vector<float> w(static_cast<size_t>(rows * k)), buf(static_cast<size_t>(k));
  for (int64_t r = 0; r < rows; ++r) {
    const float* src = weight_row(kv_b, r, buf.data());
    std::copy(src, src + k, &w[r * k]);
  }
  return w;
}

}  // namespace

void mla_attention_expanded(const MlaChunk& a, const ModelConfig& c, const TensorView& kv_b, float scale) {
  const int64_t nh = c.num_attention_heads, dn = c.qk_nope_head_dim, dr = c.qk_rope_head_dim;
  const int64_t dv = c.v_head_dim, dkv = dn + dv, R = c.kv_lora_rank, D = c.latent_dim(), L = a.start + a.n;
  // kv [L, h, 128 + v]: per head k_nope then v.
  std::vector<float> kv(static_cast<size_t>(L * nh * dkv));
  linear(a.cache, D, L, kv_b, kv.data(), nh * dkv);
  std::vector<float> p(static_cast<size_t>(L));
  for (int64_t i = 0; i < a.n; ++i) {
    const int64_t len = a.start + i + 1;  // causal: keys 0 .. position i
    for (int64_t h = 0; h < nh; ++h) {
      const float* q = a.q + i * a.ldq + h * (dn + dr);
      for (int64_t j = 0; j < len; ++j) {
        const float* k_nope = &kv[(j * nh + h) * dkv];
        p[j] = scale * (dot(q, k_nope, dn) + dot(q + dn, a.cache + j * D + R, dr));
      }
      softmax(p.data(), len);
      float* o = a.out + i * a.ldo + h * dv;
      std::fill(o, o + dv, 0.0f);
      for (int64_t j = 0; j < len; ++j) {
        const float* v = &kv[(j * nh + h) * dkv + dn];
        for (int64_t e = 0; e < dv; ++e) o[e] += p[j] * v[e];
      }
    }
  }
}

void mla_attention_absorbed(const MlaChunk& a, const ModelConfig& c, const TensorView& kv_b, float scale) {
  const int64_t nh = c.num_attention_heads, dn = c.qk_nope_head_dim, dr = c.qk_rope_head_dim;
  const int64_t dv = c.v_head_dim, dkv = dn + dv, R = c.kv_lora_rank, D = c.latent_dim();
  const std::vector<float> w = kv_b_fp32(kv_b);
  std::vector<float> q_lat(static_cast<size_t>(R)), o_lat(static_cast<size_t>(R)),
      p(static_cast<size_t>(a.start + a.n));
  for (int64_t i = 0; i < a.n; ++i) {
    const int64_t len = a.start + i + 1;
    for (int64_t h = 0; h < nh; ++h) {
      const float* q = a.q + i * a.ldq + h * (dn + dr);
      const float* w_uk = &w[h * dkv * R];       // [128, 512]
      const float* w_uv = &w[(h * dkv + dn) * R];  // [v, 512]
      std::fill(q_lat.begin(), q_lat.end(), 0.0f);  // q_lat = W_UKᵀ q_nope: [512]
      for (int64_t d = 0; d < dn; ++d)
        for (int64_t r = 0; r < R; ++r) q_lat[r] += q[d] * w_uk[d * R + r];
      for (int64_t j = 0; j < len; ++j) {
        const float* lat = a.cache + j * D;
        p[j] = scale * (dot(q_lat.data(), lat, R) + dot(q + dn, lat + R, dr));
      }
      softmax(p.data(), len);
      std::fill(o_lat.begin(), o_lat.end(), 0.0f);  // o_lat = Σ_j p_j kv_c_j: [512]
      for (int64_t j = 0; j < len; ++j)
        for (int64_t r = 0; r < R; ++r) o_lat[r] += p[j] * a.cache[j * D + r];
      float* o = a.out + i * a.ldo + h * dv;
      for (int64_t e = 0; e < dv; ++e) o[e] = dot(&w_uv[e * R], o_lat.data(), R);
    }
  }
}

}  // namespace mla::model::cpu
