#pragma once
// KV-cache formats (DESIGN.md §3, byte-level spec in docs/kv_cache_formats.md).
#include <cstdint>
#include <string_view>

#include "mla/core/dtype.h"
#include "mla/core/macros.h"
#include "mla/core/mla_shapes.h"
#include "mla/core/status.h"

namespace mla {

enum class KvFormat : uint8_t {
  kBf16,   // "auto" for a bf16 model: 576 x bf16
  kFp16,   // 576 x fp16
  kFp8,    // 576 x e4m3, one fp32 k_scale per layer: stored = satfinite(x / k_scale)
  kFp8Ds,  // 512 x e4m3 in 4 tiles of 128 + 4 x fp32 tile scales (amax/448) + 64 x bf16 k_pe = 656 B
};

// fp8_ds token layout, in bytes from the token's start.
struct Fp8DsLayout {
  static constexpr int kTileSize = 128;                            // values per scale tile
  static constexpr int kNumTiles = kDimLatent / kTileSize;         // 4
  static constexpr int kScalesOffset = kDimLatent;                 // 512: 4 x fp32
  static constexpr int kRopeOffset = kScalesOffset + 4 * kNumTiles; // 528: 64 x bf16
  static constexpr int kBytes = kRopeOffset + 2 * kDimRope;        // 656
};
static_assert(Fp8DsLayout::kBytes == 656);

MLA_HD_INLINE constexpr int kv_bytes_per_token(KvFormat f) {
  return f == KvFormat::kFp8Ds ? Fp8DsLayout::kBytes : (f == KvFormat::kFp8 ? kDimQK : 2 * kDimQK);
}

// The dtype a cache tensor of this format is viewed as: [pages, page_size, 576] for the dense formats,
// uint8 [pages, page_size, 656] for fp8_ds.
constexpr DType kv_cache_dtype(KvFormat f) {
  switch (f) {
    case KvFormat::kBf16: return DType::kBf16;
    case KvFormat::kFp16: return DType::kFp16;
    case KvFormat::kFp8: return DType::kE4m3;
    case KvFormat::kFp8Ds: return DType::kUint8;
  }
  return DType::kUint8;
}

// Elements per token along the cache tensor's last dim.
constexpr int kv_token_elems(KvFormat f) { return f == KvFormat::kFp8Ds ? Fp8DsLayout::kBytes : kDimQK; }

// The dtype of q that mla_decode takes with this format: fp8 runs both products on e4m3 (q pre-quantized
// with q_scale); fp8_ds keeps a bf16 query.
constexpr DType kv_query_dtype(KvFormat f) {
  switch (f) {
    case KvFormat::kFp16: return DType::kFp16;
    case KvFormat::kFp8: return DType::kE4m3;
    default: return DType::kBf16;
  }
}

constexpr std::string_view kv_format_name(KvFormat f) {
  switch (f) {
    case KvFormat::kBf16: return "bf16";
    case KvFormat::kFp16: return "fp16";
    case KvFormat::kFp8: return "fp8";
    case KvFormat::kFp8Ds: return "fp8_ds";
  }
  return "?";
}

// Accepts vLLM's spellings: auto (= bf16), bf16, bfloat16, fp16, half, float16, fp8, fp8_e4m3, fp8_ds.
Status parse_kv_format(std::string_view s, KvFormat* out);

}  // namespace mla
