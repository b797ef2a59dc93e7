// fp8 (e4m3) KV, 64-row tiles, warp-specialized (kernel_ws.cuh): pvfirst without V^T, P.V transposed with V
// as the register operand (pv_vreg.cuh; MLA_DECODE_FP8_VARIANT64=ws_vreg).
#include "ops/cuda/sm90/decode_fp8/launch_impl_ws.cuh"

namespace mla::sm90::decode_fp8 {
template Status launch_decode_fp8_ws<WsVreg>(const Fp8DecodeParams&, dim3, cudaStream_t);
}  // namespace mla::sm90::decode_fp8
