// mla_decode (sm90, bf16/fp16 KV) against the CPU reference, plus the device plan against the host plan.
//
// Every case draws fresh N(0,1) data (tests/common/decode_data.h, as the fp8 suites do), scatters each sequence over
// a random permutation of physical pages (pages in use are interleaved with unused ones), leaves every unused cache
// slot NaN (the tail of a sequence's last page too), puts sentinels in unused block-table entries, poisons
// out/lse/workspace with NaN, checks guard regions, and replays the same call from a CUDA graph, which must match
// eager bit for bit (decode_device_run.h). The primary comparison is ref::mla_decode_split with the same plan: it
// rounds P at the same per-split running max as the kernel, so only float summation order differs.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/random.h"
#include "decode_device_run.h"
#include "decode_graph_steps.h"
#include "decode_rejections.h"
#include "harness/device_buffer.h"
#include "harness/registry.h"
#include "harness/scoped_env.h"
#include "mla/core/cuda_check.h"
#include "mla/core/half.h"
#include "mla/ops/mla_decode.h"
#include "mla/ops/plan_decode_schedule.h"

namespace mla::test {
namespace {

constexpr int32_t kSentinel = -123456789;  // unused block-table entries: reading one faults or reads far away
constexpr float kSoftmaxScale = 0.0721687836f;  // 1/sqrt(192), DeepSeek's q/k head dim

// Kernel vs split reference. Both round P to the 16-bit operand type at the same running max, so P
// matches except where fp32 summation order moves a value across a rounding boundary; the output is
// then rounded to 16 bits by both. Measured on the H200 (3 sessions, 130 case runs, bench/decode/NOTES.md):
// worst out rel_l2 4.0e-4, worst max_abs 7.8e-3 (one bf16 ulp flip at |out| in [1, 2)); lse rel_l2
// <= 4e-7. Limits: 5x the worst rel_l2; max_abs = two bf16 ulps at |out| < 4 (2^-6 each). The tail of few-key rows
// (the fp8 test's 2e-2 failed on it, test_mla_decode_fp8.cu kFp8Tol), session 39: the 106 batch-1 cases under 14 seeds
// (3960-3973), 1484 comparisons: rel_l2 median 1.1e-4, p99.9 4.2e-4, max 5.2e-4 (3.8x under the limit); max_abs max
// 1.56e-2 (two ulps at |out| in [1, 2)).
constexpr Tolerance kDecodeTol{2e-3, 6.25e-2,
                               "16-bit P and output rounding flips on summation-order noise: measured worst "
                               "rel_l2 4.0e-4 / max_abs 7.8e-3; limits 5x and 2 bf16 ulps at |out| < 4"};
// fp16 (same kernels, fp16 MMA): P and the output round to 3 more mantissa bits, so each flip above moves a value 8x
// less but flips are 8x more frequent (a flip needs the noise within half an ulp of a midpoint): rel_l2 scales by
// 1 / sqrt(8), the bf16 worst (4.0e-4; 5.2e-4 in session 39) to ~1.4e-4 - 1.8e-4. Limits ~3x that, and two fp16 ulps
// at |out| < 8 (2^-8 each) -- still tight enough that an fp16 path rounding P or the output through bf16 (rel_l2
// ~2^-9 / sqrt(3) ~ 1e-3) fails. Derived from the bf16 numbers, then measured on the fp16 cases themselves (session 59,
// 1654124006459): worst rel_l2 9.9e-5, max_abs 1.95e-3, 4-5x under the limits.
constexpr Tolerance kFp16Tol{5e-4, 7.8125e-3,
                             "fp16 P and output rounding flips: the bf16 worst scaled by 8^-1/2 (~1.6e-4), limits ~3x "
                             "and 2 fp16 ulps at |out| < 8"};
// lse, both formats: fp32 scores of exact 16-bit products, a row sum of unrounded P, the combine's fp32 log-sum-exp;
// only summation order and the fast exp2 / log differ from the reference (~1e-6 relative). Measured rel_l2 <= 4e-7
// (above). Limits 25x that and 1e-3 in natural-log units (0.1 % of the softmax normaliser); the out tolerance would
// let a row's lse be 6e-2 off.
constexpr Tolerance kDecodeLseTol{1e-5, 1e-3, "fp32 log-sum-exp, summation order only: measured rel_l2 <= 4e-7"};
const Tolerance& case_tol(KvFormat f) { return f == KvFormat::kFp16 ? kFp16Tol : kDecodeTol; }
// Each output row on its own (worst_row, metrics.h: one wrong row of a b128 case hides in the case's rel_l2). A row's
// error here is its P and output rounding flips: ~2^-9 / sqrt(3) ~ 1.1e-3 relative for bf16 (fp16 8x less), a few times
// that in a row of few keys; a missing page, another sequence's keys or a wrong scale moves a row by far more.
// Measured on the H200 (session 60, ce5a9ad's tests, MLA_TEST_SEED=5904, 328 comparisons): median 6.6e-4, p90 2.3e-3,
// max 3.8e-3 (b32 h128 graph steps). The limit is 2.6x that maximum.
constexpr Tolerance kDecodeRowTol{1e-2, 0.0, "a row's 16-bit rounding flips: measured max 3.8e-3 over 328 comparisons"};
// Unsplit reference (rounds P at the global running max, the kernel at each split's): adds bf16 P
// rounding noise (measured worst 1.8e-3), still under the 1e-2 worst case a bf16 kernel is allowed.
constexpr double kUnsplitRelL2 = 1e-2;

// The case's inputs as decode_data.h draws them (N(0,1) q and K, written through the cache-op reference), with this
// suite's layout (dc below): a quarter more pages than the sequences use (at least 4), unused ones NaN and interleaved
// with the used ones by the random permutation, three block-table columns past the longest sequence, and a negative
// sentinel in every unused entry (the fp8 suites use a large positive one).
struct DecodeCase {
  DecodeShape shape;
  bool unsplit_check = true;  // also compare against the unsplit reference (CPU time)
};

float from16(KvFormat f, uint16_t x) { return f == KvFormat::kFp16 ? fp16_to_float(x) : bf16_to_float(x); }

ErrorStats compare16(KvFormat f, const std::vector<uint16_t>& got, const std::vector<uint16_t>& ref) {
  return compare(ref.size(), [&](size_t i) { return double(from16(f, got[i])); },
                 [&](size_t i) { return double(from16(f, ref[i])); });
}
ErrorStats worst_row16(KvFormat f, const std::vector<uint16_t>& got, const std::vector<uint16_t>& ref) {
  return worst_row(ref.size() / kDimV, kDimV, [&](size_t i) { return double(from16(f, got[i])); },
                   [&](size_t i) { return double(from16(f, ref[i])); });
}

// One decode case: the device run's shared checks (decode_device_run.h: device plan vs host plan, copies queued
// behind the call, merge counters, empty rows, graph replays vs eager, guards), then the kernel vs the split reference
// on the same plan and, where the case asks, vs the unsplit one.
Status run_decode_case(const std::string& name, const DecodeCase& c, CaseReport* rep) {
  const DecodeShape& s = c.shape;
  auto rng = case_rng(name);
  const DecodeHostData h = make_decode_data(c.shape, rng);
  // The split reference on the host copies, with the device run's plan (also the graph check's, should a replay
  // differ from the eager call: the message then says which run is off).
  std::vector<uint16_t> out_ref;
  std::vector<float> lse_ref;
  auto split_reference = [&](const DecodeDeviceResult& res) -> Status {
    out_ref.assign(h.out_elems(), 0xFFFFu);
    lse_ref.assign(h.lse_elems(), NAN);
    std::vector<float> o_acc(static_cast<size_t>(res.g.max_splits) * s.s_q * s.h_q * kDimV, NAN),
        lse_acc(static_cast<size_t>(res.g.max_splits) * s.s_q * s.h_q, NAN);
    MLA_TRY(ref::mla_decode_split(h.host_params(out_ref.data(), lse_ref.data(), kSoftmaxScale), res.plan_ref(),
                                  o_acc.data(), lse_acc.data()));
    return check_reference_complete(s.format, out_ref, lse_ref, name);
  };
  DecodeDeviceResult r;
  MLA_TRY(run_decode_on_device(name, h, kSoftmaxScale, &r,
                               [&](const DecodeDeviceResult& res, std::vector<float>* ref) -> Status {
                                 MLA_TRY(split_reference(res));
                                 ref->resize(out_ref.size());
                                 for (size_t i = 0; i < out_ref.size(); ++i) (*ref)[i] = from16(s.format, out_ref[i]);
                                 return Status::ok();
                               }));
  const std::vector<uint16_t>& out = r.out;
  const std::vector<float>& lse = r.lse;
  MLA_TRY(split_reference(r));
  rep->add("out", compare16(s.format, out, out_ref));
  rep->add("out worst row", worst_row16(s.format, out, out_ref), &kDecodeRowTol);
  rep->add("lse", compare_vec(lse, lse_ref), &kDecodeLseTol);

  if (c.unsplit_check) {
    std::vector<uint16_t> out_u(h.out_elems(), 0xFFFFu);
    std::vector<float> lse_u(h.lse_elems(), NAN);
    MLA_TRY(ref::mla_decode(h.host_params(out_u.data(), lse_u.data(), kSoftmaxScale)));
    const ErrorStats su = compare16(s.format, out, out_u);
    // lse: both references sum unrounded P, so the unsplit one is held to the split one's fp32 tolerance.
    rep->add("lse vs unsplit", compare_vec(lse, lse_u), &kDecodeLseTol);
    char buf[160];
    std::snprintf(buf, sizeof buf, "vs unsplit reference: out rel_l2=%.3e max_abs=%.3e (limit rel_l2 %.0e)", su.rel_l2,
                  su.max_abs, kUnsplitRelL2);
    rep->note = buf;
    if (!(su.rel_l2 <= kUnsplitRelL2) || su.nonfinite_got || su.mismatched_nan)
      return Status::internal("mla_decode", std::string(buf) + " (" + name + ")");
  }
  return Status::ok();
}

std::string case_name(const DecodeCase& c, const std::string& lens) {
  const DecodeShape& s = c.shape;
  return std::string(kv_format_name(s.format)) + "_b" + std::to_string(s.batch) + "_h" + std::to_string(s.h_q) + "_sq" +
         std::to_string(s.s_q) + (s.causal ? "_causal" : "") + "_" + lens;
}

// Under MLA_SMALL_CASES=1 (harness small_cases(): the compute-sanitizer runs) only cases of at most 8 sequences and
// 5000 tokens, which still reach every kernel (each h_q, s_q 1-4, splits, empty sequences, partial tiles).
void add_case(std::vector<GpuCase>& cases, DecodeCase c, const std::string& lens) {
  const DecodeShape& s = c.shape;
  int64_t tokens = 0;
  for (int len : s.seqlens) tokens += len;
  if (small_cases() && (s.batch > 8 || tokens > 5000)) return;
  const std::string name = case_name(c, lens);
  cases.push_back(
      {"mla_decode", name, case_tol(s.format), [c, name](CaseReport* rep) { return run_decode_case(name, c, rep); }});
  // 16-row tiles (h_q 16, s_q 1) run on the warp-specialized wgmma kernel by default (kernel_n16ws.cuh) and again on
  // the 256-thread mma.sync kernel (MLA_DECODE_N16 is read on every call), same tolerance: the same operands rounded
  // at the same points (P to the KV type once, fp32 accumulation); only the order of the fp32 sums differs.
  // Tiles of 32-47 rows (h_q 32 s_q 1, h_q 16 s_q 2) run on the 64-row warp-specialized kernel by default and again on
  // the two-row-group mma.sync kernel (MLA_DECODE_N32, read on every call), same tolerance and reasoning.
  const int rows = s.h_q * s.s_q;
  if (rows >= 32 && rows < 48) {
    const std::string n = name + "_n32mma";
    cases.push_back({"mla_decode", n, case_tol(s.format), [c, n](CaseReport* rep) {
                       ScopedEnv env("MLA_DECODE_N32", "mma");
                       return run_decode_case(n, c, rep);
                     }});
  }
  if (s.h_q * s.s_q == 16) {
    const std::string n = name + "_n16mma";
    cases.push_back({"mla_decode", n, case_tol(s.format), [c, n](CaseReport* rep) {
                       ScopedEnv env("MLA_DECODE_N16", "mma");
                       return run_decode_case(n, c, rep);
                     }});
  }
  // s_q 1 and h_q 64 / 128, up to 8 sequences: the case runs on the head tiles its seqlens pick (the call passes them:
  // decode_plan_narrow_tiles) and again on the other ones (MLA_DECODE_TILE_ROWS, read by every decode_plan_geometry
  // call): narrow 16-row tiles run the 16-row kernel, one tile of 16 rows per grid.y. Same tolerance: the same
  // operands rounded at the same points, as the 16-row twins above.
  if (s.s_q == 1 && s.h_q >= 64 && s.batch <= 8) {
    const std::string n = name + "_othertile";
    cases.push_back({"mla_decode", n, case_tol(s.format), [c, n](CaseReport* rep) {
                       bool narrow = false;
                       MLA_TRY(takes_narrow_tiles(c.shape, &narrow));
                       ScopedEnv env("MLA_DECODE_TILE_ROWS", narrow ? "64" : "16");
                       return run_decode_case(n, c, rep);
                     }});
  }
  // An even number of 64-row head tiles (h_q 128 s_q 1, h_q 64 s_q 2, ...) launches the 64-row kernel in head-tile
  // pairs (decode_head_pairs: (1, 2, 1) clusters); again as a plain grid (MLA_DECODE_HEAD_PAIRS=off, read on every
  // call). Same tolerance: the same kernel, only where its CTAs run differs.
  if (((rows + 63) / 64) % 2 == 0) {
    const std::string n = name + "_unpaired";
    cases.push_back({"mla_decode", n, case_tol(s.format), [c, n](CaseReport* rep) {
                       ScopedEnv env("MLA_DECODE_HEAD_PAIRS", "off");
                       return run_decode_case(n, c, rep);
                     }});
  }
  // A 64-row step of fewer sequences than columns runs again on the other column count: one column per sequence
  // (MLA_DECODE_WHOLE_SEQS=on) where the machine's columns are the default, and the machine's (off) where the step's
  // short whole sequences take one each by default (decode_plan_whole_sequences, read by every decode_plan_geometry
  // call). Same tolerance: the same kernels on another plan (whole sequences: direct segments, no partials).
  if (rows >= 48 && tokens <= 200000) {
    bool whole = false, can = false;
    if (whole_sequence_forms(s, &whole, &can).is_ok() && (whole || can)) {
      const std::string n = name + (whole ? "_machinecols" : "_wholeseqs");
      cases.push_back({"mla_decode", n, case_tol(s.format), [c, n, whole](CaseReport* rep) {
                         ScopedEnv env("MLA_DECODE_WHOLE_SEQS", whole ? "off" : "on");
                         return run_decode_case(n, c, rep);
                       }});
    }
  }
  // Steps on the 64-row warp-specialized kernel write their direct segments through its TMA-store epilogue; each runs
  // again on the kernel's plain-store form (MLA_DECODE_WS64_OUT=plain, read on every call; merged by the combine),
  // which steps that cut nearly every sequence take under `auto`. Same tolerance: the same values, stored through
  // another path.
  {
    bool ws64 = false;
    if (takes_ws64(s, &ws64).is_ok() && ws64) {
      const std::string n = name + "_plainout";
      cases.push_back({"mla_decode", n, case_tol(s.format), [c, n](CaseReport* rep) {
                         ScopedEnv env("MLA_DECODE_WS64_OUT", "plain");
                         return run_decode_case(n, c, rep);
                       }});
    }
  }
  // Every case passes the plan's merge_counters, so its split sequences are merged by the decode kernel where it can
  // (fused_merge.cuh), and again by the combine grid (MLA_DECODE_MERGE=combine, read on every call). Same tolerance:
  // the fused merge is the combine's math on the same fp32 partials, in another order of the same sums.
  const std::string n = name + "_combine";
  cases.push_back({"mla_decode", n, case_tol(s.format), [c, n](CaseReport* rep) {
                     ScopedEnv env("MLA_DECODE_MERGE", "combine");
                     return run_decode_case(n, c, rep);
                   }});
}

DecodeCase dc(KvFormat f, int batch, int h_q, int s_q, bool causal, std::vector<int> lens, bool unsplit = true) {
  DecodeCase c{decode_shape(f, batch, h_q, s_q, causal, std::move(lens)), unsplit};
  int used = 0;
  for (int len : c.shape.seqlens) used += decode_num_blocks(len);
  c.shape.spare_pages = std::max(4, used / 4);
  c.shape.spare_cols = 3;
  c.shape.table_sentinel = kSentinel;
  c.shape.keep_kv_float = false;  // no price-of-FP8 reference here
  return c;
}

constexpr KvFormat kB = KvFormat::kBf16;
constexpr KvFormat kH = KvFormat::kFp16;

MLA_GPU_CASES([](std::vector<GpuCase>& cases) {
  // Page-boundary seqlens, one sequence, every head count.
  for (int h : {16, 32, 64, 128})
    for (int len : {1, 63, 64, 65, 511})
      add_case(cases, dc(kB, 1, h, 1, false, {len}), "len" + std::to_string(len));
  // Long single sequences: the batch-1 split-KV path with many splits.
  add_case(cases, dc(kB, 1, 16, 1, false, {16384}), "len16384");
  add_case(cases, dc(kB, 1, 128, 1, false, {8191}), "len8191");
  // Batch-1 plans of decode_plan_per_part (b00ebb9): one 64-row tile over 132 parts (h_q 64 s16384: the plain 128
  // pieces of 2 pages since 6811339's weight, 86 of 3 before), and 64 rows from h_q 16 x s_q 4, causal, its pieces
  // raised from 1 to 2 pages (64 pieces). With 5f600b6's split price (1 at 64 rows) the raise applies to h_q 64
  // s8192 (64 pieces of 2 pages instead of 128 of 1) and h_q 128 s3584 (28 of 2 instead of 56); h_q 128 b32 s512
  // takes one CTA column per whole sequence (decode_plan_whole_sequences; its `_machinecols` twin cuts every sequence
  // in 2 pieces of 4 pages, the default before session 50); b24 of 5-8-page sequences of mixed lengths keeps the
  // machine's columns (its `_wholeseqs` twin takes one each).
  add_case(cases, dc(kB, 1, 64, 1, false, {16384}), "len16384");
  add_case(cases, dc(kB, 1, 16, 4, true, {8191}), "len8191");
  add_case(cases, dc(kB, 1, 64, 1, false, {8192}), "len8192");
  add_case(cases, dc(kB, 1, 128, 1, false, {3584}), "len3584");
  add_case(cases, dc(kB, 32, 128, 1, false, std::vector<int>(32, 512)), "all512");
  add_case(cases, dc(kB, 24, 128, 1, false, random_lens("b24h128", 24, 257, 512)), "rand257_512");
  // Batch-1 rows of 9-17 one-page pieces (h_q 16 s700 / s1000: 11 / 16 splits, merged by the direct combine grid's
  // few-split path since session 35; s1030: 17, combine_many's chunks) and 11 on h_q 128's narrow tiles.
  for (int len : {700, 1000, 1030}) add_case(cases, dc(kB, 1, 16, 1, false, {len}), "len" + std::to_string(len));
  add_case(cases, dc(kB, 1, 128, 1, false, {700}), "len700");
  // The same path on the other shapes of the 8-chunk grid (rows x batch <= 66, decode_combine_grid): 16 pieces at
  // h_q 64 b1 s1000, h_q 16 b2 (16 + 15), b4 (4 x 16) and h_q 16 s_q 2 (32 causal rows).
  add_case(cases, dc(kB, 1, 64, 1, false, {1000}), "len1000");
  add_case(cases, dc(kB, 2, 16, 1, false, {1000, 900}), "1000_900");
  add_case(cases, dc(kB, 4, 16, 1, false, std::vector<int>(4, 1000)), "all1000");
  add_case(cases, dc(kB, 1, 16, 2, true, {1000}), "len1000");
  // Direct (unsplit) segments whose 64-row tile holds fewer valid rows, written by the TMA-store epilogue
  // (21e6859), which must clip the rows past s_q x h_q: h_q 32 x s_q 3 (a full tile and a 32-row one, all 16
  // sequences whole), h_q 16 x s_q 3 (48-row tiles; bf16 with 3 whole sequences, fp16 with 4).
  add_case(cases, dc(kB, 16, 32, 3, true, {1, 2, 63, 64, 65, 100, 127, 128, 129, 1, 64, 65, 30, 90, 110, 120}),
           "clip_mix");
  add_case(cases, dc(kB, 7, 16, 3, true, {1, 63, 64, 65, 127, 129, 200}), "clip_mix");
  add_case(cases, dc(kH, 8, 16, 3, true, {1, 63, 64, 65, 127, 129, 2000, 5}), "clip_mix");
  add_case(cases, dc(kB, 2, 64, 1, false, {16384, 4096}), "16384_4096");
  // Speculative rows with and without the causal diagonal, including rows that see no key.
  add_case(cases, dc(kB, 2, 64, 2, true, {8191, 4096}), "8191_4096");
  add_case(cases, dc(kB, 7, 128, 4, true, {1, 2, 3, 4, 63, 64, 65}), "tiny_mix");
  add_case(cases, dc(kB, 7, 16, 4, true, random_lens("b7h16", 7, 1, 8191)), "rand1_8191");
  add_case(cases, dc(kB, 7, 16, 4, false, random_lens("b7h16nc", 7, 1, 8191)), "rand1_8191");
  add_case(cases, dc(kB, 7, 16, 3, true, random_lens("b7h16sq3", 7, 1, 2000)), "rand1_2000");  // 48 rows: 3 groups
  add_case(cases, dc(kB, 2, 32, 3, true, {300, 4096}), "300_4096");                         // 96 rows: partial 2nd tile
  add_case(cases, dc(kB, 2, 128, 4, true, {16384, 8191}, false), "16384_8191");
  // Zero-length sequences mixed in (out = 0, lse = -inf).
  add_case(cases, dc(kB, 7, 32, 1, false, {0, 65, 0, 511, 1, 0, 4096}), "with_zeros");
  // The same on the 64-row warp-specialized kernel; 896 combine items exceed the one-wave direct grid, so the
  // combine's list kernel writes the zero rows (combine_few_online, n == 0) and merges the split ones.
  add_case(cases, dc(kB, 7, 128, 1, false, {0, 65, 0, 511, 1, 0, 4096}), "with_zeros");
  add_case(cases, dc(kB, 2, 16, 2, true, {0, 0}), "all_zero");
  // The same on the 16-row kernels (kernel_n16ws.cuh's part cursor and Q loader skip empty sequences; an all-empty
  // batch leaves every CTA an empty part). Added in session 22 after the device time: first run in the next session.
  add_case(cases, dc(kB, 7, 16, 1, false, {0, 65, 0, 511, 1, 0, 4096}), "with_zeros");
  add_case(cases, dc(kB, 2, 16, 1, false, {0, 0}), "all_zero");
  // Larger batches, mixed lengths.
  add_case(cases, dc(kB, 32, 16, 1, false, random_lens("b32h16", 32, 1, 4096)), "rand1_4096");
  add_case(cases, dc(kB, 32, 128, 1, false, random_lens("b32h128", 32, 1, 4096)), "rand1_4096");
  add_case(cases, dc(kB, 32, 32, 2, true, random_lens("b32h32", 32, 1, 2048)), "rand1_2048");
  add_case(cases, dc(kB, 128, 16, 1, false, std::vector<int>(128, 4096), false), "all4096");
  // Many 1-2 page sequences: each 16-row part runs ~3 whole sequences, so the next sequence's Q tile (loaded after
  // the current one's epilogue, in its own cp.async group ahead of page j + 2, kernel.cuh) is exercised often,
  // one-page sequences included.
  add_case(cases, dc(kB, 400, 16, 1, false, random_lens("b400h16", 400, 1, 80)), "rand1_80");
  // The same for 32-row tiles (two row groups, Q read from shared memory at every step, so its reload at each
  // sequence switch is read by every later step).
  add_case(cases, dc(kB, 300, 32, 1, false, random_lens("b300h32", 300, 1, 80)), "rand1_80");
  // More sequences than the plan kernel's shared-memory arrays hold (plan_decode.cu kMaxParallelBatch): the serial plan
  // kernel, whose plan the device run checks against the host's entry by entry.
  add_case(cases, dc(kB, 1600, 16, 1, false, random_lens("b1600h16", 1600, 1, 80)), "rand1_80");
  add_case(cases, dc(kB, 128, 64, 2, false, random_lens("b128h64", 128, 1, 1024), false), "rand1_1024");
  add_case(cases, dc(kB, 128, 128, 1, false, random_lens("b128h128", 128, 1, 511)), "rand1_511");
  add_case(cases, dc(kB, 128, 16, 4, true, random_lens("b128h16", 128, 60, 70)), "rand60_70");
  // fp16 KV / q / out.
  add_case(cases, dc(kH, 1, 16, 1, false, {65}), "len65");
  add_case(cases, dc(kH, 2, 16, 1, false, {4096, 63}), "4096_63");
  // fp16 through the 16-row kernels with split and multi-sequence parts (session 22, added after the device time).
  add_case(cases, dc(kH, 7, 16, 1, false, random_lens("fp16b7h16", 7, 1, 8191)), "rand1_8191");
  add_case(cases, dc(kH, 32, 16, 1, false, random_lens("fp16b32h16", 32, 1, 4096)), "rand1_4096");
  add_case(cases, dc(kH, 7, 64, 4, false, random_lens("fp16b7", 7, 1, 4096)), "rand1_4096");
  add_case(cases, dc(kH, 32, 128, 2, true, random_lens("fp16b32", 32, 1, 2048)), "rand1_2048");
  // fp16 on the rest of the grid's corners (session 58): page boundaries at h_q 32 / 128 (the 32-row and 64-row
  // kernels), zero-length sequences on the 16- and 64-row kernels, a long batch-1 sequence per tile height, many short
  // sequences at batch 128, and s_q 4.
  for (int h : {32, 128})
    for (int len : {1, 64, 511}) add_case(cases, dc(kH, 1, h, 1, false, {len}), "len" + std::to_string(len));
  add_case(cases, dc(kH, 7, 16, 1, false, {0, 65, 0, 511, 1, 0, 4096}), "with_zeros");
  add_case(cases, dc(kH, 7, 128, 1, false, {0, 65, 0, 511, 1, 0, 4096}), "with_zeros");
  add_case(cases, dc(kH, 1, 16, 1, false, {16384}), "len16384");
  add_case(cases, dc(kH, 1, 128, 1, false, {8191}), "len8191");
  add_case(cases, dc(kH, 128, 32, 1, false, random_lens("fp16b128h32", 128, 1, 300)), "rand1_300");
  add_case(cases, dc(kH, 7, 128, 4, true, {1, 2, 3, 4, 63, 64, 65}), "tiny_mix");
  // h_q x s_q shapes the grid above leaves out (session 91), over three sequences of 69 / 2 / 11 pages (5165 tokens:
  // past the sanitizers' small set), causal: bf16 h_q 128 x s_q 2 / 3, h_q 64 x s_q 3 (3 head tiles: the only odd count
  // above 1, an unpaired launch with grid.y 3) / 4, h_q 32 x s_q 4; fp16 every (h_q, s_q) with s_q > 1 it lacked (h_q
  // 64 x s_q 2 ran only as a graph step), and h_q 64 s_q 1 on 64-row and (one 511-token sequence) narrow tiles. h_q 64
  // x s_q 3 also short, in the small set.
  const std::vector<int> lens3({4400, 65, 700});
  // (The (h_q, s_q) lists sit inside the for's parentheses: MLA_GPU_CASES is a macro, whose arguments split at
  // commas outside parentheses.)
  for (auto [h, sq] : std::vector<std::pair<int, int>>{{128, 2}, {128, 3}, {64, 3}, {64, 4}, {32, 4}})
    add_case(cases, dc(kB, 3, h, sq, true, lens3), "4400_65_700");
  for (auto [h, sq] :
       std::vector<std::pair<int, int>>{{16, 2}, {32, 2}, {64, 2}, {32, 3}, {64, 3}, {128, 3}, {16, 4}, {32, 4}})
    add_case(cases, dc(kH, 3, h, sq, true, lens3), "4400_65_700");
  add_case(cases, dc(kH, 3, 64, 1, false, lens3), "4400_65_700");
  add_case(cases, dc(kH, 1, 64, 1, false, {511}), "len511");
  for (KvFormat f : {kB, kH}) add_case(cases, dc(f, 3, 64, 3, true, {300, 65, 1}), "300_65_1");
  // fp16 on the 16-row kernel's long parts (kernel_n16ws.cuh: parts over 16 pages copy without the evict-first hint),
  // which only bf16's b128 x 4096 case reached: a plan of 4 SMs (DecodeShape::plan_sms) cuts 254 pages into parts of
  // 60-66 (the third part ends in the fourth sequence, whose two pieces the merge joins).
  {
    DecodeCase c = dc(kH, 4, 16, 1, false, {4096, 4096, 3000, 5000});
    c.shape.plan_sms = 4;
    add_case(cases, c, "long4_sms4");
  }
});

// One CUDA graph replayed over steps of other seqlens under the shapes' geometry (decode_graph_steps.h), as the
// engine's graph steps run: the 16-row kernels (h_q 16), the 64-row ones where the step's seqlens would have picked
// narrow tiles (h_q 128 short) or one column per sequence (h_q 128 b32 s512), and causal s_q 2 in fp16.
void add_graph_case(std::vector<GpuCase>& cases, KvFormat f, int batch, int h_q, int s_q, bool causal,
                    const std::vector<int>& lens, const std::string& tag) {
  if (small_cases()) return;  // 4 steps of CPU references each: too long under the sanitizers
  const DecodeCase c = dc(f, batch, h_q, s_q, causal, lens);  // the suite's layout, as every case
  const DecodeShape shape = c.shape;
  const std::string name = case_name(c, tag) + "_graph_steps";
  cases.push_back({"mla_decode", name, case_tol(f), [shape, name, f](CaseReport* rep) -> Status {
                     auto rng = case_rng(name);
                     const DecodeHostData h = make_decode_data(shape, rng);
                     return run_graph_over_steps(name, h, kSoftmaxScale, graph_steps_within(h.seqlens),
                                                 [&](const GraphStepResult& r) {
                                                   rep->add(r.tag + " out", compare16(f, r.out, r.out_ref));
                                                   rep->add(r.tag + " out worst row",
                                                            worst_row16(f, r.out, r.out_ref), &kDecodeRowTol);
                                                   rep->add(r.tag + " lse", compare_vec(r.lse, r.lse_ref),
                                                            &kDecodeLseTol);
                                                 });
                   }});
}

MLA_GPU_CASES([](std::vector<GpuCase>& cases) {
  add_graph_case(cases, kB, 7, 16, 1, false, random_lens("graph_b7h16", 7, 1, 4096), "rand1_4096");
  add_graph_case(cases, kB, 8, 128, 1, false, random_lens("graph_b8h128", 8, 1, 700), "rand1_700");
  add_graph_case(cases, kB, 32, 128, 1, false, std::vector<int>(32, 512), "all512");
  add_graph_case(cases, kH, 5, 64, 2, true, random_lens("graph_b5h64", 5, 1, 3000), "rand1_3000");
});

// Bad input: each call must return an error Status and launch nothing (out stays poisoned).
MLA_GPU_CASES([](std::vector<GpuCase>& cases) {
  cases.push_back({"mla_decode", "bad_inputs_no_launch", Tolerance{0.0, 0.0, "a status code is exact"},
                   [](CaseReport* rep) -> Status {
                     const DecodeCase c = dc(kB, 2, 16, 1, false, {100, 200});
                     auto rng = case_rng("bad_inputs");
                     const DecodeHostData h = make_decode_data(c.shape, rng);
                     DecodeRejections r;
                     const DecodeShape& s = h.shape;
                     MLA_TRY(r.alloc(s.batch, s.s_q, s.h_q, h.q.size(), h.cache.size(), h.block_table.size() * 4,
                                     size_t(2) * 16 * kDimV * 2, 2 * 16 * 4));
                     const MlaDecodeParams good = h.params(r.q.data(), r.cache.data(), r.bt.data(), r.sl.data(),
                                                           r.out.data(), r.lse.data(), kSoftmaxScale);
                     MLA_TRY(r.upload(h.q, h.cache, h.block_table, h.seqlens));
                     r.call_shared(good, h.seqlens);
                     { auto p = good; p.q.dtype = DType::kFp32; r.call("q fp32", p); }
                     { auto p = good; p.format = KvFormat::kFp16; r.call("format mismatch", p); }
                     {
                       auto p = good;
                       p.q.shape[2] = 24;
                       p.q = TensorView::contiguous(r.q.data(), DType::kBf16, {2, 1, 24, 576});
                       r.call("h_q 24", p);
                     }
                     { auto p = good; p.q = TensorView::contiguous(r.q.data(), DType::kBf16, {2, 5, 16, 576});
                       r.call("s_q 5", p); }
                     {
                       auto p = good;
                       p.block_table = TensorView::contiguous(r.bt.data(), DType::kInt32, {3, h.max_pages});
                       r.call("block_table rows", p);
                     }
                     {
                       auto p = good;
                       p.kv_cache = TensorView::contiguous(r.cache.data(), DType::kBf16, {h.num_pages, 32, 576});
                       r.call("page size 32", p);
                     }
                     { auto p = good; p.out.stride[3] = 2; r.call("strided out", p); }
                     { auto p = good; p.out.data = static_cast<char*>(r.out.data()) + 8;  // TMA stores need 16 B
                       r.call("out misaligned", p); }
                     { auto p = good; p.softmax_scale = NAN; r.call("scale NaN", p); }
                     {
                       auto p = good;
                       p.format = KvFormat::kFp8;
                       p.q.dtype = DType::kE4m3;
                       p.kv_cache.dtype = DType::kE4m3;
                       p.k_scale = 0.f; r.call("fp8 k_scale 0", p);
                     }
                     r.call("workspace too small", good, r.g, r.plan, r.ws.bytes() - 4);
                     { auto gg = r.g; gg.h_q = 32; r.call("geometry mismatch", good, gg, r.plan, r.ws.bytes()); }
                     { auto pv = r.plan; pv.parts = nullptr; r.call("null plan", good, r.g, pv, r.ws.bytes()); }
                     { ScopedEnv env("MLA_DECODE_N16", "wgmma");  // not a variant
                       r.call("bad MLA_DECODE_N16", good); }
                     { ScopedEnv env("MLA_DECODE_N32", "wgmma");  // not a variant (read on every call, any rows)
                       r.call("bad MLA_DECODE_N32", good); }
                     { ScopedEnv env("MLA_DECODE_WS64_OUT", "bulk");  // not a form (read on every call, any rows)
                       r.call("bad MLA_DECODE_WS64_OUT", good); }
                     { ScopedEnv env("MLA_DECODE_HEAD_PAIRS", "on");  // not a value
                       r.call("bad MLA_DECODE_HEAD_PAIRS", good); }
                     { ScopedEnv env("MLA_DECODE_MERGE", "both");  // not a mode
                       r.call("bad MLA_DECODE_MERGE", good); }
                     { ScopedEnv env("MLA_DECODE_MERGE", "fused");  // this plan has no merge_counters
                       r.call("MLA_DECODE_MERGE=fused without merge_counters", good); }
                     return r.report(rep);
                   }});
});

}  // namespace
}  // namespace mla::test
