#pragma once
// Dense GEMM through cuBLASLt for the CUDA backend: bf16 operands, fp32 accumulation, bf16 or fp32 output,
// row-major views, optionally batched with constant strides (the per-head products of weight absorption).
// One handle and one workspace, created once with the backend; nothing is allocated on the device per
// call. Descriptors and the heuristic's algorithm are cached per shape (and per operand alignment): the
// heuristic query costs tens of microseconds, more than a small decode GEMM itself.
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
};

class Gemm {
 public:
  Gemm();
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // workspace: device memory owned by the caller, kept for the Gemm's lifetime.
  Status init(void* workspace, size_t workspace_bytes);
  // `op` names the caller in errors ("linear", "mla_attention W_UK", ...).
  Status run(const char* op, const GemmArgs& g, Stream stream);

 private:
  struct Cache;  // descriptors and the chosen algorithm per shape (gemm.cpp)
  std::unique_ptr<Cache> cache_;
  void* handle_ = nullptr;  // cublasLtHandle_t
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

}  // namespace mla::model::cuda_backend
