#pragma once
// CUDA errors become Status values carrying the op name (include only from CUDA-aware code).
#include <cuda_runtime_api.h>

#include <string>

#include "mla/core/status.h"

namespace mla {

inline Status cuda_status(cudaError_t e, const char* op, const char* what) {
  if (e == cudaSuccess) return Status::ok();
  return Status::cuda(op, std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

}  // namespace mla

// MLA_CUDA_TRY(op, call): return a CUDA-error Status naming `op` if `call` fails.
#define MLA_CUDA_TRY(op, call) MLA_TRY(::mla::cuda_status((call), (op), #call))
// After a launch: configuration errors surface here, not at the next unrelated call.
#define MLA_CUDA_TRY_LAUNCH(op) MLA_TRY(::mla::cuda_status(cudaGetLastError(), (op), "kernel launch"))
