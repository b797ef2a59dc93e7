#pragma once
// Launch of one decode kernel instantiation with its dynamic shared memory: every decode launcher's last step (16-bit,
// fp8 and fp8_ds kernels).
#include <cuda_runtime_api.h>

#include <atomic>

#include "mla/core/cuda_check.h"
#include "ops/cuda/sm90/decode/head_pairs.h"
#include "ops/cuda/sm90/decode/params.h"

namespace mla::sm90::decode {

// kKernel: the kernel's address (a template argument, so each instantiation raises its own limit once); P its
// __grid_constant__ parameter struct; op names the call in errors. pairable (the 64-row kernels): unless
// MLA_DECODE_HEAD_PAIRS=off (decode_head_pairs, read here on every such launch), launch grid.y's head tiles in
// (1, 2, 1) clusters where grid.y is even and the GPU can hold every pair at once (the grid is one wave and
// must stay one: a cluster needs two free SMs of one GPC, which fewer SMs than the grid's CTAs may offer); else a
// plain launch.
template <auto kKernel, class P>
Status launch_kernel(const P& p, dim3 grid, int threads, int smem, cudaStream_t stream, const char* op = "mla_decode",
                     bool pairable = false) {
  bool pair = false;
  if (pairable) MLA_TRY(decode_head_pairs(&pair));
  // Raising the dynamic shared-memory limit is a function attribute, not a stream operation: done once.
  static const cudaError_t attr = cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  MLA_CUDA_TRY(op, attr);
  if (pair && grid.y % 2 == 0) {
    cudaLaunchAttribute cluster[1];
    cluster[0].id = cudaLaunchAttributeClusterDimension;
    cluster[0].val.clusterDim.x = 1;
    cluster[0].val.clusterDim.y = 2;
    cluster[0].val.clusterDim.z = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(1, 2, 1);
    cfg.blockDim = dim3(threads);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cfg.attrs = cluster;
    cfg.numAttrs = 1;
    // The device's pair capacity for this kernel (threads and shared memory are fixed per instantiation), asked until
    // a query succeeds; a failed one (its error cleared, so no later check reports it) means a plain launch this time.
    static std::atomic<int> known_pairs{-1};
    int pairs = known_pairs.load(std::memory_order_relaxed);
    if (pairs < 0) {
      int n = 0;
      if (cudaOccupancyMaxActiveClusters(&n, kKernel, &cfg) == cudaSuccess) {
        known_pairs.store(n, std::memory_order_relaxed);
        pairs = n;
      } else {
        (void)cudaGetLastError();
      }
    }
    if (2 * static_cast<int64_t>(pairs) >= static_cast<int64_t>(grid.x) * grid.y) {
      cfg.gridDim = grid;
      MLA_CUDA_TRY(op, cudaLaunchKernelEx(&cfg, kKernel, p));
      return Status::ok();
    }
  }
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
                             const char* op = "mla_decode", bool pairable = false) {
  if (decode_params_of(p).merge_counters != nullptr)
    return launch_kernel<kFusedKernel>(p, grid, threads, smem, stream, op, pairable);
  return launch_kernel<kCombineKernel>(p, grid, threads, smem, stream, op, pairable);
}

}  // namespace mla::sm90::decode
