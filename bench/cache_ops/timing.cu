#include "cache_ops/timing.h"

#include "mla/core/cuda_check.h"

namespace mla::bench {

Status L2Flusher::init() {
  int dev = 0, l2 = 0;
  MLA_CUDA_TRY("bench", cudaGetDevice(&dev));
  MLA_CUDA_TRY("bench", cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  bytes_ = 2 * static_cast<size_t>(l2 > 0 ? l2 : (64 << 20));
  MLA_CUDA_TRY("bench", cudaMalloc(&buf_, bytes_));
  return Status::ok();
}

L2Flusher::~L2Flusher() {
  if (buf_) cudaFree(buf_);
}

namespace {
// Two events, destroyed at scope exit whatever path returns.
struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  ~EventPair() {
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
  }
};
}  // namespace

Status time_median_ms(const std::function<Status()>& run, const L2Flusher& l2, const TimingOptions& opts, float* ms) {
  for (int i = 0; i < opts.warmup; ++i) MLA_TRY(run());
  EventPair ev;
  MLA_CUDA_TRY("bench", cudaEventCreate(&ev.start));
  MLA_CUDA_TRY("bench", cudaEventCreate(&ev.stop));
  std::vector<float> t;
  for (int i = 0; i < opts.reps; ++i) {
    l2.flush(nullptr);
    MLA_CUDA_TRY("bench", cudaEventRecord(ev.start));
    MLA_TRY(run());
    MLA_CUDA_TRY("bench", cudaEventRecord(ev.stop));
    MLA_CUDA_TRY("bench", cudaEventSynchronize(ev.stop));
    float v = 0;
    MLA_CUDA_TRY("bench", cudaEventElapsedTime(&v, ev.start, ev.stop));
    t.push_back(v);
  }
  if (t.empty()) return Status::invalid("bench", "no timed reps");
  std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
  *ms = t[t.size() / 2];
  return Status::ok();
}

}  // namespace mla::bench
