#pragma once
// Test data for the model's CUDA ops: host values already rounded to bf16 (what the device sees, so the
// CPU reference computes on exactly the device's inputs), device copies with guards, and read-back.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/random.h"
#include "harness/device_buffer.h"
#include "mla/core/cuda_check.h"
#include "mla/core/half.h"
#include "mla/core/tensor.h"

namespace mla::test {

// Values in float (bf16-representable when `dt` is bf16) and their raw storage.
struct HostArray {
  DType dt = DType::kBf16;
  std::vector<float> f;
  std::vector<uint8_t> raw;

  static HostArray from(DType dt, std::vector<float> v) {
    HostArray a;
    a.dt = dt;
    a.raw.resize(v.size() * dtype_size(dt));
    for (size_t i = 0; i < v.size(); ++i) {
      if (dt == DType::kBf16) {
        const uint16_t b = float_to_bf16(v[i]);
        v[i] = bf16_to_float(b);
        std::memcpy(&a.raw[i * 2], &b, 2);
      } else {
        std::memcpy(&a.raw[i * 4], &v[i], 4);
      }
    }
    a.f = std::move(v);
    return a;
  }
  static HostArray randn(DType dt, std::mt19937_64& rng, size_t n, float stddev = 1.f, float mean = 0.f) {
    return from(dt, mla::test::randn(rng, n, stddev, mean));
  }
};

// A device copy of `a` (guards around it).
inline Status to_device(const HostArray& a, DeviceBuffer* d) {
  MLA_TRY(d->alloc(std::max<size_t>(a.raw.size(), 16)));
  return a.raw.empty() ? Status::ok() : d->upload(a.raw.data(), a.raw.size());
}

template <class T>
Status to_device(const std::vector<T>& v, DeviceBuffer* d) {
  MLA_TRY(d->alloc(std::max<size_t>(v.size() * sizeof(T), 16)));
  return v.empty() ? Status::ok() : d->upload(v.data(), v.size() * sizeof(T));
}

// [rows, cols] view of a device buffer with row stride ld (elements) starting at element offset `off`.
inline TensorView view2d(const DeviceBuffer& d, DType dt, int64_t rows, int64_t cols, int64_t ld = -1,
                         int64_t off = 0) {
  TensorView v =
      TensorView::contiguous(static_cast<uint8_t*>(d.data()) + off * int64_t(dtype_size(dt)), dt, {rows, cols});
  if (ld >= 0) v.stride[0] = ld;
  return v;
}

// All of a device buffer's elements as floats (n elements of dt), after a device sync.
inline Status from_device(const DeviceBuffer& d, DType dt, size_t n, std::vector<float>* out) {
  MLA_CUDA_TRY("from_device", cudaDeviceSynchronize());
  std::vector<uint8_t> raw(n * dtype_size(dt));
  MLA_TRY(d.download(raw.data(), raw.size()));
  out->resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (dt == DType::kFp32) {
      std::memcpy(&(*out)[i], &raw[i * 4], 4);
    } else if (dt == DType::kBf16) {
      uint16_t b;
      std::memcpy(&b, &raw[i * 2], 2);
      (*out)[i] = bf16_to_float(b);
    } else {
      int32_t x;
      std::memcpy(&x, &raw[i * 4], 4);
      (*out)[i] = static_cast<float>(x);
    }
  }
  return Status::ok();
}

inline ErrorStats compare_f(const std::vector<float>& got, const std::vector<float>& ref) {
  return compare(ref.size(), [&](size_t i) { return double(got[i]); }, [&](size_t i) { return double(ref[i]); });
}

}  // namespace mla::test
