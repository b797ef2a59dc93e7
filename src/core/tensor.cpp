#include "mla/core/tensor.h"

#include <string>

namespace mla {

TensorView TensorView::contiguous(const void* data, DType dtype, std::initializer_list<int64_t> shape) {
  TensorView t;
  t.data = const_cast<void*>(data);
  t.dtype = dtype;
  t.rank = static_cast<int>(shape.size());
  int i = 0;
  for (int64_t s : shape) t.shape[i++] = s;
  int64_t stride = 1;
  for (int d = t.rank - 1; d >= 0; --d) {
    t.stride[d] = stride;
    stride *= t.shape[d];
  }
  return t;
}

int64_t TensorView::numel() const {
  if (rank == 0) return 0;
  int64_t n = 1;
  for (int d = 0; d < rank; ++d) n *= shape[d];
  return n;
}

bool TensorView::is_contiguous() const {
  int64_t expect = 1;
  for (int d = rank - 1; d >= 0; --d) {
    if (shape[d] != 1 && stride[d] != expect) return false;
    expect *= shape[d];
  }
  return true;
}

std::string TensorView::str() const {
  if (rank == 0) return "<undefined>";
  std::string s(dtype_name(dtype));
  s += "[";
  for (int d = 0; d < rank; ++d) s += (d ? ", " : "") + std::to_string(shape[d]);
  s += "]";
  if (!is_contiguous()) {
    s += " strides (";
    for (int d = 0; d < rank; ++d) s += (d ? ", " : "") + std::to_string(stride[d]);
    s += ")";
  }
  return s;
}

}  // namespace mla
