#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "mla/core/status.h"
#include "mla/core/tensor.h"

namespace mla {

constexpr int64_t kAnyDim = -1;

// Validates one tensor argument of an op: present, non-null, of the given dtype and rank, each dim
// equal to `dims[i]` unless that is kAnyDim, and contiguous when asked. The error names the op, the
// argument, what was expected and what was given, e.g.
// "mla_decode: q: expected bf16[?, ?, ?, 576] contiguous, got fp32[2, 1, 16, 576]".
Status check_tensor(std::string_view op, std::string_view name, const TensorView& t, DType dtype,
                    std::initializer_list<int64_t> dims, bool need_contiguous = true);

// Same, accepting either of two dtypes.
Status check_tensor2(std::string_view op, std::string_view name, const TensorView& t, DType a, DType b,
                     std::initializer_list<int64_t> dims, bool need_contiguous = true);

// "[?, ?, 576]" for messages.
std::string dims_str(std::initializer_list<int64_t> dims);

}  // namespace mla
