#pragma once
// A bump allocator over one device allocation made at startup: alloc() hands out 256-byte-aligned pieces,
// reset() forgets them all. Kernels run in stream order, so memory reset and handed out again is only
// touched by work queued after the work that used it before.
#include <cstddef>
#include <cstdint>

namespace mla::model::cuda_backend {

class DeviceArena {
 public:
  void init(void* base, size_t bytes) { base_ = static_cast<uint8_t*>(base), bytes_ = bytes, used_ = 0, peak_ = 0; }
  // nullptr when the arena is exhausted (callers turn that into an out-of-memory Status naming the op).
  void* alloc(size_t bytes) {
    const size_t start = (used_ + 255) / 256 * 256;
    if (start + bytes > bytes_) return nullptr;
    used_ = start + bytes;
    if (used_ > peak_) peak_ = used_;
    return base_ + start;
  }
  void reset() { used_ = 0; }
  size_t used() const { return used_; }
  size_t capacity() const { return bytes_; }
  size_t peak() const { return peak_; }
  void* base() const { return base_; }

 private:
  uint8_t* base_ = nullptr;
  size_t bytes_ = 0, used_ = 0, peak_ = 0;
};

}  // namespace mla::model::cuda_backend
