#pragma once
// rope_mla: DeepSeek-V2's YaRN RoPE, in place, on the 64 rotary values of every query head and of every
// latent row, in DeepSeek's interleaved layout (pairs (x[2i], x[2i+1]) rotate by pos · inv_freq[i]):
//
//   c = cos(pos · inv_freq[i]) · attention_factor,  s = sin(pos · inv_freq[i]) · attention_factor
//   (x0, x1) <- (x0·c - x1·s, x0·s + x1·c)
//
// inv_freq and attention_factor come from model::make_rope_table (the angle is the float32 product, as
// the reference computes it). q rows are [h · (nope + 64)]: head j's rotary part starts at j·(nope+64) + nope;
// latent rows are [kv_lora (512) | k_pe (64)].
#include "mla/core/status.h"
#include "mla/core/stream.h"
#include "mla/core/tensor.h"

namespace mla {

struct RopeMlaParams {
  TensorView q;          // [t, h · (qk_nope + 64)] bf16, row stride >= cols
  TensorView latent;     // [t, kv_lora + 64] bf16, row stride >= cols
  TensorView positions;  // [t] int32, >= 0
  TensorView inv_freq;   // [32] fp32
  int num_heads = 0;
  int qk_nope_dim = 128;
  float attention_factor = 1.f;
};

namespace cuda {
// Device pointers; one block per row, one thread per 4 pairs (16-byte accesses); no allocation.
Status rope_mla(const RopeMlaParams& p, Stream stream);
}  // namespace cuda

}  // namespace mla
