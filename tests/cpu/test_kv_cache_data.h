#pragma once
// Test data for the KV-cache op tests: raw element storage of a chosen dtype, filled from floats, read back
// as doubles through the oracle's decoders.
#include <cstdint>
#include <cstring>
#include <vector>

#include "mla/core/dtype.h"
#include "mla/core/half.h"
#include "test_kv_cache_oracle.h"

namespace mla::test {

// n elements of dtype (bf16, fp16 or fp32) in a 16-byte-aligned byte buffer.
struct RawArray {
  DType dtype = DType::kBf16;
  std::vector<uint8_t> bytes;

  RawArray(DType dt, size_t n) : dtype(dt), bytes(n * dtype_size(dt)) {}
  size_t esize() const { return dtype_size(dtype); }
  void* data() { return bytes.data(); }
  void set(size_t i, float x) {
    if (dtype == DType::kFp32) { std::memcpy(&bytes[i * 4], &x, 4); return; }
    const uint16_t v = dtype == DType::kBf16 ? float_to_bf16(x) : float_to_fp16(x);
    std::memcpy(&bytes[i * 2], &v, 2);
  }
  uint32_t bits(size_t i) const {
    uint32_t u = 0;
    std::memcpy(&u, &bytes[i * esize()], esize());
    return u;
  }
  double get(size_t i) const {
    const uint32_t u = bits(i);
    if (dtype == DType::kFp32) { float f; std::memcpy(&f, &u, 4); return f; }
    return dtype == DType::kBf16 ? oracle::bf16_value(static_cast<uint16_t>(u))
                                 : oracle::fp16_value(static_cast<uint16_t>(u));
  }
};

inline oracle::BinaryFormat binary_format(DType dt) { return dt == DType::kBf16 ? oracle::kBf16 : oracle::kFp16; }

}  // namespace mla::test
