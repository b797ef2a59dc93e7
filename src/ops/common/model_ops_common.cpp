#include "mla/ops/model_ops_common.h"

#include <cstdint>

namespace mla::model_ops {

Status check_rows_view(const char* op, const char* name, const TensorView& v, std::initializer_list<DType> dtypes,
                       int64_t rows, int64_t cols) {
  bool dtype_ok = false;
  std::string allowed;
  for (DType d : dtypes) {
    dtype_ok |= v.dtype == d;
    if (!allowed.empty()) allowed += '|';
    allowed += dtype_name(d);
  }
  const bool ok = dtype_ok && v.rank == 2 && v.data && v.stride[1] == 1 && v.stride[0] >= v.shape[1] &&
                  (rows < 0 || v.shape[0] == rows) && (cols < 0 || v.shape[1] == cols) && v.shape[1] % 8 == 0 &&
                  v.stride[0] % 8 == 0 && reinterpret_cast<uintptr_t>(v.data) % 16 == 0;
  if (ok) return Status::ok();
  return Status::invalid(op, std::string(name) + ": expected " + allowed + "[" +
                                 (rows < 0 ? "?" : std::to_string(rows)) + ", " +
                                 (cols < 0 ? "?" : std::to_string(cols)) +
                                 "] (cols and row stride multiples of 8, unit column stride, 16-byte aligned), got " +
                                 (v.defined() ? v.str() : std::string("nothing")) + (v.data ? "" : " (null data)"));
}

Status check_array(const char* op, const char* name, const TensorView& v, DType dtype, int64_t numel) {
  if (v.defined() && v.data && v.dtype == dtype && v.numel() == numel && v.is_contiguous()) return Status::ok();
  return Status::invalid(op, std::string(name) + ": expected contiguous " + std::string(dtype_name(dtype)) + " with " +
                                 std::to_string(numel) + " elements, got " +
                                 (v.defined() ? v.str() : std::string("nothing")));
}

}  // namespace mla::model_ops
