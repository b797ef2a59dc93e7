#pragma once
// Launch of one fp8 decode kernel instantiation with its dynamic shared memory (launch_impl*.cuh).
#include <cuda_runtime_api.h>

#include "mla/core/cuda_check.h"
#include "ops/cuda/sm90/decode/clock_probe.cuh"
#include "ops/cuda/sm90/decode/phase_sums.cuh"
#include "ops/cuda/sm90/decode_fp8/params.h"

namespace mla::sm90::decode_fp8 {

// kKernel: the kernel's address (a template argument, so each instantiation raises its own limit once).
template <auto kKernel>
Status launch_fp8_kernel(const Fp8DecodeParams& p, dim3 grid, int threads, int smem, cudaStream_t stream) {
  // Raising the dynamic shared-memory limit is a function attribute, not a stream operation: done once.
  static const cudaError_t attr = cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  MLA_CUDA_TRY("mla_decode (fp8)", attr);
  kKernel<<<grid, threads, smem, stream>>>(p);
  MLA_CUDA_TRY_LAUNCH("mla_decode (fp8)");
  return Status::ok();
}

// Behind a 64-row warp-specialized launch (st: its status) in diagnostics builds, nothing otherwise: the phase-sum
// printer (-DMLA_DECODE_PHASES) and the clock probe's fold (-DMLA_DECODE_CLOCK). Static, as the kernels it launches and
// the device sums they read are static to each translation unit.
// clock_kind: the kernel's name in the probe's lines (clock_probe_fold_kernel).
static inline Status after_ws_launch(const Status& st, cudaStream_t stream, int clock_kind = 0) {
#ifdef MLA_DECODE_PHASES
  if (st.is_ok()) decode::phase_sums_print_kernel<<<1, 1, 0, stream>>>();
#endif
#ifdef MLA_DECODE_CLOCK
  if (st.is_ok()) decode::clock_probe_fold_kernel<<<1, 1, 0, stream>>>(clock_kind);
#endif
  (void)stream;
  (void)clock_kind;
  return st;
}

}  // namespace mla::sm90::decode_fp8
