#include "common/timing.h"

#include <algorithm>

#include "common/dev_mem.h"
#include "mla/core/cuda_check.h"

namespace mla::bench {

namespace {
// Reads every 16 bytes of the buffer; the sink write (never taken for a zeroed buffer) keeps the loads alive.
__global__ void l2_flush_kernel(const uint4* __restrict__ p, size_t n, unsigned* sink) {
  unsigned acc = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const uint4 v = p[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0xDEADBEEFu) *sink = acc;
}
}  // namespace

Status L2Flusher::flush(cudaStream_t s) const {
  if (!buf_) return Status::ok();
  l2_flush_kernel<<<132 * 8, 256, 0, s>>>(static_cast<const uint4*>(buf_), bytes_ / 16,
                                          reinterpret_cast<unsigned*>(static_cast<uint8_t*>(buf_) + bytes_));
  MLA_CUDA_TRY_LAUNCH("bench l2 flush");
  return Status::ok();
}

Status L2Flusher::init(size_t min_bytes) {
  int dev = 0, l2 = 0;
  MLA_CUDA_TRY("bench", cudaGetDevice(&dev));
  MLA_CUDA_TRY("bench", cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  bytes_ = std::max(2 * static_cast<size_t>(l2 > 0 ? l2 : (64 << 20)), min_bytes);
  MLA_CUDA_TRY("bench", cudaMalloc(&buf_, bytes_ + 16));
  MLA_CUDA_TRY("bench", cudaMemset(buf_, 0, bytes_ + 16));
  return Status::ok();
}

L2Flusher::~L2Flusher() {
  if (buf_) cudaFree(buf_);
}

Status time_median_ms(const std::function<Status()>& run, const L2Flusher& l2, const TimingOptions& opts, float* ms) {
  for (int i = 0; i < opts.warmup; ++i) MLA_TRY(run());
  EventPair ev;
  MLA_TRY(ev.create("bench"));
  std::vector<float> t;
  for (int i = 0; i < opts.reps; ++i) {
    MLA_TRY(l2.flush(nullptr));
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

Status time_graph_median_us(cudaGraphExec_t exec, cudaStream_t s, const std::function<Status(int)>& flush, int reps,
                            double* median_us, int warmup) {
  EventPair ev;
  MLA_TRY(ev.create("bench"));
  std::vector<float> ms;
  for (int i = 0; i < reps + warmup; ++i) {
    MLA_TRY(flush(i));
    MLA_CUDA_TRY("bench (timing)", cudaEventRecord(ev.start, s));
    MLA_CUDA_TRY("bench (timing)", cudaGraphLaunch(exec, s));
    MLA_CUDA_TRY("bench (timing)", cudaEventRecord(ev.stop, s));
    MLA_CUDA_TRY("bench (timing)", cudaEventSynchronize(ev.stop));
    float t = 0;
    MLA_CUDA_TRY("bench (timing)", cudaEventElapsedTime(&t, ev.start, ev.stop));
    if (i >= warmup) ms.push_back(t);
  }
  if (ms.empty()) return Status::invalid("bench", "no timed reps");
  std::sort(ms.begin(), ms.end());
  *median_us = 1e3 * ms[ms.size() / 2];
  return Status::ok();
}

}  // namespace mla::bench
