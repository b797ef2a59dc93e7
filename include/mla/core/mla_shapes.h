#pragma once
// The fixed geometry of DeepSeek-style MLA decode. Constants, not template parameters: every kernel
// and reference is written for exactly these, and a model with other head dims is rejected by name.
namespace mla {

constexpr int kDimLatent = 512;                   // kv_c width: also the V / output width
constexpr int kDimRope = 64;                      // k_pe width
constexpr int kDimQK = kDimLatent + kDimRope;     // 576: Q·K contraction
constexpr int kDimV = kDimLatent;                 // 512
constexpr int kDecodePageSize = 64;               // tokens per KV page for mla_decode
constexpr int kMaxDecodeSq = 4;                   // speculative / MTP query rows per sequence

static_assert(kDimQK == 576 && kDimV == 512, "MLA decode geometry");

constexpr bool is_supported_decode_heads(int h_q) { return h_q == 16 || h_q == 32 || h_q == 64 || h_q == 128; }

}  // namespace mla
