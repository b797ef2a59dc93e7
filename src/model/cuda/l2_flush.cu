#include "l2_flush.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "mla/core/cuda_check.h"

namespace mla::model::cuda_backend {
namespace {

// XORs every 16 bytes; `sink` is written only when `keep` is set (the caller passes 0), so the loads cannot be
// optimized away and nothing is ever stored.
__global__ void l2_flush_kernel(const uint4* __restrict__ p, size_t n, int keep, unsigned* sink) {
  unsigned acc = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const uint4 v = p[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (keep) *sink = acc;
}

}  // namespace

Status flush_l2(const void* buf, size_t bytes, cudaStream_t stream) {
  if (!buf || bytes < 16) return Status::ok();
  l2_flush_kernel<<<132 * 8, 256, 0, stream>>>(static_cast<const uint4*>(buf), bytes / 16, 0, nullptr);
  MLA_CUDA_TRY_LAUNCH("gemm l2 flush");
  return Status::ok();
}

Status median_ms_after_flush(const char* op, const std::function<Status()>& launch, const void* buf, size_t bytes,
                             cudaStream_t stream, int reps, float* ms) {
  struct Events {  // destroyed on every exit path
    cudaEvent_t a = nullptr, b = nullptr;
    ~Events() {
      if (a) cudaEventDestroy(a);
      if (b) cudaEventDestroy(b);
    }
  } ev;
  MLA_CUDA_TRY(op, cudaEventCreate(&ev.a));
  MLA_CUDA_TRY(op, cudaEventCreate(&ev.b));
  std::vector<float> t;
  for (int r = 0; r < std::max(reps, 1); ++r) {
    MLA_TRY(flush_l2(buf, bytes, stream));
    MLA_CUDA_TRY(op, cudaEventRecord(ev.a, stream));
    MLA_TRY(launch());
    MLA_CUDA_TRY(op, cudaEventRecord(ev.b, stream));
    MLA_CUDA_TRY(op, cudaEventSynchronize(ev.b));
    float v = 0;
    MLA_CUDA_TRY(op, cudaEventElapsedTime(&v, ev.a, ev.b));
    t.push_back(v);
  }
  std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
  *ms = t[t.size() / 2];
  return Status::ok();
}

}  // namespace mla::model::cuda_backend
