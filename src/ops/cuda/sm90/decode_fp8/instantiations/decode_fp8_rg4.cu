// fp8 (e4m3) KV, 64-row tiles.
#include "ops/cuda/sm90/decode_fp8/launch_impl.cuh"

namespace mla::sm90::decode_fp8 {
template Status launch_decode_fp8<4>(const Fp8DecodeParams&, dim3, cudaStream_t);
}  // namespace mla::sm90::decode_fp8
