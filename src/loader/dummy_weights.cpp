// Dummy weights of the exact shapes, for benchmarks and tests without a checkpoint.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <string_view>
#include <thread>

#include "mla/core/half.h"
#include "mla/loader/weights_loader.h"

namespace mla::loader {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001B3ull;
  return h;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Half-width of the uniform distribution of a tensor, from its role (see the header for why).
double amplitude(std::string_view hf_name, const std::vector<int64_t>& shape, int64_t layers) {
  const double fan_in = static_cast<double>(shape.back());
  const double unit = std::sqrt(3.0 / fan_in);  // uniform(-a, a) has variance a²/3
  if (hf_name.find("embed_tokens") != std::string_view::npos) return std::sqrt(3.0);
  if (hf_name.find("mlp.gate.weight") != std::string_view::npos) return 2.0 * unit;
  if (ends_with(hf_name, "o_proj.weight") || ends_with(hf_name, "down_proj.weight"))
    return unit / std::sqrt(2.0 * static_cast<double>(layers));
  return unit;
}

// Fills one tensor: uniform(-a, a) from a counter-based hash; a == 0 means a norm weight (all ones).
void fill(const TensorView& v, uint64_t key0, double a) {
  const uint64_t key = splitmix64(key0);
  auto* out = static_cast<uint8_t*>(v.data);
  for (int64_t i = 0, n = v.numel(); i < n; ++i) {
    // 24 random bits → uniform in [-1, 1).
    const double u = static_cast<double>(splitmix64(key + static_cast<uint64_t>(i)) >> 40) / 8388608.0 - 1.0;
    const float x = a == 0.0 ? 1.0f : static_cast<float>(a * u);
    if (v.dtype == DType::kFp32) {
      std::memcpy(out + 4 * i, &x, 4);
    } else {
      const uint16_t b = float_to_bf16(x);
      std::memcpy(out + 2 * i, &b, 2);
    }
  }
}

}  // namespace

Status make_dummy_weights(const model::ModelConfig& config, uint64_t seed, DType dtype, model::ModelWeights* out) {
  if (dtype != DType::kFp32 && dtype != DType::kBf16)
    return Status::unsupported("make_dummy_weights", "dtype " + std::string(dtype_name(dtype)) + " (fp32 or bf16)");
  MLA_TRY(model::validate_config(config));
  model::ModelWeights w;
  const auto specs = model::weight_specs(config, &w);
  // Allocations of this size succeed lazily and then meet the OOM killer: refuse up front instead.
  const double need = static_cast<double>(model::num_parameters(config)) * static_cast<double>(dtype_size(dtype));
  const double have = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  if (have > 0 && need > 0.8 * have)
    return Status::oom("make_dummy_weights", config.name + " needs " + std::to_string(need / 1e9) +
                                                 " GB of host memory in " + std::string(dtype_name(dtype)) +
                                                 ", this machine has " + std::to_string(have / 1e9) + " GB");
  for (const auto& s : specs) {
    int64_t n = 1;
    for (int64_t d : s.shape) n *= d;
    std::shared_ptr<uint8_t[]> buf(new uint8_t[static_cast<size_t>(n) * dtype_size(dtype)]);
    TensorView v;
    v.data = buf.get();
    v.dtype = dtype;
    v.rank = static_cast<int>(s.shape.size());
    int64_t stride = 1;
    for (int d = v.rank - 1; d >= 0; --d) {
      v.shape[d] = s.shape[d];
      v.stride[d] = stride;
      stride *= s.shape[d];
    }
    *s.slot = v;
    w.storage.push_back(std::shared_ptr<const void>(buf, buf.get()));
  }
  // Values depend only on (seed, name, index), so tensors fill in parallel in any order.
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < specs.size();)
      fill(*specs[i].slot, seed ^ fnv1a(specs[i].hf_name),
           specs[i].shape.size() == 1 ? 0.0 : amplitude(specs[i].hf_name, specs[i].shape, config.num_hidden_layers));
  };
  std::vector<std::thread> pool;
  const unsigned n_threads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  for (unsigned t = 1; t < n_threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (config.tie_word_embeddings) w.lm_head = w.embed_tokens;
  *out = std::move(w);
  return Status::ok();
}

}  // namespace mla::loader
