// fp8 (e4m3) KV, 64-row tiles, S on wgmma (opt-in: MLA_DECODE_FP8_VARIANT64=wgmma_s).
#include "ops/cuda/sm90/decode_fp8/launch_impl.cuh"

namespace mla::sm90::decode_fp8 {
template Status launch_decode_fp8<4, true>(const Fp8DecodeParams&, dim3, cudaStream_t);
}  // namespace mla::sm90::decode_fp8
