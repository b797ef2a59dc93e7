// fp16 KV cache, 1 active 16-row group per CTA, mma.sync + TMA page loads (Q in registers).
#include "ops/cuda/sm90/decode/launch_impl.cuh"

namespace mla::sm90::decode {
template Status launch_decode<Fp16Traits, 1, false, true>(const DecodeKernelParams&, dim3, cudaStream_t);
}  // namespace mla::sm90::decode
