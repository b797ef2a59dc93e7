// fp8 (e4m3) KV, 64-row tiles, warp-specialized (kernel_ws.cuh): the default, the ahead schedule with 4-load
// transpose rounds and the short softmax (config_ws.h WsAhead; MLA_DECODE_FP8_VARIANT64 unset or ws_ahead; runs W10
// and W14 in bench/decode/NOTES_fp8.md).
#include "ops/cuda/sm90/decode_fp8/launch_impl_ws.cuh"

namespace mla::sm90::decode_fp8 {
template Status launch_decode_fp8_ws<WsAhead>(const Fp8DecodeParams&, dim3, cudaStream_t);
}  // namespace mla::sm90::decode_fp8
