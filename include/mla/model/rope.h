#pragma once
// YaRN RoPE tables for DeepSeek's rotary (64 dims = 32 frequency pairs) and the rotation itself, in
// DeepSeek's interleaved layout: value pairs (x[2i], x[2i+1]) rotate by angle pos · inv_freq[i]
// (transformers' DeepseekV2 views q_pe / k_pe as 32 complex numbers; vLLM calls it is_neox_style=False).
// Host code; a device backend uploads the same inv_freq table.
#include <cstdint>
#include <vector>

#include "mla/model/config.h"

namespace mla::model {

struct RopeTable {
  std::vector<float> inv_freq;  // [qk_rope_head_dim / 2]
  float attention_factor = 1;   // multiplies cos and sin: mscale(factor, mscale) / mscale(factor, mscale_all_dim)
};

// inv_freq follows transformers' _compute_yarn_parameters step by step in float32 (pow, reciprocal,
// ramp blend), so angles agree with the reference to the last bit where possible.
RopeTable make_rope_table(const ModelConfig& c);

// Rotates x[0..2·inv_freq.size()) in place for position `pos`.
void apply_rope_interleaved(float* x, int64_t pos, const RopeTable& t);

}  // namespace mla::model
