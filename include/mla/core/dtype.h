#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace mla {

// Element types that cross the op boundary. Storage only: arithmetic happens in float.
enum class DType : uint8_t { kBf16, kFp16, kFp32, kE4m3, kInt32, kInt64, kUint8 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::kBf16: case DType::kFp16: return 2;
    case DType::kFp32: case DType::kInt32: return 4;
    case DType::kInt64: return 8;
    case DType::kE4m3: case DType::kUint8: return 1;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kBf16: return "bf16";
    case DType::kFp16: return "fp16";
    case DType::kFp32: return "fp32";
    case DType::kE4m3: return "e4m3";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kUint8: return "uint8";
  }
  return "?";
}

}  // namespace mla
