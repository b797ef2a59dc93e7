// fp8 (e4m3) KV, 64-row tiles, warp-specialized (kernel_ws.cuh): the overlap schedule with V^T stored by
// stmatrix in 2-load rounds, the default before run W10 (MLA_DECODE_FP8_VARIANT64=ws_overlap_stsm; opt-in).
#include "ops/cuda/sm90/decode_fp8/launch_impl_ws.cuh"

namespace mla::sm90::decode_fp8 {
template Status launch_decode_fp8_ws<WsOverlapStsm>(const Fp8DecodeParams&, dim3, cudaStream_t);
}  // namespace mla::sm90::decode_fp8
