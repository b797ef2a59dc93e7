// Tail stealing of the fp8 64-row kernel (src/ops/cuda/sm90/decode_fp8/steal_ws.cuh, MLA_DECODE_FP8_STEAL, a
// prototype knob): the same problem decoded with stealing off and on (fixed tails T, deterministic dT, zones zZcC),
// on shapes where tails exist (h_q 64 / 128, parts of whole sequences of >= C + 3 pages) and CTAs run out of work at
// different times (mixed lengths, the b128 rows' 2-sequence parts).
//
// Per case and mode: two eager calls in a row on one plan (the second runs on steal words the first call's last CTA
// reset) and three replays of a CUDA graph of plan + decode, each onto NaN-poisoned out / lse; every result against
// the stealing-off result, guards intact. Deterministic modes (dT: every tail a piece of its own whoever walks it)
// must also give the same bits on every call. The stealing-off kernel itself is checked against the CPU reference by
// gpu_test_mla_decode_fp8 (and that suite can run with the knob set, see bench/decode/NOTES_plan.md session 8).
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
#include "harness/device_buffer.h"
#include "harness/registry.h"
#include "mla/core/cuda_check.h"
#include "mla/core/fp8.h"
#include "mla/core/half.h"
#include "mla/ops/mla_decode.h"

namespace mla::test {
namespace {

constexpr float kSoftmaxScale = 0.0721687836f;  // 1/sqrt(192)

// Stealing vs not: a stolen (or, dT, any) tail is a split of its own, so its P is rounded to e4m3 against the tail's
// own running max instead of the whole sequence's, and the two pieces merge in fp32 before the bf16 output. That
// moves individual P codes by one e4m3 step (<= 2^-3 of that P, as a split of the static plan does) on the tail's
// keys only; both sides are approximations of the same softmax at FP8's own error (ANCHORS.md: PR54 vs the bf16
// inputs 3.2e-2 - 4.5e-2 rel_l2). Limits: rel_l2 3e-2 (below FP8's price: a wrong merge weight, a page walked twice
// or skipped, or a stale partial gives O(1) on the tail's rows), max_abs 2^-3 in max|V| units (two flips in a row).
constexpr Tolerance kStealTol{3e-2, 0.125,
                               "one e4m3 step of the tail's P (re-rounded against its own max); FP8's price is 3-4.5e-2"};

class EnvScope {
 public:
  EnvScope(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~EnvScope() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  EnvScope(const EnvScope&) = delete;
  EnvScope& operator=(const EnvScope&) = delete;

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

int device_sms() {
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
    return 132;
  return sms;
}

double max_abs_v(const DecodeHostData& h) {
  double vmax = 0;
  const DecodeShape& s = h.shape;
  for (int b = 0; b < s.batch; ++b)
    for (int t = 0; t < s.seqlens[b]; ++t) {
      const int32_t pg = h.block_table[size_t(b) * h.max_pages + t / kDecodePageSize];
      const uint8_t* tok = &h.cache[(size_t(pg) * kDecodePageSize + t % kDecodePageSize) * kDimQK];
      for (int d = 0; d < kDimV; ++d) vmax = std::max(vmax, std::fabs(double(e4m3_to_float(tok[d]))));
    }
  return vmax * s.k_scale;
}

std::vector<int> random_lens(const std::string& tag, int batch, int lo, int hi) {
  auto rng = case_rng("steal_lens_" + tag);
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<int> v(batch);
  for (auto& x : v) x = d(rng);
  return v;
}

struct StealCase {
  DecodeShape shape;
  std::vector<const char*> modes;
};

Status run_steal_case(const std::string& name, const StealCase& c, CaseReport* rep) {
  auto rng = case_rng(name);
  const DecodeHostData h = make_decode_data(c.shape, rng);
  const DecodeShape& s = h.shape;
  DecodePlanGeometry g;
  MLA_TRY(decode_plan_geometry(s.batch, s.s_q, s.h_q, device_sms(), &g));
  const size_t parts_ints = static_cast<size_t>(g.num_parts) * kPlanPartInts;

  DeviceBuffer d_q, d_cache, d_bt, d_sl, d_out, d_lse, d_parts, d_off, d_ws;
  MLA_TRY(d_q.alloc(h.q.size()));
  MLA_TRY(d_cache.alloc(h.cache.size()));
  MLA_TRY(d_bt.alloc(h.block_table.size() * 4));
  MLA_TRY(d_sl.alloc(h.seqlens.size() * 4));
  MLA_TRY(d_out.alloc(h.out_elems() * 2));
  MLA_TRY(d_lse.alloc(h.lse_elems() * 4));
  MLA_TRY(d_parts.alloc(parts_ints * 4));
  MLA_TRY(d_off.alloc((s.batch + 1) * 4));
  MLA_TRY(d_ws.alloc(decode_workspace_bytes(g)));
  MLA_TRY(d_q.upload(h.q));
  MLA_TRY(d_cache.upload(h.cache));
  MLA_TRY(d_bt.upload(h.block_table));
  MLA_TRY(d_sl.upload(h.seqlens));
  cudaStream_t stream;
  MLA_CUDA_TRY("test", cudaStreamCreate(&stream));
  const TensorView d_seqlens = TensorView::contiguous(d_sl.data(), DType::kInt32, {s.batch});
  const DecodePlanView plan{d_parts.as<int32_t>(), d_off.as<int32_t>(), g.num_parts};
  const MlaDecodeParams p = h.params(d_q.data(), d_cache.data(), d_bt.data(), d_sl.data(), d_out.data(), d_lse.data(),
                                     kSoftmaxScale);
  std::vector<uint16_t> out(h.out_elems());
  std::vector<float> lse(h.lse_elems());
  auto fetch = [&]() -> Status {
    MLA_CUDA_TRY("test", cudaStreamSynchronize(stream));
    MLA_TRY(d_out.download(&out));
    return d_lse.download(&lse);
  };
  auto poison = [&]() -> Status {
    MLA_TRY(d_out.poison());
    return d_lse.poison();
  };
  MLA_TRY(cuda::plan_decode(d_seqlens, p.block_table, g, plan, stream));

  std::vector<uint16_t> out0;
  std::vector<float> lse0;
  {
    EnvScope off("MLA_DECODE_FP8_STEAL", nullptr);
    MLA_TRY(poison());
    MLA_TRY(cuda::mla_decode(p, g, plan, d_ws.data(), d_ws.bytes(), stream));
    MLA_TRY(fetch());
    out0 = out;
    lse0 = lse;
  }
  const double vmax = max_abs_v(h);
  auto check = [&](const std::string& what) {
    rep->add(what + " out/max|V|", compare(out.size(), [&](size_t i) { return double(bf16_to_float(out[i])) / vmax; },
                                           [&](size_t i) { return double(bf16_to_float(out0[i])) / vmax; }));
    rep->add(what + " lse/max(1,|lse|)",
             compare(lse.size(), [&](size_t i) { return double(lse[i]) / std::max(1.0, std::fabs(double(lse0[i]))); },
                     [&](size_t i) { return double(lse0[i]) / std::max(1.0, std::fabs(double(lse0[i]))); }));
  };
  for (const char* mode : c.modes) {
    EnvScope on("MLA_DECODE_FP8_STEAL", mode);
    const bool det = mode[0] == 'd';
    std::vector<uint16_t> out_first;
    std::vector<float> lse_first;
    auto same_bits = [&](const std::string& what) -> Status {
      if (!det) return Status::ok();
      if (out_first.empty()) {
        out_first = out;
        lse_first = lse;
        return Status::ok();
      }
      if (std::memcmp(out.data(), out_first.data(), out.size() * 2) != 0 ||
          std::memcmp(lse.data(), lse_first.data(), lse.size() * 4) != 0)
        return Status::internal("mla_decode", std::string("deterministic steal mode ") + mode + ": " + what +
                                                  " differs from the first call (" + name + ")");
      return Status::ok();
    };
    for (int k = 0; k < 2; ++k) {
      const std::string what = std::string(mode) + " eager" + std::to_string(k);
      MLA_TRY(poison());
      MLA_TRY(cuda::mla_decode(p, g, plan, d_ws.data(), d_ws.bytes(), stream));
      MLA_TRY(fetch());
      check(what);
      MLA_TRY(same_bits(what));
    }
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    MLA_CUDA_TRY("test", cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    const Status cap = [&]() -> Status {
      MLA_TRY(cuda::plan_decode(d_seqlens, p.block_table, g, plan, stream));
      return cuda::mla_decode(p, g, plan, d_ws.data(), d_ws.bytes(), stream);
    }();
    MLA_CUDA_TRY("test", cudaStreamEndCapture(stream, &graph));
    MLA_TRY(cap);
    MLA_CUDA_TRY("test", cudaGraphInstantiate(&exec, graph, 0));
    for (int k = 0; k < 3; ++k) {
      const std::string what = std::string(mode) + " graph" + std::to_string(k);
      MLA_TRY(poison());
      MLA_CUDA_TRY("test", cudaGraphLaunch(exec, stream));
      MLA_TRY(fetch());
      check(what);
      MLA_TRY(same_bits(what));
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
  cudaStreamDestroy(stream);
  for (const DeviceBuffer* b : {&d_q, &d_cache, &d_bt, &d_sl, &d_out, &d_lse, &d_parts, &d_off, &d_ws})
    MLA_TRY(b->check_guards(name));
  return Status::ok();
}

void add(std::vector<GpuCase>& cases, int batch, int h_q, int s_q, bool causal, std::vector<int> lens,
         const std::string& tag, std::vector<const char*> modes) {
  StealCase c;
  c.shape.batch = batch;
  c.shape.h_q = h_q;
  c.shape.s_q = s_q;
  c.shape.causal = causal;
  c.shape.seqlens = std::move(lens);
  c.shape.format = KvFormat::kFp8;
  c.shape.q_scale = 1.f;
  c.shape.k_scale = 1.f;
  c.modes = std::move(modes);
  const std::string name = "fp8_steal_b" + std::to_string(batch) + "_h" + std::to_string(h_q) + "_sq" +
                           std::to_string(s_q) + (causal ? "_causal" : "") + "_" + tag;
  cases.push_back({"mla_decode", name, kStealTol, [c, name](CaseReport* rep) { return run_steal_case(name, c, rep); }});
}

bool small_cases() {
  const char* s = std::getenv("MLA_SMALL_CASES");
  return s != nullptr && s[0] == '1';
}

void add_cases(std::vector<GpuCase>& cases) {
  // MLA_SMALL_CASES=1 (sanitizers): two small shapes; under the tools' slowdown which tails get stolen differs.
  if (small_cases()) {
    add(cases, 16, 128, 1, false, random_lens("b16h128", 16, 300, 900), "rand300_900", {"2", "d2", "z16c2"});
    add(cases, 7, 128, 1, false, {0, 650, 0, 511, 1, 0, 4096}, "with_zeros", {"2", "z16c2"});
    return;
  }
  const std::vector<const char*> all = {"3", "8", "d3", "d8", "z16c2", "z32c2", "z64c4"};
  // The bench rows' shape at a shorter length: 2-sequence parts, 8 CTAs with one sequence steal first.
  add(cases, 128, 128, 1, false, std::vector<int>(128, 1024), "all1024", all);
  // Mixed lengths: parts end at different times, tails of every size; zero-length and one-page sequences.
  add(cases, 128, 128, 1, false, random_lens("b128h128", 128, 0, 1536), "rand0_1536", all);
  // Static splits next to stolen ones (long sequences cut by the plan, short whole ones with tails).
  add(cases, 32, 128, 1, false, random_lens("b32h128", 32, 1, 4096), "rand1_4096", {"3", "d3", "z32c2"});
  // Speculative rows (two query positions per sequence, causal): a tail piece's rows see fewer keys.
  add(cases, 64, 64, 2, true, random_lens("b64h64sq2", 64, 1, 3000), "rand1_3000", {"3", "d3", "z16c2"});
  add(cases, 7, 128, 1, false, {0, 650, 0, 511, 1, 0, 4096}, "with_zeros", {"2", "d2", "z16c2"});
}

MLA_GPU_CASES(add_cases);

}  // namespace
}  // namespace mla::test
