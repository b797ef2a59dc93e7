// fp8_ds KV cache, 2 active 16-row group(s) per CTA, mma.sync math on pages dequantized to bf16 (pages.cuh).
#include "ops/cuda/sm90/decode/launch_impl.cuh"

namespace mla::sm90::decode {
template Status launch_decode<Fp8DsTraits, 2, false>(const DecodeKernelParams&, dim3, cudaStream_t);
}  // namespace mla::sm90::decode
