#include "cache_ops/gather_study.h"

#include <cuda_runtime.h>

#include "mla/core/cuda_check.h"

namespace mla::bench {
namespace {

__device__ __forceinline__ uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7FEB352Du;
  x ^= x >> 15;
  x *= 0x846CA68Bu;
  x ^= x >> 16;
  return x;
}

// A finite bf16 / fp16 of magnitude 2^-7 .. 2^3 from 32 random bits.
__device__ __forceinline__ uint16_t rand_bf16(uint32_t h) {
  return uint16_t((h & 0x8000u) | ((120u + (h >> 16) % 11u) << 7) | (h & 0x7Fu));
}
__device__ __forceinline__ uint16_t rand_fp16(uint32_t h) {
  return uint16_t((h & 0x8000u) | ((8u + (h >> 16) % 11u) << 10) | (h & 0x3FFu));
}
// Four e4m3 codes, none NaN (magnitude 0x7F becomes 0x7E).
__device__ __forceinline__ uint32_t rand_e4m3x4(uint32_t h) {
  const uint32_t nan = ((h & 0x7F7F7F7Fu) + 0x01010101u) & 0x80808080u;  // bit 7 of each NaN byte
  return h & ~(nan >> 7);
}

// One 32-bit word of the cache per thread; its meaning depends on where it falls in its token.
__global__ void fill_cache_kernel(KvFormat f, uint32_t* cache, int64_t words, uint32_t seed) {
  const int tb_words = kv_bytes_per_token(f) / 4;
  for (int64_t w = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; w < words; w += int64_t(gridDim.x) * blockDim.x) {
    const uint32_t h = mix32(uint32_t(w) ^ mix32(uint32_t(w >> 32) + seed));
    const uint32_t h2 = mix32(h + 0x9E3779B9u);
    const int off = int(w % tb_words) * 4;  // byte offset in the token
    uint32_t v;
    switch (f) {
      case KvFormat::kBf16: v = rand_bf16(h) | uint32_t(rand_bf16(h2)) << 16; break;
      case KvFormat::kFp16: v = rand_fp16(h) | uint32_t(rand_fp16(h2)) << 16; break;
      case KvFormat::kFp8: v = rand_e4m3x4(h); break;
      default:
        if (off < Fp8DsLayout::kScalesOffset) v = rand_e4m3x4(h);
        else if (off < Fp8DsLayout::kRopeOffset) v = uint32_t(127 - 8 + int(h % 12)) << 23;  // 2^-8 .. 2^3
        else v = rand_bf16(h) | uint32_t(rand_bf16(h2)) << 16;
    }
    cache[w] = v;
  }
}

constexpr int kStreamUnroll = 8;  // 16-byte loads per lane before the stores: 4 KB per warp, as the gather

template <int K>
__global__ void __launch_bounds__(256) stream_kernel(const uint4* __restrict__ in, uint4* __restrict__ out, int64_t n) {
  const int lane = threadIdx.x % 32;
  const int64_t base = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32 * 32 * kStreamUnroll;
  uint4 v[kStreamUnroll];
#pragma unroll
  for (int u = 0; u < kStreamUnroll; ++u)
    if (base + u * 32 + lane < n) v[u] = __ldg(in + base + u * 32 + lane);
#pragma unroll
  for (int u = 0; u < kStreamUnroll; ++u) {
    if (base + u * 32 + lane >= n) continue;
#pragma unroll
    for (int j = 0; j < K; ++j) {
      uint4 y = v[u];
      y.x ^= j;  // the k copies differ, so nothing can be elided
      out[(base + u * 32) * K + j * 32 + lane] = y;
    }
  }
}

template <KvFormat F, class Out, int T, bool S>
Status launch_variant(const cache::GatherKernelParams& kp) {
  cache::gather_cache_mla_kernel<F, Out, T, S><<<cache::gather_blocks(kp.n_rows), cache::kWarpsPerBlock * 32>>>(kp);
  MLA_CUDA_TRY_LAUNCH("bench gather variant");
  return Status::ok();
}

template <KvFormat F, class Out>
Status launch_knobs(int target, bool stream, const cache::GatherKernelParams& kp) {
  if (stream) return launch_variant<F, Out, 128, true>(kp);
  if (target == 64) return launch_variant<F, Out, 64, false>(kp);
  if (target == 256) return launch_variant<F, Out, 256, false>(kp);
  return launch_variant<F, Out, 128, false>(kp);
}

template <class Out>
Status launch_format(KvFormat f, int target, bool stream, const cache::GatherKernelParams& kp) {
  switch (f) {
    case KvFormat::kBf16: return launch_knobs<KvFormat::kBf16, Out>(target, stream, kp);
    case KvFormat::kFp16: return launch_knobs<KvFormat::kFp16, Out>(target, stream, kp);
    case KvFormat::kFp8: return launch_knobs<KvFormat::kFp8, Out>(target, stream, kp);
    case KvFormat::kFp8Ds: return launch_knobs<KvFormat::kFp8Ds, Out>(target, stream, kp);
  }
  return Status::internal("bench", "unknown format");
}

}  // namespace

Status fill_cache(KvFormat f, void* cache, int64_t slots, uint32_t seed) {
  const int64_t words = slots * kv_bytes_per_token(f) / 4;
  fill_cache_kernel<<<132 * 16, 256>>>(f, static_cast<uint32_t*>(cache), words, seed);
  MLA_CUDA_TRY_LAUNCH("bench fill_cache");
  MLA_CUDA_TRY("bench", cudaDeviceSynchronize());
  return Status::ok();
}

Status time_stream(int k, const void* in, void* out, int64_t n_in_bytes, const L2Flusher& l2, const TimingOptions& t,
                   float* ms) {
  const int64_t n = n_in_bytes / 16;
  const int64_t warps = (n + 32 * kStreamUnroll - 1) / (32 * kStreamUnroll);
  const unsigned blocks = static_cast<unsigned>((warps + 7) / 8);
  const auto* src = static_cast<const uint4*>(in);
  auto* dst = static_cast<uint4*>(out);
  return time_median_ms(
      [&]() -> Status {
        if (k == 1) stream_kernel<1><<<blocks, 256>>>(src, dst, n);
        else if (k == 2) stream_kernel<2><<<blocks, 256>>>(src, dst, n);
        else stream_kernel<4><<<blocks, 256>>>(src, dst, n);
        MLA_CUDA_TRY_LAUNCH("bench stream");
        return Status::ok();
      },
      l2, t, ms);
}

Status time_gather_variant(KvFormat f, bool fp32_out, int target_bytes, bool stream_stores,
                           const cache::GatherKernelParams& kp, const L2Flusher& l2, const TimingOptions& t,
                           float* ms) {
  return time_median_ms(
      [&]() {
        return fp32_out ? launch_format<cache::Fp32>(f, target_bytes, stream_stores, kp)
                        : launch_format<cache::Bf16>(f, target_bytes, stream_stores, kp);
      },
      l2, t, ms);
}

}  // namespace mla::bench
