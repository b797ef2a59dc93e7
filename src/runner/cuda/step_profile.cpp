#include "step_profile.h"

#include <cstdio>

namespace mla::runner {

ProfilingBackend::~ProfilingBackend() {
  for (auto& [a, b] : events_) cudaEventDestroy(a), cudaEventDestroy(b);
  for (cudaEvent_t e : graph_ev_)
    if (e) cudaEventDestroy(e);
}

void ProfilingBackend::start(Phase p) {
  if (used_ == events_.size()) {
    cudaEvent_t a, b;
    cudaEventCreate(&a), cudaEventCreate(&b);
    events_.push_back({a, b});
  }
  cudaEventRecord(events_[used_].first, reinterpret_cast<cudaStream_t>(be_->stream()));
  phases_.push_back(p);
}

void ProfilingBackend::stop() {
  cudaEventRecord(events_[used_].second, reinterpret_cast<cudaStream_t>(be_->stream()));
  ++used_;
}

void ProfilingBackend::end_step(const std::string& label, int64_t tokens, int64_t decode_rows, double wall_ms) {
  cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(be_->stream()));
  Row& r = rows_[label];
  ++r.steps;
  r.tokens += tokens;
  r.decode_rows += decode_rows;
  r.wall += wall_ms;
  for (size_t i = 0; i < used_; ++i) {
    float ms = 0;
    cudaEventElapsedTime(&ms, events_[i].first, events_[i].second);
    r.ms[phases_[i]] += ms;
  }
  used_ = 0;
  phases_.clear();
}

void ProfilingBackend::graph_launch_begin() {
  for (cudaEvent_t& e : graph_ev_)
    if (!e) cudaEventCreate(&e);
  cudaEventRecord(graph_ev_[0], reinterpret_cast<cudaStream_t>(be_->stream()));
}

void ProfilingBackend::graph_launch_end() {
  cudaEventRecord(graph_ev_[1], reinterpret_cast<cudaStream_t>(be_->stream()));
}

void ProfilingBackend::end_graph_step(int bucket, int rows, double wall_ms) {
  cudaEventSynchronize(graph_ev_[1]);
  float ms = 0;
  cudaEventElapsedTime(&ms, graph_ev_[0], graph_ev_[1]);
  GraphRow& g = graph_rows_[bucket];
  ++g.steps;
  g.rows += rows;
  g.gpu += ms;
  g.wall += wall_ms;
}

std::string ProfilingBackend::report() const {
  std::string out =
      "step profile (eager, CUDA events per op, ms per step): step | steps | rows | decode rows | attn cache write | "
      "attn decode (absorbed) | attn expand (gather + kv_b_proj) | attn prefill kernel | MoE | dense GEMMs | small ops "
      "| "
      "sampling | GPU sum | wall | host (wall - GPU)\n";
  char line[512];
  for (const auto& [label, r] : rows_) {
    double gpu = 0;
    for (double m : r.ms) gpu += m;
    const double n = double(r.steps);
    std::snprintf(
        line, sizeof line,
        "| %s | %lld | %.1f | %.1f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f |\n",
        label.c_str(), (long long)r.steps, double(r.tokens) / n, double(r.decode_rows) / n, r.ms[kAttnWrite] / n,
        r.ms[kAttnDecode] / n, r.ms[kAttnExpand] / n, r.ms[kAttnPrefill] / n, r.ms[kMoe] / n, r.ms[kGemm] / n,
        r.ms[kSmall] / n, r.ms[kSampling] / n, gpu / n, r.wall / n, (r.wall - gpu) / n);
    out += line;
  }
  if (!graph_rows_.empty()) {
    out += "decode steps replayed from CUDA graphs (events around the launch; wall = staging + launch + wait for the "
           "tokens), ms per step: bucket | steps | mean rows | GPU | wall | host (wall - GPU)\n";
    for (const auto& [bucket, g] : graph_rows_) {
      const double n = double(g.steps);
      std::snprintf(line, sizeof line, "| %d | %lld | %.1f | %.3f | %.3f | %.3f |\n", bucket, (long long)g.steps,
                    double(g.rows) / n, g.gpu / n, g.wall / n, (g.wall - g.gpu) / n);
      out += line;
    }
  }
  return out;
}

}  // namespace mla::runner
