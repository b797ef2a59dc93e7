#pragma once
// One mla_decode call on the device for a tests/common/decode_data.h problem, with the checks every decode
// format shares: device plan == host plan (exactly), copies queued on the stream right behind the call see its
// finished output, merge counters left at zero, empty rows exactly 0 / -inf, a CUDA-graph replay of plan + decode +
// combine onto NaN-poisoned out/lse/plan buffers equal to the eager call bit for bit, and intact guard regions on
// every buffer. Returns the eager out/lse and the host plan (for the split reference).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/decode_data.h"
#include "common/metrics.h"  // compare
#include "harness/device_buffer.h"
#include "harness/registry.h"
#include "mla/core/cuda_check.h"
#include "mla/ops/mla_decode.h"

namespace mla::test {

inline int device_sm_count() {
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
    return 132;
  return sms;
}

// The SMs a case's plan fills: DecodeShape::plan_sms where given, else the device's.
inline int plan_sm_count(const DecodeShape& s) { return s.plan_sms > 0 ? s.plan_sms : device_sm_count(); }

// The geometry run_decode_on_device builds for a case's step (seqlens and format given, as an engine's eager step;
// plan_sm_count's SMs), for the tests that pick a twin by it.
inline Status case_geometry(const DecodeShape& s, DecodePlanGeometry* g) {
  const std::vector<int32_t> lens(s.seqlens.begin(), s.seqlens.end());
  return decode_plan_geometry(s.batch, s.s_q, s.h_q, plan_sm_count(s), g, lens.data(), s.format);
}

// Whether mla_decode runs the case's step on narrow 16-row head tiles by default (decode_plan_narrow_tiles), so a test
// can force the other.
inline Status takes_narrow_tiles(const DecodeShape& s, bool* narrow) {
  const std::vector<int32_t> lens(s.seqlens.begin(), s.seqlens.end());
  return decode_plan_narrow_tiles(s.batch, s.s_q, s.h_q, plan_sm_count(s), lens.data(), narrow);
}

// Whether the case's geometry has one CTA column per sequence (decode_plan_whole_sequences, after the narrow-tile
// choice) and whether forcing it (MLA_DECODE_WHOLE_SEQS=on) would: a test runs the other one.
inline Status whole_sequence_forms(const DecodeShape& s, bool* by_default, bool* forced) {
  DecodePlanGeometry g;
  MLA_TRY(case_geometry(s, &g));
  const int columns = plan_sm_count(s) / g.num_head_tiles;
  *by_default = g.tile_rows == kDecodeRowsPerCta && g.num_parts == s.batch && s.batch < columns;
  *forced = g.tile_rows == kDecodeRowsPerCta && s.batch < columns;
  return Status::ok();
}

// Whether a 16-bit step runs the 64-row warp-specialized kernel with the default knobs: 64-row head tiles (not the
// narrow 16-row ones) of at least 32 query rows (MLA_DECODE_N32's default sends 32-47 rows there; 16 rows run a 16-row
// kernel). Not for fp8, whose 32-row tiles run its 16-row kernel.
inline Status takes_ws64(const DecodeShape& s, bool* ws64) {
  DecodePlanGeometry g;
  MLA_TRY(case_geometry(s, &g));
  *ws64 = g.tile_rows == kDecodeRowsPerCta && s.s_q * s.h_q >= 32;
  return Status::ok();
}

// Rows that see no key (a seqlen of 0, or a causal row before its sequence's first key) have an exact result by
// contract (mla_decode.h): out 0 and lse -inf. Checked bit for bit (out +-0) instead of through the tolerance the other
// rows get, which small garbage would pass. out [b, s_q, h_q, 512] 16-bit, lse [b, h_q, s_q].
inline Status check_empty_rows(int batch, int s_q, int h_q, bool causal, const std::vector<int32_t>& seqlens,
                               const std::vector<uint16_t>& out, const std::vector<float>& lse,
                               const std::string& name) {
  for (int b = 0; b < batch; ++b)
    for (int i = 0; i < s_q; ++i) {
      if ((causal ? seqlens[b] - s_q + 1 + i : seqlens[b]) > 0) continue;
      for (int h = 0; h < h_q; ++h) {
        const float l = lse[(size_t(b) * h_q + h) * s_q + i];
        const uint16_t* o = &out[((size_t(b) * s_q + i) * h_q + h) * kDimV];
        const bool zero = std::all_of(o, o + kDimV, [](uint16_t v) { return (v & 0x7FFFu) == 0; });
        if (!zero || !(std::isinf(l) && l < 0))
          return Status::internal("mla_decode", "row (b " + std::to_string(b) + ", i " + std::to_string(i) + ", h " +
                                                    std::to_string(h) + ") sees no key: out " +
                                                    (zero ? "0" : "not 0") + ", lse " + std::to_string(l) +
                                                    " (want 0, -inf) (" + name + ")");
      }
    }
  return Status::ok();
}

// The reference wrote every value, and a number: the comparisons skip a position where both sides are NaN (metrics.h),
// so a row that neither the reference (its buffers start NaN) nor the kernel (poisoned outputs) wrote, or a NaN both
// computed, would otherwise pass. out_ref 16-bit in the format's output type (fp16 for fp16, bf16 otherwise): every
// value finite; lse_ref finite or -inf (a row that sees no key).
inline Status check_reference_complete(KvFormat f, const std::vector<uint16_t>& out_ref,
                                       const std::vector<float>& lse_ref, const std::string& name) {
  const uint16_t exp_mask = f == KvFormat::kFp16 ? 0x7C00u : 0x7F80u;  // all ones: inf or NaN
  const size_t bad_out =
      std::count_if(out_ref.begin(), out_ref.end(), [&](uint16_t v) { return (v & exp_mask) == exp_mask; });
  const size_t bad_lse =
      std::count_if(lse_ref.begin(), lse_ref.end(), [](float x) { return std::isnan(x) || x == INFINITY; });
  if (bad_out == 0 && bad_lse == 0) return Status::ok();
  return Status::internal("test", "the reference left " + std::to_string(bad_out) + " out values not finite and " +
                                      std::to_string(bad_lse) + " lse values NaN or +inf (" + name + ")");
}

// lse compared in units of max(1, |lse_ref|): relative where |lse| is large, absolute near 0 (the fp8 formats' lse
// metric). Rows of -inf on both sides give NaN on both, which compare() skips (check_empty_rows holds them exactly).
inline ErrorStats compare_lse(const std::vector<float>& got, const std::vector<float>& ref) {
  return compare(ref.size(), [&](size_t i) { return double(got[i]) / std::max(1.0, std::fabs(double(ref[i]))); },
                 [&](size_t i) { return double(ref[i]) / std::max(1.0, std::fabs(double(ref[i]))); });
}

// The fused merge's counters (DecodePlanView::merge_counters): plan_decode zeroes them and every mla_decode call must
// leave them zero, or the next layer's call of the step would merge at the wrong arrival.
inline Status check_merge_counters_zero(const DeviceBuffer& d_cnt, const std::string& name) {
  std::vector<int32_t> cnt(d_cnt.bytes() / 4);
  MLA_TRY(d_cnt.download(&cnt));
  for (size_t i = 0; i < cnt.size(); ++i)
    if (cnt[i] != 0)
      return Status::internal("mla_decode", "merge counter " + std::to_string(i) + " = " + std::to_string(cnt[i]) +
                                                " after the call, not 0 (" + name + ")");
  return Status::ok();
}

// How two results of one decode call differ bit for bit: the out values and lse entries that differ, the first
// differing out value (flattened index ((b * s_q + i) * h_q + h) * 512 + dim; out.size() when none) and the first 12
// differing out rows (b * s_q + i) * h_q + h, as " r0 r1 ...".
struct BitDifference {
  size_t n_out = 0, n_lse = 0, first = 0;
  std::string rows;
};
inline BitDifference bit_difference(const std::vector<uint16_t>& out_a, const std::vector<uint16_t>& out_b,
                                    const std::vector<float>& lse_a, const std::vector<float>& lse_b) {
  BitDifference d;
  d.first = out_a.size();
  std::set<size_t> rows;
  for (size_t i = 0; i < out_a.size(); ++i) {
    if (out_a[i] == out_b[i]) continue;
    if (d.n_out++ == 0) d.first = i;
    if (rows.size() < 12) rows.insert(i / kDimV);
  }
  for (size_t r : rows) d.rows.append(" ").append(std::to_string(r));
  for (size_t i = 0; i < lse_a.size(); ++i) d.n_lse += std::memcmp(&lse_a[i], &lse_b[i], 4) != 0;
  return d;
}

// Further CUDA-graph replays of a decode call, each onto NaN-poisoned out / lse, each of which must equal the eager
// result bit for bit. The first replay catches a wrong schedule; a rare race needs many (session 30: the 16-row kernel
// released a stage with its ldmatrix reads in flight and gave one tile a wrong partial in ~2-3 % of calls). Small
// outputs get up to 200 replays (16 MiB of downloads at most per case, cheap next to the CPU reference); the
// sanitizer runs (small_cases()) two.
inline int replay_count(size_t out_bytes) {
  if (small_cases()) return 2;
  return static_cast<int>(std::clamp<size_t>((size_t{16} << 20) / std::max<size_t>(out_bytes, 1), 1, 200));
}

// Ok, or an error that says how many of the replays differed and where the first one did.
inline Status check_replays(cudaGraphExec_t exec, cudaStream_t stream, DeviceBuffer& d_out, DeviceBuffer& d_lse,
                            const std::vector<uint16_t>& out, const std::vector<float>& lse, const std::string& name) {
  const int n = replay_count(out.size() * 2);
  std::vector<uint16_t> out_r(out.size());
  std::vector<float> lse_r(lse.size());
  int differing = 0, first = -1;
  BitDifference d;  // the first differing replay's
  for (int r = 0; r < n; ++r) {
    MLA_TRY(d_out.poison());
    MLA_TRY(d_lse.poison());
    MLA_CUDA_TRY("test", cudaGraphLaunch(exec, stream));
    MLA_CUDA_TRY("test", cudaStreamSynchronize(stream));
    MLA_TRY(d_out.download(&out_r));
    MLA_TRY(d_lse.download(&lse_r));
    if (std::memcmp(out_r.data(), out.data(), out.size() * 2) == 0 &&
        std::memcmp(lse_r.data(), lse.data(), lse.size() * 4) == 0)
      continue;
    if (differing++ > 0) continue;
    first = r;
    d = bit_difference(out, out_r, lse, lse_r);
  }
  if (differing == 0) return Status::ok();
  char buf[384];
  std::snprintf(buf, sizeof buf,
                "%d of %d further CUDA-graph replays differ from the eager call; the first (replay %d): %zu of %zu out "
                "values (first at %zu), %zu of %zu lse; rows (b * s_q + i) * h_q + h:%s (%s)",
                differing, n, first, d.n_out, out.size(), d.first, d.n_lse, lse.size(), d.rows.c_str(), name.c_str());
  return Status::internal("mla_decode", buf);
}

// The graph half of the shared checks: `call` (plan + decode + combine, captured without the start hints) as a CUDA
// graph, launched twice onto NaN-poisoned out / lse / plan records; the second launch's out / lse go to *out_g /
// *lse_g for the caller to compare with the eager out / lse (so its message can name the reference too), and
// check_replays' further launches to *replays.
template <class Call>
inline Status replay_as_graph(Call&& call, cudaStream_t stream, DeviceBuffer& d_out, DeviceBuffer& d_lse,
                              DeviceBuffer& d_parts, const std::vector<uint16_t>& out, const std::vector<float>& lse,
                              const std::string& name, std::vector<uint16_t>* out_g, std::vector<float>* lse_g,
                              Status* replays) {
  MLA_TRY(d_out.poison());
  MLA_TRY(d_lse.poison());
  MLA_TRY(d_parts.poison());
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  MLA_CUDA_TRY("test", cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const Status cap = call();
  MLA_CUDA_TRY("test", cudaStreamEndCapture(stream, &graph));
  MLA_TRY(cap);
  MLA_CUDA_TRY("test", cudaGraphInstantiate(&exec, graph, 0));
  MLA_CUDA_TRY("test", cudaGraphLaunch(exec, stream));
  MLA_CUDA_TRY("test", cudaGraphLaunch(exec, stream));
  MLA_CUDA_TRY("test", cudaStreamSynchronize(stream));
  out_g->assign(out.size(), 0);
  lse_g->assign(lse.size(), 0.f);
  MLA_TRY(d_out.download(out_g));
  MLA_TRY(d_lse.download(lse_g));
  Status further = check_replays(exec, stream, d_out, d_lse, out, lse, name);
  std::swap(*replays, further);  // not `=`: nvcc warns on an assignment's unused [[nodiscard]] Status&
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return Status::ok();
}

// One step's device buffers, each between guard regions (harness/device_buffer.h): h's inputs uploaded; out, lse, the
// plan, the workspace and (with counters) the fused merge's counters poisoned, sized for g -- plan_decode must zero the
// counters, and every output a call leaves unwritten stays NaN.
struct DecodeStepBuffers {
  DeviceBuffer q, cache, bt, sl, out, lse, parts, off, ws, cnt;
  Status alloc(const DecodeHostData& h, const DecodePlanGeometry& g, bool counters) {
    MLA_TRY(q.alloc(h.q.size()));
    if (counters) MLA_TRY(cnt.alloc(decode_plan_counters(g) * 4));
    MLA_TRY(cache.alloc(h.cache.size()));
    MLA_TRY(bt.alloc(h.block_table.size() * 4));
    MLA_TRY(sl.alloc(h.seqlens.size() * 4));
    MLA_TRY(out.alloc(h.out_elems() * 2));
    MLA_TRY(lse.alloc(h.lse_elems() * 4));
    MLA_TRY(parts.alloc(size_t(g.num_parts) * kPlanPartInts * 4));
    MLA_TRY(off.alloc((size_t(h.shape.batch) + 1) * 4));
    MLA_TRY(ws.alloc(decode_workspace_bytes(g)));
    MLA_TRY(q.upload(h.q));
    MLA_TRY(cache.upload(h.cache));
    MLA_TRY(bt.upload(h.block_table));
    return sl.upload(h.seqlens);
  }
  MlaDecodeParams params(const DecodeHostData& h, float softmax_scale) const {
    return h.params(q.data(), cache.data(), bt.data(), sl.data(), out.data(), lse.data(), softmax_scale);
  }
  // Ok when no buffer's guards were overwritten (an unallocated one has none).
  Status check_guards(const std::string& name) const {
    for (const DeviceBuffer* b : {&q, &cache, &bt, &sl, &out, &lse, &parts, &off, &ws, &cnt})
      MLA_TRY(b->check_guards(name));
    return Status::ok();
  }
};

struct DecodeDeviceResult {
  DecodePlanGeometry g;
  std::vector<int32_t> parts_ref, off_ref;  // the host plan (ref::plan_decode)
  std::vector<uint16_t> out;                // 16-bit out of the eager call
  std::vector<float> lse;
  // The eager call's split lse values from its workspace, [max_splits, s_q * h_q] as the reference's lse_accum (slots
  // of sequences with one split are never written: poison): where a failed case's merge weights went wrong.
  std::vector<float> lse_partials;
  // The references only read the plan.
  DecodePlanView plan_ref() const {
    return {const_cast<int32_t*>(parts_ref.data()), const_cast<int32_t*>(off_ref.data()), g.num_parts};
  }
};

// reference_out (optional): the case's reference out as floats, computed from r (its host plan) only when the graph
// replay differs from the eager call, so the message can say which of the two is off.
using ReferenceOut = std::function<Status(const DecodeDeviceResult&, std::vector<float>*)>;

inline Status run_decode_on_device(const std::string& name, const DecodeHostData& h, float softmax_scale,
                                   DecodeDeviceResult* r, const ReferenceOut& reference_out = {}) {
  const DecodeShape& s = h.shape;
  MLA_TRY(case_geometry(s, &r->g));
  const DecodePlanGeometry& g = r->g;
  const size_t parts_ints = static_cast<size_t>(g.num_parts) * kPlanPartInts;
  DecodeStepBuffers d;
  MLA_TRY(d.alloc(h, g, /*counters=*/true));
  DeviceBuffer out_next, lse_next;  // the copies queued behind the eager call (below)
  MLA_TRY(out_next.alloc(h.out_elems() * 2));
  MLA_TRY(lse_next.alloc(h.lse_elems() * 4));

  r->parts_ref.assign(parts_ints, -7);
  r->off_ref.assign(s.batch + 1, -7);
  MLA_TRY(ref::plan_decode(TensorView::contiguous(const_cast<int32_t*>(h.seqlens.data()), DType::kInt32, {s.batch}),
                           TensorView::contiguous(h.block_table.data(), DType::kInt32, {s.batch, h.max_pages}), g,
                           r->plan_ref()));
  cudaStream_t stream;
  MLA_CUDA_TRY("test", cudaStreamCreate(&stream));
  const TensorView d_seqlens = TensorView::contiguous(d.sl.data(), DType::kInt32, {s.batch});
  const DecodePlanView plan{d.parts.as<int32_t>(), d.off.as<int32_t>(), g.num_parts, d.cnt.as<int32_t>()};
  const MlaDecodeParams p = d.params(h, softmax_scale);
  // The eager call's plan carries the start hints (block table given: the engine's path, whose records the
  // host plan must equal); the graph below is captured without the page hints, so its bit-for-bit match with
  // the eager result also checks the cursor's block-table loads against the hinted first pages.
  auto call = [&](bool hints) -> Status {
    MLA_TRY(hints ? cuda::plan_decode(d_seqlens, p.block_table, g, plan, stream)
                  : cuda::plan_decode(d_seqlens, g, plan, stream));
    return cuda::mla_decode(p, g, plan, d.ws.data(), d.ws.bytes(), stream);
  };
  auto finish = [&](Status st) {
    cudaStreamDestroy(stream);
    return st;
  };
  // What the stream's next operation sees: copies of out / lse queued right behind the call (before any host
  // synchronization) must equal the result read after it. The combine's CTAs with nothing to merge leave without
  // waiting for the decode grid (combine_cta_waits); its waiting CTAs (CTA 0 at least) keep the stream ordered
  // behind the decode, else an unsplit sequence's rows (written by the decode kernel alone) could show poison here.
  // A coarse check: the copy must start inside the window between the combine's end and the decode's, and a
  // combine in which no CTA waited passed it on the H200 (NOTES_plan.md, session 10 tail run 2, ko 5).
  if (Status st = call(true); !st.is_ok()) return finish(st);
  for (auto [to, from] : {std::pair{&out_next, &d.out}, std::pair{&lse_next, &d.lse}})
    if (cudaError_t e = cudaMemcpyAsync(to->data(), from->data(), from->bytes(), cudaMemcpyDeviceToDevice, stream);
        e != cudaSuccess)
      return finish(Status::cuda("test", std::string(cudaGetErrorString(e)) + " (" + name + ")"));
  if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess)
    return finish(Status::cuda("mla_decode", std::string(cudaGetErrorString(e)) + " (" + name + ")"));
  std::vector<int32_t> parts_dev(parts_ints), off_dev(s.batch + 1);
  MLA_TRY(d.parts.download(&parts_dev));
  MLA_TRY(d.off.download(&off_dev));
  if (parts_dev != r->parts_ref || off_dev != r->off_ref)
    return finish(Status::internal("plan_decode", "device plan differs from the host plan (" + name + ")"));
  if (Status st = check_merge_counters_zero(d.cnt, name); !st.is_ok()) return finish(st);
  r->out.assign(h.out_elems(), 0);
  r->lse.assign(h.lse_elems(), 0.f);
  MLA_TRY(d.out.download(&r->out));
  MLA_TRY(d.lse.download(&r->lse));
  r->lse_partials.assign(static_cast<size_t>(g.max_splits) * s.s_q * s.h_q, 0.f);
  MLA_TRY(d.ws.download(r->lse_partials.data(), r->lse_partials.size() * sizeof(float),
                        decode_workspace_lse_offset(g)));
  {
    std::vector<uint16_t> out_q(r->out.size());
    std::vector<float> lse_q(r->lse.size());
    MLA_TRY(out_next.download(&out_q));
    MLA_TRY(lse_next.download(&lse_q));
    if (std::memcmp(out_q.data(), r->out.data(), out_q.size() * 2) != 0 ||
        std::memcmp(lse_q.data(), r->lse.data(), lse_q.size() * 4) != 0)
      return finish(Status::internal("mla_decode", "a copy queued behind the call saw an unfinished output (" + name +
                                                       ")"));
  }
  if (Status st = check_empty_rows(s.batch, s.s_q, s.h_q, s.causal, h.seqlens, r->out, r->lse, name); !st.is_ok())
    return finish(st);

  std::vector<uint16_t> out_g;
  std::vector<float> lse_g;
  Status replays;
  if (Status st = replay_as_graph([&] { return call(false); }, stream, d.out, d.lse, d.parts, r->out, r->lse, name,
                                  &out_g, &lse_g, &replays);
      !st.is_ok())
    return finish(st);
  if (std::memcmp(out_g.data(), r->out.data(), out_g.size() * 2) != 0 ||
      std::memcmp(lse_g.data(), r->lse.data(), lse_g.size() * 4) != 0) {
    const BitDifference bd = bit_difference(r->out, out_g, r->lse, lse_g);
    auto out_value = [&](const std::vector<uint16_t>& v, size_t i) {
      return s.format == KvFormat::kFp16 ? fp16_to_float(v[i]) : bf16_to_float(v[i]);
    };
    auto value = [&](const std::vector<uint16_t>& v) { return bd.first < v.size() ? out_value(v, bd.first) : 0.f; };
    std::string against;  // each run's error against the reference, where the case gave one
    std::vector<float> ref;
    if (reference_out && reference_out(*r, &ref).is_ok() && ref.size() == out_g.size()) {
      auto rel_l2 = [&](const std::vector<uint16_t>& v) {
        return compare(v.size(), [&](size_t i) { return double(out_value(v, i)); },
                       [&](size_t i) { return double(ref[i]); })
            .rel_l2;
      };
      char b[160];
      std::snprintf(b, sizeof b, "; reference there %.6g; out rel_l2 against the reference: eager %.3e, graph %.3e",
                    bd.first < ref.size() ? ref[bd.first] : 0.f, rel_l2(r->out), rel_l2(out_g));
      against = b;
    }
    char buf[640];
    std::snprintf(buf, sizeof buf,
                  "CUDA-graph replay differs from the eager call: %zu of %zu out values, %zu of %zu lse; first out "
                  "%zu: eager %.6g, graph %.6g%s; rows (b * s_q + i) * h_q + h:%s (%s)",
                  bd.n_out, out_g.size(), bd.n_lse, lse_g.size(), bd.first, value(r->out), value(out_g),
                  against.c_str(), bd.rows.c_str(), name.c_str());
    return finish(Status::internal("mla_decode", buf));
  }
  if (!replays.is_ok()) return finish(replays);
  if (Status st = check_merge_counters_zero(d.cnt, name); !st.is_ok()) return finish(st);
  if (Status st = d.check_guards(name); !st.is_ok()) return finish(st);
  for (const DeviceBuffer* b : {&out_next, &lse_next})
    if (Status st = b->check_guards(name); !st.is_ok()) return finish(st);
  return finish(Status::ok());
}

}  // namespace mla::test
