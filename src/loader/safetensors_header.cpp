// Safetensors header parsing and validation. A header comes from an untrusted file: every field is
// type-checked and every byte range bounds-checked before anything points into the data.
#include <algorithm>
#include <limits>

#include <nlohmann/json.hpp>

#include "mla/loader/safetensors.h"

namespace mla::loader {
namespace {

constexpr const char* kOp = "safetensors";
using json = nlohmann::json;

Status bad(std::string_view where, const std::string& msg) {
  return Status::invalid(kOp, std::string(where) + ": " + msg);
}

Status parse_entry(const std::string& name, const json& e, size_t data_size, std::string_view where,
                   TensorInfo* t) {
  if (!e.is_object()) return bad(where, "tensor \"" + name + "\": entry is not an object");
  t->name = name;
  auto dt = e.find("dtype");
  if (dt == e.end() || !dt->is_string()) return bad(where, "tensor \"" + name + "\": missing dtype");
  Status s = dtype_from_safetensors(dt->get<std::string>(), &t->dtype);
  if (!s.is_ok()) return Status::unsupported(kOp, std::string(where) + ": tensor \"" + name + "\": " + s.message());
  auto sh = e.find("shape");
  if (sh == e.end() || !sh->is_array()) return bad(where, "tensor \"" + name + "\": missing shape");
  int64_t numel = 1;
  for (const auto& d : *sh) {
    if (!d.is_number_unsigned()) return bad(where, "tensor \"" + name + "\": shape must hold non-negative integers");
    const uint64_t v = d.get<uint64_t>();
    // Refuse sizes whose byte count could overflow: no real tensor is near 2^48 elements.
    if (v > (uint64_t{1} << 48) || (v > 0 && static_cast<uint64_t>(numel) > (uint64_t{1} << 48) / v))
      return bad(where, "tensor \"" + name + "\": shape too large");
    t->shape.push_back(static_cast<int64_t>(v));
    numel *= static_cast<int64_t>(v);
  }
  auto off = e.find("data_offsets");
  if (off == e.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
      !(*off)[1].is_number_unsigned())
    return bad(where, "tensor \"" + name + "\": data_offsets must be [begin, end]");
  const uint64_t b = (*off)[0].get<uint64_t>(), en = (*off)[1].get<uint64_t>();
  if (b > en || en > data_size)
    return bad(where, "tensor \"" + name + "\": data_offsets [" + std::to_string(b) + ", " + std::to_string(en) +
                          "] outside the data section of " + std::to_string(data_size) + " bytes (truncated file?)");
  const uint64_t want = static_cast<uint64_t>(numel) * dtype_size(t->dtype);
  if (en - b != want)
    return bad(where, "tensor \"" + name + "\": " + t->str() + " needs " + std::to_string(want) +
                          " bytes, data_offsets give " + std::to_string(en - b));
  t->begin = static_cast<size_t>(b);
  t->end = static_cast<size_t>(en);
  return Status::ok();
}

}  // namespace

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorInfo::str() const {
  std::string s(dtype_name(dtype));
  s += "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Status dtype_from_safetensors(std::string_view s, DType* out) {
  static const std::pair<std::string_view, DType> table[] = {
      {"BF16", DType::kBf16}, {"F16", DType::kFp16},   {"F32", DType::kFp32},         {"I32", DType::kInt32},
      {"I64", DType::kInt64}, {"U8", DType::kUint8}, {"F8_E4M3", DType::kE4m3}};
  for (const auto& [n, t] : table)
    if (n == s) {
      *out = t;
      return Status::ok();
    }
  return Status::unsupported(kOp, "dtype \"" + std::string(s) + "\" (BF16, F16, F32, I32, I64, U8, F8_E4M3)");
}

std::string_view safetensors_dtype_name(DType t) {
  switch (t) {
    case DType::kBf16: return "BF16";
    case DType::kFp16: return "F16";
    case DType::kFp32: return "F32";
    case DType::kInt32: return "I32";
    case DType::kInt64: return "I64";
    case DType::kUint8: return "U8";
    case DType::kE4m3: return "F8_E4M3";
  }
  return "?";
}

Status parse_safetensors_header(std::string_view json_text, size_t data_size, std::string_view where,
                                std::vector<TensorInfo>* tensors, std::map<std::string, std::string>* metadata) {
  json j = json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return bad(where, "header is not a JSON object (corrupt file?)");
  tensors->clear();
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) return bad(where, "__metadata__ must be an object");
      for (auto m = it->begin(); m != it->end(); ++m)
        if (m->is_string() && metadata) (*metadata)[m.key()] = m->get<std::string>();
      continue;
    }
    TensorInfo t;
    MLA_TRY(parse_entry(it.key(), *it, data_size, where, &t));
    tensors->push_back(std::move(t));
  }
  // Byte ranges must not overlap (a corrupt header could alias two tensors).
  std::vector<const TensorInfo*> by_offset;
  for (const auto& t : *tensors) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i]->begin < by_offset[i - 1]->end)
      return bad(where, "tensors \"" + by_offset[i - 1]->name + "\" and \"" + by_offset[i]->name + "\" overlap");
  return Status::ok();
}

}  // namespace mla::loader
