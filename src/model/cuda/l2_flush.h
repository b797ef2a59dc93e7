#pragma once
// Evicts the L2 cache by reading a buffer of at least twice its size, so the next kernel's operands come
// from HBM as they do in a model step (each layer's weights are read once). Reads only: a written flush
// buffer would leave dirty lines whose write-back bills the next kernel. Used by the start-up choices between
// implementations: the cuBLASLt autotuner (gemm.cpp) and the decode-size dense-path choice (small_m_gemm.cpp).
#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>

#include "mla/core/status.h"

namespace mla::model::cuda_backend {

// `buf`: device memory of `bytes` (any contents; never written). bytes == 0: nothing to do.
Status flush_l2(const void* buf, size_t bytes, cudaStream_t stream);

// Median (element reps / 2 of the sorted times) milliseconds of `launch` over `reps` >= 1 runs on `stream`, each
// run after flush_l2(buf, bytes) and between two CUDA events. Synchronizes the stream once per run, so never
// inside a graph capture. `op` names the caller in errors.
Status median_ms_after_flush(const char* op, const std::function<Status()>& launch, const void* buf, size_t bytes,
                             cudaStream_t stream, int reps, float* ms);

}  // namespace mla::model::cuda_backend
