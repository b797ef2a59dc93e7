#pragma once
// Safetensors files: an 8-byte little-endian header length, a JSON header
// {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}},
// then the data section. Files are memory mapped; views point into the mapping, which the
// SafetensorsFile keeps alive (hold the shared_ptr as long as a view is used).
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mla/core/dtype.h"
#include "mla/core/status.h"
#include "mla/core/tensor.h"

namespace mla::loader {

struct TensorInfo {
  std::string name;
  DType dtype = DType::kFp32;
  std::vector<int64_t> shape;
  size_t begin = 0;  // byte offsets into the data section
  size_t end = 0;
  int64_t numel() const;
  std::string str() const;  // "bf16[576, 2048]"
};

// "BF16" <-> DType (BF16, F16, F32, I32, I64, U8, F8_E4M3); other safetensors dtypes are unsupported.
Status dtype_from_safetensors(std::string_view s, DType* out);
std::string_view safetensors_dtype_name(DType t);

// Parses and checks a header against the size of the data section that follows it: every tensor's
// byte range must match dtype × shape, lie inside the data, and not overlap another. `where` names
// the file in messages.
Status parse_safetensors_header(std::string_view json_text, size_t data_size, std::string_view where,
                                std::vector<TensorInfo>* tensors, std::map<std::string, std::string>* metadata);

class SafetensorsFile {
 public:
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  // Maps `path` read-only and parses its header; a short, truncated or corrupt file is an error.
  static Status open(const std::string& path, std::shared_ptr<SafetensorsFile>* out);

  const std::string& path() const { return path_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const TensorInfo* find(std::string_view name) const;
  const void* data(const TensorInfo& t) const { return data_ + t.begin; }
  // Contiguous view of a tensor in the mapping (read-only memory: never write through it).
  TensorView view(const TensorInfo& t) const;

 private:
  SafetensorsFile() = default;
  std::string path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  const uint8_t* data_ = nullptr;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// A tensor to write: name, dtype, shape and `numel × dtype_size` bytes at `data`.
struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const void* data;
};

// Writes a safetensors file (tensors in the given order, 8-byte aligned header). For tests and tools.
Status write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                         const std::map<std::string, std::string>& metadata = {});

}  // namespace mla::loader
