#pragma once
// Resolves `--model` / `--load-format` into a config and weights:
//   dummy          DeepSeek-V2-Lite shapes (preset deepseek-v2-lite), deterministic dummy weights
//   dummy:NAME     another preset (e.g. dummy:tiny for a machine without a GPU)
//   DIR            a Hugging Face checkpoint (config.json + safetensors); --load-format dummy keeps the
//                  config and replaces the weights with dummy ones, as vLLM's does.
#include <cstdint>
#include <string>

#include "mla/core/status.h"
#include "mla/model/weights.h"

namespace mla::cli {

struct ModelSource {
  std::string model = "dummy";
  std::string load_format = "auto";  // auto | safetensors | dummy
  uint64_t seed = 0;
};

Status load_model_weights(const ModelSource& src, DType weight_dtype, model::ModelWeights* out);

}  // namespace mla::cli
