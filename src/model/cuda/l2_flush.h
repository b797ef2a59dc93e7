#pragma once
// Evicts the L2 cache by reading a buffer of at least twice its size, so the next kernel's operands come
// from HBM as they do in a model step (each layer's weights are read once). Reads only: a written flush
// buffer would leave dirty lines whose write-back bills the next kernel. Used by the GEMM autotuner.
#include <cuda_runtime_api.h>

#include <cstddef>

#include "mla/core/status.h"

namespace mla::model::cuda_backend {

// `buf`: device memory of `bytes` (any contents; never written). bytes == 0: nothing to do.
Status flush_l2(const void* buf, size_t bytes, cudaStream_t stream);

}  // namespace mla::model::cuda_backend
