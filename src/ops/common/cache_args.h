#pragma once
// Argument checks shared by the cache ops' validators (concat, gather): the paged cache tensor and the
// 16-byte alignment the vectorized kernels rely on.
#include <cstdint>
#include <string>
#include <string_view>

#include "mla/core/kv_format.h"
#include "mla/core/status.h"
#include "mla/core/tensor.h"

namespace mla::cache {

constexpr bool is_supported_page_size(int64_t n) { return n == 16 || n == 32 || n == 64; }

// kv_cache must be kv_cache_dtype(format) [num_pages, page_size in {16,32,64}, kv_token_elems(format)],
// contiguous, 16-byte aligned.
Status check_paged_cache(std::string_view op, const TensorView& cache, KvFormat format);

// A [rows, cols] operand read with 16-byte vector loads: unit stride along cols, row stride >= cols, base
// and row stride multiples of 16 bytes.
Status check_vector_rows(std::string_view op, std::string_view name, const TensorView& t);

// k_scale of the fp8 format: finite and > 0 (ignored by the other formats).
Status check_k_scale(std::string_view op, KvFormat format, float k_scale);

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace mla::cache
