// fp8 (e4m3) KV, 32-row tiles.
#include "ops/cuda/sm90/decode_fp8/launch_impl.cuh"

namespace mla::sm90::decode_fp8 {
template Status launch_decode_fp8<2>(const Fp8DecodeParams&, dim3, cudaStream_t);
}  // namespace mla::sm90::decode_fp8
