// The warp-specialized exact-code fp8_ds kernel for 16-row tiles (kernel_ws16.cuh) and its launcher.
#include "mla/core/cuda_check.h"
#include "mla/core/env_knob.h"
#include "ops/cuda/sm90/decode_fp8ds/kernel_ws16.cuh"
#include "ops/cuda/sm90/decode_fp8ds/launch.h"

namespace mla::sm90::decode_fp8ds {
namespace {

template <int V>
Status launch_opts(const decode::DecodeKernelParams& p, dim3 grid, cudaStream_t stream) {
  constexpr int smem = ws16::layout().total;
  auto* kernel = &ws16::mla_decode_fp8ds_ws16_kernel<V>;
  // Raising the dynamic shared-memory limit is a function attribute, not a stream operation: done once.
  static const cudaError_t attr = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  MLA_CUDA_TRY("mla_decode", attr);
  kernel<<<grid, ws16::kThreads, smem, stream>>>(p);
  MLA_CUDA_TRY_LAUNCH("mla_decode");
  return Status::ok();
}

// Run F9's schedule variants (config_ws16.h Opts); unset = "base".
const EnvKnob& variant_knob() {
  static const EnvKnob k = read_env_knob("MLA_DECODE_FP8DS_WS16", {"base", "fmap", "fmap_late", "fmap_late_rope", "late"});
  return k;
}

}  // namespace

Status launch_decode_fp8ds_ws16(const decode::DecodeKernelParams& p, dim3 grid, cudaStream_t stream) {
  MLA_TRY(variant_knob().status);
  switch (variant_knob().index) {
    case 1: return launch_opts<1>(p, grid, stream);
    case 2: return launch_opts<2>(p, grid, stream);
    case 3: return launch_opts<3>(p, grid, stream);
    case 4: return launch_opts<4>(p, grid, stream);
    default: return launch_opts<0>(p, grid, stream);
  }
}

}  // namespace mla::sm90::decode_fp8ds
