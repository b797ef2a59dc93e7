#pragma once
// Facts about the current CUDA device that launchers and plans need (read once, cached per device).
#include "mla/core/status.h"

namespace mla::runtime {

struct DeviceInfo {
  int device = 0;
  int num_sms = 0;             // 132 on H200 SXM
  int cc_major = 0, cc_minor = 0;
  size_t l2_bytes = 0;
  size_t smem_optin_bytes = 0;  // per-block dynamic shared memory limit after opt-in (227 KB on Hopper)
};

// Info of the current device. Errors (no device, driver mismatch) come back as a Status naming the call.
Status current_device_info(DeviceInfo* out);

}  // namespace mla::runtime
