#pragma once
// Dense GEMM through cuBLASLt for the CUDA backend: bf16 operands, fp32 accumulation, bf16 or fp32 output,
// row-major views, optionally batched with constant strides (the per-head products of weight absorption).
// One handle and one workspace, created once with the backend; nothing is allocated on the device per
// call. Descriptors and the chosen algorithm are cached per shape (and per operand alignment): the
// heuristic query costs tens of microseconds, more than a small decode GEMM itself.
//
// Autotuning (decode shapes; off by default since H200 run 1 of bench/model/NOTES_step.md moved no step beyond
// noise — GemmTuneOptions::enabled or MLA_GEMM_TUNE=1 turn it on): cuBLASLt's heuristic ranks algorithms by a model,
// and for the skinny weight-streaming products of a decode step (m <= 256 rows against a [n, 2048] weight) its first
// choice can leave most SMs idle. So the first call of such a shape times the heuristic's top candidates on the
// caller's own operands, each rep after an L2 flush (the weights of a real step come from HBM), and keeps
// the fastest. A tuned algorithm is shared by every m in the same power-of-two bucket (checked with
// cublasLtMatmulAlgoCheck), so an eager engine that sees many batch sizes tunes at most 9 times per shape.
// Tuning synchronizes the stream once per new shape and never runs inside a graph capture (the heuristic's
// choice serves the capture, and the shape is tuned at its next eager call).
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "mla/core/dtype.h"
#include "mla/core/status.h"
#include "mla/core/stream.h"

namespace mla::model::cuda_backend {

// C[i][m, n] = A[i][m, k] · op(B[i])  for i < batch, all row-major with leading dims in elements.
struct GemmArgs {
  const void* a = nullptr;  // bf16 [m, k], row stride lda
  int64_t lda = 0, stride_a = 0;
  const void* b = nullptr;  // bf16 [n, k] (b_is_nk: an nn.Linear weight, op = transpose) or [k, n], row stride ldb
  int64_t ldb = 0, stride_b = 0;
  bool b_is_nk = true;
  void* c = nullptr;        // [m, n] of c_dtype (bf16 | fp32), row stride ldc
  int64_t ldc = 0, stride_c = 0;
  DType c_dtype = DType::kBf16;
  int64_t m = 0, n = 0, k = 0;
  int batch = 1;
  bool tune = true;  // false: the heuristic's first choice (a shape seen once, e.g. one MoE expert's row count)
};

struct GemmTuneOptions {
  bool enabled = false;         // MLA_GEMM_TUNE=1 / =0 in the environment overrides it (read per call). Off by
                                // default: on the H200 it moved no decode step by more than noise (NOTES_step.md)
  int64_t max_m = 256;          // rows up to which a shape is tuned: the decode regime
  int candidates = 8;           // heuristic results timed
  int reps = 5;                 // timed reps per candidate (median), after one warm-up call
  const void* flush = nullptr;  // device memory read (never written) before each timed rep; nullptr: no flush
  size_t flush_bytes = 0;       // >= 2 x L2 for a cold cache
};

class Gemm {
 public:
  Gemm();
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // workspace: device memory owned by the caller, kept for the Gemm's lifetime.
  Status init(void* workspace, size_t workspace_bytes, const GemmTuneOptions& tune = {});
  // `op` names the caller in errors ("linear", "mla_attention W_UK", ...).
  Status run(const char* op, const GemmArgs& g, Stream stream);
  // How the last run() chose its algorithm: "heuristic", "tuned i/n" (candidate i of n won), "bucket".
  const char* last_choice() const { return last_choice_; }

 private:
  struct Cache;  // descriptors and the chosen algorithm per shape (gemm.cpp)
  // Picks the algorithm of a new tunable shape (plan: gemm.cpp's Plan; stream: cudaStream_t).
  Status settle(const char* op, const GemmArgs& g, const std::array<int64_t, 16>& key, void* plan, void* stream);
  std::unique_ptr<Cache> cache_;
  void* handle_ = nullptr;  // cublasLtHandle_t
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  GemmTuneOptions tune_;
  const char* last_choice_ = "";
  char choice_buf_[32] = {};
};

}  // namespace mla::model::cuda_backend
