// fp8 (e4m3) KV, 64-row tiles, warp-specialized: max-first + the next S behind P.V (config_ws.h WsMaxFirstSNext;
// MLA_DECODE_FP8_VARIANT64=ws_mf_snext; run W17 in bench/decode/NOTES_fp8.md).
#include "ops/cuda/sm90/decode_fp8/launch_impl_ws.cuh"

namespace mla::sm90::decode_fp8 {
template Status launch_decode_fp8_ws<WsMaxFirstSNext>(const Fp8DecodeParams&, dim3, cudaStream_t);
}  // namespace mla::sm90::decode_fp8
