// ModelWeights → a (possibly sharded) Hugging Face checkpoint.
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "mla/loader/safetensors.h"
#include "mla/loader/weights_loader.h"

namespace mla::loader {

Status save_weights(const model::ModelWeights& w, const std::string& dir, int num_shards) {
  if (num_shards < 1) return Status::invalid("save_weights", "num_shards must be >= 1");
  model::ModelWeights copy = w;  // views and owners only; list_weights needs non-const slots
  const auto specs = model::list_weights(&copy);
  std::vector<std::vector<TensorToWrite>> shards(static_cast<size_t>(num_shards));
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorView& v = *specs[i].slot;
    if (!v.defined() || !v.is_contiguous() || v.numel() == 0)
      return Status::invalid("save_weights", "tensor \"" + specs[i].hf_name + "\" is not set or not contiguous");
    shards[i * static_cast<size_t>(num_shards) / specs.size()].push_back(
        {specs[i].hf_name, v.dtype, specs[i].shape, v.data});
  }
  if (num_shards == 1) return write_safetensors(dir + "/model.safetensors", shards[0], {{"format", "pt"}});
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  for (int s = 0; s < num_shards; ++s) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, num_shards);
    MLA_TRY(write_safetensors(dir + "/" + name, shards[static_cast<size_t>(s)], {{"format", "pt"}}));
    for (const auto& t : shards[static_cast<size_t>(s)]) weight_map[t.name] = name;
  }
  std::ofstream idx(dir + "/model.safetensors.index.json");
  idx << nlohmann::ordered_json{{"metadata", nlohmann::json::object()}, {"weight_map", weight_map}}.dump(2);
  return idx ? Status::ok() : Status::io("save_weights", "cannot write the index in " + dir);
}

}  // namespace mla::loader
