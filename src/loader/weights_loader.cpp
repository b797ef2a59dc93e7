// Checkpoint tensors → ModelWeights, with every name, dtype and shape checked against weight_specs.
#include "mla/loader/weights_loader.h"

#include <cstring>
#include <set>

#include "mla/core/half.h"
#include "mla/loader/checkpoint.h"

namespace mla::loader {
namespace {

constexpr const char* kOp = "load_weights";

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// A contiguous fp32 copy of `src` (F16 widening, or a misaligned mapping).
TensorView owned_fp32(const TensorView& src, std::vector<std::shared_ptr<const void>>* storage) {
  const int64_t n = src.numel();
  std::shared_ptr<float[]> buf(new float[static_cast<size_t>(n)]);
  for (int64_t i = 0; i < n; ++i) {
    if (src.dtype == DType::kFp16) {
      uint16_t h;
      std::memcpy(&h, static_cast<const uint8_t*>(src.data) + 2 * i, 2);
      buf[i] = fp16_to_float(h);
    } else if (src.dtype == DType::kBf16) {
      uint16_t h;
      std::memcpy(&h, static_cast<const uint8_t*>(src.data) + 2 * i, 2);
      buf[i] = bf16_to_float(h);
    } else {
      std::memcpy(&buf[i], static_cast<const uint8_t*>(src.data) + 4 * i, 4);
    }
  }
  TensorView v = src;
  v.data = buf.get();
  v.dtype = DType::kFp32;
  storage->push_back(std::shared_ptr<const void>(buf, buf.get()));
  return v;
}

}  // namespace

Status load_weights(const std::string& path, const model::ModelConfig& config, model::ModelWeights* out,
                    const LoadOptions& opts) {
  Checkpoint ckpt;
  MLA_TRY(Checkpoint::open(path, &ckpt));
  model::ModelWeights w;
  const std::vector<model::WeightSpec> specs = model::weight_specs(config, &w);
  std::set<std::string> expected;
  for (const auto& s : specs) expected.insert(s.hf_name);
  // Extra tensors first: a checkpoint of another shape usually shows up here with a clearer name.
  for (const auto& [name, t] : ckpt.tensors()) {
    if (expected.count(name) || model::is_ignorable_checkpoint_tensor(name)) continue;
    if (config.tie_word_embeddings && name == "lm_head.weight") continue;  // some exports save the tied copy
    return Status::invalid(kOp, path + ": unexpected tensor \"" + name + "\" " + t.info->str() + " (not part of " +
                                    config.name + ")");
  }
  ProgressBar bar("loading weights", specs.size(), ckpt.total_bytes(), opts.progress);
  std::set<const SafetensorsFile*> files;
  for (const auto& s : specs) {
    const CheckpointTensor* t = ckpt.find(s.hf_name);
    if (!t)
      return Status::invalid(kOp, path + ": missing tensor \"" + s.hf_name + "\" (" + s.our_name + ", expected " +
                                      shape_str(s.shape) + ")");
    if (t->info->shape != s.shape)
      return Status::invalid(kOp, path + ": tensor \"" + s.hf_name + "\" (" + s.our_name + ") has shape " +
                                      t->info->str() + ", expected " + shape_str(s.shape));
    TensorView v = t->file->view(*t->info);
    const DType dt = t->info->dtype;
    if (dt != DType::kBf16 && dt != DType::kFp32 && dt != DType::kFp16)
      return Status::unsupported(kOp, path + ": tensor \"" + s.hf_name + "\" has dtype " + std::string(dtype_name(dt)) +
                                          " (bf16, fp16 or fp32 expected)");
    const bool aligned = reinterpret_cast<uintptr_t>(v.data) % dtype_size(dt) == 0;
    if (dt == DType::kFp16 || !aligned) v = owned_fp32(v, &w.storage);
    else files.insert(t->file.get());
    *s.slot = v;
    bar.advance(1, t->info->end - t->info->begin);
  }
  bar.finish();
  // Keep the mappings the views point into alive for as long as the weights are.
  for (const auto& [name, t] : ckpt.tensors())
    if (files.count(t.file.get())) {
      w.storage.push_back(t.file);
      files.erase(t.file.get());
    }
  if (config.tie_word_embeddings) w.lm_head = w.embed_tokens;
  *out = std::move(w);
  return Status::ok();
}

Status load_model(const std::string& dir, model::ModelWeights* out, const LoadOptions& opts) {
  model::ModelConfig c;
  MLA_TRY(model::load_config(dir, &c));
  return load_weights(dir, c, out, opts);
}

}  // namespace mla::loader
