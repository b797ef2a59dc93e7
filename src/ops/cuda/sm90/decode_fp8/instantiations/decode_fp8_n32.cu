// fp8 (e4m3) KV, 32-row tiles (h_q 32 s_q 1, h_q 16 s_q 2) on 8-bit wgmma (kernel_h16.cuh, RG 2).
#include "ops/cuda/sm90/decode_fp8/launch_impl_h16.cuh"

namespace mla::sm90::decode_fp8 {
Status launch_decode_fp8_n32(const Fp8DecodeParams& p, dim3 grid, cudaStream_t stream) {
  return launch_decode_fp8_tile<2>(p, grid, stream);
}
}  // namespace mla::sm90::decode_fp8
