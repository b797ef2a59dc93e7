#include "mla/model/rope.h"

#include <algorithm>
#include <cmath>

namespace mla::model {
namespace {

double get_mscale(double scale, double m) { return scale <= 1.0 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; }

// The dimension index at which a frequency completes `rotations` turns over the original context.
double correction_dim(double rotations, int dim, double base, double max_pos) {
  return dim * std::log(max_pos / (rotations * 2.0 * M_PI)) / (2.0 * std::log(base));
}

}  // namespace

RopeTable make_rope_table(const ModelConfig& c) {
  const int dim = static_cast<int>(c.qk_rope_head_dim), half = dim / 2;
  const float base = static_cast<float>(c.rope_theta);
  RopeTable t;
  t.inv_freq.resize(static_cast<size_t>(half));
  const YarnScaling& y = c.rope_scaling;
  if (!y.enabled) {
    for (int i = 0; i < half; ++i)
      t.inv_freq[static_cast<size_t>(i)] = 1.0f / std::pow(base, static_cast<float>(2 * i) / static_cast<float>(dim));
    return t;
  }
  const double orig = static_cast<double>(y.original_max_position_embeddings);
  double low = std::floor(correction_dim(y.beta_fast, dim, c.rope_theta, orig));
  double high = std::ceil(correction_dim(y.beta_slow, dim, c.rope_theta, orig));
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // avoid a zero-width ramp
  const float factor = static_cast<float>(y.factor);
  for (int i = 0; i < half; ++i) {
    const float pos_freq = std::pow(base, static_cast<float>(2 * i) / static_cast<float>(dim));
    const float extrap = 1.0f / pos_freq, interp = 1.0f / (factor * pos_freq);
    // ramp = 0 for high-frequency dims (kept as trained: extrapolation), 1 for low ones (interpolated).
    const float ramp = std::clamp(static_cast<float>((i - low) / (high - low)), 0.0f, 1.0f);
    const float keep = 1.0f - ramp;
    t.inv_freq[static_cast<size_t>(i)] = interp * (1.0f - keep) + extrap * keep;
  }
  t.attention_factor = static_cast<float>(get_mscale(y.factor, y.mscale) / get_mscale(y.factor, y.mscale_all_dim));
  return t;
}

void apply_rope_interleaved(float* x, int64_t pos, const RopeTable& t) {
  const float p = static_cast<float>(pos);
  for (size_t i = 0; i < t.inv_freq.size(); ++i) {
    const float angle = t.inv_freq[i] * p;  // float32 product, as the reference computes it
    const float c = static_cast<float>(std::cos(static_cast<double>(angle))) * t.attention_factor;
    const float s = static_cast<float>(std::sin(static_cast<double>(angle))) * t.attention_factor;
    const float x0 = x[2 * i], x1 = x[2 * i + 1];
    x[2 * i] = x0 * c - x1 * s;
    x[2 * i + 1] = x0 * s + x1 * c;
  }
}

}  // namespace mla::model
