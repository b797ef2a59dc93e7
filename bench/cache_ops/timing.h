#pragma once
// Timing for memory-bound kernels: CUDA events around each launch, warm-up first, the L2 flushed before
// every timed rep (a 2 x L2-sized memset outside the events) so each rep streams from HBM, median reported.
#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "mla/core/status.h"

namespace mla::bench {

struct TimingOptions {
  int warmup = 5;
  int reps = 50;
};

class L2Flusher {
 public:
  Status init();  // allocates 2 x the device's L2 size
  ~L2Flusher();
  void flush(cudaStream_t s) const { if (buf_) cudaMemsetAsync(buf_, ++tick_ & 0xFF, bytes_, s); }

 private:
  void* buf_ = nullptr;
  size_t bytes_ = 0;
  mutable int tick_ = 0;
};

// Median milliseconds of `run` over opts.reps timed launches. `run` returns a Status (the op's launcher).
Status time_median_ms(const std::function<Status()>& run, const L2Flusher& l2, const TimingOptions& opts, float* ms);

}  // namespace mla::bench
