// CPU reference of concat_and_cache_mla: one token at a time, element codecs from ops/common/cache_codec.h
// (the same functions the kernel calls, so the bytes agree by construction).
#include <algorithm>
#include <cstring>
#include <string>

#include "mla/ops/concat_and_cache_mla.h"
#include "ops/common/cache_codec.h"

namespace mla {
namespace {

// Gathers token i's 576 input values, in storage type In, into one row: [kv_c | k_pe].
template <class In>
void load_row(const ConcatAndCacheMlaParams& p, int64_t i, typename In::raw* row) {
  using R = typename In::raw;
  const R* c = p.kv_c.ptr<const R>() + i * p.kv_c.stride[0];
  const R* r = p.k_pe.ptr<const R>() + i * p.k_pe.stride[0];
  std::copy(c, c + kDimLatent, row);
  std::copy(r, r + kDimRope, row + kDimLatent);
}

template <class In>
void encode_token(const ConcatAndCacheMlaParams& p, const typename In::raw* row, uint8_t* dst) {
  switch (p.format) {
    case KvFormat::kBf16: {
      auto* o = reinterpret_cast<uint16_t*>(dst);
      for (int j = 0; j < kDimQK; ++j) o[j] = cache::convert<In, cache::Bf16>(row[j]);
      break;
    }
    case KvFormat::kFp16: {
      auto* o = reinterpret_cast<uint16_t*>(dst);
      for (int j = 0; j < kDimQK; ++j) o[j] = cache::convert<In, cache::Fp16>(row[j]);
      break;
    }
    case KvFormat::kFp8:
      for (int j = 0; j < kDimQK; ++j) dst[j] = cache::encode_e4m3(cache::to_float(In{}, row[j]), p.k_scale);
      break;
    case KvFormat::kFp8Ds: {
      using L = Fp8DsLayout;
      for (int tile = 0; tile < L::kNumTiles; ++tile) {
        const auto* x = row + tile * L::kTileSize;
        float amax = 0.f;
        for (int j = 0; j < L::kTileSize; ++j) amax = std::max(amax, cache::finite_abs(cache::to_float(In{}, x[j])));
        const float scale = cache::fp8_ds_tile_scale(amax);
        for (int j = 0; j < L::kTileSize; ++j)
          dst[tile * L::kTileSize + j] = cache::encode_e4m3(cache::to_float(In{}, x[j]), scale);
        std::memcpy(dst + L::kScalesOffset + 4 * tile, &scale, 4);
      }
      uint16_t rope[kDimRope];
      for (int j = 0; j < kDimRope; ++j) rope[j] = cache::convert<In, cache::Bf16>(row[kDimLatent + j]);
      std::memcpy(dst + L::kRopeOffset, rope, sizeof rope);
      break;
    }
  }
}

template <class In>
Status run(const ConcatAndCacheMlaParams& p) {
  const int64_t t = p.kv_c.shape[0];
  const int64_t page_size = p.kv_cache.shape[1];
  const int64_t capacity = p.kv_cache.shape[0] * page_size;
  const int64_t token_bytes = kv_bytes_per_token(p.format);
  const int64_t* slots = p.slot_mapping.ptr<const int64_t>();
  // Reject every bad slot before writing anything, so a failed call leaves the cache as it was.
  for (int64_t i = 0; i < t; ++i) {
    if (slots[i] >= capacity)
      return Status::invalid("concat_and_cache_mla", "slot_mapping[" + std::to_string(i) +
                                                         "] = " + std::to_string(slots[i]) + " is past the cache " +
                                                         p.kv_cache.str() + " (" + std::to_string(capacity) +
                                                         " slots)");
  }
  typename In::raw row[kDimQK];
  auto* base = p.kv_cache.ptr<uint8_t>();
  for (int64_t i = 0; i < t; ++i) {
    if (slots[i] < 0) continue;
    load_row<In>(p, i, row);
    // Contiguous [num_pages][page_size][token]: slot s starts at byte s * token_bytes.
    encode_token<In>(p, row, base + slots[i] * token_bytes);
  }
  return Status::ok();
}

}  // namespace

namespace ref {
Status concat_and_cache_mla(const ConcatAndCacheMlaParams& p) {
  MLA_TRY(validate_concat_and_cache_mla(p));
  switch (p.kv_c.dtype) {
    case DType::kBf16: return run<cache::Bf16>(p);
    case DType::kFp16: return run<cache::Fp16>(p);
    default: return run<cache::Fp32>(p);
  }
}
}  // namespace ref

}  // namespace mla
