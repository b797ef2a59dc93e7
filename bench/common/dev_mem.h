#pragma once
// Scope-bound device resources for the benchmarks: a typed device allocation and a pair of CUDA events, released on
// every return path (the benchmarks return a Status wherever a CUDA call fails).
#include <cuda_runtime_api.h>

#include <cstddef>

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
