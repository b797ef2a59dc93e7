#include "mla/engine/sampling_params.h"

#include <cmath>
#include <string>

namespace mla::engine {

Status validate(const SamplingParams& p) {
  const char* op = "SamplingParams";
  if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature)) {
    return Status::invalid(op, "temperature must be finite and >= 0, got " + std::to_string(p.temperature));
  }
  if (p.top_k < 0) return Status::invalid(op, "top_k must be >= 0 (0 = all), got " + std::to_string(p.top_k));
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) {
    return Status::invalid(op, "top_p must be in (0, 1], got " + std::to_string(p.top_p));
  }
  if (p.max_tokens < 1) return Status::invalid(op, "max_tokens must be >= 1, got " + std::to_string(p.max_tokens));
  return Status::ok();
}

}  // namespace mla::engine
