#pragma once
// Dense products of a few rows (a decode step's t <= 256 tokens) on the routed experts' grouped-GEMM kernel,
// run as a single "expert": out[t, n] = x[t, k] · w[n, k]ᵀ, or with the SiLU·mul epilogue over a [2n, k]
// gate|up weight (the shared experts: one launch instead of a GEMM, silu_mul and a re-read of 2n columns).
//
// Why: at these sizes the product streams its weights; the grouped kernel's 16/32-row tiles spread an
// [n, k] weight over n / 64 × ceil(t / bm) CTAs with an 8-stage cp.async ring, where cuBLASLt's 64–128-row
// tiles leave most SMs idle for n of a few thousand (bench/dense measures both).
//
// The kernel reads its (expert, first row) tiles and the expert's row range from device memory; for one
// expert those depend on t only, so they are precomputed once for every t up to max_rows (a few hundred
// KB) and a launch needs no upload: capturable in a CUDA graph.
#include <cstdint>

#include "mla/core/status.h"
#include "mla/core/stream.h"
#include "mla/core/tensor.h"
#include "mla/ops/grouped_gemm.h"

namespace mla::model::cuda_backend {

constexpr int64_t kSmallMMaxRows = 256;  // the tables' rows (the decode regime; prefill stays on cuBLASLt)

struct SmallMTables {
  int64_t max_rows = 0;
  const int32_t* offsets = nullptr;  // [max_rows + 1][2]: row t holds (0, t), one expert's offsets for t rows
  const int32_t* tiles[4] = {};      // block_m 16, 32, 64, 128: [max_rows / bm + 1][2], entry j = (0, j · bm)
};

// Fills `device` (device memory of small_m_table_bytes(max_rows) bytes) and `out`.
int64_t small_m_table_bytes(int64_t max_rows);
Status init_small_m_tables(int64_t max_rows, void* device, SmallMTables* out);

// The block_m the kernel runs for t rows of one expert.
int small_m_block_m(int64_t t);

// Whether linear(x, w) → out runs here: MLA_DENSE_PATH=grouped (read per call; default and =cublaslt: no),
// bf16 out, t <= max_rows, and the kernel's alignment rules.
bool small_m_eligible(const SmallMTables& tables, const TensorView& x, const TensorView& w, const TensorView& out,
                      GroupedEpilogue epi);

// x [t, k] bf16 (unit column stride, row stride % 8 == 0), w [n, k] bf16 contiguous ([2n, k] gate then up for
// kSiluMul), out [t, n] bf16. t <= tables.max_rows.
Status small_m_linear(const SmallMTables& tables, const TensorView& x, const TensorView& w, GroupedEpilogue epi,
                      TensorView out, Stream stream);

}  // namespace mla::model::cuda_backend
