#pragma once
// A Hugging Face checkpoint directory: model.safetensors, or shards listed by
// model.safetensors.index.json ({"weight_map": {"tensor name": "shard file name"}}).
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "mla/loader/safetensors.h"

namespace mla::loader {

struct CheckpointTensor {
  const TensorInfo* info = nullptr;
  std::shared_ptr<SafetensorsFile> file;  // keeps the mapping alive
};

class Checkpoint {
 public:
  // `path`: a directory holding model.safetensors or model.safetensors.index.json, or one .safetensors file.
  // Every shard is mapped and its header checked; a tensor the index names but its shard lacks, or one
  // in two shards, is an error naming it.
  static Status open(const std::string& path, Checkpoint* out);

  const CheckpointTensor* find(const std::string& name) const;
  const std::map<std::string, CheckpointTensor>& tensors() const { return tensors_; }
  size_t total_bytes() const;
  const std::string& path() const { return path_; }

 private:
  Status add_file(const std::string& file, const std::vector<std::string>* only);
  std::string path_;
  std::map<std::string, CheckpointTensor> tensors_;
};

}  // namespace mla::loader
