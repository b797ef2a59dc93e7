// Single-file and sharded Hugging Face checkpoints.
#include "mla/loader/checkpoint.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace mla::loader {
namespace {

constexpr const char* kOp = "checkpoint";

bool is_file(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// weight_map of an index file: shard file name → the tensor names it must hold.
Status read_index(const std::string& index_path, std::map<std::string, std::vector<std::string>>* shards) {
  std::ifstream in(index_path);
  if (!in) return Status::io(kOp, "cannot open " + index_path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    return Status::invalid(kOp, index_path + ": expected a JSON object with a \"weight_map\" object");
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    if (!it->is_string())
      return Status::invalid(kOp, index_path + ": weight_map[\"" + it.key() + "\"] is not a file name");
    const std::string shard = it->get<std::string>();
    if (shard.find('/') != std::string::npos)
      return Status::invalid(kOp, index_path + ": shard \"" + shard + "\" is not a plain file name");
    (*shards)[shard].push_back(it.key());
  }
  return Status::ok();
}

}  // namespace

Status Checkpoint::add_file(const std::string& file, const std::vector<std::string>* only) {
  std::shared_ptr<SafetensorsFile> f;
  MLA_TRY(SafetensorsFile::open(file, &f));
  auto add = [&](const TensorInfo& t) -> Status {
    if (tensors_.count(t.name))
      return Status::invalid(kOp, "tensor \"" + t.name + "\" appears in two shards (" + file + ")");
    tensors_[t.name] = {&t, f};
    return Status::ok();
  };
  if (!only) {
    for (const auto& t : f->tensors()) MLA_TRY(add(t));
    return Status::ok();
  }
  for (const auto& name : *only) {
    const TensorInfo* t = f->find(name);
    if (!t) return Status::invalid(kOp, "tensor \"" + name + "\" is listed in the index but missing from " + file);
    MLA_TRY(add(*t));
  }
  return Status::ok();
}

Status Checkpoint::open(const std::string& path, Checkpoint* out) {
  Checkpoint c;
  c.path_ = path;
  if (is_file(path)) {
    MLA_TRY(c.add_file(path, nullptr));
  } else if (is_file(path + "/model.safetensors.index.json")) {
    std::map<std::string, std::vector<std::string>> shards;
    MLA_TRY(read_index(path + "/model.safetensors.index.json", &shards));
    for (const auto& [shard, names] : shards) MLA_TRY(c.add_file(path + "/" + shard, &names));
  } else if (is_file(path + "/model.safetensors")) {
    MLA_TRY(c.add_file(path + "/model.safetensors", nullptr));
  } else {
    return Status::io(kOp, path + ": no model.safetensors or model.safetensors.index.json");
  }
  *out = std::move(c);
  return Status::ok();
}

const CheckpointTensor* Checkpoint::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

size_t Checkpoint::total_bytes() const {
  size_t n = 0;
  for (const auto& [name, t] : tensors_) n += t.info->end - t.info->begin;
  return n;
}

}  // namespace mla::loader
