// Session 61's n1 against the reference's model of the e4m3 wgmma's sums (src/ops/ref/wgmma_e4m3_sum.h), case by case:
// n1 measured each fp8 kernel against the float-sum reference; this recomputes, on the CPU and from the same data and
// plans, the model-sum reference against the float-sum one. Where the kernel is the model, the two agree (the same
// rel_l2, the same worst element and row); where they part, the kernel or the model misses (session 62). Not part of
// the build; by hand, from the repo root after `ninja -C build`:
//   g++ -O3 -std=c++17 -I. -Iinclude -Isrc -Itests bench/decode/repro/fp8_model_vs_n1.cpp
//       build/src/libmla_ref.a -lpthread -o /tmp/fp8_model_vs_n1          (one command)
//   MLA_TEST_SEED=1796448581257790 /tmp/fp8_model_vs_n1 bench/decode/repro/n1_fp8_case_checks.txt
// The cases' shapes are test_mla_decode_fp8.cu's (21 classes); a variant suffix sets what it set there (plan knobs;
// the kernel family decides the reference's sums and bf16 partials as fp8_reference_sums does). mma.sync variants
// (n32mma) are skipped: float sums.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common/decode_data.h"
#include "common/metrics.h"
#include "common/random.h"
#include "mla/ops/mla_decode.h"
#include "ops/cuda/sm90/decode_fp8/kernel_family.h"
#include "ops/cuda/sm90/decode_fp8/variant64.h"

using namespace mla;
using namespace mla::test;

namespace {

struct Spec {
  const char* name;
  int b, h, sq;
  bool causal;
  float qs, ks;
  DataKind data;
  std::vector<int> lens;
};

const DataKind kDs = DataKind::kDeepSeekLike, kN = DataKind::kNormal;

const std::vector<Spec>& specs() {
  static const std::vector<Spec> v = {
      {"fp8_b1_h16_sq1_len8191_s0p02_ds", 1, 16, 1, false, 0.02f, 0.02f, kDs, {8191}},
      {"fp8_b1_h128_sq1_len8191_s3_ds", 1, 128, 1, false, 3.f, 3.f, kDs, {8191}},
      {"fp8_b2_h32_sq4_causal_300_1000_s1_ds", 2, 32, 4, true, 1.f, 1.f, kDs, {300, 1000}},
      {"fp8_b2_h16_sq1_4096_1000_s0p02_k3_ds", 2, 16, 1, false, 0.02f, 3.f, kDs, {4096, 1000}},
      {"fp8_b2_h128_sq1_1000_511_s3_k0p02_ds", 2, 128, 1, false, 3.f, 0.02f, kDs, {1000, 511}},
      {"fp8_b7_h128_sq4_causal_tiny_mix_s0p02_ds", 7, 128, 4, true, 0.02f, 0.02f, kDs, {1, 2, 3, 4, 63, 64, 65}},
      {"fp8_b7_h16_sq4_causal_rand1_8191_s0p02_ds", 7, 16, 4, true, 0.02f, 0.02f, kDs, random_lens("b7h16", 7, 1, 8191)},
      {"fp8_b2_h16_sq2_8191_63_s1_ds", 2, 16, 2, false, 1.f, 1.f, kDs, {8191, 63}},
      {"fp8_b32_h128_sq1_rand1_4096_s0p02_ds", 32, 128, 1, false, 0.02f, 0.02f, kDs,
       random_lens("b32h128", 32, 1, 4096)},
      {"fp8_b32_h32_sq2_causal_rand1_2048_s3_ds", 32, 32, 2, true, 3.f, 3.f, kDs, random_lens("b32h32", 32, 1, 2048)},
      {"fp8_b128_h16_sq1_rand1_130_s1_ds", 128, 16, 1, false, 1.f, 1.f, kDs, random_lens("b128h16short", 128, 1, 130)},
      {"fp8_b128_h128_sq1_rand1_511_s1_ds", 128, 128, 1, false, 1.f, 1.f, kDs, random_lens("b128h128", 128, 1, 511)},
      {"fp8_b7_h16_sq2_causal_rand1_8191_s0p02_ds", 7, 16, 2, true, 0.02f, 0.02f, kDs,
       random_lens("b7h16sq2", 7, 1, 8191)},
      {"fp8_b64_h16_sq2_causal_rand1_130_s1_ds", 64, 16, 2, true, 1.f, 1.f, kDs,
       random_lens("b64h16sq2short", 64, 1, 130)},
      {"fp8_b1_h64_sq1_len16384_s1", 1, 64, 1, false, 1.f, 1.f, kN, {16384}},
      {"fp8_b1_h16_sq4_causal_len8191_s1", 1, 16, 4, true, 1.f, 1.f, kN, {8191}},
      {"fp8_b32_h128_sq1_all512_s1", 32, 128, 1, false, 1.f, 1.f, kN, std::vector<int>(32, 512)},
      {"fp8_b24_h128_sq1_rand257_512_s1", 24, 128, 1, false, 1.f, 1.f, kN, random_lens("b24h128", 24, 257, 512)},
      {"fp8_b32_h64_sq1_rand1_1024_s1", 32, 64, 1, false, 1.f, 1.f, kN, random_lens("b32h64", 32, 1, 1024)},
      {"fp8_b32_h16_sq1_rand1_4096_s1", 32, 16, 1, false, 1.f, 1.f, kN, random_lens("b32h16", 32, 1, 4096)},
      {"fp8_b7_h16_sq3_causal_rand1_2000_s3", 7, 16, 3, true, 3.f, 3.f, kN, random_lens("b7h16sq3", 7, 1, 2000)},
  };
  return v;
}

// The plan knobs a variant suffix set in the suite (read by decode_plan_geometry); "skip" for mma.sync variants.
std::map<std::string, std::string> variant_env(const std::string& v, const Spec& sp) {
  if (v == "_wholeseqs") return {{"MLA_DECODE_WHOLE_SEQS", "on"}};
  if (v == "_machinecols") return {{"MLA_DECODE_WHOLE_SEQS", "off"}};
  if (v == "_n32ws") return {{"MLA_DECODE_N32", "ws"}};
  if (v == "_n32mma") return {{"skip", "1"}};
  if (v == "_othertile") {
    DecodePlanGeometry g;
    const std::vector<int32_t> lens(sp.lens.begin(), sp.lens.end());
    if (!decode_plan_geometry(sp.b, sp.sq, sp.h, 132, &g, lens.data(), KvFormat::kFp8).is_ok()) return {{"skip", "1"}};
    return {{"MLA_DECODE_TILE_ROWS", g.tile_rows == 16 ? "64" : "16"}};
  }
  return {};  // "", _combine, _ws3, _wssplit, _combine_wsqreg, _early_*: the same plan and kernel family
}

struct Result {
  ErrorStats out, row, lse;
};

// combine: the case ran the combine (no fused merge); forced_steps: a variant forced by name (ws3 / ws_split: 8,
// ws_qreg: 6), else 0.
Result model_vs_float(const Spec& sp, const std::string& name, bool combine, int forced_steps) {
  DecodeShape s = decode_shape(KvFormat::kFp8, sp.b, sp.h, sp.sq, sp.causal, sp.lens);
  s.q_scale = sp.qs;
  s.k_scale = sp.ks;
  s.data = sp.data;
  auto rng = case_rng(name);
  const DecodeHostData h = make_decode_data(s, rng);
  DecodePlanGeometry g;
  Result r;
  if (!decode_plan_geometry(s.batch, s.s_q, s.h_q, 132, &g, h.seqlens.data(), s.format).is_ok()) return r;
  std::vector<int32_t> parts(size_t(g.num_parts) * kPlanPartInts), off(s.batch + 1);
  const DecodePlanView pv{parts.data(), off.data(), g.num_parts};
  if (!ref::plan_decode(TensorView::contiguous(const_cast<int32_t*>(h.seqlens.data()), DType::kInt32, {s.batch}),
                        TensorView::contiguous(const_cast<int32_t*>(h.block_table.data()), DType::kInt32,
                                               {s.batch, h.max_pages}),
                        g, pv)
           .is_ok())
    return r;
  // fp8_reference_sums (test_mla_decode_fp8.cu) for the knobs set: the 16-row kernel (fp32 partials, S from shared
  // memory, V^T from registers), the 64-row ws kernels (bf16 partials, P.V from shared memory, S's last steps from
  // registers: 6 for ws_qreg, 8 for ws_split and ws3; config_ws.h / config_ws3.h).
  const int rows = s.s_q * s.h_q;
  sm90::decode_fp8::N32Mode n32{};  // (the mma.sync cases, n32mma, are skipped above)
  if (!sm90::decode_fp8::n32_mode(&n32).is_ok()) return r;
  const bool h16 =
      sm90::decode_fp8::fp8_kernel_family(rows, g.tile_rows, n32, false) == sm90::decode_fp8::Fp8KernelFamily::kH16;
  const bool fused = !combine && g.tile_rows == kDecodeRowsPerCta;  // n1's cases passed merge counters
  MlaDecodeRefOptions model;
  model.fp8_mma_sum = Fp8MmaSum::kWgmmaE4m3;
  model.bf16_partials = !h16;
  model.pv_register_a = h16;
  if (!h16)
    model.s_register_steps =
        forced_steps > 0 ? forced_steps
        : sm90::decode_fp8::auto_variant64(g, fused) == sm90::decode_fp8::Variant64::kWsQReg ? 6
                                                                                              : 8;
  std::vector<uint16_t> of(h.out_elems()), om(h.out_elems());
  std::vector<float> lf(h.lse_elems()), lm(h.lse_elems());
  std::vector<float> oa(size_t(g.max_splits) * rows * kDimV + 1), la(size_t(g.max_splits) * rows + 1);
  const float sm = 0.0721687836f;
  if (!ref::mla_decode_split(h.host_params(of.data(), lf.data(), sm), pv, oa.data(), la.data()).is_ok() ||
      !ref::mla_decode_split(h.host_params(om.data(), lm.data(), sm), pv, oa.data(), la.data(), model).is_ok())
    return r;
  double vmax = 0;
  for (int b = 0; b < s.batch; ++b)
    for (int t = 0; t < s.seqlens[b]; ++t)
      for (int d = 0; d < kDimV; ++d) vmax = std::max(vmax, std::fabs(double(e4m3_to_float(h.token(b, t)[d]))));
  vmax *= s.k_scale;
  auto got = [&](size_t i) { return double(bf16_to_float(om[i])); };
  auto want = [&](size_t i) { return double(bf16_to_float(of[i])); };
  r.out = compare(of.size(), [&](size_t i) { return got(i) / vmax; }, [&](size_t i) { return want(i) / vmax; });
  r.row = worst_row(of.size() / kDimV, kDimV, got, want);
  // lse in units of max(1, |lse|), as the suite's compare_lse (tests/gpu/decode_device_run.h)
  auto unit = [&](size_t i) { return std::max(1.0, std::fabs(double(lf[i]))); };
  r.lse = compare(lf.size(), [&](size_t i) { return double(lm[i]) / unit(i); },
                  [&](size_t i) { return double(lf[i]) / unit(i); });
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s n1_fp8_case_checks.txt (MLA_TEST_SEED=1796448581257790)\n", argv[0]);
    return 2;
  }
  // n1's three checks per case: out (rel_l2, max_abs, at), row (rel_l2 at row), lse (max_abs at).
  std::map<std::string, std::map<std::string, std::vector<std::string>>> n1;
  std::vector<std::string> order;
  std::ifstream in(argv[1]);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string name, check, rel, mx, at;
    ls >> name >> check >> rel >> mx >> at;
    if (!n1.count(name)) order.push_back(name);
    n1[name][check] = {rel, mx, at};
  }
  std::printf("case: n1 kernel vs float sums | model vs float sums (out rel_l2, max_abs @ element; worst row @ row; "
              "lse max_abs @ row)\n");
  for (const std::string& name : order) {
    const Spec* sp = nullptr;
    std::string variant;
    for (const Spec& x : specs()) {
      const size_t n = std::strlen(x.name);
      if (name.compare(0, n, x.name) == 0 && (name.size() == n || name[n] == '_')) {
        sp = &x;
        variant = name.substr(n);
      }
    }
    if (!sp) continue;
    const auto env = variant_env(variant, *sp);
    if (env.count("skip")) continue;
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    const bool combine = variant == "_combine" || variant == "_combine_wsqreg";
    const int forced = variant == "_ws3" || variant == "_wssplit" ? 8 : variant == "_combine_wsqreg" ? 6 : 0;
    const Result r = model_vs_float(*sp, name, combine, forced);
    for (const auto& [k, v] : env) unsetenv(k.c_str());
    auto& m = n1[name];
    std::printf("%s: %s %s@%s %s@%s %s@%s | %.3e %.3e@%zu %.3e@%zu %.3e@%zu\n", name.c_str(), m["out"][0].c_str(),
                m["out"][1].c_str(), m["out"][2].c_str(), m["row"][0].c_str(), m["row"][2].c_str(),
                m["lse"][1].c_str(), m["lse"][2].c_str(), r.out.rel_l2, r.out.max_abs, r.out.worst, r.row.rel_l2,
                r.row.worst, r.lse.max_abs, r.lse.worst);
    std::fflush(stdout);
  }
  return 0;
}
