// mla_decode launcher (sm90): validate, check the plan/workspace against the shapes, pick the variant,
// launch decode + combine on the caller's stream. No allocation and no host synchronization, so the
// call can be captured in a CUDA graph.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "mla/core/cuda_check.h"
#include "mla/core/env_knob.h"
#include "mla/ops/decode_timeline.h"
#include "mla/ops/mla_decode.h"
#include "ops/cuda/sm90/decode/config.h"
#include "ops/cuda/sm90/decode/head_pairs.h"
#include "ops/cuda/sm90/decode/launch.h"
#include "ops/cuda/sm90/decode/traits.h"
#include "ops/cuda/sm90/decode_fp8/launch.h"
#include "ops/cuda/sm90/decode_fp8ds/launch.h"
#include "ops/cuda/sm90/decode_fp8ds/launch_ws64.h"

namespace mla::cuda {
namespace {

using sm90::decode::DecodeKernelParams;

constexpr const char* kOp = "mla_decode";

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

Status check_plan(const MlaDecodeParams& p, const DecodePlanGeometry& g, const DecodePlanView& plan, const void* ws,
                  size_t ws_bytes) {
  const int64_t b = p.q.shape[0], s_q = p.q.shape[1], h_q = p.q.shape[2];
  if (g.batch != b || g.s_q != s_q || g.h_q != h_q)
    return Status::invalid(kOp, "plan geometry (batch " + std::to_string(g.batch) + ", s_q " + std::to_string(g.s_q) +
                                    ", h_q " + std::to_string(g.h_q) + ") does not match q " + p.q.str());
  // Narrow (16-row) tiles run only on the 16-row kernels, which have no causal rows: s_q 1.
  const bool tile_ok = g.tile_rows == kDecodeRowsPerCta || (g.tile_rows == kDecodeNarrowTileRows && s_q == 1);
  if (!tile_ok || g.num_head_tiles != (s_q * h_q + g.tile_rows - 1) / g.tile_rows || g.num_parts < 1 ||
      g.max_splits != g.batch + g.num_parts - 1)
    return Status::invalid(kOp, "plan geometry is not from decode_plan_geometry (tile_rows " +
                                    std::to_string(g.tile_rows) + ", num_head_tiles " +
                                    std::to_string(g.num_head_tiles) + ", num_parts " + std::to_string(g.num_parts) +
                                    ")");
  if (plan.parts == nullptr || plan.split_offsets == nullptr || plan.num_parts != g.num_parts)
    return Status::invalid(kOp, "plan buffers missing or plan.num_parts " + std::to_string(plan.num_parts) +
                                    " != geometry num_parts " + std::to_string(g.num_parts));
  if (ws == nullptr || ws_bytes < decode_workspace_bytes(g))
    return Status::invalid(kOp, "workspace of " + std::to_string(ws_bytes) + " bytes at " +
                                    (ws ? "non-null" : "null") + ", need " + std::to_string(decode_workspace_bytes(g)));
  if (!aligned16(p.q.data) || !aligned16(p.kv_cache.data) || !aligned16(p.out.data) || !aligned16(ws))
    return Status::invalid(kOp, "q, kv_cache, out and workspace must be 16-byte aligned");
  MLA_TRY(check_block_table_width(kOp, p.block_table, g));
  if (g.num_head_tiles > 65535 || g.batch > 65535)
    return Status::unsupported(kOp, "batch or head tiles exceed the grid limit (" + p.q.str() + ")");
  return Status::ok();
}

// Variant of 64-row tiles: the warp-specialized TMA + wgmma kernel (kernel_ws.cuh, schedule
// ws_pvfirst_slabs, the default), the 256-thread cp.async + wgmma kernel, or cp.async + mma.sync.
// MLA_DECODE_VARIANT64=ws_pvfirst_slabs|wgmma|mma_sync picks one (debugging and benchmarking;
// MLA_DECODE_FORCE_MMA_SYNC=1 still means mma_sync), read once: so the GPU suites test the default alone, and
// scripts/knob_tests.sh runs the suite's small set once on each of the others.
// MLA_DECODE_VARIANT16=ws runs the short tiles (h_q 16/32 with fewer than 48 query rows) on the chosen
// warp-specialized schedule too (rows past the tile compute and are dropped).
enum class Variant64 { kWsPvFirstSlabs, kWgmma, kMmaSync };
const EnvKnob& variant64_knob() {
  static const EnvKnob k = read_env_knob("MLA_DECODE_VARIANT64", {"ws_pvfirst_slabs", "wgmma", "mma_sync"});
  return k;
}
// MLA_DECODE_FORCE_MMA_SYNC=1 (or 0 / unset: no effect), strict like the other knobs.
const EnvKnob& force_mma_sync_knob() {
  static const EnvKnob k = read_env_knob("MLA_DECODE_FORCE_MMA_SYNC", {"0", "1"});
  return k;
}
Variant64 variant64() {
  static const Variant64 v = [] {
    if (force_mma_sync_knob().index == 1) return Variant64::kMmaSync;
    const int i = variant64_knob().index;
    return i == 1 ? Variant64::kWgmma : i == 2 ? Variant64::kMmaSync : Variant64::kWsPvFirstSlabs;
  }();
  return v;
}
// Pages prefetched into L2 ahead of the shared-memory stages (both kernels); MLA_DECODE_L2_PREFETCH=N
// overrides the default (0 turns it off), read once.
// Strict like every knob: a value outside 0..8 is an error, not a silent clamp to a different depth.
const EnvKnob& l2_prefetch_knob() {
  static const EnvKnob k = read_env_knob("MLA_DECODE_L2_PREFETCH", {"0", "1", "2", "3", "4", "5", "6", "7", "8"});
  return k;
}
int l2_prefetch_pages() { return std::max(0, l2_prefetch_knob().index); }
const EnvKnob& variant16_knob() {
  static const EnvKnob k = read_env_knob("MLA_DECODE_VARIANT16", {"ws"});
  return k;
}
bool ws_for_short_tiles() { return variant16_knob().index == 0; }

// MLA_DECODE_N16 = ws (default) | mma: 16-row tiles (h_q 16, s_q 1) on the warp-specialized wgmma kernel
// (kernel_n16ws.cuh) or on the 256-thread mma.sync kernel (kernel.cuh), the default until session 22 (H200, 3 passes
// each: ws -1.0..-1.2 us on the b32 rows, -1.2 / -2.3 / -3.7 on b128 s512 / s4096 / s8192, b1 within +-0.2; bench/
// decode/NOTES.md "Session 22"). Read on every call (one getenv), so the tests run every 16-row case on both; strict
// like every knob.
Status n16_ws(bool* ws) {
  const EnvKnob k = read_env_knob("MLA_DECODE_N16", {"ws", "mma"});
  MLA_TRY(k.status);
  *ws = k.index != 1;
  return Status::ok();
}

// MLA_DECODE_N32 (decode_fp8/kernel_family.h n32_mode): whether the 16-bit and fp8_ds formats run tiles of 32-47 rows
// on their 64-row ws kernels (every value but mma).
Status n32_ws(bool* ws) {
  sm90::decode_fp8::N32Mode m{};
  MLA_TRY(sm90::decode_fp8::n32_mode(&m));
  *ws = m != sm90::decode_fp8::N32Mode::kMma;
  return Status::ok();
}

// A 64-row kernel's output form from knob `name` = auto | tma | plain (unset: auto where unset_is_auto, else tma), read
// on every call. auto: plain on combine-merged steps that cut nearly every sequence (decode_plan_spreads_sequences).
Status plain_out_knob(const char* name, bool unset_is_auto, const DecodeKernelParams& kp, const DecodePlanGeometry& g,
                      bool* plain) {
  const EnvKnob k = read_env_knob(name, {"auto", "tma", "plain"});
  MLA_TRY(k.status);
  const bool is_auto = k.index == 0 || (k.index < 0 && unset_is_auto);
  *plain = k.index == 2 || (is_auto && kp.merge_counters == nullptr && decode_plan_spreads_sequences(g));
  return Status::ok();
}
// How the 16-bit 64-row kernel writes direct segments: MLA_DECODE_WS64_OUT = tma (default, or unset: the TMA-store
// epilogue, epilogue_tma_ws.cuh) | auto (plain stores on combine-merged steps that cut nearly every sequence,
// decode_plan_spreads_sequences: nearly every segment is a split partial there, so the TMA epilogue seldom runs; what
// it costs is the kernel's allocation, 1-2 % on h_q 128 b32 in the fp8 / fp8_ds kernels, sessions 49-50) | plain
// (every step; merged by the combine, whatever MLA_DECODE_MERGE says, as MLA_DECODE_FP8DS_WS64_OUT=plain). auto is the
// rule the fp8 and fp8_ds 64-row kernels take by default; for bf16 / fp16 it waits for its measurement
// (bench/decode/NOTES.md "Session 56"). Read on every call, so the tests run every form.
Status ws64_plain_out(const DecodeKernelParams& kp, const DecodePlanGeometry& g, bool* plain) {
  return plain_out_knob("MLA_DECODE_WS64_OUT", /*unset_is_auto=*/false, kp, g, plain);
}

template <class Traits>
Status launch_ws(DecodeKernelParams& kp, const DecodePlanGeometry& g, int64_t num_pages, dim3 grid, bool plain,
                 cudaStream_t stream) {
  using namespace sm90::decode;
  if (plain) kp.merge_counters = nullptr;  // the plain-store form has no fused merge: launch() adds the combine
  MLA_TRY(encode_tensor_maps(&kp, num_pages, static_cast<int64_t>(g.batch) * kp.rows));
  return launch_decode_ws<Traits, true, true>(kp, grid, stream, plain);
}

// The 16-bit kernels; the warp-specialized ones (kWs, kN16Ws) can merge split sequences themselves (fused_merge.cuh).
enum class Kernel16 { kWs, kN16Ws, kMma16, kMma32, kMma64, kWgmma64 };

template <class Traits>
Status launch(DecodeKernelParams& kp, const DecodePlanGeometry& g, int64_t num_pages, cudaStream_t stream) {
  using namespace sm90::decode;
  MLA_TRY(variant64_knob().status);
  MLA_TRY(variant16_knob().status);
  MLA_TRY(force_mma_sync_knob().status);
  MLA_TRY(l2_prefetch_knob().status);
  bool n16ws = false, ws64_plain = false;
  MLA_TRY(n16_ws(&n16ws));  // checked on every call, whatever the rows, as the other knobs
  MLA_TRY(ws64_plain_out(kp, g, &ws64_plain));
  const dim3 grid(g.num_parts, g.num_head_tiles);
  // Active 16-row groups: a single short tile (h_q 16/32 with few query rows) skips the empty groups.
  const int rows_first_tile = kp.rows < g.tile_rows ? kp.rows : g.tile_rows;
  const int groups = rows_first_tile / 16;
  // Narrow tiles (decode_plan_narrow_tiles) always run the warp-specialized 16-row kernel, whatever MLA_DECODE_N16 /
  // VARIANT16 say (the others take 64-row tile offsets); merge_counters_for left their merge to the combine.
  const bool narrow = g.tile_rows == kDecodeNarrowTileRows;
  const bool ws64 = variant64() != Variant64::kWgmma && variant64() != Variant64::kMmaSync;
  bool ws32 = false;
  MLA_TRY(n32_ws(&ws32));
  // 3 groups run a 64-row kernel: kWs computes rows of the next sequence's q in the 4th (finite, never written; 2
  // groups on kWs: the 3rd and 4th), kMma64 leaves one warp row idle, kWgmma64 computes zeros there.
  const Kernel16 k = narrow ? Kernel16::kN16Ws
                     : ws64 && (ws_for_short_tiles() || (groups == 2 && ws32)) ? Kernel16::kWs
                     : groups == 1 ? (n16ws && kp.rows == 16 ? Kernel16::kN16Ws : Kernel16::kMma16)
                     : groups == 2 ? Kernel16::kMma32
                     : variant64() == Variant64::kMmaSync ? Kernel16::kMma64
                     : variant64() == Variant64::kWgmma   ? Kernel16::kWgmma64
                                                          : Kernel16::kWs;
  if (k != Kernel16::kWs && k != Kernel16::kN16Ws) kp.merge_counters = nullptr;  // these need the combine
  switch (k) {
    case Kernel16::kWs:
      MLA_TRY(launch_ws<Traits>(kp, g, num_pages, grid, ws64_plain, stream));
      break;
    case Kernel16::kN16Ws:
      MLA_TRY(
          encode_tensor_map_kv_slabs16(&kp, num_pages, kN16WsGroupSlabs));  // kernel_n16ws.cuh: + the slab-group map
      MLA_TRY(encode_tensor_map_q16(&kp, static_cast<int64_t>(g.batch) * kp.rows));
      MLA_TRY(launch_decode_n16ws<Traits>(kp, grid, stream));
      break;
    case Kernel16::kMma16:
      MLA_TRY(encode_tensor_map_kv_slabs16(&kp, num_pages));  // pages.cuh TmaPages
      MLA_TRY((launch_decode<Traits, 1, false>(kp, grid, stream)));
      break;
    case Kernel16::kMma32:
      MLA_TRY((launch_decode<Traits, 2, false>(kp, grid, stream)));
      break;
    case Kernel16::kMma64:
      MLA_TRY((launch_decode<Traits, 4, false>(kp, grid, stream)));
      break;
    case Kernel16::kWgmma64:
      MLA_TRY((launch_decode<Traits, 4, true>(kp, grid, stream)));
      break;
  }
  return kp.merge_counters != nullptr ? Status::ok() : launch_combine<Traits>(kp, stream);
}

// 16-row fp8_ds tiles run the warp-specialized exact-code kernel (sm90/decode_fp8ds/kernel_ws16.cuh);
// MLA_DECODE_FP8DS_RG1=dequant runs them on the dequantizing bf16 kernel (comparison).
const EnvKnob& fp8ds_rg1_knob() {
  static const EnvKnob k = read_env_knob("MLA_DECODE_FP8DS_RG1", {"dequant"});
  return k;
}
bool fp8ds_rg1_dequant() { return fp8ds_rg1_knob().index == 0; }
// 64-row fp8_ds tiles of h_q >= 64 run the owner-converts kernel (sm90/decode_fp8ds/kernel_ws64.cuh; fp8_ds run G5:
// 3-6 % under the producer-converts one on the h128 rows with s >= 4096); MLA_DECODE_FP8DS_WS64=producer runs the
// producer-converts kernel (kernel_ws.cuh + producer_ws_fp8ds.cuh) instead, which 48/64-row tiles of h_q 16/32
// (s_q > 1) keep: the owner-converts kernel was measured and tested on h_q 64/128 only.
const EnvKnob& fp8ds_ws64_knob() {
  static const EnvKnob k = read_env_knob("MLA_DECODE_FP8DS_WS64", {"producer"});
  return k;
}
bool fp8ds_owner_converts(int h_q) { return h_q >= 64 && fp8ds_ws64_knob().index != 0; }
// How the owner-converts kernel writes direct segments: `auto` (or unset) through its TMA-store epilogue, but with
// plain stores on steps whose sequences are all cut and merged by the combine (decode_plan_spreads_sequences: every
// segment is a split partial there, and the TMA epilogue's code cost the kernel 1-2 % on h_q 128 b32, session 49 c6 /
// c8); `tma` / `plain` force one form (`plain` merges by the combine). Read on every call, so the tests run both.
Status fp8ds_ws64_plain_out(const DecodeKernelParams& kp, const DecodePlanGeometry& g, bool* plain) {
  return plain_out_knob("MLA_DECODE_FP8DS_WS64_OUT", /*unset_is_auto=*/true, kp, g, plain);
}

// fp8_ds: the bf16 kernels with dequantizing page loaders (sm90/decode/pages.cuh, producer_ws_fp8ds.cuh) or
// consumers (decode_fp8ds/kernel_ws64.cuh). 48/64-row tiles on the producer-converts kernel run the
// ws_pvfirst_slabs schedule, the one whose per-slab full barriers the slab-by-slab dequantization needs (the
// owner-converts kernel has its own, on the same barriers); MLA_DECODE_VARIANT* and the L2 prefetch (sized for
// 16-bit pages) do not apply.
Status launch_fp8ds(DecodeKernelParams& kp, const DecodePlanGeometry& g, int64_t num_pages, cudaStream_t stream) {
  using namespace sm90::decode;
  MLA_TRY(fp8ds_rg1_knob().status);
  MLA_TRY(fp8ds_ws64_knob().status);
  kp.l2_prefetch = 0;
  const dim3 grid(g.num_parts, g.num_head_tiles);
  const int groups = (kp.rows < g.tile_rows ? kp.rows : g.tile_rows) / 16;
  bool ws32 = false;
  MLA_TRY(n32_ws(&ws32));
  // A warp-specialized 64-row kernel: tiles of 48 or more rows, and of 32-47 where MLA_DECODE_N32 picks ws.
  const bool ws = groups > 2 || (groups == 2 && ws32);
  const bool owner_converts = ws && fp8ds_owner_converts(kp.h_q);
  // Narrow tiles (decode_plan_narrow_tiles) always run the exact-code 16-row kernel (merged by the combine:
  // merge_counters_for).
  const bool narrow = g.tile_rows == kDecodeNarrowTileRows;
  const bool exact16 = narrow || (groups == 1 && kp.rows == 16 && !fp8ds_rg1_dequant());
  // Only the owner-converts and exact-code kernels have the fused merge (a kFused instantiation each; the former not in
  // its plain-store form); the others leave it to the combine.
  bool plain_out = false;
  if (owner_converts && !exact16) MLA_TRY(fp8ds_ws64_plain_out(kp, g, &plain_out));
  if ((!owner_converts && !exact16) || plain_out) kp.merge_counters = nullptr;
  if (exact16) {
    MLA_TRY(sm90::decode_fp8ds::launch_decode_fp8ds_ws16(kp, grid, stream));  // exact codes, wgmma
  } else if (groups == 1) {
    MLA_TRY((launch_decode<Fp8DsTraits, 1, false>(kp, grid, stream)));
  } else if (!ws) {
    MLA_TRY((launch_decode<Fp8DsTraits, 2, false>(kp, grid, stream)));
  } else {
    MLA_TRY(encode_tensor_maps_fp8ds(&kp, num_pages, static_cast<int64_t>(g.batch) * kp.rows));
    if (owner_converts) {
      MLA_TRY(sm90::decode_fp8ds::launch_decode_fp8ds_ws64(kp, grid, stream, plain_out));
    } else {
      MLA_TRY((launch_decode_ws<Fp8DsTraits, true, true>(kp, grid, stream)));
    }
  }
  return kp.merge_counters != nullptr ? Status::ok() : launch_combine<Bf16Traits>(kp, stream);  // bf16 out, as bf16 KV
}

// Who merges the split sequences: the decode kernel itself when the caller passes the plan's merge_counters
// (fused_merge.cuh; the caller decides, decode_plan_wants_fused_merge; only the warp-specialized 16-bit kernels, the
// fp8 wgmma kernels and fp8_ds's exact-code 16-row and owner-converts kernels have it, the others launch the combine
// anyway), else the combine grid. MLA_DECODE_MERGE (decode_merge_knob, below) overrides it for tests and benchmarks;
// read on every call (the tests run cases both ways), strict like every knob.
Status merge_counters_for(const DecodePlanGeometry& g, const DecodePlanView& plan, int32_t** counters) {
  const EnvKnob k = decode_merge_knob();
  MLA_TRY(k.status);
  const bool fused = k.index != 1;
  if (k.index == 2 && plan.merge_counters == nullptr)
    return Status::invalid(kOp, "MLA_DECODE_MERGE=fused needs the plan's merge_counters [" +
                                    std::to_string(decode_plan_counters(g)) + "] (DecodePlanView)");
  // fused_merge.cuh merges 64-row head tiles: narrow tiles (decode_plan_narrow_tiles) always leave it to the combine.
  *counters = fused && g.tile_rows == kDecodeRowsPerCta ? plan.merge_counters : nullptr;
  return Status::ok();
}

}  // namespace

EnvKnob decode_merge_knob() { return read_env_knob("MLA_DECODE_MERGE", {"auto", "combine", "fused"}); }

Status mla_decode(const MlaDecodeParams& p, const DecodePlanGeometry& g, const DecodePlanView& plan, void* workspace,
                  size_t workspace_bytes, Stream stream) {
  MLA_TRY(validate_mla_decode(p));
  if (p.format != KvFormat::kBf16 && p.format != KvFormat::kFp16 && p.format != KvFormat::kFp8 &&
      p.format != KvFormat::kFp8Ds)
    return Status::unsupported(kOp, std::string("format ") + std::string(kv_format_name(p.format)) +
                                        " has no CUDA kernel (bf16, fp16, fp8 and fp8_ds do)");
  MLA_TRY(check_plan(p, g, plan, workspace, workspace_bytes));
  bool pairs = false;  // read again by launch_kernel for the 64-row kernels; checked here on every call, whatever runs
  MLA_TRY(sm90::decode::decode_head_pairs(&pairs));

  DecodeKernelParams kp{};
  kp.q = p.q.data;
  kp.kv_cache = p.kv_cache.data;
  kp.block_table = p.block_table.ptr<const int32_t>();
  kp.seqlens = p.seqlens.ptr<const int32_t>();
  kp.out = p.out.data;
  kp.lse = p.lse.ptr<float>();
  kp.o_accum = static_cast<float*>(workspace);
  kp.lse_accum = reinterpret_cast<float*>(static_cast<uint8_t*>(workspace) + decode_workspace_lse_offset(g));
  kp.parts = plan.parts;
  kp.split_offsets = plan.split_offsets;
  MLA_TRY(merge_counters_for(g, plan, &kp.merge_counters));
  kp.batch = g.batch;
  kp.s_q = g.s_q;
  kp.h_q = g.h_q;
  kp.rows = g.s_q * g.h_q;
  kp.block_table_stride = static_cast<int>(p.block_table.shape[1]);
  kp.causal = p.causal && g.s_q > 1 ? 1 : 0;
  kp.softmax_scale = p.softmax_scale;
  kp.scale_log2 = p.softmax_scale * 1.4426950408889634f;
  kp.l2_prefetch = l2_prefetch_pages();
#ifdef MLA_DECODE_TIMELINE
  kp.timeline = decode_timeline();  // diagnostics (bench_decode --timeline), normally nullptr
#endif

  auto* s = reinterpret_cast<cudaStream_t>(stream);
  if (p.format == KvFormat::kFp8) {
    // Scores are raw e4m3 dot products: fold q_scale * k_scale into the softmax scale (lse stays in the
    // caller's units); the output is scaled by k_scale in the kernel's epilogue (src/ops/cuda/sm90/decode_fp8).
    kp.softmax_scale = p.softmax_scale * p.q_scale * p.k_scale;
    kp.scale_log2 = kp.softmax_scale * 1.4426950408889634f;
    sm90::decode_fp8::N32Mode n32{};
    MLA_TRY(sm90::decode_fp8::n32_mode(&n32));
    return sm90::decode_fp8::run_decode_fp8(kp, p.k_scale, g, p.kv_cache.shape[0], n32, s);
  }
  const int64_t num_pages = p.kv_cache.shape[0];
  if (p.format == KvFormat::kFp8Ds) return launch_fp8ds(kp, g, num_pages, s);
  if (p.format == KvFormat::kFp16) return launch<sm90::decode::Fp16Traits>(kp, g, num_pages, s);
  return launch<sm90::decode::Bf16Traits>(kp, g, num_pages, s);
}

}  // namespace mla::cuda
