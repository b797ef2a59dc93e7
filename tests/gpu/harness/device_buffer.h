#pragma once
// Device memory for GPU tests, with guard regions: every buffer is allocated with kGuardBytes of a known
// pattern before and after it, and check_guards() tells whether a kernel wrote out of bounds.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "mla/core/status.h"

namespace mla::test {

class DeviceBuffer {
 public:
  static constexpr size_t kGuardBytes = 4096;
  static constexpr uint8_t kGuardByte = 0xA5;
  static constexpr uint8_t kPoisonByte = 0xFF;  // 0xFF.. is NaN in e4m3, bf16, fp16 and fp32

  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) { Status s = alloc(bytes); (void)s; }
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;

  Status alloc(size_t bytes);  // allocates, writes guards, poisons the payload with NaN bytes
  void* data() const { return base_ ? base_ + kGuardBytes : nullptr; }
  template <class T>
  T* as() const { return static_cast<T*>(data()); }
  size_t bytes() const { return bytes_; }

  Status upload(const void* host, size_t bytes, size_t offset = 0);
  Status download(void* host, size_t bytes, size_t offset = 0) const;
  template <class T>
  Status upload(const std::vector<T>& v) { return upload(v.data(), v.size() * sizeof(T)); }
  template <class T>
  Status download(std::vector<T>* v) const { return download(v->data(), v->size() * sizeof(T)); }
  Status fill(uint8_t byte);                 // whole payload
  Status poison() { return fill(kPoisonByte); }
  // Ok when both guard regions still hold kGuardByte; otherwise names the first corrupted offset.
  Status check_guards(const std::string& name) const;

 private:
  uint8_t* base_ = nullptr;
  size_t bytes_ = 0;
};

// Aborts the current gtest test with the Status message when not ok.
#define MLA_ASSERT_OK(expr)                                          \
  do {                                                               \
    ::mla::Status s_ = (expr);                                       \
    ASSERT_TRUE(s_.is_ok()) << s_.to_string();                       \
  } while (0)

}  // namespace mla::test
