// fp8 (e4m3) KV, 64-row tiles, warp-specialized (kernel_ws.cuh): the default, the overlap schedule with V^T
// stored by stmatrix (MLA_DECODE_FP8_VARIANT64 unset or ws_overlap_stsm).
#include "ops/cuda/sm90/decode_fp8/launch_impl_ws.cuh"

namespace mla::sm90::decode_fp8 {
template Status launch_decode_fp8_ws<WsOverlapStsm>(const Fp8DecodeParams&, dim3, cudaStream_t);
}  // namespace mla::sm90::decode_fp8
