#pragma once
// Hugging Face checkpoints and dummy weights → ModelWeights (host memory, for the CPU backend and
// as the source a device backend uploads from).
#include <cstdint>
#include <string>

#include "mla/core/status.h"
#include "mla/loader/progress.h"
#include "mla/model/weights.h"

namespace mla::loader {

struct LoadOptions {
  ProgressMode progress = ProgressMode::kAuto;
};

// Loads every tensor weight_specs(config) names from the checkpoint at `path` (see Checkpoint::open).
// BF16 and F32 tensors stay in the mapping (zero copy); F16 is widened to F32. A missing, extra or
// mismatched (dtype, shape) tensor is an error naming the Hugging Face name and ours.
Status load_weights(const std::string& path, const model::ModelConfig& config, model::ModelWeights* out,
                    const LoadOptions& opts = {});
// config.json from the same directory, then load_weights.
Status load_model(const std::string& dir, model::ModelWeights* out, const LoadOptions& opts = {});

// Writes `w` as a Hugging Face checkpoint into the existing directory `dir`: model.safetensors, or
// `num_shards` files plus model.safetensors.index.json. For tests and for saving dummy weights.
Status save_weights(const model::ModelWeights& w, const std::string& dir, int num_shards = 1);

// Dummy weights of the exact shapes: deterministic from `seed` (independent of load order: each
// value is a hash of seed, tensor name and index), dtype fp32 or bf16. Linear weights are uniform with
// variance 1/fan_in (so projections keep activations near unit scale), norms are 1, the router is
// sharper (2×), and o_proj / down_proj are damped by 1/sqrt(2·layers) so the residual stream stays bounded.
Status make_dummy_weights(const model::ModelConfig& config, uint64_t seed, DType dtype, model::ModelWeights* out);

}  // namespace mla::loader
