#include "model_source.h"

#include "mla/loader/weights_loader.h"
#include "mla/model/config.h"

namespace mla::cli {

Status load_model_weights(const ModelSource& src, DType weight_dtype, model::ModelWeights* out) {
  if (src.load_format != "auto" && src.load_format != "safetensors" && src.load_format != "dummy")
    return Status::invalid("--load-format", "expected auto, safetensors or dummy, got '" + src.load_format + "'");
  model::ModelConfig config;
  const bool preset = src.model == "dummy" || src.model.rfind("dummy:", 0) == 0;
  if (preset) {
    const std::string name = src.model == "dummy" ? "deepseek-v2-lite" : src.model.substr(6);
    MLA_TRY(model::preset_config(name, &config));
  } else if (src.load_format != "dummy") {
    loader::LoadOptions opts;
    return loader::load_model(src.model, out, opts);
  } else {
    MLA_TRY(model::load_config(src.model + "/config.json", &config));
  }
  return loader::make_dummy_weights(config, src.seed, weight_dtype, out);
}

}  // namespace mla::cli
