// fp8 (e4m3) KV, 64-row tiles, warp-specialized (kernel_ws.cuh): the overlap schedule with lazy O rescaling (2 ldmatrix per transpose round, as the default)
// (MLA_DECODE_FP8_VARIANT64=ws_lazy; run W8 in bench/decode/NOTES_fp8.md).
#include "ops/cuda/sm90/decode_fp8/launch_impl_ws.cuh"

namespace mla::sm90::decode_fp8 {
template Status launch_decode_fp8_ws<WsOverlapLazy>(const Fp8DecodeParams&, dim3, cudaStream_t);
}  // namespace mla::sm90::decode_fp8
