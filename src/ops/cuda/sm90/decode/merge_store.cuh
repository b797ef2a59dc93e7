#pragma once
// Stores of merged rows, shared by the combine kernels (combine.cu) and the decode kernels' fused merge
// (fused_merge.cuh): a merged value read at a partials offset (partials.h order) goes to its logical columns of out.
#include <cstdint>

#include "mla/core/mla_shapes.h"
#include "ops/cuda/sm90/decode/params.h"
#include "ops/cuda/sm90/decode/partials.h"

namespace mla::sm90::decode {

// Logical columns (col, col + 1) of row `row` of sequence b, packed to the output's 16-bit type.
template <class Traits>
__device__ __forceinline__ void store_pair(const DecodeKernelParams& p, int b, int row, int col, float2 v) {
  uint16_t* out = static_cast<uint16_t*>(p.out) + (static_cast<int64_t>(b) * p.rows + row) * kDimV + col;
  *reinterpret_cast<uint32_t*>(out) = Traits::pack(v.x, v.y);
}

// The merged float4 read at partials offset off (a multiple of 4): two pairs, each to its logical columns.
template <class Traits>
__device__ __forceinline__ void store_partial_quad(const DecodeKernelParams& p, int b, int row, int off, float4 v) {
  store_pair<Traits>(p, b, row, partial_pair_col(off), make_float2(v.x, v.y));
  store_pair<Traits>(p, b, row, partial_pair_col(off + 2), make_float2(v.z, v.w));
}

}  // namespace mla::sm90::decode
