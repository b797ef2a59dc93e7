#include "step_profile.h"

#include <cstdio>

namespace mla::runner {

ProfilingBackend::~ProfilingBackend() {
  for (auto& [a, b] : events_) cudaEventDestroy(a), cudaEventDestroy(b);
}

void ProfilingBackend::end_step(int batch, double wall_ms) {
  cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(be_->stream()));
  Row& r = rows_[batch];
  ++r.steps;
  r.wall += wall_ms;
  for (size_t i = 0; i < used_; ++i) {
    float ms = 0;
    cudaEventElapsedTime(&ms, events_[i].first, events_[i].second);
    r.ms[phases_[i]] += ms;
  }
  used_ = 0;
  phases_.clear();
}

std::string ProfilingBackend::report() const {
  std::string out =
      "decode step profile (eager, ms per step): batch | steps | attention | MoE | dense GEMMs | small ops | "
      "sampling | GPU sum | wall | host (wall - GPU)\n";
  for (const auto& [batch, r] : rows_) {
    double gpu = 0;
    for (double m : r.ms) gpu += m;
    char line[256];
    const double n = r.steps;
    std::snprintf(line, sizeof line, "| %d | %d | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f |\n", batch,
                  r.steps, r.ms[kAttention] / n, r.ms[kMoe] / n, r.ms[kGemm] / n, r.ms[kSmall] / n, r.ms[kSampling] / n,
                  gpu / n, r.wall / n, (r.wall - gpu) / n);
    out += line;
  }
  return out;
}

}  // namespace mla::runner
