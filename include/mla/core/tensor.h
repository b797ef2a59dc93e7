#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "mla/core/dtype.h"

namespace mla {

constexpr int kMaxRank = 6;

// A non-owning view of an n-d array: pointer, dtype, shape and strides (in elements).
// Host or device memory alike; the op it is passed to says which.
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kFp32;
  int rank = 0;
  std::array<int64_t, kMaxRank> shape{};
  std::array<int64_t, kMaxRank> stride{};

  // Row-major contiguous view.
  static TensorView contiguous(const void* data, DType dtype, std::initializer_list<int64_t> shape);

  int64_t numel() const;
  int64_t size(int dim) const { return shape[dim]; }
  bool is_contiguous() const;
  bool defined() const { return rank > 0; }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  template <class T>
  T* ptr() const { return static_cast<T*>(data); }
  // "bf16[2, 1, 16, 576]" (with strides appended when not contiguous).
  std::string str() const;
};

}  // namespace mla
