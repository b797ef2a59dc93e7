#pragma once
// Measurements around gather_and_maybe_dequant_cache_mla that are not the op itself (bench_cache_ops):
// realistic cache contents, a streaming "read N, write k N" ceiling for the gather's write-heavy shapes,
// and a sweep of the gather kernel's tuning knobs launched directly.
#include <cstdint>

#include "common/timing.h"
#include "mla/core/kv_format.h"
#include "mla/core/status.h"
#include "ops/cuda/cache/gather_cache_mla_kernel.cuh"

namespace mla::bench {

// Fills `slots` tokens of format f at `cache` with random finite values (seeded): bf16/fp16 of magnitude
// 2^-7..2^3, e4m3 codes other than NaN, fp8_ds tile scales 2^-8..2^3. A real cache holds no NaN codes,
// and the gather takes its slow (per-value codec) path only on words holding one.
Status fill_cache(KvFormat f, void* cache, int64_t slots, uint32_t seed);

// Median time of the streaming kernel that reads n_in_bytes and writes k * n_in_bytes (k = 1, 2, 4), laid
// out like the gather: each warp loads 32 x 8 contiguous 16-byte chunks, then stores k times as many, every
// store instruction 512 contiguous bytes. n_in_bytes must be a multiple of 16.
Status time_stream(int k, const void* in, void* out, int64_t n_in_bytes, const L2Flusher& l2, const TimingOptions& t,
                   float* ms);

// Median time of the gather kernel with explicit knobs: target read bytes in flight per lane (64, 128 or
// 256) and streaming stores. Valid (format, Out) as the op; kp as the launcher builds it.
Status time_gather_variant(KvFormat f, bool fp32_out, int target_bytes, bool stream_stores,
                           const cache::GatherKernelParams& kp, const L2Flusher& l2, const TimingOptions& t, float* ms);

}  // namespace mla::bench
