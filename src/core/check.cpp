#include "mla/core/check.h"

#include <string>

namespace mla {

std::string dims_str(std::initializer_list<int64_t> dims) {
  std::string s = "[";
  int i = 0;
  for (int64_t d : dims) s += (i++ ? ", " : "") + (d == kAnyDim ? std::string("?") : std::to_string(d));
  return s + "]";
}

namespace {
Status check_impl(std::string_view op, std::string_view name, const TensorView& t, bool dtype_ok,
                  std::string_view dtype_expect, std::initializer_list<int64_t> dims, bool need_contiguous) {
  auto fail = [&](std::string_view why) {
    std::string msg = std::string(name) + ": expected " + std::string(dtype_expect) + dims_str(dims) +
                      (need_contiguous ? " contiguous" : "") + ", got " + t.str();
    if (!why.empty()) msg += " (" + std::string(why) + ")";
    return Status::invalid(std::string(op), msg);
  };
  if (!t.defined()) return fail("missing");
  if (t.data == nullptr && t.numel() > 0) return fail("null data pointer");
  if (!dtype_ok) return fail("wrong dtype");
  if (t.rank != static_cast<int>(dims.size())) return fail("wrong rank");
  int i = 0;
  for (int64_t d : dims) {
    if (t.shape[i] < 0) return fail("negative dim");
    if (d != kAnyDim && t.shape[i] != d) return fail("dim " + std::to_string(i));
    ++i;
  }
  if (need_contiguous && !t.is_contiguous()) return fail("not contiguous");
  return Status::ok();
}
}  // namespace

Status check_tensor(std::string_view op, std::string_view name, const TensorView& t, DType dtype,
                    std::initializer_list<int64_t> dims, bool need_contiguous) {
  return check_impl(op, name, t, t.dtype == dtype, dtype_name(dtype), dims, need_contiguous);
}

Status check_tensor2(std::string_view op, std::string_view name, const TensorView& t, DType a, DType b,
                     std::initializer_list<int64_t> dims, bool need_contiguous) {
  const std::string both = std::string(dtype_name(a)) + "|" + std::string(dtype_name(b));
  return check_impl(op, name, t, t.dtype == a || t.dtype == b, both, dims, need_contiguous);
}

}  // namespace mla
