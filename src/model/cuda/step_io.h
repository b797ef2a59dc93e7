#pragma once
// The step's host<->device traffic through fixed memory made once at create(): a pinned host staging block
// and its device twin for the inputs, and a pinned/device pair for the sampled token ids.
//
// begin_step packs the step's arrays into the staging block with put() (256-byte aligned, in call order)
// and sends them with one cudaMemcpyAsync (two when a graph step's block table is copied at its used
// width only). Offsets depend only on the arrays' lengths, so a step padded to a CUDA-graph bucket always
// lands at the device addresses its graph was captured with. Nothing here allocates after init().
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace mla::model::cuda_backend {

class StepIo {
 public:
  StepIo() = default;
  StepIo(const StepIo&) = delete;
  StepIo& operator=(const StepIo&) = delete;
  ~StepIo() {
    if (host_) cudaFreeHost(host_);
    if (dev_) cudaFree(dev_);
    if (tok_host_) cudaFreeHost(tok_host_);
    if (tok_dev_) cudaFree(tok_dev_);
  }

  // input_bytes: the staging capacity; max_samples: sampled rows a step may return.
  cudaError_t init(size_t input_bytes, int64_t max_samples) {
    bytes_ = input_bytes, max_samples_ = max_samples;
    cudaError_t e = cudaHostAlloc(&host_, input_bytes, cudaHostAllocDefault);
    if (e == cudaSuccess) e = cudaMalloc(&dev_, input_bytes);
    if (e == cudaSuccess)
      e = cudaHostAlloc(reinterpret_cast<void**>(&tok_host_), size_t(max_samples) * 4, cudaHostAllocDefault);
    if (e == cudaSuccess) e = cudaMalloc(reinterpret_cast<void**>(&tok_dev_), size_t(max_samples) * 4);
    return e;
  }
  void reset() { used_ = 0; }
  // Reserves n elements; *host gets the staging slot to fill; returns the device address (nullptr when
  // the block is full).
  template <class T>
  T* reserve(size_t n, T** host) {
    const size_t start = (used_ + 255) / 256 * 256, len = n * sizeof(T);
    if (start + len > bytes_) return *host = nullptr, nullptr;
    used_ = start + len;
    *host = reinterpret_cast<T*>(static_cast<uint8_t*>(host_) + start);
    return reinterpret_cast<T*>(static_cast<uint8_t*>(dev_) + start);
  }
  template <class T>
  T* put(const T* src, size_t n) {
    T* h = nullptr;
    T* d = reserve<T>(n, &h);
    if (d && n) std::memcpy(h, src, n * sizeof(T));
    return d;
  }
  // Bytes [from, to) of the block (offsets as device addresses), host -> device on `stream`.
  cudaError_t upload(const void* dev_from, const void* dev_to, cudaStream_t stream) const {
    const size_t a = offset(dev_from), b = offset(dev_to);
    if (b <= a) return cudaSuccess;
    return cudaMemcpyAsync(static_cast<uint8_t*>(dev_) + a, static_cast<uint8_t*>(host_) + a, b - a,
                           cudaMemcpyHostToDevice, stream);
  }
  void* device_end() const { return static_cast<uint8_t*>(dev_) + used_; }
  void* device_begin() const { return dev_; }
  size_t offset(const void* dev) const {
    return size_t(static_cast<const uint8_t*>(dev) - static_cast<uint8_t*>(dev_));
  }
  template <class T>
  T* host_of(T* dev) const { return reinterpret_cast<T*>(static_cast<uint8_t*>(host_) + offset(dev)); }
  size_t capacity() const { return bytes_; }
  size_t used() const { return used_; }

  int32_t* tokens_device() const { return tok_dev_; }
  const int32_t* tokens_host() const { return tok_host_; }
  int32_t* tokens_host_mut() { return tok_host_; }
  int64_t max_samples() const { return max_samples_; }

 private:
  void* host_ = nullptr;
  void* dev_ = nullptr;
  int32_t* tok_host_ = nullptr;
  int32_t* tok_dev_ = nullptr;
  size_t bytes_ = 0, used_ = 0;
  int64_t max_samples_ = 0;
};

}  // namespace mla::model::cuda_backend
