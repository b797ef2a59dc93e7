// fp8 (e4m3) KV, 16-row tiles without the Q-tile ring (diagnostic: MLA_DECODE_FP8_SIMPLE16=1).
#include "ops/cuda/sm90/decode_fp8/launch_impl.cuh"

namespace mla::sm90::decode_fp8 {
template Status launch_decode_fp8<1, false, false>(const Fp8DecodeParams&, dim3, cudaStream_t);
}  // namespace mla::sm90::decode_fp8
