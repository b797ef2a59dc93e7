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
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "mla/core/status.h"
#include "mla/core/stream.h"
#include "mla/core/tensor.h"
#include "mla/ops/grouped_gemm.h"

namespace mla::model::cuda_backend {

constexpr int64_t kSmallMMaxRows = 256;  // the tables' rows (the decode regime; prefill stays on cuBLASLt)

struct SmallMChoices;  // measured choices per shape (small_m_gemm.cpp)

struct SmallMTables {
  int64_t max_rows = 0;
  const int32_t* offsets = nullptr;  // [max_rows + 1][2]: row t holds (0, t), one expert's offsets for t rows
  const int32_t* tiles[4] = {};      // block_m 16, 32, 64, 128: [max_rows / bm + 1][2], entry j = (0, j · bm)
  const void* flush = nullptr;       // read before each timed rep of a choice (>= 2 x L2; never written)
  size_t flush_bytes = 0;
  std::shared_ptr<SmallMChoices> choices;
};

// Fills `device` (device memory of small_m_table_bytes(max_rows) bytes) and `out`.
int64_t small_m_table_bytes(int64_t max_rows);
Status init_small_m_tables(int64_t max_rows, void* device, const void* flush, size_t flush_bytes, SmallMTables* out);

// The block_m the kernel runs for t rows of one expert when nothing was measured (MLA_DENSE_PATH=grouped).
int small_m_block_m(int64_t t);

// x [t, k] bf16 (unit column stride, row stride % 8 == 0), w [n, k] bf16 contiguous ([2n, k] gate then up for
// kSiluMul), out [t, n] bf16. t <= tables.max_rows. block_m 0: small_m_block_m(t).
Status small_m_linear(const SmallMTables& tables, const TensorView& x, const TensorView& w, GroupedEpilogue epi,
                      TensorView out, Stream stream, int block_m = 0);

// Runs the product the faster way for its shape: the grouped kernel (block_m 16, 32 or 64) or `fallback` (the
// cuBLASLt path, with silu_mul after it for kSiluMul). The first eager call of a shape (rows in a power-of-two
// bucket, n, k, epilogue, strides) times every candidate on the caller's operands, L2 flushed before each of
// 5 reps, and keeps the fastest; inside a graph capture an unmeasured shape takes the fallback (the runner's
// warm-up step measures first). MLA_DENSE_PATH=cublaslt: always the fallback; =grouped: always the kernel at
// small_m_block_m. MLA_DENSE_REPORT=1 prints each measurement to stderr.
Status small_m_run(const SmallMTables& tables, const TensorView& x, const TensorView& w, GroupedEpilogue epi,
                   TensorView out, Stream stream, const std::function<Status()>& fallback);

}  // namespace mla::model::cuda_backend
