#pragma once
// Launch of one decode kernel instantiation with its dynamic shared memory: every decode launcher's last step (16-bit,
// fp8 and fp8_ds kernels).
#include <cuda_runtime_api.h>

#include "mla/core/cuda_check.h"
#include "ops/cuda/sm90/decode/params.h"

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

// The decode parameters inside a kernel's parameter struct (the fp8 kernels' overload: decode_fp8/params.h).
inline const DecodeKernelParams& decode_params_of(const DecodeKernelParams& p) { return p; }

// The choice of every decode kernel with a fused-merge instantiation (fused_merge.cuh): kFusedKernel when the call
// carries the plan's merge counters (mla_decode.cu keeps them only for kernels that have one), else kCombineKernel,
// whose split sequences the combine grid merges. Arguments as launch_kernel's.
template <auto kFusedKernel, auto kCombineKernel, class P>
Status launch_merging_kernel(const P& p, dim3 grid, int threads, int smem, cudaStream_t stream,
                             const char* op = "mla_decode") {
  if (decode_params_of(p).merge_counters != nullptr)
    return launch_kernel<kFusedKernel>(p, grid, threads, smem, stream, op);
  return launch_kernel<kCombineKernel>(p, grid, threads, smem, stream, op);
}

}  // namespace mla::sm90::decode
