// fp8 (e4m3) KV, 64-row tiles, warp-specialized (kernel_ws.cuh): ws_t4_lazy with the TMA producer folded into
// transpose warp 0, so four warps transpose (MLA_DECODE_FP8_VARIANT64=ws_t4_fold; run W9 in bench/decode/NOTES_fp8.md).
#include "ops/cuda/sm90/decode_fp8/launch_impl_ws.cuh"

namespace mla::sm90::decode_fp8 {
template Status launch_decode_fp8_ws<WsOverlapT4Fold>(const Fp8DecodeParams&, dim3, cudaStream_t);
}  // namespace mla::sm90::decode_fp8
