// fp8 (e4m3) KV, 64-row tiles, warp-specialized (kernel_ws.cuh): the pvfirst schedule (opt-in,
// MLA_DECODE_FP8_VARIANT64=ws_stsm; the default until run W5, 0-1.5 % slower than the overlap schedule).
#include "ops/cuda/sm90/decode_fp8/launch_impl_ws.cuh"

namespace mla::sm90::decode_fp8 {
template Status launch_decode_fp8_ws<WsPvFirstStsm>(const Fp8DecodeParams&, dim3, cudaStream_t);
}  // namespace mla::sm90::decode_fp8
