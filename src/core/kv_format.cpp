#include "mla/core/kv_format.h"

#include <string>

namespace mla {

Status parse_kv_format(std::string_view s, KvFormat* out) {
  if (s == "auto" || s == "bf16" || s == "bfloat16") { *out = KvFormat::kBf16; return Status::ok(); }
  if (s == "fp16" || s == "half" || s == "float16") { *out = KvFormat::kFp16; return Status::ok(); }
  if (s == "fp8" || s == "fp8_e4m3") { *out = KvFormat::kFp8; return Status::ok(); }
  if (s == "fp8_ds") { *out = KvFormat::kFp8Ds; return Status::ok(); }
  return Status::invalid("kv-cache-dtype", "unknown format '" + std::string(s) +
                                               "' (expected auto, bf16, fp16, fp8, fp8_e4m3 or fp8_ds)");
}

}  // namespace mla
