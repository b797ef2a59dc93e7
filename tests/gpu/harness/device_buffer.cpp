#include "harness/device_buffer.h"

#include <utility>

#include "mla/core/cuda_check.h"

namespace mla::test {

DeviceBuffer::~DeviceBuffer() {
  if (base_) cudaFree(base_);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (base_) cudaFree(base_);
    base_ = std::exchange(o.base_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

Status DeviceBuffer::alloc(size_t bytes) {
  if (base_) cudaFree(base_);
  base_ = nullptr;
  bytes_ = bytes;
  void* p = nullptr;
  MLA_CUDA_TRY("DeviceBuffer", cudaMalloc(&p, bytes + 2 * kGuardBytes));
  base_ = static_cast<uint8_t*>(p);
  MLA_CUDA_TRY("DeviceBuffer", cudaMemset(base_, kGuardByte, kGuardBytes));
  MLA_CUDA_TRY("DeviceBuffer", cudaMemset(base_ + kGuardBytes + bytes, kGuardByte, kGuardBytes));
  return poison();
}

Status DeviceBuffer::upload(const void* host, size_t bytes, size_t offset) {
  if (offset + bytes > bytes_) return Status::invalid("DeviceBuffer::upload", "out of range");
  MLA_CUDA_TRY("DeviceBuffer::upload", cudaMemcpy(as<uint8_t>() + offset, host, bytes, cudaMemcpyHostToDevice));
  return Status::ok();
}

Status DeviceBuffer::download(void* host, size_t bytes, size_t offset) const {
  if (offset + bytes > bytes_) return Status::invalid("DeviceBuffer::download", "out of range");
  MLA_CUDA_TRY("DeviceBuffer::download", cudaMemcpy(host, as<uint8_t>() + offset, bytes, cudaMemcpyDeviceToHost));
  return Status::ok();
}

Status DeviceBuffer::fill(uint8_t byte) {
  if (bytes_ == 0) return Status::ok();
  MLA_CUDA_TRY("DeviceBuffer::fill", cudaMemset(data(), byte, bytes_));
  return Status::ok();
}

Status DeviceBuffer::check_guards(const std::string& name) const {
  if (!base_) return Status::ok();
  std::vector<uint8_t> g(kGuardBytes);
  for (int side = 0; side < 2; ++side) {
    const uint8_t* src = side == 0 ? base_ : base_ + kGuardBytes + bytes_;
    MLA_CUDA_TRY("check_guards", cudaMemcpy(g.data(), src, kGuardBytes, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < kGuardBytes; ++i) {
      if (g[i] != kGuardByte) {
        return Status::internal("check_guards", name + ": guard " + (side == 0 ? "before" : "after") +
                                                    " the buffer overwritten at guard byte " + std::to_string(i));
      }
    }
  }
  return Status::ok();
}

}  // namespace mla::test
