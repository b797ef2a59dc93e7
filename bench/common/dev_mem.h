#pragma once
// Scope-bound device resources for the benchmarks: a typed device allocation and a pair of CUDA events, released on
// every return path (the benchmarks return a Status wherever a CUDA call fails).
#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

#include "mla/core/cuda_check.h"
#include "mla/core/status.h"

namespace mla::bench {

// n elements of T on the device; alloc's error names `op` (the benchmark) and cudaMalloc.
template <class T>
struct DevMem {
  T* p = nullptr;
  DevMem() = default;
  DevMem(const DevMem&) = delete;
  DevMem& operator=(const DevMem&) = delete;
  ~DevMem() {
    if (p) cudaFree(p);
  }
  Status alloc(size_t n, const char* op) { return cuda_status(cudaMalloc(&p, n * sizeof(T)), op, "cudaMalloc"); }
  // alloc, then every byte zero: defined contents (16-bit / e4m3 zeros) where a kernel may read before it writes.
  Status alloc_zeroed(size_t n, const char* op) {
    MLA_TRY(alloc(n, op));
    return cuda_status(cudaMemset(p, 0, n * sizeof(T)), op, "cudaMemset");
  }
  // v.size() elements holding v (synchronous copy: set-up, outside any timing).
  Status upload(const std::vector<T>& v, const char* op) {
    MLA_TRY(alloc(v.size(), op));
    return cuda_status(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), op, "cudaMemcpy");
  }
};

// Two events, destroyed at scope exit whatever path returns.
struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  EventPair() = default;
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  ~EventPair() {
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
  }
  Status create(const char* op) {
    MLA_CUDA_TRY(op, cudaEventCreate(&start));
    MLA_CUDA_TRY(op, cudaEventCreate(&stop));
    return Status::ok();
  }
};

}  // namespace mla::bench
