// Decode benchmark: the ANCHORS.md grid timed the way the anchors were (ANCHORS.md "How the anchor was
// timed"): paged cache of 64-token pages, block table a random permutation of pages, q and K from
// N(0, 1), s_q 1, every sequence = seqlen; the plan is computed beforehand and reused; one decode call =
// decode kernel + combine, captured in a CUDA graph; a 256 MB memset between calls evicts L2; median
// over --reps calls. Rows print in DESIGN.md §6 column order.
//
//   bench_decode [--format bf16|fp16|fp8|fp8_ds] [--rows 1,2,18 | 1-9] [--reps N] [--hints on|off|ab] [--timeline]
//                [--parts N] [--tune SEQ,SPLIT,MIN[,SHORT]] [--price N] [--shape H,B,S[,SQ] ...] [--prewarm
//                none|same|other|FORMAT]
//                [--flush memset|read|memset0|fill] [--pad KIB] [--cache-offset KIB] [--churn MIB] [--addresses]
//                [--touch KIB] [--l2-pages N] [--unrolled N] [--vs FORMAT]
//                (mlaserve bench decode ...)
// --vs FORMAT: each row timed again in FORMAT right after (its own data, the same shape and method), as two more
// columns, FORMAT's us and FORMAT us / ours: issue 4's ratio of fp8 to our own bf16 (`--format fp8 --vs bf16`).
// --hints: the plan's start hints (plan_decode.h fields 5-7) as the engine gets them (on, the default), cleared
// to -1 after the plan so every CTA loads seqlens and the block table itself (off), or ab: both on the same
// data and graph, interleaved on / off / on / off, printed as two extra columns per variant.
// --timeline: after a row's timings, one more graph of the call with the per-CTA globaltimer stamps of
// mla/ops/decode_timeline.h, replayed like a timed call; a summary line per row (stdout) and every CTA's
// stamps (stderr), with the pages of each CTA's part (read back from the plan) and a tail summary: the CTAs'
// ends grouped by their page count (plan inequality: more pages end later; bandwidth unfairness: equal pages,
// different ends) and how long the combine runs after the last decode CTA.
// --parts N: N CTA columns per head tile instead of the geometry's num_sms / head tiles (fewer, fuller CTAs;
// mla_decode accepts any num_parts >= 1 whose max_splits matches); --tune: the plan's DecodePlanTuning
// (seq_cost, split_cost, min_part_cost[, short_step_pages]; default 4,4,1,2; --tune 4,4,1,0 is the plan before session
// 33's short-step rule); --price N: the geometry's split_price replaced by N.
// All three are experiments: the engine uses the defaults. --shape H_Q,BATCH,SEQLEN[,S_Q] (repeatable): time these
// shapes instead of the grid's rows (no anchor: plan experiments off the grid, e.g. h_q 64 or small batches; S_Q 2-4
// is causal MTP / speculative decode, printed in an s_q column, its FLOPs counting only the visible keys; any SEQLEN,
// the last page partly filled when it is not a multiple of 64); with --rows
// it is an error (the rows would be ignored). Every parse error repeats the value it rejects.
// --prewarm (experiment): what warm kernel code is worth. After each flush, outside the events, one call of the same
// shape on a few pages of its own, in this format (same: the kernels' code in L2 and the SMs' instruction caches),
// another (other: bf16 <-> fp16, fp8 / fp8_ds -> bf16: neither, and the timed kernels' code evicted from the
// instruction caches), or a named one (fp8_ds before bf16 warms only the shared combine kernel). Session 13: at
// h_q 128 batch 1 a cold instruction cache costs 2-5 us per call, L2-cold code (the anchors' timing) 0.2-0.5 us.
// --flush read (experiment): the L2 flush between calls is a 256 MB read (L2 left clean) instead of the anchors'
// memset, whose dirty lines the timed call's reads write back (bench_stream prices that share); not comparable to
// the anchors, it says what a change does apart from that write-back. --flush memset0 / fill (experiment): the memset
// always writing zeros, or a kernel storing 256 MB of zeros as torch's zero_() does; both time the memory-bound rows
// as the default memset does, the fill kernel reads five long h_q 128 rows 0.9-1.7 % slower (session 18).
// --pad KIB / --cache-offset KIB / --churn MIB (experiments): the row's buffers placed elsewhere -- after a KIB
// allocation held for the row, the cache view KIB into a larger allocation, or into the addresses of a MIB allocation
// freed just before (as after a big row) -- to tell what placement alone moves from what a change
// does (session 34: two binaries of the same decode SASS timed one row 1.5 us apart, every pass); --addresses prints
// each row's buffer addresses (stderr).
// --touch KIB (experiment): after each flush, outside the events, a kernel loading one word every KIB of the row's
// KV cache. Session 42: no row moves with warm translations (64 KiB or 2 MiB apart), but the grid run's row 13
// (layout B of session 34) drops 1.3 us with any kernel at all between the memset and the call, loads or none.
// --l2-pages N (experiment): the block table names only N distinct pages, so the row reads nearly all its pages from
// L2: the compute-bound page on a machine whose DRAM would bound it (Options::l2_pages; not an anchor timing).
// --unrolled N (experiment): one graph of N x (flush, call) minus one of N x flush, per call (Options::unrolled):
// what a row reads without the graph launch and the events around each call (session 43).
// The rows are burst numbers: --reps 30 is at most ~20 ms of load, though the busy rows already run power-capped
// (h_q 128 at 1625-1760 MHz, session 20's clock probe); hundreds of reps in a row bring the clock further down and
// the long h_q 128 rows up to 15 % slower (docs/mla_decode.md).
//
// fp8: q and the cache hold e4m3 codes of the same N(0, 1) draws (q_scale = k_scale = 1), out is bf16.
// fp8_ds: every token is written the way concat_and_cache_mla writes N(0, 1) values (per 128-value tile
// scale = amax / 448, e4m3 codes, bf16 RoPE); q and out are bf16.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/args.h"
#include "common/dev_mem.h"
#include "common/plan_tuning_arg.h"
#include "common/timing.h"
#include "mla/core/cuda_check.h"
#include "mla/ops/decode_timeline.h"
#include "mla/ops/mla_decode.h"
#include "mla/ops/plan_decode_schedule.h"

namespace {

using mla::Status;
using mla::bench::DevMem;

constexpr const char* kOp = "bench decode";  // the op this benchmark's errors name (a few add their step: "(timeline)")

struct Row {
  int h_q, batch, seqlen;
  double anchor_us;  // best of "FlashMLA bf16" and "FlashMLA PR54 bf16" for this row
  int s_q = 1;       // query tokens per sequence (--shape's fourth value; causal when > 1: MTP / speculative decode)
};

// ANCHORS.md, same table, column "FlashMLA PR54 fp8" (the fp8 anchor, issue 4), in kRows order.
constexpr double kAnchorFp8Us[] = {10.1, 14.5, 15.9, 15.5, 41.2, 65.5, 25.1, 111.3, 210.1,
                                   12.1, 16.6, 19.6, 27.7, 68.7, 116.2, 50.6, 218.1, 419.1};
// ANCHORS.md, same table, column "FlashMLA sparse fp8 (656 B/token)" (the fp8_ds anchor, issue 6).
constexpr double kAnchorFp8DsUs[] = {12.7, 25.6, 28.8, 23.6, 71.8, 119.2, 38.2, 208.2, 400.8,
                                     12.3, 20.6, 26.6, 31.5, 103.0, 182.4, 58.9, 344.8, 683.3};

// ANCHORS.md, table "Decode call, µs", measured 2026-11-29 on our H200: min(FlashMLA bf16, PR54 bf16).
constexpr Row kRows[] = {
    {16, 1, 512, 9.6},     {16, 1, 4096, 15.5},    {16, 1, 8192, 17.5},    {16, 32, 512, 17.9},
    {16, 32, 4096, 51.6},  {16, 32, 8192, 88.4},   {16, 128, 512, 29.5},   {16, 128, 4096, 153.0},
    {16, 128, 8192, 287.9}, {128, 1, 512, 12.5},   {128, 1, 4096, 17.1},   {128, 1, 8192, 20.5},
    {128, 32, 512, 27.9},  {128, 32, 4096, 71.4},  {128, 32, 8192, 123.3}, {128, 128, 512, 45.9},
    {128, 128, 4096, 236.5}, {128, 128, 8192, 484.6},
};

static_assert(sizeof(kAnchorFp8Us) / sizeof(kAnchorFp8Us[0]) == sizeof(kRows) / sizeof(kRows[0]),
              "one fp8 anchor per row");
static_assert(sizeof(kAnchorFp8DsUs) == sizeof(kAnchorFp8Us), "one fp8_ds anchor per row");

constexpr size_t kFlushBytes = mla::bench::kMemsetFlushBytes;

// N(0, 1) draw number i from a counter hash (Box-Muller), so gigabytes of cache fill in milliseconds.
__device__ float normal_at(size_t i, uint32_t seed) {
  uint32_t h = static_cast<uint32_t>(i) * 0x9E3779B1u ^ seed ^ static_cast<uint32_t>(i >> 32) * 0x85EBCA77u;
  h ^= h >> 16; h *= 0x7FEB352Du; h ^= h >> 15; h *= 0x846CA68Bu; h ^= h >> 16;
  uint32_t g = h * 0x27D4EB2Fu + 0x165667B1u;
  g ^= g >> 15; g *= 0x2C1B3C6Du; g ^= g >> 12;
  const float u1 = (static_cast<float>(h >> 8) + 1.f) * (1.f / 16777217.f);
  const float u2 = static_cast<float>(g >> 8) * (1.f / 16777216.f);
  return sqrtf(-2.f * logf(u1)) * cospif(2.f * u2);
}

// N(0, 1) values (bf16, fp16 or e4m3 codes).
__global__ void fill_normal(uint16_t* x, size_t n, uint32_t seed, int kind) {  // kind 0 bf16, 1 fp16, 2 e4m3
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float v = normal_at(i, seed);
    if (kind == 2) {  // e4m3 codes, one byte per value
      reinterpret_cast<uint8_t*>(x)[i] = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
    } else if (kind == 1) {
      const __half hv = __float2half_rn(v);
      x[i] = *reinterpret_cast<const uint16_t*>(&hv);
    } else {
      const __nv_bfloat16 bv = __float2bfloat16_rn(v);
      x[i] = *reinterpret_cast<const uint16_t*>(&bv);
    }
  }
}

// fp8_ds tokens of N(0, 1) draws, encoded as concat_and_cache_mla does (docs/kv_cache_formats.md): work
// item 5 t + j < 4 writes tile j of token t (amax pass, then codes and the scale), item 5 t + 4 its RoPE.
__global__ void fill_fp8ds(uint8_t* cache, size_t tokens, uint32_t seed) {
  for (size_t w = blockIdx.x * size_t(blockDim.x) + threadIdx.x; w < tokens * 5; w += size_t(gridDim.x) * blockDim.x) {
    const size_t t = w / 5;
    const int j = static_cast<int>(w % 5);
    uint8_t* tok = cache + t * mla::Fp8DsLayout::kBytes;
    const size_t i0 = t * mla::kDimQK + j * mla::Fp8DsLayout::kTileSize;  // draw numbers: token-major, 576 per token
    if (j == 4) {
      auto* rope = reinterpret_cast<__nv_bfloat16*>(tok + mla::Fp8DsLayout::kRopeOffset);
      for (int d = 0; d < mla::kDimRope; ++d)
        rope[d] = __float2bfloat16_rn(normal_at(t * mla::kDimQK + mla::kDimLatent + d, seed));
      continue;
    }
    float amax = 0.f;
    for (int d = 0; d < mla::Fp8DsLayout::kTileSize; ++d) amax = fmaxf(amax, fabsf(normal_at(i0 + d, seed)));
    const float scale = __fdiv_rn(amax, 448.f) == 0.f ? 1.f : __fdiv_rn(amax, 448.f);
    for (int d = 0; d < mla::Fp8DsLayout::kTileSize; ++d)
      tok[j * mla::Fp8DsLayout::kTileSize + d] =
          __nv_cvt_float_to_fp8(__fdiv_rn(normal_at(i0 + d, seed), scale), __NV_SATFINITE, __NV_E4M3);
    reinterpret_cast<float*>(tok + mla::Fp8DsLayout::kScalesOffset)[j] = scale;
  }
}

__global__ void empty_kernel() {}

// The machine's stream rate, printed above every table (the read probe): reads `n16` 16-byte words grid-stride, 8
// loads in flight per thread, and writes their sum only if it is the impossible sentinel (so the loads stay).
// H200s differ: on some every long stream runs ~1.6 % slower (bf16 h16 b128 s8192 ~293.7 vs ~289 us), and a change
// that shortens the copies' issue gains on the others only (NOTES_plan.md session 16); the probe says which a table
// ran on.
__global__ void __launch_bounds__(256) read_probe_kernel(const uint4* __restrict__ src, size_t n16, uint32_t* sink) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  uint32_t acc = 0;
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 7 * stride < n16; i += 8 * stride) {
    uint4 v[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] = __ldcs(src + i + k * stride);
#pragma unroll
    for (int k = 0; k < 8; ++k) acc ^= v[k].x ^ v[k].y ^ v[k].z ^ v[k].w;
  }
  for (; i < n16; i += stride) {
    const uint4 v = __ldcs(src + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9E3779B9u) *sink = acc;
}

// fill_normal's kind for a format's q (and its cache, but fp8_ds's): e4m3 codes, fp16 or bf16.
int fill_kind_of(mla::KvFormat f) { return f == mla::KvFormat::kFp8 ? 2 : f == mla::KvFormat::kFp16 ? 1 : 0; }

struct Options {
  mla::KvFormat format = mla::KvFormat::kBf16;
  std::vector<int> rows;  // 1-based indices into kRows; empty = all
  int reps = 50;
  enum Hints { kOn, kOff, kAb } hints = kOn;
  bool timeline = false;
  int parts = 0;  // 0: the geometry's num_parts
  int price = -1;  // -1: the geometry's split_price
  mla::DecodePlanTuning tune{};
  std::vector<Row> shapes;  // --shape: off-grid rows (anchor 0), run instead of kRows
  // --prewarm (experiment): after each flush, outside the events, one call of the same shape whose every sequence
  // reads the same few pages (its own small cache, q, out and workspace), in this format (same) or another one
  // (other: bf16 <-> fp16, fp8 -> bf16, fp8_ds -> bf16; or a format named). Same vs other isolates what warm
  // kernel code is worth; fp8_ds before bf16 warms the combine kernel (bf16 out, fp32 partials) but not the decode.
  enum Prewarm { kNone, kSame, kOther, kFormat } prewarm = kNone;
  mla::KvFormat prewarm_format = mla::KvFormat::kBf16;
  // --flush (experiment): how L2 is flushed between calls. memset (default): cudaMemsetAsync of 256 MB, the byte value
  // changing per call; read: a 256 MB read (L2 left clean); memset0: the same memset always writing zeros; fill: an
  // elementwise kernel storing 16-byte zeros (what torch's zero_() runs, the flush of triton's do_bench).
  enum Flush { kMemset, kRead, kMemset0, kFill } flush = kMemset;
  // Placement experiments (the file's header): --pad KIB (an allocation held before the row's buffers),
  // --cache-offset KIB (the cache view that far into its allocation), --churn MIB (an allocation made and freed before
  // them), --addresses (each row's buffer addresses on stderr).
  int pad_kib = 0;
  int cache_offset_kib = 0;
  int churn_mib = 0;
  bool addresses = false;
  // --touch KIB (experiment): after each flush, outside the events, one 4-byte load every KIB KiB of the row's KV
  // cache (its address translations warm, ~0.01 % of its bytes in L2). Against the plain flush it prices what cold
  // translations cost a row (the anchors' timing has them cold wherever the flush evicted them).
  int touch_kib = 0;
  // --l2-pages N (experiment): the block table names only N distinct pages (the entries past the N-th drawn from them
  // at random, so the CTAs do not walk one page order in step), so after each flush a row reads N pages from DRAM and
  // the rest from L2. Session 74: on an H200 FlashMLA's h_q 128 kernel is compute-bound and faster per page than ours;
  // on an H100 both stream at its DRAM ceiling and read level. With the pages in L2 an H100 times the compute-bound
  // page too (a proxy for the H200, not an anchor timing).
  int l2_pages = 0;
  // --unrolled N (experiment): the anchors' method as session 43 reads it, not events around each call. One graph of
  // N x (flush, call) and one of N x flush, each replayed 10 times; the row is the difference of their per-call
  // medians, so the graph launch and the event pair (the 2.8 us floor of the default method) leave the number.
  int unrolled = 0;
  // --vs FORMAT: every row timed a second time in that format, printed as two more columns (the file's header).
  bool vs = false;
  mla::KvFormat vs_format = mla::KvFormat::kBf16;
};

// An option's integer value in [lo, hi], or an error naming the option and the range.
Status parse_int_arg(const std::string& opt, const std::string& v, long lo, long hi, int* out) {
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || n < lo || n > hi)
    return Status::invalid(kOp, opt + " wants an integer in " + std::to_string(lo) + ".." +
                                               std::to_string(hi) + "; got '" + v + "'");
  *out = static_cast<int>(n);
  return Status::ok();
}

Status parse(int argc, char** argv, Options* o) {
  constexpr int kNumRows = static_cast<int>(sizeof(kRows) / sizeof(kRows[0]));
  std::string rows_arg, shape_args;  // as given, for the --rows / --shape conflict's message
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_val = i + 1 < argc;
    if (a == "--format" && has_val) {
      MLA_TRY(mla::parse_kv_format(argv[++i], &o->format));
    } else if (a == "--rows" && has_val) {
      const std::string v = argv[++i];
      // parse_int_list reads a malformed item as 0: rejected here with the rest outside the grid.
      const std::vector<int64_t> t = mla::bench::parse_int_list(v);
      for (int64_t r : t)
        if (r < 1 || r > kNumRows)
          return Status::invalid(kOp, "--rows wants row numbers 1.." + std::to_string(kNumRows) +
                                                     " (lists 1,2,5 and ranges 10-18); got '" + v + "'");
      if (t.empty()) return Status::invalid(kOp, "--rows names no row; got '" + v + "'");
      o->rows.insert(o->rows.end(), t.begin(), t.end());
      rows_arg += (rows_arg.empty() ? "'" : " '") + v + "'";
    } else if (a == "--reps" && has_val) {
      MLA_TRY(parse_int_arg(a, argv[++i], 1, 100000, &o->reps));
    } else if (a == "--timeline") {
      o->timeline = true;
    } else if (a == "--parts" && has_val) {
      MLA_TRY(parse_int_arg(a, argv[++i], 1, 1024, &o->parts));
    } else if (a == "--price" && has_val) {
      MLA_TRY(parse_int_arg(a, argv[++i], 0, 64, &o->price));
    } else if (a == "--tune" && has_val) {
      MLA_TRY(mla::bench::parse_plan_tuning(kOp, argv[++i], &o->tune));
    } else if (a == "--shape" && has_val) {
      const std::string v = argv[++i];
      const std::vector<int64_t> t = mla::bench::parse_int_list(v);
      if ((t.size() != 3 && t.size() != 4) || (t[0] != 16 && t[0] != 32 && t[0] != 64 && t[0] != 128) || t[1] < 1 ||
          t[1] > 4096 || t[2] < 1 || t[2] > 131072 || (t.size() == 4 && (t[3] < 1 || t[3] > 4)))
        return Status::invalid(kOp, "--shape wants H_Q,BATCH,SEQLEN[,S_Q] (16|32|64|128, 1..4096, "
                                               "1..131072, 1..4); got '" + v + "'");
      shape_args += (shape_args.empty() ? "'" : " '") + v + "'";
      o->shapes.push_back({static_cast<int>(t[0]), static_cast<int>(t[1]), static_cast<int>(t[2]), 0.0,
                           t.size() == 4 ? static_cast<int>(t[3]) : 1});
    } else if (a == "--prewarm" && has_val) {
      const std::string v = argv[++i];
      if (v == "none") o->prewarm = Options::kNone;
      else if (v == "same") o->prewarm = Options::kSame;
      else if (v == "other") o->prewarm = Options::kOther;
      else if (mla::parse_kv_format(v, &o->prewarm_format).is_ok()) o->prewarm = Options::kFormat;
      else return Status::invalid(kOp, "--prewarm wants none, same, other or a format; got '" + v + "'");
    } else if (a == "--flush" && has_val) {
      const std::string v = argv[++i];
      if (v == "memset") o->flush = Options::kMemset;
      else if (v == "read") o->flush = Options::kRead;
      else if (v == "memset0") o->flush = Options::kMemset0;
      else if (v == "fill") o->flush = Options::kFill;
      else return Status::invalid(kOp, "--flush wants memset, read, memset0 or fill; got '" + v + "'");
    } else if (a == "--unrolled" && has_val) {
      MLA_TRY(parse_int_arg(a, argv[++i], 1, 1000, &o->unrolled));
    } else if (a == "--touch" && has_val) {
      MLA_TRY(parse_int_arg(a, argv[++i], 4, 1 << 20, &o->touch_kib));
    } else if (a == "--l2-pages" && has_val) {
      MLA_TRY(parse_int_arg(a, argv[++i], 1, 1 << 20, &o->l2_pages));
    } else if (a == "--addresses") {
      o->addresses = true;
    } else if (a == "--churn" && has_val) {
      MLA_TRY(parse_int_arg(a, argv[++i], 0, 1 << 17, &o->churn_mib));
    } else if (a == "--pad" && has_val) {
      MLA_TRY(parse_int_arg(a, argv[++i], 0, 1 << 22, &o->pad_kib));
    } else if (a == "--cache-offset" && has_val) {
      MLA_TRY(parse_int_arg(a, argv[++i], 0, 1 << 16, &o->cache_offset_kib));
    } else if (a == "--vs" && has_val) {
      MLA_TRY(mla::parse_kv_format(argv[++i], &o->vs_format));
      o->vs = true;
    } else if (a == "--hints" && has_val) {
      const std::string v = argv[++i];
      if (v == "on") o->hints = Options::kOn;
      else if (v == "off") o->hints = Options::kOff;
      else if (v == "ab") o->hints = Options::kAb;
      else return Status::invalid(kOp, "--hints wants on, off or ab; got '" + v + "'");
    } else {
      return Status::invalid(
          kOp,
          "usage: [--format bf16|fp16|fp8|fp8_ds] [--rows 1,2,..18 | 10-18] [--reps N] "
          "[--hints on|off|ab] [--timeline] [--parts N] [--tune SEQ,SPLIT,MIN[,SHORT]] [--price N] "
          "[--shape H_Q,BATCH,SEQLEN[,S_Q]] [--prewarm none|same|other|FORMAT] [--flush memset|read|memset0|fill] "
          "[--pad KIB] [--cache-offset KIB] [--churn MIB] [--addresses] [--touch KIB] [--l2-pages N] [--unrolled N] "
          "[--vs FORMAT]; "
          "got '" +
              a + "'");
    }
  }
  // --shape replaces the grid, so --rows would select nothing it runs: refuse rather than ignore it.
  if (!o->shapes.empty() && !o->rows.empty())
    return Status::invalid(kOp, "--shape " + shape_args + " times its own shapes instead of the grid's "
                                           "rows: drop --rows " + rows_arg + " (or --shape)");
  if (o->unrolled > 0 && (o->touch_kib > 0 || o->prewarm != Options::kNone || o->flush == Options::kRead ||
                          o->hints == Options::kAb || o->timeline))
    return Status::invalid(kOp, "--unrolled times the flush and the call alone: it excludes --touch, --prewarm, "
                                "--flush read, --hints ab and --timeline");
  if (o->vs && o->vs_format == o->format)
    return Status::invalid(kOp, "--vs " + std::string(mla::kv_format_name(o->vs_format)) +
                                    " names the format the rows already run in; name another one");
  if (o->vs && o->timeline)
    return Status::invalid(kOp, "--vs and --timeline exclude each other (the timeline is of the --format rows only)");
  // Both run after each flush in the one warm-call slot.
  if (o->touch_kib > 0 && o->prewarm != Options::kNone)
    return Status::invalid(kOp, "--touch and --prewarm exclude each other (both run after each flush)");
  return Status::ok();
}

struct Timing {
  double decode_us, plan_us;
  double ab_us[4];  // --hints ab: on, off, on, off
};

// Median µs of `reps` launches of `exec` after 3 warm-up calls, each preceded by the anchors' L2 flush (a 256 MB
// memset) and bracketed by events on `s`: the timing every bench row and the empty-kernel floor share.
// --flush read: a 256 MB read instead (bench/common L2Flusher; L2 left full of clean lines), the calls' own traffic
// without the memset's dirty lines to write back (bench_stream's read column). Set once in main.
const mla::bench::L2Flusher* g_read_flush = nullptr;
Options::Flush g_flush = Options::kMemset;  // --flush, set once in main

// --flush fill: one 16-byte store of zeros per thread, 128-thread blocks over the whole buffer (the shape of torch's
// vectorized fill kernel behind zero_()).
__global__ void fill_zero_kernel(uint4* p, size_t n) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) p[i] = make_uint4(0, 0, 0, 0);
}

// --touch: one 4-byte load every `stride` bytes of [base, base + bytes), spread over the grid; the sum goes to `sink`
// only if it hits an improbable value, so the loads stay and nothing is written.
__global__ void touch_kernel(const uint8_t* base, size_t bytes, size_t stride, uint32_t* sink) {
  uint32_t acc = 0;
  const size_t n = bytes / stride;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    acc += __ldcg(reinterpret_cast<const uint32_t*>(base + i * stride));
  if (acc == 0x9E3779B9u) *sink = acc;
}

// The flush before call i that writes the 256 MB buffer: the memset (byte i & 0xFF, or 0 for --flush memset0) or the
// fill kernel of --flush fill. Also what --unrolled captures into its graphs.
Status flush_op(cudaStream_t s, void* flush, int i) {
  if (g_flush == Options::kFill) {
    const size_t n = kFlushBytes / 16;
    fill_zero_kernel<<<unsigned((n + 127) / 128), 128, 0, s>>>(static_cast<uint4*>(flush), n);
    return mla::cuda_status(cudaGetLastError(), kOp, "flush fill");
  }
  return mla::cuda_status(cudaMemsetAsync(flush, g_flush == Options::kMemset0 ? 0 : (i & 0xFF), kFlushBytes, s), kOp,
                          "flush memset");
}

Status time_graph_median(cudaGraphExec_t exec, cudaStream_t s, void* flush, int reps, double* median_us,
                         cudaGraphExec_t warm = nullptr) {
  auto memset_flush = [&](int i) {
    if (g_read_flush != nullptr) {
      MLA_TRY(g_read_flush->flush(s));
    } else {
      MLA_TRY(flush_op(s, flush, i));
    }
    if (warm) MLA_CUDA_TRY(kOp, cudaGraphLaunch(warm, s));
    return Status::ok();
  };
  return mla::bench::time_graph_median_us(exec, s, memset_flush, reps, median_us);
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Per-call median us of `exec` (n calls in one graph, each behind its own flush) over 10 replays after one warm-up
// replay: bench/common's graph timing with no flush between replays.
Status time_unrolled_graph(cudaGraphExec_t exec, cudaStream_t s, int n, double* per_call_us) {
  double us = 0;
  MLA_TRY(mla::bench::time_graph_median_us(exec, s, [](int) { return Status::ok(); }, 10, &us, 1));
  *per_call_us = us / n;
  return Status::ok();
}

// Pages (KV blocks) and pieces (sequences touched) of each part record of a plan whose sequences all hold
// `seqlen` tokens (the bench rows).
struct PartLoad {
  int pages = 0, pieces = 0;
};
std::vector<PartLoad> part_loads(const std::vector<int32_t>& parts, int num_parts, int batch, int seqlen) {
  const int nblk = mla::decode_num_blocks(seqlen);
  std::vector<PartLoad> out(num_parts);
  for (int i = 0; i < num_parts; ++i) {
    const int32_t* rec = &parts[static_cast<size_t>(i) * mla::kPlanPartInts];
    for (int b = rec[mla::kPartBeginBatch]; b <= rec[mla::kPartEndBatch] && b < batch; ++b) {
      const int lo = b == rec[mla::kPartBeginBatch] ? rec[mla::kPartBeginBlock] : 0;
      const int hi = b == rec[mla::kPartEndBatch] ? rec[mla::kPartEndBlock] : nblk;
      if (lo < hi) {
        out[i].pages += hi - lo;
        ++out[i].pieces;
      }
    }
  }
  return out;
}

// --timeline: captures `call` with the stamp buffer set, replays it three times like a timed call (L2 flush
// first) and summarizes the last replay's stamps, in µs after the first decode CTA's start. `parts`: the
// plan's records (host copy), for each CTA's page count.
template <class Call, class Capture>
Status run_timeline(const Row& r, const mla::DecodePlanGeometry& g, const std::vector<int32_t>& parts, cudaStream_t s,
                    void* flush, Call call, Capture capture) {
  if (!mla::cuda::kDecodeTimelineCompiled) {
    std::printf("# timeline: not compiled in (build with -DMLA_DECODE_TIMELINE)\n");
    return Status::ok();
  }
  DevMem<unsigned long long> buf;
  MLA_TRY(buf.alloc(mla::cuda::kTimelineSlots, kOp));
  cudaGraphExec_t exec;
  mla::cuda::set_decode_timeline(buf.p);
  const Status cap = capture(call, &exec);
  mla::cuda::set_decode_timeline(nullptr);
  MLA_TRY(cap);
  std::vector<unsigned long long> h(mla::cuda::kTimelineSlots);
  cudaError_t err = cudaSuccess;
  for (int i = 0; i < 3 && err == cudaSuccess; ++i) {
    err = cudaMemsetAsync(buf.p, 0, h.size() * 8, s);
    if (err == cudaSuccess) err = cudaMemsetAsync(flush, i, kFlushBytes, s);
    if (err == cudaSuccess) err = cudaGraphLaunch(exec, s);
    if (err == cudaSuccess) err = cudaMemcpyAsync(h.data(), buf.p, h.size() * 8, cudaMemcpyDeviceToHost, s);
    if (err == cudaSuccess) err = cudaStreamSynchronize(s);
  }
  cudaGraphExecDestroy(exec);
  MLA_CUDA_TRY("bench decode (timeline)", err);
  const int n = std::min(g.num_parts * g.num_head_tiles, mla::cuda::kTimelineDecodeCtas);
  constexpr int kStride = mla::cuda::kTimelineDecodeStride;
  unsigned long long t0 = ~0ull, t_first_cmb = ~0ull;
  for (int i = 0; i < n; ++i)
    if (h[kStride * i] != 0) t0 = std::min(t0, h[kStride * i]);
  auto us = [&](unsigned long long t) { return t == 0 || t == ~0ull ? -1.0 : (double(t) - double(t0)) * 1e-3; };
  const std::vector<PartLoad> load = part_loads(parts, g.num_parts, r.batch, r.seqlen);
  std::vector<double> start, chain, walked;
  // The CTA's end: mark 8 (CTA done, after its last stores; set by the kernels that define it), else the
  // cursor's last item walked (fixed slot 2: before the last item's compute and epilogue).
  constexpr int kDoneMark = 8;
  bool all_done_marked = true;
  std::vector<std::pair<int, double>> ends;  // (pages, end µs) of every CTA with a non-empty part
  unsigned long long min_step = ~0ull;
  for (int i = 0; i < n; ++i) {
    const unsigned long long* c = &h[kStride * i];
    if (c[0] == 0) continue;
    start.push_back(us(c[0]));
    chain.push_back((double(c[1]) - double(c[0])) * 1e-3);
    walked.push_back(us(c[2] != 0 ? c[2] : c[1]));  // an empty part walks nothing
    if (c[1] > c[0]) min_step = std::min(min_step, c[1] - c[0]);
    const PartLoad& pl = load[i % g.num_parts];
    if (pl.pages > 0) {
      if (c[kDoneMark] == 0) all_done_marked = false;
      ends.emplace_back(pl.pages, c[kDoneMark] != 0 ? us(c[kDoneMark]) : walked.back());
    }
    std::fprintf(stderr, "tl h%d b%d s%d decode %d sm %llu pages %d pieces %d start %.2f chain %.2f walked %.2f", r.h_q,
                 r.batch, r.seqlen, i, c[3], pl.pages, pl.pieces, us(c[0]), (double(c[1]) - double(c[0])) * 1e-3,
                 walked.back());
    for (int k = mla::cuda::kTimelineFirstMark; k < kStride; ++k)
      if (c[k] != 0) std::fprintf(stderr, " m%d %.2f", k, us(c[k]));
    std::fprintf(stderr, "\n");
  }
  std::vector<double> cin, cwait, cdone;
  for (int j = 0; j < mla::cuda::kTimelineCombineCtas; ++j) {
    const unsigned long long* c = &h[kStride * mla::cuda::kTimelineDecodeCtas + 4 * j];
    if (c[0] == 0) continue;
    t_first_cmb = std::min(t_first_cmb, c[0]);
    cin.push_back(us(c[0]));
    cwait.push_back(us(c[1]));
    cdone.push_back(us(c[2]));
    if (j < 4 || j % 64 == 0)
      std::fprintf(stderr, "tl h%d b%d s%d combine %d sm %llu in %.2f waited %.2f done %.2f\n", r.h_q, r.batch,
                   r.seqlen, j, c[3], cin.back(), cwait.back(), cdone.back());
  }
  if (start.empty()) return Status::internal(kOp, "timeline: no decode CTA stamped");
  auto mx = [](const std::vector<double>& v) { return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()); };
  auto mn = [](const std::vector<double>& v) { return v.empty() ? 0.0 : *std::min_element(v.begin(), v.end()); };
  std::printf(
      "# timeline h%d b%d s%d (us from the first decode CTA): %zu decode CTAs start <= %.2f, chain med %.2f "
      "max %.2f, walked min %.2f med %.2f max %.2f | %zu combine CTAs in %.2f-%.2f, waited %.2f-%.2f, done %.2f "
      "| clock step >= %.3f\n",
      r.h_q, r.batch, r.seqlen, start.size(), mx(start), median_of(chain), mx(chain), mn(walked), median_of(walked),
      mx(walked), cin.size(), mn(cin), mx(cin), mn(cwait), mx(cwait), mx(cdone),
      min_step == ~0ull ? -1.0 : min_step * 1e-3);
  // The kernel's free marks (timeline.cuh MLA_TL_MARK_*; their meaning is documented in the kernel): per mark, over
  // the CTAs that set it, min / median / max µs after the first decode CTA's start.
  for (int k = mla::cuda::kTimelineFirstMark; k < kStride; ++k) {
    std::vector<double> m;
    for (int i = 0; i < n; ++i)
      if (h[kStride * i] != 0 && h[kStride * i + k] != 0) m.push_back(us(h[kStride * i + k]));
    if (!m.empty())
      std::printf("# timeline h%d b%d s%d mark %d: %zu CTAs, min %.2f med %.2f max %.2f\n", r.h_q, r.batch, r.seqlen, k,
                  m.size(), mn(m), median_of(m), mx(m));
  }
  // Tail: the CTAs' ends by page count. Plan inequality shows as groups with more pages ending later; bandwidth
  // unfairness as a wide spread inside the largest group. Then the least-squares line end = a + b * pages over
  // the CTAs (a: a CTA's fixed cost, b: its µs per page while all stream) and the combine after the last end.
  if (!ends.empty()) {
    std::sort(ends.begin(), ends.end());
    std::printf("# tail h%d b%d s%d (end = %s):", r.h_q, r.batch, r.seqlen,
                all_done_marked ? "mark 8, CTA done" : "last item walked (no mark 8 on every CTA)");
    double sx = 0, sy = 0, sxx = 0, sxy = 0, last = 0;
    for (size_t j0 = 0; j0 < ends.size();) {
      size_t j1 = j0;
      std::vector<double> e;
      while (j1 < ends.size() && ends[j1].first == ends[j0].first) e.push_back(ends[j1++].second);
      std::printf(" | %d pages: %zu CTAs, end min %.2f med %.2f max %.2f", ends[j0].first, e.size(), mn(e),
                  median_of(e), mx(e));
      j0 = j1;
    }
    for (const auto& [x, y] : ends) {
      sx += x;
      sy += y;
      sxx += double(x) * x;
      sxy += x * y;
      last = std::max(last, y);
    }
    const double k = double(ends.size()), den = k * sxx - sx * sx;
    const double slope = den > 0 ? (k * sxy - sx * sy) / den : 0, icpt = (sy - slope * sx) / k;
    std::vector<double> all;
    for (const auto& e : ends) all.push_back(e.second);
    std::printf(" | fit end = %.2f + %.3f x pages | ends med %.2f max %.2f | idle parts %d | combine waited %.2f-%.2f, "
                "done %.2f (+%.2f after the last end)\n",
                icpt, slope, median_of(all), last, g.num_parts * g.num_head_tiles - static_cast<int>(ends.size()),
                mn(cwait), mx(cwait), mx(cdone), cdone.empty() ? 0.0 : mx(cdone) - last);
  }
  return Status::ok();
}

// --prewarm: a call of the row's shape in format `wf` whose sequences all read the same pages_per_seq pages, with its
// own q, cache, out, lse, plan and workspace (so the timed call finds none of its data in L2), captured once and
// launched after each flush, outside the events.
// MLA_DECODE_MERGE=fused (mla::cuda::decode_merge_knob): the plans keep their merge counters on every row, so the fused
// merge is timed where decode_plan_wants_fused_merge says no. An unknown value is mla_decode's error to report.
bool fused_merge_forced() { return mla::cuda::decode_merge_knob().index == 2; }

struct WarmCall {
  DevMem<uint16_t> q, cache, out;
  DevMem<int32_t> table, parts, offsets, counters;
  DevMem<float> lse;
  DevMem<uint8_t> ws;
  cudaGraphExec_t exec = nullptr;
  WarmCall() = default;
  WarmCall(const WarmCall&) = delete;
  WarmCall& operator=(const WarmCall&) = delete;
  ~WarmCall() {
    if (exec) cudaGraphExecDestroy(exec);
  }
};

// The warm call's format: the row's (same), another of the same kernel shape (other: bf16 <-> fp16, fp8 / fp8_ds ->
// bf16), or the one named.
mla::KvFormat warm_format(const Options& o) {
  if (o.prewarm == Options::kSame) return o.format;
  if (o.prewarm == Options::kFormat) return o.prewarm_format;
  return o.format == mla::KvFormat::kBf16 ? mla::KvFormat::kFp16 : mla::KvFormat::kBf16;
}

// p: the timed call's parameters (shapes, seqlens, scale); capture(body, &exec) as run_row's.
template <class Capture>
Status build_warm_call(const Row& r, mla::KvFormat wf, const mla::MlaDecodeParams& p, const mla::DecodePlanGeometry& g,
                       const mla::DecodePlanTuning& tune, cudaStream_t s, Capture capture, WarmCall* w) {
  const int pages_per_seq = mla::decode_num_blocks(r.seqlen), num_pages = r.batch * pages_per_seq;
  const int kind = fill_kind_of(wf);
  const size_t q_elems = size_t(r.batch) * r.s_q * r.h_q * mla::kDimQK;
  const size_t cache_elems = size_t(pages_per_seq) * mla::kDecodePageSize * mla::kDimQK;  // 16-bit: any format fits
  MLA_TRY(w->q.alloc(q_elems, kOp));
  MLA_TRY(w->cache.alloc(cache_elems, kOp));
  MLA_TRY(w->out.alloc(size_t(r.batch) * r.s_q * r.h_q * mla::kDimV, kOp));
  MLA_TRY(w->lse.alloc(size_t(r.batch) * r.h_q * r.s_q, kOp));
  MLA_TRY(w->table.alloc(num_pages, kOp));
  MLA_TRY(w->parts.alloc(size_t(g.num_parts) * mla::kPlanPartInts, kOp));
  MLA_TRY(w->offsets.alloc(r.batch + 1, kOp));
  MLA_TRY(w->ws.alloc(mla::decode_workspace_bytes(g), kOp));
  fill_normal<<<1024, 256, 0, s>>>(w->q.p, q_elems, 0x4321u, kind);
  if (wf == mla::KvFormat::kFp8Ds) {
    fill_fp8ds<<<1024, 256, 0, s>>>(reinterpret_cast<uint8_t*>(w->cache.p),
                                    size_t(pages_per_seq) * mla::kDecodePageSize, 0x77u);
  } else {
    fill_normal<<<1024, 256, 0, s>>>(w->cache.p, cache_elems, 0x77u, kind);
  }
  MLA_CUDA_TRY_LAUNCH("bench decode (prewarm)");
  std::vector<int32_t> table(num_pages);
  for (int i = 0; i < num_pages; ++i) table[i] = i % pages_per_seq;
  MLA_CUDA_TRY("bench decode (prewarm)", cudaMemcpyAsync(w->table.p, table.data(), table.size() * 4,
                                                         cudaMemcpyHostToDevice, s));
  mla::MlaDecodeParams wp = p;
  wp.format = wf;
  wp.q = mla::TensorView::contiguous(w->q.p, mla::kv_query_dtype(wf), {r.batch, r.s_q, r.h_q, mla::kDimQK});
  wp.kv_cache = mla::TensorView::contiguous(w->cache.p, mla::kv_cache_dtype(wf),
                                            {pages_per_seq, mla::kDecodePageSize, mla::kv_token_elems(wf)});
  wp.block_table = mla::TensorView::contiguous(w->table.p, mla::DType::kInt32, {r.batch, pages_per_seq});
  wp.out = mla::TensorView::contiguous(w->out.p, wf == mla::KvFormat::kFp16 ? mla::DType::kFp16 : mla::DType::kBf16,
                                       {r.batch, r.s_q, r.h_q, mla::kDimV});
  wp.lse = mla::TensorView::contiguous(w->lse.p, mla::DType::kFp32, {r.batch, r.h_q, r.s_q});
  // Untimed: the combine path, or the fused merge under MLA_DECODE_MERGE=fused (which mla_decode refuses without
  // counters).
  mla::DecodePlanView plan{w->parts.p, w->offsets.p, g.num_parts};
  if (fused_merge_forced()) {
    MLA_TRY(w->counters.alloc(mla::decode_plan_counters(g), kOp));
    plan.merge_counters = w->counters.p;
  }
  MLA_TRY(mla::cuda::plan_decode(wp.seqlens, wp.block_table, g, plan, s, tune));
  const size_t ws_bytes = mla::decode_workspace_bytes(g);
  MLA_TRY(mla::cuda::mla_decode(wp, g, plan, w->ws.p, ws_bytes, s));  // warm-up, attributes
  MLA_CUDA_TRY("bench decode (prewarm)", cudaStreamSynchronize(s));
  return capture([&] { return mla::cuda::mla_decode(wp, g, plan, w->ws.p, ws_bytes, s); }, &w->exec);
}

// The read probe (read_probe_kernel): 604 MB -- h_q 16 · batch 128 · 8192's fp8 KV bytes -- read once per call by 4
// CTAs per SM, timed as a row (graph, the anchors' flush, median), printed as µs and TB/s.
Status print_read_probe(cudaStream_t s, void* flush, int reps) {
  constexpr size_t kBytes = size_t(128) * 8192 * 576;
  void* buf = nullptr;
  uint32_t* sink = nullptr;
  MLA_CUDA_TRY("bench decode (read probe)", cudaMalloc(&buf, kBytes));
  cudaError_t err = cudaMalloc(&sink, sizeof(uint32_t));
  if (err == cudaSuccess) err = cudaMemsetAsync(buf, 0x5A, kBytes, s);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (err == cudaSuccess) err = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  if (err == cudaSuccess) {
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    read_probe_kernel<<<4 * sms, 256, 0, s>>>(static_cast<const uint4*>(buf), kBytes / 16, sink);
    err = cudaStreamEndCapture(s, &graph);
  }
  if (err == cudaSuccess) err = cudaGraphInstantiate(&exec, graph, 0);
  double us = 0;
  const Status st = err != cudaSuccess ? mla::cuda_status(err, kOp, "read probe setup")
                                      : time_graph_median(exec, s, flush, reps, &us);
  if (exec != nullptr) cudaGraphExecDestroy(exec);
  if (graph != nullptr) cudaGraphDestroy(graph);
  cudaFree(sink);
  cudaFree(buf);
  MLA_TRY(st);
  std::printf("# read probe, timed like a row: 604 MB (h16 b128 s8192's fp8 KV bytes) in %.1f us, %.2f TB/s\n", us,
              kBytes / us * 1e-6);
  return Status::ok();
}

Status run_row(const Row& r, const Options& o, cudaStream_t s, void* flush, Timing* t) {
  const int pages_per_seq = mla::decode_num_blocks(r.seqlen);  // the last page partly filled when seqlen % 64 != 0
  const int num_pages = r.batch * pages_per_seq;
  const bool fp16 = o.format == mla::KvFormat::kFp16;
  const bool fp8ds = o.format == mla::KvFormat::kFp8Ds;
  const int fill_kind = fill_kind_of(o.format);
  const mla::DType dt = mla::kv_cache_dtype(o.format), q_dt = mla::kv_query_dtype(o.format);
  const mla::DType out_dt = fp16 ? mla::DType::kFp16 : mla::DType::kBf16;
  int dev = 0, sms = 0;
  MLA_CUDA_TRY(kOp, cudaGetDevice(&dev));
  MLA_CUDA_TRY(kOp, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const std::vector<int32_t> lens(r.batch, r.seqlen);
  mla::DecodePlanGeometry g;
  MLA_TRY(mla::decode_plan_geometry(r.batch, r.s_q, r.h_q, sms, &g, lens.data(), o.format));  // as an engine would get
  if (o.parts > 0) {  // experiment: another CTA count (mla_decode checks only max_splits == batch + parts - 1)
    g.num_parts = o.parts;
    g.max_splits = g.batch + g.num_parts - 1;
  }
  if (o.price >= 0) g.split_price = o.price;  // experiment: another price of a cut (host and device plans read g)

  DevMem<uint16_t> q, cache, out;
  DevMem<int32_t> bt, sl, parts, off, counters;
  DevMem<float> lse;
  DevMem<uint8_t> ws, pad;
  if (o.churn_mib > 0) {
    DevMem<uint8_t> churn;
    MLA_TRY(churn.alloc(size_t(o.churn_mib) << 20, kOp));
  }
  if (o.pad_kib > 0) MLA_TRY(pad.alloc(size_t(o.pad_kib) << 10, kOp));
  const size_t cache_elems = size_t(num_pages) * mla::kDecodePageSize * mla::kDimQK;  // 16-bit: room for any format
  const size_t cache_skip = size_t(o.cache_offset_kib) << 9;                              // elements of 2 bytes
  MLA_TRY(q.alloc(size_t(r.batch) * r.s_q * r.h_q * mla::kDimQK, kOp));
  MLA_TRY(cache.alloc(cache_elems + cache_skip, kOp));
  uint16_t* const cache_p = cache.p + cache_skip;
  MLA_TRY(out.alloc(size_t(r.batch) * r.s_q * r.h_q * mla::kDimV, kOp));
  MLA_TRY(lse.alloc(size_t(r.batch) * r.h_q * r.s_q, kOp));
  MLA_TRY(bt.alloc(num_pages, kOp));
  MLA_TRY(sl.alloc(r.batch, kOp));
  MLA_TRY(parts.alloc(size_t(g.num_parts) * mla::kPlanPartInts, kOp));
  MLA_TRY(off.alloc(r.batch + 1, kOp));
  MLA_TRY(counters.alloc(size_t(mla::decode_plan_counters(g)), kOp));  // the fused merge's (zeroed by plan_decode)
  MLA_TRY(ws.alloc(mla::decode_workspace_bytes(g), kOp));
  fill_normal<<<1024, 256, 0, s>>>(q.p, size_t(r.batch) * r.s_q * r.h_q * mla::kDimQK, 0x1234u + r.h_q, fill_kind);
  if (fp8ds) {
    fill_fp8ds<<<4096, 256, 0, s>>>(reinterpret_cast<uint8_t*>(cache_p), size_t(num_pages) * mla::kDecodePageSize,
                                    0xBEEFu + r.batch);
  } else {
    fill_normal<<<4096, 256, 0, s>>>(cache_p, cache_elems, 0xBEEFu + r.batch, fill_kind);
  }
  MLA_CUDA_TRY_LAUNCH(kOp);
  std::vector<int32_t> perm(num_pages);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937_64(42 + r.batch * 7 + r.seqlen));
  if (o.l2_pages > 0) {  // experiment: entries drawn at random from the first N of the permutation (Options::l2_pages)
    std::mt19937_64 pick(7 + r.batch);
    for (size_t k = size_t(o.l2_pages); k < perm.size(); ++k) perm[k] = perm[pick() % size_t(o.l2_pages)];
  }
  MLA_CUDA_TRY(kOp, cudaMemcpyAsync(bt.p, perm.data(), perm.size() * 4, cudaMemcpyHostToDevice, s));
  MLA_CUDA_TRY(kOp, cudaMemcpyAsync(sl.p, lens.data(), lens.size() * 4, cudaMemcpyHostToDevice, s));

  mla::MlaDecodeParams p;
  p.q = mla::TensorView::contiguous(q.p, q_dt, {r.batch, r.s_q, r.h_q, mla::kDimQK});
  p.kv_cache =
      mla::TensorView::contiguous(cache_p, dt, {num_pages, mla::kDecodePageSize, mla::kv_token_elems(o.format)});
  p.block_table = mla::TensorView::contiguous(bt.p, mla::DType::kInt32, {r.batch, pages_per_seq});
  p.seqlens = mla::TensorView::contiguous(sl.p, mla::DType::kInt32, {r.batch});
  p.out = mla::TensorView::contiguous(out.p, out_dt, {r.batch, r.s_q, r.h_q, mla::kDimV});
  p.lse = mla::TensorView::contiguous(lse.p, mla::DType::kFp32, {r.batch, r.h_q, r.s_q});
  p.format = o.format;
  p.causal = r.s_q > 1;  // MTP / speculative decode: query i of s_q sees keys < seqlen - s_q + 1 + i
  p.softmax_scale = 0.0721687836f;
  // merge_counters dropped below unless the host plan says the fused merge pays (decode_plan_wants_fused_merge) or
  // MLA_DECODE_MERGE=fused forces it.
  mla::DecodePlanView plan{parts.p, off.p, g.num_parts, counters.p};

  WarmCall warm;  // --prewarm: built below, launched after each flush of the decode graph's timings
  auto time_graph = [&](cudaGraphExec_t exec, double* median_us) {
    return time_graph_median(exec, s, flush, o.reps, median_us, warm.exec);
  };
  auto capture = [&](auto&& body, cudaGraphExec_t* exec) -> Status {
    cudaGraph_t graph;
    MLA_CUDA_TRY(kOp, cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    const Status st = body();
    MLA_CUDA_TRY(kOp, cudaStreamEndCapture(s, &graph));
    MLA_TRY(st);
    MLA_CUDA_TRY(kOp, cudaGraphInstantiate(exec, graph, 0));
    cudaGraphDestroy(graph);
    return Status::ok();
  };
  const mla::TensorView seqlens = p.seqlens;
  // The plan first (eagerly: the decode graph reads it), then both graphs.
  const mla::TensorView table = p.block_table;
  // Clears the start hints of every record (fields 5-7 -> -1): the kernels then load them as before.
  auto clear_hints = [&] {
    return mla::cuda_status(cudaMemset2DAsync(parts.p + mla::kPartFirstSeqlen, mla::kPlanPartInts * 4, 0xFF,
                                              (mla::kPlanPartInts - mla::kPartFirstSeqlen) * 4, g.num_parts, s),
                            kOp, "cudaMemset2DAsync");
  };
  MLA_TRY(mla::cuda::plan_decode(seqlens, table, g, plan, s, o.tune));
  // The plan's records (host copy, checked equal to the device's): --timeline reads each CTA's pages from them.
  std::vector<int32_t> host(static_cast<size_t>(g.num_parts) * mla::kPlanPartInts);
  {
    // The device plan must be the host's (compute_decode_plan with the same geometry, tuning and block table),
    // or a --tune / --price / --parts row would time a plan nobody checked.
    std::vector<int32_t> dev(host.size());
    std::vector<int32_t> dev_off(r.batch + 1), host_off(r.batch + 1);
    MLA_CUDA_TRY(kOp, cudaMemcpyAsync(dev.data(), parts.p, dev.size() * 4, cudaMemcpyDeviceToHost, s));
    MLA_CUDA_TRY(kOp, cudaMemcpyAsync(dev_off.data(), off.p, dev_off.size() * 4, cudaMemcpyDeviceToHost, s));
    MLA_CUDA_TRY(kOp, cudaStreamSynchronize(s));
    mla::compute_decode_plan(lens.data(), r.batch, g.num_parts, g.split_price, o.tune, host.data(), host_off.data(),
                             mla::DecodePlanPages{perm.data(), pages_per_seq});
    if (dev != host || dev_off != host_off)
      return Status::internal(kOp, "device plan differs from compute_decode_plan on the host");
    // The geometry's host facts from the plan this row runs (--tune / --price / --parts change it; the kernel choice
    // reads them, decode_fp8/variant64.h). As an engine with the step's seqlens on the host would: the fused merge
    // only where nothing is cut (or forced).
    mla::decode_plan_note_host_plan(&g, lens.data(), host_off.data());
    if (!fused_merge_forced() && !g.host_uncut) plan.merge_counters = nullptr;
  }
  if (o.hints == Options::kOff) MLA_TRY(clear_hints());
  if (o.addresses)
    std::fprintf(stderr,
                 "# addresses h%d b%d s%d: flush %p q %p cache %p out %p lse %p table %p parts %p ws %p counters %p "
                 "fused %d\n",
                 r.h_q, r.batch, r.seqlen, flush, static_cast<void*>(q.p), static_cast<void*>(cache_p),
                 static_cast<void*>(out.p), static_cast<void*>(lse.p), static_cast<void*>(bt.p),
                 static_cast<void*>(parts.p), static_cast<void*>(ws.p), static_cast<void*>(counters.p),
                 plan.merge_counters != nullptr);
  MLA_TRY(mla::cuda::mla_decode(p, g, plan, ws.p, mla::decode_workspace_bytes(g), s));  // warm-up, attributes
  MLA_CUDA_TRY(kOp, cudaStreamSynchronize(s));
  cudaGraphExec_t decode_exec, plan_exec;
  MLA_TRY(capture([&] { return mla::cuda::mla_decode(p, g, plan, ws.p, mla::decode_workspace_bytes(g), s); },
                  &decode_exec));
  MLA_TRY(capture([&] { return mla::cuda::plan_decode(seqlens, table, g, plan, s, o.tune); }, &plan_exec));
  if (o.prewarm != Options::kNone) MLA_TRY(build_warm_call(r, warm_format(o), p, g, o.tune, s, capture, &warm));
  DevMem<uint32_t> touch_sink;
  if (o.touch_kib > 0) {  // the --touch loads take the warm call's place after each flush
    MLA_TRY(touch_sink.alloc(1, kOp));
    const size_t bytes = size_t(num_pages) * mla::kDecodePageSize * mla::kv_bytes_per_token(o.format);
    MLA_TRY(capture(
        [&] {
          touch_kernel<<<264, 128, 0, s>>>(reinterpret_cast<const uint8_t*>(cache_p), bytes,
                                            size_t(o.touch_kib) << 10, touch_sink.p);
          return mla::cuda_status(cudaGetLastError(), kOp, "touch_kernel");
        },
        &warm.exec));
  }
  if (o.unrolled > 0) {
    // The same n flushes with and without the calls between them.
    auto capture_unrolled = [&](bool with_calls, cudaGraphExec_t* exec) {
      return capture(
          [&] {
            for (int i = 0; i < o.unrolled; ++i) {
              MLA_TRY(flush_op(s, flush, i));
              if (with_calls) MLA_TRY(mla::cuda::mla_decode(p, g, plan, ws.p, mla::decode_workspace_bytes(g), s));
            }
            return Status::ok();
          },
          exec);
    };
    cudaGraphExec_t all_exec, flush_exec;
    MLA_TRY(capture_unrolled(true, &all_exec));
    MLA_TRY(capture_unrolled(false, &flush_exec));
    double all_us = 0, flush_us = 0;
    MLA_TRY(time_unrolled_graph(all_exec, s, o.unrolled, &all_us));
    MLA_TRY(time_unrolled_graph(flush_exec, s, o.unrolled, &flush_us));
    t->decode_us = all_us - flush_us;
    cudaGraphExecDestroy(all_exec);
    cudaGraphExecDestroy(flush_exec);
  } else {
    MLA_TRY(time_graph(decode_exec, &t->decode_us));
  }
  if (o.hints == Options::kAb) {
    // The decode graph reads the plan buffers when it runs: the same graph, with the hints cleared or rewritten.
    for (int v = 0; v < 4; ++v) {
      MLA_TRY(v % 2 ? clear_hints() : mla::cuda::plan_decode(seqlens, table, g, plan, s, o.tune));
      MLA_TRY(time_graph(decode_exec, &t->ab_us[v]));
    }
  }
  MLA_TRY(time_graph_median(plan_exec, s, flush, o.reps, &t->plan_us));  // no warm call: the plan's usual timing
  if (o.timeline) {
    MLA_TRY(mla::cuda::plan_decode(seqlens, table, g, plan, s, o.tune));
    if (o.hints == Options::kOff) MLA_TRY(clear_hints());
    MLA_TRY(run_timeline(
        r, g, host, s, flush,
        [&] { return mla::cuda::mla_decode(p, g, plan, ws.p, mla::decode_workspace_bytes(g), s); }, capture));
  }
  cudaGraphExecDestroy(decode_exec);
  cudaGraphExecDestroy(plan_exec);
  MLA_CUDA_TRY(kOp, cudaStreamSynchronize(s));
  return Status::ok();
}

Status bench(const Options& o) {
  cudaStream_t s;
  MLA_CUDA_TRY(kOp, cudaStreamCreate(&s));
  void* flush = nullptr;
  MLA_CUDA_TRY(kOp, cudaMalloc(&flush, kFlushBytes));
  static mla::bench::L2Flusher read_flush;  // --flush read (lives as long as the timings that use it)
  g_flush = o.flush;
  if (o.flush == Options::kRead) {
    MLA_TRY(read_flush.init(kFlushBytes));
    g_read_flush = &read_flush;
    std::printf("# flush: a 256 MB read between calls (L2 left clean), not the anchors' memset: not comparable to "
                "the anchors\n");
  } else if (o.flush != Options::kMemset) {
    std::printf("# flush: %s\n", o.flush == Options::kFill ? "a kernel storing 256 MB of zeros (torch zero_()'s shape)"
                                                           : "a 256 MB memset of zeros");
  }
  if (o.l2_pages > 0)
    std::printf("# block table: %d distinct pages, drawn at random (--l2-pages): after each flush nearly every page "
                "comes from L2, not comparable to the anchors\n", o.l2_pages);
  cudaDeviceProp prop{};
  MLA_CUDA_TRY(kOp, cudaGetDeviceProperties(&prop, 0));
  // An s_q column only when a --shape asks for s_q > 1 (the grid's table keeps the anchors' columns).
  const bool show_sq = std::any_of(o.shapes.begin(), o.shapes.end(), [](const Row& r) { return r.s_q > 1; });
  std::printf("# mla_decode, %s, %d SMs, format %s, %s, reps %d (median, L2 flushed, CUDA graph)\n", prop.name,
              prop.multiProcessorCount, std::string(mla::kv_format_name(o.format)).c_str(),
              show_sq ? "s_q per row (causal when > 1)" : "s_q 1", o.reps);
  if (o.unrolled > 0)
    std::printf("# timing: --unrolled %d -- per call, one graph of %d x (flush, call) minus one of the flushes alone, "
                "median of 10 replays (the reps above apply to the plan and floor lines only)\n",
                o.unrolled, o.unrolled);
  const bool fp8 = o.format == mla::KvFormat::kFp8, fp8ds = o.format == mla::KvFormat::kFp8Ds;
  std::printf(fp8     ? "# anchor = the FlashMLA PR54 fp8 column of ANCHORS.md\n"
              : fp8ds ? "# anchor = the FlashMLA sparse fp8 (656 B/token) column of ANCHORS.md\n"
                      : "# anchor = best of the FlashMLA bf16 and FlashMLA PR54 bf16 columns of ANCHORS.md\n");
  // The anchors are an H200's (141 GB HBM3e, ~4.0 TB/s read); on another GPU the ratio column compares machines as
  // much as kernels (an H100 SXM's stream is ~2.8 TB/s here: its memory-bound rows read ~30-40 % over the anchors, its
  // h_q 128 rows about as on an H200; BENCHMARKS.md "Session 68").
  if (std::strstr(prop.name, "H200") == nullptr)
    std::printf("# note: the anchors were measured on an H200 and this GPU is not one; the ratio column is not the "
                "issues' bar here\n");
  const bool ab = o.hints == Options::kAb;
  std::printf("# start hints: %s\n", o.hints == Options::kOn    ? "on"
                                     : o.hints == Options::kOff ? "off"
                                                                : "ab (µs = on)");
  std::printf("# plan: %s CTA columns per head tile, split price %s, tuning seq_cost %d split_cost %d min_part_cost %d "
              "short_step_pages %d\n",
              o.parts > 0 ? std::to_string(o.parts).c_str() : "the geometry's",
              o.price >= 0 ? std::to_string(o.price).c_str() : "the geometry's", o.tune.seq_cost, o.tune.split_cost,
              o.tune.min_part_cost, o.tune.short_step_pages);
  std::printf("# head tiles: 64 query rows, 16 where s_q is 1, h_q >= 64 and the pages are at most 1.5 per CTA column "
              "(decode_plan_narrow_tiles; MLA_DECODE_TILE_ROWS=%s)\n",
              std::getenv("MLA_DECODE_TILE_ROWS") != nullptr ? std::getenv("MLA_DECODE_TILE_ROWS") : "auto");
  const std::string vs_name(mla::kv_format_name(o.vs_format));
  const std::string vs_cols = o.vs ? " " + vs_name + " µs | " + vs_name + " µs / ours |" : "";
  std::printf("| format | h_q | batch | seqlen |%s µs | TB/s | TFLOP/s | anchor µs | anchor µs / ours |%s%s\n",
              show_sq ? " s_q |" : "", ab ? " on 2 | on 3 | off 1 | off 2 | off-on |" : "", vs_cols.c_str());
  std::printf("|---|---|---|---|%s---|---|---|---|---|%s%s\n", show_sq ? "---|" : "", ab ? "---|---|---|---|---|" : "",
              o.vs ? "---|---|" : "");
  {
    // The floor under the plan column: one empty kernel timed the same way (flush, events, graph launch).
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    MLA_CUDA_TRY(kOp, cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    empty_kernel<<<1, 512, 0, s>>>();
    MLA_CUDA_TRY(kOp, cudaStreamEndCapture(s, &graph));
    MLA_CUDA_TRY(kOp, cudaGraphInstantiate(&exec, graph, 0));
    double floor_us = 0;
    const Status st = time_graph_median(exec, s, flush, o.reps, &floor_us);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    MLA_TRY(st);
    std::printf("# empty-kernel graph, timed like a row (the floor of the plan_decode times below): %.1f us\n",
                floor_us);
  }
  MLA_TRY(print_read_probe(s, flush, o.reps));
  std::vector<double> plan_us;
  const int n = static_cast<int>(sizeof(kRows) / sizeof(kRows[0]));
  const bool grid = o.shapes.empty();
  for (int i = 1; i <= (grid ? n : static_cast<int>(o.shapes.size())); ++i) {
    if (grid && !o.rows.empty() && std::find(o.rows.begin(), o.rows.end(), i) == o.rows.end()) continue;
    const Row& r = grid ? kRows[i - 1] : o.shapes[i - 1];
    Timing t{};
    MLA_TRY(run_row(r, o, s, flush, &t));
    // ANCHORS.md: cache bytes + q bytes (1 per value for fp8) + 16-bit out bytes.
    const double bytes = double(r.batch) * r.seqlen * mla::kv_bytes_per_token(o.format) +
                         double(r.batch) * r.s_q * r.h_q * (mla::kDimQK * (fp8 ? 1 : 2) + mla::kDimV * 2);
    const double anchor_us = !grid ? 0.0 : fp8 ? kAnchorFp8Us[i - 1] : fp8ds ? kAnchorFp8DsUs[i - 1] : r.anchor_us;
    // Causal s_q > 1: query i sees seqlen - s_q + 1 + i keys, none when that is <= 0 (a --shape seqlen below s_q).
    double keys = 0;
    for (int q = 0; q < r.s_q; ++q) keys += std::max(0, r.seqlen - r.s_q + 1 + q);
    const double flops = double(r.batch) * r.h_q * keys * (mla::kDimQK + mla::kDimV) * 2;
    std::printf("| %s | %d | %d | %d |", std::string(mla::kv_format_name(o.format)).c_str(), r.h_q, r.batch, r.seqlen);
    if (show_sq) std::printf(" %d |", r.s_q);
    std::printf(" %.1f | %.2f | %.0f | %.1f | %.2f |", t.decode_us,
                bytes / t.decode_us * 1e-6, flops / t.decode_us * 1e-6, anchor_us, anchor_us / t.decode_us);
    if (ab) {
      const double on = (t.ab_us[0] + t.ab_us[2]) / 2, off = (t.ab_us[1] + t.ab_us[3]) / 2;
      std::printf(" %.1f | %.1f | %.1f | %.1f | %+.2f |", t.ab_us[0], t.ab_us[2], t.ab_us[1], t.ab_us[3], off - on);
    }
    if (o.vs) {  // the same row in the --vs format, right after this one
      Options ov = o;
      ov.format = o.vs_format;
      Timing tv{};
      MLA_TRY(run_row(r, ov, s, flush, &tv));
      std::printf(" %.1f | %.2f |", tv.decode_us, tv.decode_us / t.decode_us);
    }
    std::printf("\n");
    std::fflush(stdout);
    plan_us.push_back(t.plan_us);
  }
  if (!plan_us.empty()) {
    std::printf("# plan_decode per row (us, row order):");
    for (double u : plan_us) std::printf(" %.1f", u);
    std::printf("\n");
    std::sort(plan_us.begin(), plan_us.end());
    std::printf("# plan_decode (not in the decode column): %.1f-%.1f us per step over these rows\n", plan_us.front(),
                plan_us.back());
  }
  cudaFree(flush);
  cudaStreamDestroy(s);
  return Status::ok();
}

}  // namespace

int decode_bench_main(int argc, char** argv) {
  // argv[0] is the program name (bench_decode) or the subcommand (mlaserve bench decode): skip it.
  const int skip = argc > 0 && argv[0][0] != '-' ? 1 : 0;
  Options o;
  const Status st = [&]() -> Status {
    MLA_TRY(parse(argc - skip, argv + skip, &o));
    return bench(o);
  }();
  if (!st.is_ok()) {
    std::fprintf(stderr, "%s\n", st.to_string().c_str());
    return 1;
  }
  return 0;
}
