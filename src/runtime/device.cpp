#include "mla/runtime/device.h"

#include <cuda_runtime_api.h>

#include <array>
#include <mutex>

#include "mla/core/cuda_check.h"

namespace mla::runtime {

Status current_device_info(DeviceInfo* out) {
  static std::mutex mu;
  static std::array<DeviceInfo, 64> cache{};
  int dev = 0;
  MLA_CUDA_TRY("device_info", cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  if (dev < 0 || dev >= static_cast<int>(cache.size()))
    return Status::internal("device_info", "device index out of range");
  DeviceInfo& d = cache[dev];
  if (d.num_sms == 0) {
    cudaDeviceProp prop{};
    MLA_CUDA_TRY("device_info", cudaGetDeviceProperties(&prop, dev));
    d.device = dev;
    d.num_sms = prop.multiProcessorCount;
    d.cc_major = prop.major;
    d.cc_minor = prop.minor;
    d.l2_bytes = static_cast<size_t>(prop.l2CacheSize);
    d.smem_optin_bytes = prop.sharedMemPerBlockOptin;
  }
  *out = d;
  return Status::ok();
}

}  // namespace mla::runtime
