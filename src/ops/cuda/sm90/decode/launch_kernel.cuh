#pragma once
// Launch of one decode kernel instantiation with its dynamic shared memory: every decode launcher's last step (16-bit,
// fp8 and fp8_ds kernels).
#include <cuda_runtime_api.h>

#include "mla/core/cuda_check.h"

namespace mla::sm90::decode {

// kKernel: the kernel's address (a template argument, so each instantiation raises its own limit once); P its
// __grid_constant__ parameter struct; op names the call in errors.
template <auto kKernel, class P>
Status launch_kernel(const P& p, dim3 grid, int threads, int smem, cudaStream_t stream, const char* op = "mla_decode") {
  // Raising the dynamic shared-memory limit is a function attribute, not a stream operation: done once.
  static const cudaError_t attr = cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  MLA_CUDA_TRY(op, attr);
  kKernel<<<grid, threads, smem, stream>>>(p);
  MLA_CUDA_TRY_LAUNCH(op);
  return Status::ok();
}

}  // namespace mla::sm90::decode
