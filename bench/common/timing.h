#pragma once
// Timing for memory-bound kernels: CUDA events around each launch, warm-up first, the L2 flushed before
// every timed rep (a kernel reading a 2 x L2-sized buffer, outside the events) so each rep streams from HBM,
// median reported. The flush reads rather than writes: dirty flush lines would be written back to HBM
// during the timed kernel and bill it for traffic that is not its own.
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
  Status init(size_t min_bytes = 0);  // allocates 2 x the device's L2 size, or min_bytes if larger
  ~L2Flusher();
  Status flush(cudaStream_t s) const;

 private:
  void* buf_ = nullptr;   // 2 x L2 bytes, then 16 bytes of sink the flush kernel never writes in practice
  size_t bytes_ = 0;
};

// Median milliseconds of `run` over opts.reps timed launches. `run` returns a Status (the op's launcher).
Status time_median_ms(const std::function<Status()>& run, const L2Flusher& l2, const TimingOptions& opts, float* ms);

// The decode anchors' flush (ANCHORS.md "How the anchor was timed"): a 256 MB memset between calls. It leaves L2 full
// of dirty lines, which the timed call's first reads write back (bench_stream measures that share).
constexpr size_t kMemsetFlushBytes = size_t(256) << 20;

// Median µs of `reps` launches of the CUDA graph `exec` on `s` after `warmup` untimed ones, each preceded by
// flush(launch index) outside the events: the timing of bench_decode's rows (flush = the anchors' memset; its
// --unrolled graphs hold their flushes and take a no-op here) and of bench_stream.
Status time_graph_median_us(cudaGraphExec_t exec, cudaStream_t s, const std::function<Status(int)>& flush, int reps,
                            double* median_us, int warmup = 3);

}  // namespace mla::bench
