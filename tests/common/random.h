#pragma once
// Fresh random test data: each case draws from its own seed, derived from the case name and a run seed
// (MLA_TEST_SEED, default: time-based, printed) so every run sees new data and a failure can be replayed.
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "mla/core/fp8.h"
#include "mla/core/half.h"

namespace mla::test {

inline uint64_t run_seed() {
  static const uint64_t seed = []() -> uint64_t {
    if (const char* s = std::getenv("MLA_TEST_SEED")) return std::strtoull(s, nullptr, 10);
    return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }();
  return seed;
}

inline std::mt19937_64 case_rng(const std::string& case_name) {
  return std::mt19937_64(run_seed() ^ std::hash<std::string>{}(case_name));
}

// Seqlens of a test case drawn uniformly from [lo, hi]: fresh each run, reproducible through MLA_TEST_SEED; `tag`
// names the draw (the case's own name, or a name shared by the cases that should see the same lengths).
inline std::vector<int> random_lens(const std::string& tag, int batch, int lo, int hi) {
  auto rng = case_rng("lens_" + tag);
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<int> v(batch);
  for (auto& x : v) x = d(rng);
  return v;
}

inline std::vector<float> randn(std::mt19937_64& rng, size_t n, float stddev = 1.f, float mean = 0.f) {
  std::normal_distribution<float> d(mean, stddev);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

inline std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> o(v.size());
  for (size_t i = 0; i < v.size(); ++i) o[i] = float_to_bf16(v[i]);
  return o;
}
inline std::vector<uint16_t> to_fp16(const std::vector<float>& v) {
  std::vector<uint16_t> o(v.size());
  for (size_t i = 0; i < v.size(); ++i) o[i] = float_to_fp16(v[i]);
  return o;
}

}  // namespace mla::test
