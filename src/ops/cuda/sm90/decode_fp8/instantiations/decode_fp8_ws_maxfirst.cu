// fp8 (e4m3) KV, 64-row tiles, warp-specialized: the max-first schedule (config_ws.h WsMaxFirst;
// MLA_DECODE_FP8_VARIANT64=ws_maxfirst; run W16 in bench/decode/NOTES_fp8.md).
#include "ops/cuda/sm90/decode_fp8/launch_impl_ws.cuh"

namespace mla::sm90::decode_fp8 {
template Status launch_decode_fp8_ws<WsMaxFirst>(const Fp8DecodeParams&, dim3, cudaStream_t);
}  // namespace mla::sm90::decode_fp8
