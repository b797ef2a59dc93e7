#pragma once
// Row permutations of a 2-d activation (logit-row selection, MoE token sorting, decode-row subsets):
//
//   gather_rows  : out[i, :] = x[rows[i], :]    for i < n
//   scatter_rows : out[rows[i], :] = x[i, :]    for i < n   (rows distinct)
//
// A pure copy: x and out have one dtype (bf16 or fp32) and one width.
#include "mla/core/status.h"
#include "mla/core/stream.h"
#include "mla/core/tensor.h"

namespace mla {

struct RowCopyParams {
  TensorView x;     // gather: [m, cols]; scatter: [n, cols]; bf16 | fp32, row stride >= cols
  TensorView rows;  // [n] int32 in [0, m) (gather) or [0, out rows) (scatter); an index out of range is skipped
  TensorView out;   // gather: [n, cols]; scatter: [m, cols]; dtype of x, row stride >= cols
};

namespace cuda {
// Device pointers; one warp per row, 16-byte accesses; no allocation.
Status gather_rows(const RowCopyParams& p, Stream stream);
Status scatter_rows(const RowCopyParams& p, Stream stream);
}  // namespace cuda

}  // namespace mla
