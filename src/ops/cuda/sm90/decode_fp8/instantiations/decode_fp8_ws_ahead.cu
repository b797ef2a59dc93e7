// fp8 (e4m3) KV, 64-row tiles, warp-specialized (kernel_ws.cuh): the ahead schedule with 4-load transpose rounds and
// the short softmax, Q from shared memory in every S step (config_ws.h WsAhead; MLA_DECODE_FP8_VARIANT64=ws_ahead;
// the default until run W17; runs W10, W14 and W17-W18 in bench/decode/NOTES_fp8.md).
#include "ops/cuda/sm90/decode_fp8/launch_impl_ws.cuh"

namespace mla::sm90::decode_fp8 {
template Status launch_decode_fp8_ws<WsAhead>(const Fp8DecodeParams&, dim3, cudaStream_t);
}  // namespace mla::sm90::decode_fp8
