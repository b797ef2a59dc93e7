// fp8 (e4m3) KV, 16-row tiles (h_q 16, s_q 1) on 8-bit wgmma (kernel_h16.cuh).
#include "ops/cuda/sm90/decode_fp8/launch_impl_h16.cuh"

namespace mla::sm90::decode_fp8 {
Status launch_decode_fp8_h16(const Fp8DecodeParams& p, dim3 grid, cudaStream_t stream) {
  return launch_decode_fp8_tile<1>(p, grid, stream);
}
}  // namespace mla::sm90::decode_fp8
