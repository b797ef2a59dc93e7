#pragma once
// Host-side checks shared by the model's small CUDA ops (embedding, RMSNorm, RoPE, SiLU·mul, row gathers,
// MoE routing and combine). Their activations are 2-d [rows, cols] views with a unit column stride and a
// row stride >= cols; the kernels move 8 elements per 16-byte (bf16) or 32-byte (fp32) access, so cols,
// the row stride and the base address must allow that.
#include <initializer_list>
#include <string>

#include "mla/core/status.h"
#include "mla/core/tensor.h"

namespace mla::model_ops {

// A 2-d view of one of `dtypes`, shape [rows, cols] (-1: any), unit column stride, row stride >= cols,
// cols and row stride multiples of 8, 16-byte aligned base.
Status check_rows_view(const char* op, const char* name, const TensorView& v, std::initializer_list<DType> dtypes,
                       int64_t rows, int64_t cols);
// A contiguous 1-d or 2-d index/scale array of `dtype` with `numel` elements.
Status check_array(const char* op, const char* name, const TensorView& v, DType dtype, int64_t numel);

}  // namespace mla::model_ops
