#pragma once
// Device buffers and fast synthetic data for the benchmarks (GBs of weights filled on the device, no host
// round trip). Include from one .cu file per benchmark executable (the fill kernel is defined here).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace mla::bench {

// A device allocation released at scope exit; p == nullptr when cudaMalloc failed (callers check).
struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(size_t bytes) {
    if (cudaMalloc(&p, std::max<size_t>(bytes, 256)) != cudaSuccess) p = nullptr;
  }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <class T>
  T* as() const { return static_cast<T*>(p); }
};

// Deterministic pseudo-random bf16 in [-scale, scale) (a hash of the index): fills GBs in milliseconds.
__global__ void fill_bf16(__nv_bfloat16* p, int64_t n, float scale, uint32_t seed) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13, h *= 3266489917u, h ^= h >> 16;
    p[i] = __float2bfloat16((float(h & 0xFFFFFF) / 8388608.f - 1.f) * scale);
  }
}

}  // namespace mla::bench
