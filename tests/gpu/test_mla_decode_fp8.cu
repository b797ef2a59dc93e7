// mla_decode for the fp8 KV format (e4m3 q and cache, FP8 tensor cores) against the CPU reference.
//
// Data: tests/common/decode_data.h (fresh random per run, pages scattered over a random permutation,
// NaN codes in every unused cache slot, sentinels in unused block-table entries); out/lse/workspace
// poisoned, guard regions checked, the call replayed from a CUDA graph (must equal eager bit for bit).
// The primary comparison is ref::mla_decode_split with the kernel's own plan: it rounds P to e4m3 at the
// same per-split running max, and (session 62) adds up S and P V as the kernel's MMA does: the e4m3 wgmma's
// truncating sums (src/ops/ref/wgmma_e4m3_sum.h) with the wgmma kernels' softmax arithmetic and bf16 partials
// where they store them, float sums for the mma.sync kernels (fp8_reference_sums). The cases checked against the
// model take their own, tighter limits (kFp8ModelTol, kFp8ModelLseTol: session 63) and note their error against
// float sums beside. Each case also notes the error against an unquantized reference (bf16 q and K, exact softmax):
// the price of FP8.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/decode_data.h"
#include "common/random.h"
#include "common/s_noise.h"
#include "common/split_lse.h"
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
#include "ops/cuda/sm90/decode_fp8/config_ws.h"
#include "ops/cuda/sm90/decode_fp8/config_ws3.h"
#include "ops/cuda/sm90/decode_fp8/kernel_family.h"
#include "ops/cuda/sm90/decode_fp8/variant64.h"

namespace mla::test {
namespace {

constexpr float kSoftmaxScale = 0.0721687836f;  // 1/sqrt(192)

// Kernel vs split reference (same plan, same P-rounding points). What can differ:
//  - S: the e4m3 products are exact in both, only the fp32 summation order (and the tensor core's
//    accumulation precision) differs; exp2(fma(s, scale*log2e, -m')) vs exp(s*scale - m) adds ~1e-7.
//  - These perturb P by a relative delta (~1e-6, up to ~2^-12 if the FP8 MMA keeps ~13 bits of its
//    partial sums). Where P sits within delta of an e4m3 rounding midpoint the two round to neighbouring
//    codes: one term changes by one e4m3 ulp, <= 2^-3 of that P (P = 1 at the row max never flips).
//    A flipped non-max key has P/l <= 1/2, so one flip moves an output by <= 2^-4 * max|V| (output
//    units); bf16 rounding of the output adds <= 2^-8 * |out|. Flips are rare (a fraction ~20 * delta of
//    the terms) and random in sign: rel_l2 ~ sqrt(fraction) * 2^-4 <= ~5e-3 even at delta = 2^-12.
// Limits: out is compared divided by max|V| (output units, over the used tokens), so max_abs is two single-flip bounds,
// 2^-3: two flips can land in one output (session 12, MLA_TEST_SEED=4243: fp8_b32_h32_sq2_causal_rand1_2048_s3_ds
// max_abs 7.4e-2 at rel_l2 5.5e-3, over the 2^-4 bound of one flip plus the bf16 roundings of partials and output).
// rel_l2 3e-2: what the flips' count allows. A flip moves rel_l2 by ~2^-4 sqrt(flipped weight^2 / all weight^2), so
// its median is alike at every length, but a case of few rows and keys (b1 h16 len63: 16 rows x 63 keys) holds ~2
// flips, a Poisson count, and its tail is long. Measured on the H200 (session 39, kernels of 3aaf72f): 48 seeds
// (3900-3947) of the 145 batch-1 cases, 6960 comparisons: median 4.9e-3, p99 1.15e-2, p99.9 1.52e-2, max 2.27e-2
// (fp8_b1_h16_sq1_len63_s1_early_never, seed 3939: max_abs only 2.3e-2, i.e. flips, not a bug; it failed the 2e-2
// limit this had before); the whole suite under 4 more seeds (1108): max 1.69e-2. A CPU model of that family (exact
// scores plus relative noise 7e-4 of sqrt(sum (q k)^2), P rounded to e4m3 after it; median 5.0e-3 and p90 1.0e-2, as
// the H200's 5.5e-3 / 1.1e-2) over 40000 seeds: p99.9 1.95e-2, max 2.54e-2, none over 3e-2. A layout, order or scale
// bug gives errors of O(1), and 3e-2 stays below what FP8 itself costs (ANCHORS.md: PR54 vs the original bf16 inputs
// 3.2e-2 - 4.5e-2; this kernel's own price, in the notes, 4e-2 - 6e-2 on these cases).
// lse: a perturbed S moves lse by |dS| (natural-log units), far below 2^-4; compared relative to
// max(1, |lse|): relative where |lse| is large, absolute near 0 (measured max 7.7e-3, session 39).
// Where the noise comes from (H200, 2026-11-29, MLA_TEST_SEED=20261129, 46 cases): with mma.sync for both products
// (all tiles), unsaturated cases worst out rel_l2 1.8e-4 (max_abs 3.5e-3 in max|V| units), lse rel 1.9e-7. The wgmma
// kernels (every tile height's default since then) reach the rel_l2 above, lse rel ~1e-4: wgmma's e4m3 accumulation
// keeps fewer bits than mma.sync's (a single-key row, where P = 1 exactly, shows S itself off by ~5e-4 relative), i.e.
// the ~2^-12 end of the estimate above.
constexpr Tolerance kFp8Tol{
    3e-2, 1.25e-1,
    "e4m3 P flips on accumulation noise: two flips <= 2^-3 max|V|; rel_l2 measured p99.9 1.5e-2, "
    "max 2.3e-2 over 6960 batch-1 comparisons"};
// lse, divided by max(1, |lse|): P flips do not reach it (the row sum is taken before P is rounded), only the S noise
// does, by |dS| in natural-log units. Measured on the H200 (session 54 c7, d8a6478's kernels, MLA_TEST_SEED=5407, the
// 383 cases of this file then): rel_l2 median 7.2e-5, max 7.1e-4; max_abs median 3.3e-4, p99 5.2e-3, max 7.5e-3
// (b7 h128 s_q 4 tiny_mix, DeepSeek-like data at scale 0.02, its outliers the largest scores). Limits 7x and 4x those
// maxima; the out tolerance above would let a row's lse be 0.125 off (e^0.125 = 13 % in the normaliser).
constexpr Tolerance kFp8LseTol{5e-3, 3e-2,
                               "S noise of the e4m3 wgmma accumulation only: measured max rel_l2 7.1e-4, max_abs "
                               "7.5e-3 over 383 cases"};
// Each output row on its own (worst_row, metrics.h: one wrong row of a b128 case hides in the case's rel_l2). A row's
// error is its e4m3 P flips: one flip moves a weight p by an e4m3 ulp (2^-4 to 2^-3 of p), so a row carried by a few
// keys moves by up to ~0.12 of its norm a flip (and by its score noise: s_noise_diagnosis). Measured on the H200
// (session 60, 946409b's tests, MLA_TEST_SEED=5903, 469 comparisons): median 3.6e-2, p90 9.5e-2, p99 1.19e-1, max
// 1.24e-1 (h128 rows of 511-8191 keys: one flip's worth). The limit, 2x that maximum, catches a broadly wrong row
// (another sequence's keys: ~1.4; a sign: 2; a scale off by 2x: 0.5-1).
constexpr Tolerance kFp8RowTol{0.25, 0.0, "a row's e4m3 P flips: measured max 0.124 over 469 comparisons; 2x margin"};
// The same checks where the reference models the e4m3 wgmma's sums (fp8_reference_sums: every kernel but the mma.sync
// ones; session 62). Measured on an H100 (session 63, 9075fa8's tests, MLA_TEST_SEED=1796466420702488: 439 cases and
// 12 graph steps against the model; scripts/fp8_suite_errors.py): out rel_l2 max 7.6e-3 (DeepSeek-like; N(0,1)
// 4.3e-3), where the same outputs against float sums reach 2.2e-2; lse max_abs 9.2e-4 against 1.2e-2; max_abs 9.8e-2
// and the worst row 0.124 either way: P flips, which the model keeps (the kernel's ex2.approx against exp2), so the
// row limit and max_abs stay. rel_l2 2e-2 (2.6x the max: the batch-1 cases' flip tail, above, was measured against
// float sums only), lse 5e-3 (5x the max; 6x under the float-sum limit).
constexpr Tolerance kFp8ModelTol{
    2e-2, 1.25e-1, "against the wgmma-sum model: measured max rel_l2 7.6e-3 over 439 cases; P flips as kFp8Tol"};
constexpr Tolerance kFp8ModelLseTol{5e-3, 5e-3, "against the wgmma-sum model: measured max_abs 9.2e-4 over 439 cases"};
double bf16_at(const std::vector<uint16_t>& v, size_t i) { return double(bf16_to_float(v[i])); }
ErrorStats worst_row_bf16(const std::vector<uint16_t>& got, const std::vector<uint16_t>& ref) {
  return worst_row(ref.size() / kDimV, kDimV, [&](size_t i) { return bf16_at(got, i); },
                   [&](size_t i) { return bf16_at(ref, i); });
}
// Why an out check failed, for the case's note: how much of the failure the score noise of the e4m3 wgmma explains
// (common/s_noise.h). Its partial sums keep ~14 bits, so a score is off by ~eps x M_t (M_t = sum |q_d k_td|): on
// N(0, 1) data a few 1e-3 nats, nothing next to a P flip; on DeepSeek-like data, whose outlier channels put a row's
// logits at hundreds of nats, up to ~1 nat, and a row carried by two keys of nearly equal logits then swings between
// their V rows by more than any P flip. The note gives the eps at which each failed check would pass with every output
// allowed eps x its sigma, and the sigma of the worst row (`row`): an eps near what this suite's lse errors imply on
// DeepSeek-like data (session 61, 76 comparisons: each case's worst lse row implies eps median 3.3e-4, max 6.9e-4 but
// for n1's failing case, 1.4e-3) says noise; a large one or none says a bug. A diagnosis only: the checks stay the
// limits above.
std::string s_noise_diagnosis(const DecodeHostData& h, float softmax_scale, const std::vector<uint16_t>& out,
                              const std::vector<uint16_t>& ref, double vmax, size_t row) {
  const SNoise nz = fp8_s_noise(h, softmax_scale);
  auto got = [&](size_t i) { return bf16_at(out, i); };
  auto want = [&](size_t i) { return bf16_at(ref, i); };
  auto row_stats = [&](const std::vector<double>& v) {
    return worst_row(ref.size() / kDimV, kDimV, [&](size_t i) { return v[i]; }, want);
  };
  auto out_stats = [&](const std::vector<double>& v) {
    return compare(ref.size(), [&](size_t i) { return v[i] / vmax; }, [&](size_t i) { return want(i) / vmax; });
  };
  auto row_passes = [&](const std::vector<double>& v) { return within(row_stats(v), kFp8RowTol); };
  auto out_passes = [&](const std::vector<double>& v) { return within(out_stats(v), kFp8Tol); };
  const double eps_row = s_noise_eps_needed(ref.size(), got, want, nz, row_passes);
  const double eps_out = s_noise_eps_needed(ref.size(), got, want, nz, out_passes);
  double sig = 0, norm = 0;
  for (int d = 0; d < kDimV; ++d) {
    sig += double(nz.out[row * kDimV + d]) * nz.out[row * kDimV + d];
    norm += want(row * kDimV + d) * want(row * kDimV + d);
  }
  char buf[240];
  std::snprintf(buf, sizeof buf,
                "score noise (common/s_noise.h): eps needed by the out checks %.2e, by the row check %.2e; worst row "
                "%zu's sigma %.1f x eps of its norm",
                eps_out, eps_row, row, std::sqrt(sig / std::max(norm, 1e-300)));
  return buf;
}

// The worst row's split lse values, kernel against reference (both [max_splits, s_q * h_q], natural log): the merge
// weights of its pieces. A piece off by much more than the others says which part (CTA) went wrong; all of them off
// alike, a shared bias the merge does not see.
std::string split_lse_diagnosis(const DecodeShape& s, const DecodeDeviceResult& r, const std::vector<float>& lse_acc,
                                size_t worst_row) {
  const int rows = s.s_q * s.h_q, b = int(worst_row) / rows, q_row = int(worst_row) % rows;
  std::string msg = "row " + std::to_string(worst_row) + "'s split lse, kernel - reference:";
  const int first = r.off_ref[b], n = r.off_ref[b + 1] - first;
  if (n == 1) return msg + " none (one piece)";
  char buf[64];
  for (int k = 0; k < n; ++k) {
    const size_t i = static_cast<size_t>(first + k) * rows + q_row;
    std::snprintf(buf, sizeof buf, " %.4f - %.4f", r.lse_partials[i], lse_acc[i]);
    msg += buf;
    if (k + 1 < n) msg += ",";
  }
  return msg;
}
// Saturated inputs (codes pinned at +-448, raw scores up to 448^2 * 576 ~ 1.2e8) run with a softmax scale that
// keeps the logits O(1) (std ~4, see add()), so they get the tolerance above. At the model's scale such scores
// are ~1e6 logits apart: the softmax is one-hot, and since every product of pinned codes is +-448^2 many keys
// tie exactly for the maximum; Hopper's FP8 MMA keeps only ~14 bits of its partial sums (DeepSeek-V3 report)
// and the reference's fp32 sums are not exact beyond 2^24 either, so each side breaks those ties its own way
// and one flipped row moves rel_l2 by sqrt(2 / rows) (~9e-2 at 256 rows; seeds 20261130 and 20261201 failed
// that way on two kernels). That tests tie-breaking, not saturation; the saturation itself (satfinite codes,
// scales applied after the MMA) is what these cases must check, with a well-conditioned softmax.

struct Fp8Case {
  DecodeShape shape;
  bool price_check = true;  // also run the unquantized reference (CPU time) for the note
  float softmax_scale = kSoftmaxScale;
};

// Largest |V| in output units over the tokens sequences use (the scale of one P flip, see kFp8Tol).
double max_abs_v(const DecodeHostData& h) {
  double vmax = 0;
  const DecodeShape& s = h.shape;
  for (int b = 0; b < s.batch; ++b)
    for (int t = 0; t < s.seqlens[b]; ++t) {
      const uint8_t* tok = h.token(b, t);
      for (int d = 0; d < kDimV; ++d) vmax = std::max(vmax, std::fabs(double(e4m3_to_float(tok[d]))));
    }
  return vmax * s.k_scale;
}

ErrorStats compare_bf16(const std::vector<uint16_t>& got, const std::vector<uint16_t>& ref, double unit) {
  const double inv = unit > 0 ? 1.0 / unit : 1.0;
  return compare(ref.size(), [&](size_t i) { return bf16_at(got, i) * inv; },
                 [&](size_t i) { return bf16_at(ref, i) * inv; });
}

// The unquantized problem: bf16 q and K from the generator's float values, one page per (b, block) in
// order, exact softmax (no P rounding). Returns out.
Status unquantized_reference(const DecodeHostData& h, float softmax_scale, std::vector<uint16_t>* out) {
  const DecodeShape& s = h.shape;
  const int pages = s.batch * h.max_pages;
  std::vector<uint16_t> q(h.q_float.size()), cache(size_t(pages) * kDecodePageSize * kDimQK, 0xFFFFu);
  for (size_t i = 0; i < q.size(); ++i) q[i] = float_to_bf16(h.q_float[i]);
  std::vector<int32_t> bt(size_t(s.batch) * h.max_pages);
  for (int b = 0; b < s.batch; ++b) {
    for (int j = 0; j < h.max_pages; ++j) bt[size_t(b) * h.max_pages + j] = b * h.max_pages + j;
    for (int t = 0; t < s.seqlens[b]; ++t) {
      const size_t src = (size_t(b) * h.max_pages * kDecodePageSize + t) * kDimQK;
      const size_t dst = (size_t(b) * h.max_pages * kDecodePageSize + t) * kDimQK;  // page b * max_pages + t / 64
      for (int d = 0; d < kDimQK; ++d) cache[dst + d] = float_to_bf16(h.kv_float[src + d]);
    }
  }
  std::vector<float> lse(h.lse_elems());
  out->assign(h.out_elems(), 0xFFFFu);
  MlaDecodeParams p;
  p.q = TensorView::contiguous(q.data(), DType::kBf16, {s.batch, s.s_q, s.h_q, kDimQK});
  p.kv_cache = TensorView::contiguous(cache.data(), DType::kBf16, {pages, kDecodePageSize, kDimQK});
  p.block_table = TensorView::contiguous(bt.data(), DType::kInt32, {s.batch, h.max_pages});
  p.seqlens = TensorView::contiguous(const_cast<int32_t*>(h.seqlens.data()), DType::kInt32, {s.batch});
  p.out = TensorView::contiguous(out->data(), DType::kBf16, {s.batch, s.s_q, s.h_q, kDimV});
  p.lse = TensorView::contiguous(lse.data(), DType::kFp32, {s.batch, s.h_q, s.s_q});
  p.format = KvFormat::kBf16;
  p.softmax_scale = softmax_scale;
  p.causal = s.causal;
  MlaDecodeRefOptions opts;
  opts.p_rounding = PRounding::kNone;
  return ref::mla_decode(p, opts);
}

// One case: the device run's shared checks (decode_device_run.h: device plan vs host plan, graph replays vs eager,
// merge counters, guards), then the kernel vs the split reference on the same plan.
// The suite's out rel_l2 of the cases on N(0,1) data that nothing drives to +-448, in run order, for the suite-level
// check registered last (fp8_suite_median_error): one case's limit (kFp8Tol) must allow a rare tail of P flips, so a
// systematic mismatch of a few 1e-2 -- the exact running max instead of the lazy one (2.3e-2 - 2.7e-2 in a CPU model),
// P not cast to e4m3 (1.6e-2 - 2.5e-2), both passed by every case -- shows only in the median over many cases.
std::vector<double>& suite_out_rel_l2() {
  static std::vector<double> v;
  return v;
}

// The reference's sums for the kernel a step of geometry g runs under the knobs the case sets (the dispatch's own
// rules: sm90/decode_fp8/kernel_family.h, variant64.h): the mma.sync kernels add up at float precision (H200,
// 2026-11-29: lse rel 1.9e-7, above); the others run their products on e4m3 wgmma, whose sums the reference models
// (src/ops/ref/wgmma_e4m3_sum.h) with each product's wgmma form: the 64-row kernels take Q from registers in S's last
// kQRegSteps k32 steps (ws_qreg 6, ws_split and ws3 8, ws_ahead none) and P.V from shared memory, and store split
// partials as bf16 (decode::write_segment_ws); the 16-row kernel takes S from shared memory and V^T from registers.
// counters: the call passes the plan's merge counters (the suite's cases; the engine's graph steps pass none), which
// mla_decode keeps for 64-row tiles unless MLA_DECODE_MERGE=combine (merge_counters_for).
Status fp8_reference_sums(const DecodePlanGeometry& g, int rows_per_seq, bool counters, MlaDecodeRefOptions* o) {
  namespace fp8 = sm90::decode_fp8;
  fp8::N32Mode n32{};
  MLA_TRY(fp8::n32_mode(&n32));
  const EnvKnob merge = cuda::decode_merge_knob();  // index 1: combine
  MLA_TRY(merge.status);
  const bool fused = counters && merge.index != 1 && g.tile_rows == kDecodeRowsPerCta;
  fp8::Variant64 v{};
  MLA_TRY(fp8::variant64(g, fused, &v));
  const fp8::Fp8KernelFamily family =
      fp8::fp8_kernel_family(rows_per_seq, g.tile_rows, n32, v == fp8::Variant64::kMmaSync);
  *o = MlaDecodeRefOptions{};
  o->fp8_mma_sum = family == fp8::Fp8KernelFamily::kMmaSync ? Fp8MmaSum::kFloat : Fp8MmaSum::kWgmmaE4m3;
  o->bf16_partials = family == fp8::Fp8KernelFamily::kWs64;
  o->pv_register_a = family == fp8::Fp8KernelFamily::kH16;
  if (family == fp8::Fp8KernelFamily::kWs64) {
    switch (v) {
      case fp8::Variant64::kWs3: o->s_register_steps = fp8::kWs3QRegSteps; break;
      case fp8::Variant64::kWsSplit: o->s_register_steps = fp8::WsSplit::kQRegSteps; break;
      case fp8::Variant64::kWsAhead: o->s_register_steps = fp8::WsAhead::kQRegSteps; break;
      default: o->s_register_steps = fp8::WsQReg::kQRegSteps;
    }
  }
  return Status::ok();
}

// The sums a reference ran with, as a case's note says it ("reference sums: model" / "float"): what
// scripts/fp8_suite_errors.py groups the suite's measured errors by; and the out / lse limits of a comparison
// against that reference.
bool model_sums(const MlaDecodeRefOptions& o) { return o.fp8_mma_sum == Fp8MmaSum::kWgmmaE4m3; }
const char* reference_sums_name(const MlaDecodeRefOptions& o) { return model_sums(o) ? "model" : "float"; }
const Tolerance* out_tolerance(const MlaDecodeRefOptions& o) { return model_sums(o) ? &kFp8ModelTol : &kFp8Tol; }
const Tolerance* lse_tolerance(const MlaDecodeRefOptions& o) { return model_sums(o) ? &kFp8ModelLseTol : &kFp8LseTol; }
void add_note(CaseReport* rep, const std::string& text) { rep->note += (rep->note.empty() ? "" : "; ") + text; }

Status run_fp8_case(const std::string& name, const Fp8Case& c, CaseReport* rep) {
  // MLA_TEST_DATA_NAME=<case>: draw another case's data (same shape), e.g. a failed case's on each kernel variant of
  // its class, to tell a failure that follows the data from one that follows the kernel.
  const char* data_name = std::getenv("MLA_TEST_DATA_NAME");
  auto rng = case_rng(data_name ? std::string(data_name) : name);
  const DecodeHostData h = make_decode_data(c.shape, rng);
  const DecodeShape& s = h.shape;
  DecodeDeviceResult r;
  MLA_TRY(run_decode_on_device(name, h, c.softmax_scale, &r));
  const DecodePlanGeometry& g = r.g;
  const std::vector<uint16_t>& out = r.out;
  const std::vector<float>& lse = r.lse;

  // Split reference on the host copies, same plan.
  std::vector<uint16_t> out_ref(h.out_elems(), 0xFFFFu);
  std::vector<float> lse_ref(h.lse_elems(), NAN);
  std::vector<float> o_acc(size_t(g.max_splits) * s.s_q * s.h_q * kDimV, NAN),
      lse_acc(size_t(g.max_splits) * s.s_q * s.h_q, NAN);
  const MlaDecodeParams ph = h.host_params(out_ref.data(), lse_ref.data(), c.softmax_scale);
  MlaDecodeRefOptions sums;
  MLA_TRY(fp8_reference_sums(g, s.s_q * s.h_q, /*counters=*/true, &sums));
  MLA_TRY(ref::mla_decode_split(ph, r.plan_ref(), o_acc.data(), lse_acc.data(), sums));
  MLA_TRY(check_reference_complete(KvFormat::kFp8, out_ref, lse_ref, name));
  const double vmax = max_abs_v(h);
  const ErrorStats out_err = compare_bf16(out, out_ref, vmax), row_err = worst_row_bf16(out, out_ref);
  rep->add("out/max|V|", out_err, out_tolerance(sums));
  rep->add("out worst row", row_err, &kFp8RowTol);
  const bool out_fails = !within(out_err, *out_tolerance(sums)) || !within(row_err, kFp8RowTol);
  const DecodeShape& sh = c.shape;
  if (sh.data == DataKind::kNormal && sh.data_scale / sh.q_scale <= 448.f && sh.data_scale / sh.k_scale <= 448.f)
    suite_out_rel_l2().push_back(out_err.rel_l2);
  rep->add("lse/max(1,|lse|)", compare_lse(lse, lse_ref), lse_tolerance(sums));

  if (c.price_check) {
    std::vector<uint16_t> out_u;
    MLA_TRY(unquantized_reference(h, c.softmax_scale, &out_u));
    const ErrorStats su = compare_bf16(out, out_u, 1.0);
    char buf[200];
    std::snprintf(buf, sizeof buf, "price of FP8 (vs bf16 inputs, exact softmax): out rel_l2=%.3e max_abs=%.3e",
                  su.rel_l2, su.max_abs);
    add_note(rep, buf);
    if (su.nonfinite_got || su.mismatched_nan)
      return Status::internal("mla_decode", std::string(buf) + " non-finite (" + name + ")");
  }
  if (model_sums(sums)) {
    // What the model of the wgmma's sums takes out of the comparison: the same kernel output against float sums (the
    // reference before session 62), as a note (scripts/fp8_suite_errors.py's "float sums:" rows).
    std::vector<uint16_t> out_f(h.out_elems(), 0xFFFFu);
    std::vector<float> lse_f(h.lse_elems(), NAN), o_f(o_acc.size()), l_f(lse_acc.size());
    MLA_TRY(ref::mla_decode_split(h.host_params(out_f.data(), lse_f.data(), c.softmax_scale), r.plan_ref(), o_f.data(),
                                  l_f.data()));
    const ErrorStats fo = compare_bf16(out, out_f, vmax), fr = worst_row_bf16(out, out_f), fl = compare_lse(lse, lse_f);
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "against float sums: out/max|V| rel_l2=%.3e max_abs=%.3e, worst row %.3e (row %zu), lse max_abs=%.3e",
                  fo.rel_l2, fo.max_abs, fr.rel_l2, fr.worst, fl.max_abs);
    add_note(rep, buf);
  }
  // (After the price note, which scripts/fp8_price_table.py reads first in the line.)
  add_note(rep, std::string("reference sums: ") + reference_sums_name(sums));
  {
    // A diagnostic for now, no check: the pieces' lse errors free of their shared bias (common/split_lse.h), reported
    // on every case until a run of the whole suite has measured them (then a limit in nats).
    const SplitLseSpread sp = split_lse_spread(r.lse_partials, lse_acc, r.off_ref, s.s_q * s.h_q);
    if (sp.rows > 0) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "split lse spread over weighted pieces: max %.3f nats at row %ld (%ld rows)",
                    sp.max_nats, sp.row, sp.rows);
      add_note(rep, buf);
    }
  }
  if (out_fails)
    add_note(rep, s_noise_diagnosis(h, c.softmax_scale, out, out_ref, vmax, row_err.worst) + "; " +
                      split_lse_diagnosis(s, r, lse_acc, row_err.worst));
  return Status::ok();
}

struct CaseSpec {
  int batch, h_q, s_q;
  bool causal;
  std::vector<int> lens;
  std::string lens_tag;
  float scale = 1.f;        // q_scale, and k_scale unless given below
  float data_scale = 1.f;   // > 448 * scale saturates codes at +-448
  DataKind data = DataKind::kNormal;
  bool price = true;
  bool small = false;       // part of the MLA_SMALL_CASES=1 (sanitizer) subset
  int spare_pages = 3;      // cache pages no sequence uses; 0: every page is used, the cache's last one included
  float k_scale = 0.f;      // > 0: k_scale apart from q_scale (a swap of the two, or one used twice, is then wrong)
  int plan_sms = 0;         // > 0: the plan fills this many SMs (DecodeShape::plan_sms): long parts from a small step
};

std::string scale_tag(float x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  std::string s = buf;
  std::replace(s.begin(), s.end(), '.', 'p');
  return s;
}

// Whether the case's step, merged by the combine, runs its 64-row tiles on another kernel than ws_qreg by default
// (ws3 or ws_split, variant64.h; the geometry an engine's eager step gets: with its seqlens).
bool auto_leaves_ws_qreg_under_combine(const Fp8Case& c) {
  DecodePlanGeometry g;
  if (!case_geometry(c.shape, &g).is_ok()) return false;
  return sm90::decode_fp8::auto_picks_ws3(g, false) || sm90::decode_fp8::auto_picks_ws_split(g, false);
}

void add(std::vector<GpuCase>& cases, const CaseSpec& cs) {
  if (small_cases() && !cs.small) return;
  Fp8Case c;
  c.shape.batch = cs.batch;
  c.shape.h_q = cs.h_q;
  c.shape.s_q = cs.s_q;
  c.shape.causal = cs.causal;
  c.shape.seqlens = cs.lens;
  c.shape.format = KvFormat::kFp8;
  c.shape.q_scale = cs.scale;
  c.shape.k_scale = cs.k_scale > 0.f ? cs.k_scale : cs.scale;
  c.shape.data_scale = cs.data_scale;
  c.shape.data = cs.data;
  c.shape.spare_pages = cs.spare_pages;
  c.shape.plan_sms = cs.plan_sms;
  c.price_check = cs.price;
  const std::string name = "fp8_b" + std::to_string(cs.batch) + "_h" + std::to_string(cs.h_q) + "_sq" +
                           std::to_string(cs.s_q) + (cs.causal ? "_causal" : "") + "_" + cs.lens_tag + "_s" +
                           scale_tag(cs.scale) + (cs.k_scale > 0.f ? "_k" + scale_tag(cs.k_scale) : "") +
                           (cs.data_scale != 1.f ? "_x" + scale_tag(cs.data_scale) : "") +
                           (cs.data == DataKind::kDeepSeekLike ? "_ds" : "") +
                           (cs.spare_pages == 0 ? "_nospare" : "") +
                           (cs.plan_sms > 0 ? "_sms" + std::to_string(cs.plan_sms) : "");
  // Saturating cases (|x / scale| >> 448 for most values of q or K): a pinned code is +-448 * scale after
  // dequantization, an unpinned value keeps ~data_scale, so a score has std ~sqrt(576) * vq * vk with v = the smaller
  // of the two; this softmax scale puts the logits' std at ~4 (where both saturate: sqrt(576) * (448 * scale)^2).
  const float q_scale = c.shape.q_scale, k_scale = c.shape.k_scale;
  if (cs.data_scale / q_scale > 448.f || cs.data_scale / k_scale > 448.f) {
    const float vq = std::min(cs.data_scale, 448.f * q_scale), vk = std::min(cs.data_scale, 448.f * k_scale);
    c.softmax_scale = 4.f / (24.f * vq * vk);
  }
  cases.push_back({"mla_decode", name, kFp8Tol, [c, name](CaseReport* rep) { return run_fp8_case(name, c, rep); }});
  // The 16- and 32-row kernel's early S (kernel_h16.cuh) is taken per page when the next page has landed in time, so
  // a default run may reach either path or both: each 16- and 32-row case runs again with it forced always and never
  // (MLA_DECODE_FP8_H16_EARLY_S, read on every call). Not for the b128 x 4096 case: its CPU reference takes ~16 s.
  int64_t tokens = 0;
  for (int len : cs.lens) tokens += len;
  if ((cs.h_q * cs.s_q == 16 || cs.h_q * cs.s_q == 32) && tokens <= 200000) {
    for (const char* mode : {"always", "never"}) {
      const std::string n = name + "_early_" + mode;
      cases.push_back({"mla_decode", n, kFp8Tol, [c, n, mode](CaseReport* rep) {
                         ScopedEnv env("MLA_DECODE_FP8_H16_EARLY_S", mode);
                         return run_fp8_case(n, c, rep);
                       }});
    }
  }
  // Tiles of exactly 32 rows run on the keys-as-M wgmma kernel with two row groups by default (kernel_h16.cuh, RG 2),
  // and again on the 64-row warp-specialized kernel (bf16 partials, as the 48-row tiles) and on the two-row-group
  // mma.sync kernel (MLA_DECODE_N32 = ws / mma, read on every call), same tolerance: the same operands rounded at the
  // same points.
  if (cs.h_q * cs.s_q >= 32 && cs.h_q * cs.s_q < 48 && tokens <= 200000) {
    for (const char* mode : {"ws", "mma"}) {
      const std::string n = name + "_n32" + mode;
      cases.push_back({"mla_decode", n, kFp8Tol, [c, n, mode](CaseReport* rep) {
                         ScopedEnv env("MLA_DECODE_N32", mode);
                         return run_fp8_case(n, c, rep);
                       }});
    }
  }
  // 64-row tiles (h_q * s_q >= 48) run again on the experimental scorer-split kernel (kernel_ws3.cuh;
  // MLA_DECODE_FP8_VARIANT64 is read on every call), same tolerance: the same operands rounded at the same points (Q,
  // K, V, P in e4m3); only the order in which the row sums add up differs (per page and quad, then per page), far
  // below the tolerance. Not the b128 x 4096 case, as above: its CPU reference alone takes ~16 s.
  if (cs.h_q * cs.s_q >= 48 && tokens <= 200000) {
    const std::string n = name + "_ws3";
    cases.push_back({"mla_decode", n, kFp8Tol, [c, n](CaseReport* rep) {
                       ScopedEnv env("MLA_DECODE_FP8_VARIANT64", "ws3");
                       return run_fp8_case(n, c, rep);
                     }});
  }
  // ... and on ws_split (config_ws.h WsSplit: plain stores, 8 Q-register steps, the combine merges), the default of
  // steps whose sequences are all cut, here on every 64-row case, whole sequences and fused-merge steps included (the
  // dispatch drops the merge counters for it). Same tolerance: the same kernel as ws_qreg but for where its output is
  // staged and how many Q steps come from registers (the same e4m3 values).
  if (cs.h_q * cs.s_q >= 48 && tokens <= 200000) {
    const std::string n = name + "_wssplit";
    cases.push_back({"mla_decode", n, kFp8Tol, [c, n](CaseReport* rep) {
                       ScopedEnv env("MLA_DECODE_FP8_VARIANT64", "ws_split");
                       return run_fp8_case(n, c, rep);
                     }});
  }
  // An even number of 64-row head tiles (h_q 128 s_q 1, h_q 64 s_q 2, ...) launches in head-tile pairs ((1, 2, 1)
  // clusters, decode_head_pairs), and again as a plain grid (MLA_DECODE_HEAD_PAIRS=off, read on every call). Same
  // tolerance: the same operands rounded at the same points; only where the CTAs run differs (a cluster twin of the
  // kernel, as bench/decode/patches/fp8_ws_pair_split.patch builds, would differ in more).
  if (cs.h_q * cs.s_q >= 48 && (cs.h_q * cs.s_q + 63) / 64 % 2 == 0 && tokens <= 200000) {
    const std::string n = name + "_unpaired";
    cases.push_back({"mla_decode", n, kFp8Tol, [c, n](CaseReport* rep) {
                       ScopedEnv env("MLA_DECODE_HEAD_PAIRS", "off");
                       return run_fp8_case(n, c, rep);
                     }});
  }
  // s_q 1 and h_q 64 / 128, up to 8 sequences: the case runs on the head tiles its seqlens pick (the call passes them:
  // decode_plan_narrow_tiles) and again on the other ones (MLA_DECODE_TILE_ROWS, read by every decode_plan_geometry
  // call): narrow 16-row tiles run the keys-as-M kernel, one tile of 16 rows per grid.y. Same tolerance: the same
  // operands rounded at the same points (Q, K, V, P in e4m3), as the 32-row twins above.
  if (cs.s_q == 1 && cs.h_q >= 64 && cs.batch <= 8 && tokens <= 200000) {
    const std::string n = name + "_othertile";
    cases.push_back({"mla_decode", n, kFp8Tol, [c, n](CaseReport* rep) {
                       bool narrow = false;
                       MLA_TRY(takes_narrow_tiles(c.shape, &narrow));
                       ScopedEnv env("MLA_DECODE_TILE_ROWS", narrow ? "64" : "16");
                       return run_fp8_case(n, c, rep);
                     }});
  }
  // A 64-row step of fewer sequences than columns runs again on the other column count: one column per sequence
  // (MLA_DECODE_WHOLE_SEQS=on) where the machine's columns are the default, and the machine's (off) where the step's
  // short whole sequences take one each by default (decode_plan_whole_sequences, read by every decode_plan_geometry
  // call). Same tolerance: the same kernels on another plan (whole sequences: direct segments, no partials).
  if (cs.h_q * cs.s_q >= 48 && tokens <= 200000) {
    bool whole = false, can = false;
    if (whole_sequence_forms(c.shape, &whole, &can).is_ok() && (whole || can)) {
      const std::string n = name + (whole ? "_machinecols" : "_wholeseqs");
      cases.push_back({"mla_decode", n, kFp8Tol, [c, n, whole](CaseReport* rep) {
                         ScopedEnv env("MLA_DECODE_WHOLE_SEQS", whole ? "off" : "on");
                         return run_fp8_case(n, c, rep);
                       }});
    }
  }
  // Every case passes the plan's merge_counters, so its split sequences are merged by the decode kernel where it can
  // (fused_merge.cuh), and again by the combine grid (MLA_DECODE_MERGE=combine, read on every call); same tolerance
  // (the combine's math on the same partials, in another order of the same sums).
  if (tokens <= 200000) {
    const std::string n = name + "_combine";
    cases.push_back({"mla_decode", n, kFp8Tol, [c, n](CaseReport* rep) {
                       ScopedEnv env("MLA_DECODE_MERGE", "combine");
                       return run_fp8_case(n, c, rep);
                     }});
  }
  // Without the fused merge, a step of short split parts runs its 64-row tiles on ws3 by default, and a step whose
  // sequences are all cut on ws_split (variant64.h, from the seqlens the call passes): such a case runs the combine
  // once more on the ws_qreg kernel, so every kernel stays covered under the combine.
  if (tokens <= 200000 && auto_leaves_ws_qreg_under_combine(c)) {
    const std::string n = name + "_combine_wsqreg";
    cases.push_back({"mla_decode", n, kFp8Tol, [c, n](CaseReport* rep) {
                       ScopedEnv merge("MLA_DECODE_MERGE", "combine");
                       ScopedEnv variant("MLA_DECODE_FP8_VARIANT64", "ws_qreg");
                       return run_fp8_case(n, c, rep);
                     }});
  }
}

constexpr DataKind kDs = DataKind::kDeepSeekLike;

MLA_GPU_CASES([](std::vector<GpuCase>& cases) {
  // Page-boundary seqlens, one sequence, every head count (16/32: 1-2 row groups; 64/128: 64-row tiles).
  for (int h : {16, 32, 64, 128})
    for (int len : {1, 63, 64, 65, 511})
      add(cases, {1, h, 1, false, {len}, "len" + std::to_string(len), 1.f, 1.f, DataKind::kNormal, true,
                  len == 65 && (h == 16 || h == 128)});
  // Long single sequences: many splits; scales 0.02 and 3.0 (codes ~50x and ~0.3x the data).
  add(cases, {1, 16, 1, false, {8191}, "len8191", 0.02f, 1.f, kDs});
  add(cases, {1, 128, 1, false, {8191}, "len8191", 3.f, 1.f, kDs});
  add(cases, {1, 32, 1, false, {4096}, "len4096", 1.f});
  // Batch-1 plans of decode_plan_per_part (b00ebb9): h_q 16 x s_q 4 (64 rows, causal), its pieces raised from 1 to 2
  // pages (64 pieces), and h_q 64 s16384, no longer raised since 6811339's weight: the plain 128 pieces of 2 pages
  // (86 of 3 before).
  add(cases, {1, 64, 1, false, {16384}, "len16384", 1.f});
  add(cases, {1, 16, 4, true, {8191}, "len8191", 1.f});
  // Plans of 5f600b6's split price (1 at 64 rows): h_q 128 b32 s512, each sequence cut in 2 pieces of 4 pages (its
  // `_machinecols` twin; one whole sequence per column by default since session 50); the
  // batch-1 raise, h_q 64 s8192 (64 pieces of 2 pages instead of 128 of 1) and h_q 128 s3584 (28 of 2 instead of 56).
  add(cases, {32, 128, 1, false, std::vector<int>(32, 512), "all512", 1.f});
  // Mixed lengths of 5-8 pages: the machine's columns by default, one column per whole sequence in its `_wholeseqs`
  // twin (decode_plan_whole_sequences takes only steps of 8-page sequences by default).
  add(cases, {24, 128, 1, false, random_lens("b24h128", 24, 257, 512), "rand257_512", 1.f});
  add(cases, {1, 64, 1, false, {8192}, "len8192", 1.f});
  add(cases, {1, 128, 1, false, {3584}, "len3584", 1.f});
  // Batch-1 rows of 11 / 16 / 17 one-page pieces: the direct combine grid's few-split path up to 16 (session 35).
  for (int len : {700, 1000, 1030}) add(cases, {1, 16, 1, false, {len}, "len" + std::to_string(len), 1.f});
  add(cases, {1, 128, 1, false, {700}, "len700", 1.f});
  // The same path on the other shapes of the 8-chunk grid (rows x batch <= 66, decode_combine_grid): 16 pieces at
  // h_q 64 b1 s1000, h_q 16 b2 (16 + 15), b4 (4 x 16) and h_q 16 s_q 2 (32 causal rows).
  add(cases, {1, 64, 1, false, {1000}, "len1000", 1.f});
  add(cases, {2, 16, 1, false, {1000, 900}, "1000_900", 1.f});
  add(cases, {4, 16, 1, false, std::vector<int>(4, 1000), "all1000", 1.f});
  add(cases, {1, 16, 2, true, {1000}, "len1000", 1.f});
  // Saturation: |x / scale| far above 448 for most values (q and K codes at +-448; logits kept O(1), see add()).
  add(cases, {2, 16, 1, false, {4096, 1000}, "4096_1000", 1.f, 2000.f});
  add(cases, {2, 128, 1, false, {511, 64}, "511_64", 3.f, 1500.f, DataKind::kNormal, true, true});
  add(cases, {2, 32, 2, true, {700, 65}, "700_65", 0.02f, 20.f, DataKind::kNormal, true, true});
  // The 16-bit suite's other shapes (session 58): h_q 16 s16384 (128 one-page pieces), the TMA-store epilogue's clipped
  // tiles (h_q 32 x s_q 3: a full tile and a 32-row one; h_q 16 x s_q 3: 48 rows), h_q 64 over two long sequences,
  // s_q 4 at h_q 32 / 64 (128 / 256 rows: 2 / 4 tiles; both in the sanitizers' small set, with s_q 2 unmasked), h_q
  // 128 s_q 4 over 16384 + 8191 keys, many 1-2 page sequences per 16- and 32-row part (Q slots reloaded at every
  // switch), and b128 h_q 64 s_q 2.
  add(cases, {1, 16, 1, false, {16384}, "len16384", 1.f});
  add(cases, {16, 32, 3, true, {1, 2, 63, 64, 65, 100, 127, 128, 129, 1, 64, 65, 30, 90, 110, 120}, "clip_mix", 1.f});
  add(cases, {7, 16, 3, true, {1, 63, 64, 65, 127, 129, 200}, "clip_mix", 1.f, 1.f, DataKind::kNormal, true, true});
  add(cases, {2, 64, 1, false, {16384, 4096}, "16384_4096", 1.f});
  add(cases, {2, 32, 4, true, {300, 1000}, "300_1000", 1.f, 1.f, kDs, true, true});
  add(cases, {2, 64, 4, true, {700, 65}, "700_65", 1.f, 1.f, DataKind::kNormal, true, true});
  add(cases, {3, 16, 2, false, {100, 65, 1}, "100_65_1", 1.f, 1.f, DataKind::kNormal, true, true});  // s_q 2, no mask
  add(cases, {2, 128, 4, true, {16384, 8191}, "16384_8191", 1.f, 1.f, DataKind::kNormal, false});
  add(cases, {400, 16, 1, false, random_lens("b400h16", 400, 1, 80), "rand1_80", 1.f});
  add(cases, {300, 32, 1, false, random_lens("b300h32", 300, 1, 80), "rand1_80", 1.f});
  add(cases,
      {128, 64, 2, false, random_lens("b128h64", 128, 1, 1024), "rand1_1024", 1.f, 1.f, DataKind::kNormal, false});
  // q_scale apart from k_scale (0.02 / 3.0 both ways; codes ~50x and ~0.3x the data): the scores take q_scale *
  // k_scale, the output k_scale alone, so a kernel that swaps them or squares one is off by O(1). On the 16-row kernel,
  // the 32-row tiles (keys-as-M, and its _n32 twins) and the 64-row kernel; the last with K alone saturated (K codes at
  // +-448: |x| / 0.02 ~ 1000; q / 3 unsaturated), so the two sides of the product are quantized differently.
  add(cases, {2, 16, 1, false, {4096, 1000}, "4096_1000", 0.02f, 1.f, kDs, true, false, 3, 3.f});
  add(cases, {7, 32, 1, false, random_lens("b7h32qk", 7, 1, 2048), "rand1_2048", 3.f, 1.f, DataKind::kNormal, true,
              false, 3, 0.02f});
  add(cases, {2, 128, 1, false, {1000, 511}, "1000_511", 3.f, 1.f, kDs, true, false, 3, 0.02f});
  add(cases, {2, 128, 2, true, {700, 65}, "700_65", 3.f, 20.f, DataKind::kNormal, true, true, 3, 0.02f});
  // Speculative rows with and without the causal diagonal, including rows that see no key.
  add(cases, {2, 64, 2, true, {8191, 4096}, "8191_4096", 1.f});
  add(cases, {7, 128, 4, true, {1, 2, 3, 4, 63, 64, 65}, "tiny_mix", 0.02f, 1.f, kDs, true, true});
  add(cases, {7, 16, 4, true, random_lens("b7h16", 7, 1, 8191), "rand1_8191", 0.02f, 1.f, kDs});
  add(cases, {7, 16, 4, false, random_lens("b7h16nc", 7, 1, 8191), "rand1_8191", 1.f});
  add(cases, {7, 16, 3, true, random_lens("b7h16sq3", 7, 1, 2000), "rand1_2000", 3.f});  // 48 rows: 3 groups
  add(cases, {2, 32, 3, true, {300, 4096}, "300_4096", 1.f});                            // 96 rows: partial 2nd tile
  add(cases, {2, 16, 2, false, {8191, 63}, "8191_63", 1.f, 1.f, kDs});
  // Zero-length sequences mixed in (out = 0, lse = -inf).
  add(cases, {7, 32, 1, false, {0, 65, 0, 511, 1, 0, 4096}, "with_zeros", 1.f});
  // The 64-row warp-specialized kernel; 896 combine items: the combine's list kernel writes the zero rows.
  add(cases, {7, 128, 1, false, {0, 65, 0, 511, 1, 0, 4096}, "with_zeros", 1.f});
  // The 16-row wgmma kernel (kernel_h16.cuh) counts Q slots per visited sequence: zero-length ones skipped.
  add(cases, {7, 16, 1, false, {0, 65, 0, 511, 1, 0, 4096}, "with_zeros", 1.f});
  add(cases, {2, 16, 2, true, {0, 0}, "all_zero", 1.f, 1.f, DataKind::kNormal, true, true});
  // Every cache page in use (no NaN page past the sequences'), in the sanitizers' small set: h_q 16 on the 16-row
  // kernel, h_q 128 on the 64-row one. Their parts are short (33 pages over the machine's columns), so the 16-row
  // kernel copies every page as evict-first 2D boxes here; the long-part cases below reach the 3D copy and its
  // last-page exception.
  for (int h : {16, 128})
    add(cases, {3, h, 1, false, {700, 64, 1300}, "700_64_1300", 1.f, 1.f, DataKind::kNormal, true, true, 0});
  // Long parts on the 16- and 32-row tiles of the keys-as-M kernel (kernel_h16.cuh RG 1 / 2): a plan of 4 SMs cuts
  // 254 pages into parts of 60-66, over the 32 pages below which a part's copies are evict-first 2D boxes, so every
  // page goes as one 3D copy (page_tma.cuh tma_page) except the cache's last one, which is in use (no spare pages) and
  // goes as five 2D boxes. Without this plan only the b128 x 4096 case reached the 3D copy, with RG 1 and the fused
  // merge alone, and the last-page branch only where its draw left the last page in use (nearly always: 8192 in
  // 8195). Their twins run the combine-merged build and the early-S forms (and, at 32 rows, the _n32 kernels).
  for (int h : {16, 32})
    add(cases, {4, h, 1, false, {4096, 4096, 3000, 5000}, "long4", 1.f, 1.f, DataKind::kNormal, true, false, 0, 0.f,
                4});
  // h_q x s_q shapes the grid above leaves out: h_q 64 x s_q 3 (3 head tiles: the only odd count above 1, so an
  // unpaired launch with grid.y 3; also in the small set) and h_q 128 x s_q 3 (6 tiles).
  add(cases, {3, 64, 3, true, {4400, 65, 700}, "4400_65_700", 1.f});
  add(cases, {3, 64, 3, true, {300, 65, 1}, "300_65_1", 1.f, 1.f, DataKind::kNormal, true, true});
  add(cases, {3, 128, 3, true, {4400, 65, 700}, "4400_65_700", 0.02f, 1.f, kDs});
  // Larger batches, mixed lengths.
  add(cases, {32, 16, 1, false, random_lens("b32h16", 32, 1, 4096), "rand1_4096", 1.f});
  add(cases, {32, 128, 1, false, random_lens("b32h128", 32, 1, 4096), "rand1_4096", 0.02f, 1.f, kDs});
  add(cases, {32, 32, 2, true, random_lens("b32h32", 32, 1, 2048), "rand1_2048", 3.f, 1.f, kDs});
  add(cases, {32, 64, 1, false, random_lens("b32h64", 32, 1, 1024), "rand1_1024", 1.f});
  add(cases, {128, 16, 1, false, std::vector<int>(128, 4096), "all4096", 1.f, 1.f, DataKind::kNormal, false});
  // 16-row tiles with many short sequences per CTA: the two Q slots of the 16-row kernel (config_h16.h) are reused
  // many times per CTA (the scorer's thread 0 loads sequence n + 2 into n's slot, q_full barriers).
  add(cases, {128, 16, 1, false, random_lens("b128h16short", 128, 1, 130), "rand1_130", 1.f, 1.f, kDs});
  add(cases, {32, 16, 1, false, random_lens("b32h16short", 32, 1, 70), "rand1_70", 0.02f, 1.f, DataKind::kNormal, true,
              true});
  add(cases, {128, 16, 4, true, random_lens("b128h16", 128, 60, 70), "rand60_70", 0.02f});
  add(cases, {128, 128, 1, false, random_lens("b128h128", 128, 1, 511), "rand1_511", 1.f, 1.f, kDs, false});
  // The 64-row kernel (ws_qreg) over 400 sequences of 1-2 pages, ~3 whole ones per CTA column: back-to-back switches
  // one page apart, each staging its epilogue in the P area or the out area (kernel_ws.cuh out_stage, session 64); in
  // the sanitizers' small set.
  add(cases, {400, 64, 1, false, random_lens("b400h64", 400, 1, 80), "rand1_80", 1.f, 1.f, DataKind::kNormal, true,
              true});
  add(cases,
      {128, 32, 1, false, random_lens("b128h32", 128, 1, 1024), "rand1_1024", 3.f, 1.f, DataKind::kNormal, false});
  // 32-row tiles on the keys-as-M kernel (kernel_h16.cuh RG 2): h_q 16 s_q 2 causal, its two row groups with their own
  // limits (query 0 of a 1-token sequence sees no key), split sequences, and many short sequences per CTA (Q slots).
  add(cases, {5, 16, 2, true, {1, 2, 64, 65, 129}, "tiny_causal", 1.f, 1.f, DataKind::kNormal, true, true});
  add(cases, {7, 16, 2, true, random_lens("b7h16sq2", 7, 1, 8191), "rand1_8191", 0.02f, 1.f, kDs});
  add(cases, {32, 32, 1, false, random_lens("b32h32", 32, 1, 4096), "rand1_4096", 1.f});
  add(cases, {64, 16, 2, true, random_lens("b64h16sq2short", 64, 1, 130), "rand1_130", 1.f, 1.f, kDs});
});

// One CUDA graph replayed over steps of other seqlens under the shapes' geometry (decode_graph_steps.h), as the
// engine's graph steps run: the 16-row kernel, the 64-row kernel where the step's seqlens would have picked narrow
// tiles, and causal 32-row tiles at scales apart.
void add_graph(std::vector<GpuCase>& cases, int batch, int h_q, int s_q, bool causal, const std::vector<int>& lens,
               const std::string& tag, float q_scale, float k_scale) {
  if (small_cases()) return;  // 4 steps of CPU references each: too long under the sanitizers
  DecodeShape shape = decode_shape(KvFormat::kFp8, batch, h_q, s_q, causal, lens);
  shape.q_scale = q_scale;
  shape.k_scale = k_scale;
  const std::string name = "fp8_b" + std::to_string(batch) + "_h" + std::to_string(h_q) + "_sq" + std::to_string(s_q) +
                           (causal ? "_causal" : "") + "_" + tag + "_graph_steps";
  cases.push_back({"mla_decode", name, kFp8Tol, [shape, name](CaseReport* rep) -> Status {
                     auto rng = case_rng(name);
                     const DecodeHostData h = make_decode_data(shape, rng);
                     const double vmax = max_abs_v(h);  // over the longest step's tokens: a unit, the same for all
                     MlaDecodeRefOptions sums;  // the graph's one geometry: one choice for every step
                     MLA_TRY(run_graph_over_steps(
                         name, h, kSoftmaxScale, graph_steps_within(h.seqlens), [&](const GraphStepResult& r) {
                           rep->add(r.tag + " out/max|V|", compare_bf16(r.out, r.out_ref, vmax), out_tolerance(sums));
                           rep->add(r.tag + " out worst row", worst_row_bf16(r.out, r.out_ref), &kFp8RowTol);
                           rep->add(r.tag + " lse/max(1,|lse|)", compare_lse(r.lse, r.lse_ref), lse_tolerance(sums));
                         },
                         [&](const DecodePlanGeometry& g, MlaDecodeRefOptions* o) {
                           MLA_TRY(fp8_reference_sums(g, shape.s_q * shape.h_q, /*counters=*/false, o));  // as the engine
                           sums = *o;
                           return Status::ok();
                         }));
                     add_note(rep, std::string("reference sums: ") + reference_sums_name(sums));
                     return Status::ok();
                   }});
}

MLA_GPU_CASES([](std::vector<GpuCase>& cases) {
  add_graph(cases, 7, 16, 1, false, random_lens("graph_b7h16", 7, 1, 4096), "rand1_4096", 1.f, 1.f);
  add_graph(cases, 8, 128, 1, false, random_lens("graph_b8h128", 8, 1, 700), "rand1_700", 1.f, 1.f);
  add_graph(cases, 5, 16, 2, true, random_lens("graph_b5h16sq2", 5, 1, 3000), "rand1_3000", 0.02f, 3.f);
});

// Bad fp8 input: each call must return an error Status and launch nothing (out stays poisoned).
MLA_GPU_CASES([](std::vector<GpuCase>& cases) {
  cases.push_back({"mla_decode", "fp8_bad_inputs_no_launch", Tolerance{0.0, 0.0, "a status code is exact"},
                   [](CaseReport* rep) -> Status {
                     const DecodeShape s = decode_shape(KvFormat::kFp8, 2, 16, 1, false, {100, 200});
                     auto rng = case_rng("fp8_bad_inputs");
                     const DecodeHostData h = make_decode_data(s, rng);
                     DecodeRejections r;
                     MlaDecodeParams good;  // q and the cache with room for their bf16 views
                     MLA_TRY(r.start(h, kSoftmaxScale, h.q.size() * 2, h.cache.size() * 2, &good));
                     { auto p = good; p.q.dtype = DType::kBf16; r.call("fp8 with bf16 q", p); }
                     { auto p = good; p.kv_cache.dtype = DType::kBf16; r.call("fp8 with bf16 cache", p); }
                     { auto p = good; p.k_scale = NAN; r.call("k_scale NaN", p); }
                     { auto p = good; p.k_scale = -1.f; r.call("k_scale < 0", p); }
                     { auto p = good; p.q_scale = 0.f; r.call("q_scale 0", p); }
                     { auto p = good; p.q_scale = INFINITY; r.call("q_scale inf", p); }
                     { auto p = good; p.out.dtype = DType::kFp32; r.call("fp32 out", p); }
                     { auto p = good; p.q = TensorView::contiguous(r.q.data(), DType::kE4m3, {2, 1, 24, 576});
                       r.call("h_q 24", p); }
                     { ScopedEnv env("MLA_DECODE_FP8_H16_EARLY_S", "sometimes");  // not in auto / always / never
                       r.call("bad MLA_DECODE_FP8_H16_EARLY_S", good); }
                     // Read on every call too, and checked before the row-group dispatch: a 16-row call fails with it.
                     { ScopedEnv env("MLA_DECODE_FP8_VARIANT64", "ws4");  // not a variant
                       r.call("bad MLA_DECODE_FP8_VARIANT64", good); }
                     return r.report(rep);
                   }});
});

// Registered last (static registration runs in file order, the cases run in registration order): the median of every
// earlier case's out rel_l2 on N(0,1) data that nothing saturates (suite_out_rel_l2). Measured on the H200 (session 54
// c7, MLA_TEST_SEED=5407, those 302 case runs of then): median 5.6e-3, p90 9.7e-3, max 2.4e-2. Limit 1e-2: a
// systematic mismatch moves the median to >= 1.6e-2 (above); the median of ~300 runs moves by a few % from seed to
// seed. With under 50 such runs before it (a --gtest_filter, the sanitizers' small set) it reports the median and
// checks nothing more.
MLA_GPU_CASES([](std::vector<GpuCase>& cases) {
  cases.push_back(
      {"mla_decode", "fp8_suite_median_error",
       Tolerance{1e-2, 1.0, "median out rel_l2 over the suite: measured 5.6e-3; a systematic mismatch >= 1.6e-2"},
       [](CaseReport* rep) -> Status {
         std::vector<double> v = suite_out_rel_l2();
         ErrorStats med;
         med.n = v.size();
         if (!v.empty()) {
           std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
           med.rel_l2 = v[v.size() / 2];
         }
         char buf[120];
         std::snprintf(buf, sizeof buf, "median out rel_l2 %.3e over %zu case runs", med.rel_l2, v.size());
         rep->note = buf;
         if (v.size() < 50) med.rel_l2 = 0;  // too few runs for a median to mean anything
         rep->add("median out rel_l2 of the suite", med);
         return Status::ok();
       }});
});

}  // namespace
}  // namespace mla::test
