// Diagnostic knock-outs of the default 64-row kernel (config_ws.h kDiag; run W6 only, wrong results by design,
// MLA_DECODE_FP8_VARIANT64=diag1|diag2|diag3|diag4): removed again after the run.
#include "ops/cuda/sm90/decode_fp8/launch_impl_ws.cuh"

namespace mla::sm90::decode_fp8 {
template Status launch_decode_fp8_ws<WsSchedule<false, 2, 2, 1>>(const Fp8DecodeParams&, dim3, cudaStream_t);
template Status launch_decode_fp8_ws<WsSchedule<false, 2, 2, 2>>(const Fp8DecodeParams&, dim3, cudaStream_t);
template Status launch_decode_fp8_ws<WsSchedule<false, 2, 2, 3>>(const Fp8DecodeParams&, dim3, cudaStream_t);
template Status launch_decode_fp8_ws<WsSchedule<false, 2, 2, 4>>(const Fp8DecodeParams&, dim3, cudaStream_t);
}  // namespace mla::sm90::decode_fp8
