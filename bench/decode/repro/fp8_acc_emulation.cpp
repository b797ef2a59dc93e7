// Emulations of Hopper's FP8 MMA accumulation for the fp8 decode's scores, against session 61's failing row (session
// 62, bench/decode/NOTES.md): can the wgmma's truncation open a 1.15-nat gap between the two keys of row 1491 of
// fp8_b32_h32_sq2_causal_rand1_2048_s3_ds_ws3 (seed 1796448581257790)? Not part of the build; by hand, from the repo
// root after `ninja -C build`:
//   g++ -O2 -std=c++17 -I. -Iinclude -Isrc -Itests bench/decode/repro/fp8_acc_emulation.cpp
//       build/src/libmla_ref.a -o /tmp/fp8_acc_emulation          (one command)
//   MLA_TEST_SEED=1796448581257790 /tmp/fp8_acc_emulation row
//   MLA_TEST_SEED=1796448581257790 /tmp/fp8_acc_emulation calibrate bench/decode/repro/n1_fp8_ds_lse.txt
// `row`: each model's error on the two keys' scores (nats) and on the row's lse. `calibrate`: each model's lse error on
// the worst lse row of every DeepSeek-like case of n1 (|lse| > 5), against the error n1 measured there.
// A model: the 576 products q_d k_d (exact: e4m3 x e4m3) taken in steps of `group`; within a step each product is
// floored (sign-fill right shift) or truncated toward zero at 2^(e - window), e the exponent of the step's largest
// product (and of the accumulator, align_acc); the accumulator then keeps acc_bits mantissa bits (truncated), 0 = all.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/decode_data.h"
#include "common/random.h"
#include "ops/ref/wgmma_e4m3_sum.h"

using namespace mla;
using namespace mla::test;

namespace {

struct AccModel {
  int group, window;
  bool align_acc, floor_products;
  int acc_bits;
  int acc_window = 0;  // align_acc: the accumulator's own window (0: `window`)
};

double keep_mantissa(double x, int bits) {
  if (x == 0 || bits <= 0) return x;
  int e;
  std::frexp(std::fabs(x), &e);
  const double ulp = std::ldexp(1.0, e - 1 - bits);
  return std::trunc(x / ulp) * ulp;
}

double score(const uint8_t* q, const uint8_t* k, const AccModel& m) {
  double acc = 0;
  for (int k0 = 0; k0 < kDimQK; k0 += m.group) {
    double p[64], top = m.align_acc ? std::fabs(acc) : 0;
    for (int d = 0; d < m.group; ++d) {
      p[d] = double(e4m3_to_float(q[k0 + d])) * e4m3_to_float(k[k0 + d]);
      top = std::max(top, std::fabs(p[d]));
    }
    double step = 0;
    if (m.window <= 0 || top == 0) {
      for (int d = 0; d < m.group; ++d) step += p[d];
    } else {
      int e;
      std::frexp(top, &e);
      const double ulp = std::ldexp(1.0, e - m.window);
      auto cut = [&](double x) { return (m.floor_products ? std::floor(x / ulp) : std::trunc(x / ulp)) * ulp; };
      for (int d = 0; d < m.group; ++d) step += cut(p[d]);
      if (m.align_acc) {
        const double ua = std::ldexp(1.0, e - (m.acc_window > 0 ? m.acc_window : m.window));
        acc = (m.floor_products ? std::floor(acc / ua) : std::trunc(acc / ua)) * ua;
      }
    }
    acc = keep_mantissa(acc + step, m.acc_bits);
  }
  return acc;
}

const AccModel kExact{32, 0, false, false, 0};

std::vector<AccModel> models() {
  std::vector<AccModel> v;
  const char* grid = std::getenv("EMU_GRID");
  if (grid && std::strcmp(grid, "fine") == 0) {
    for (int g : {16, 32})
      for (int w : {13, 14, 15})
        for (int wa : {12, 13, 14, 15}) v.push_back({g, w, true, false, 13, wa});
    return v;
  }
  for (int fl : {1, 0})  // floor (sign-fill shift), truncation toward zero
    for (int w : {12, 13, 14, 15, 16, 17})
      for (int al : {0, 1}) v.push_back({32, w, bool(al), bool(fl), 13});
  v.push_back({32, 0, false, false, 13});  // only the accumulator at 13 bits
  return v;
}

void print_model(const AccModel& m) {
  std::printf("k%d window %d%s", m.group, m.window, m.align_acc ? " +acc" : "");
  if (m.align_acc && m.acc_window > 0) std::printf(" (acc window %d)", m.acc_window);
  std::printf(" %s acc %d bits", m.floor_products ? "floor" : "trunc", m.acc_bits);
}

// A row's lse (nats) under a model, over its visible keys.
double row_lse(const DecodeHostData& h, int row, const AccModel& m) {
  const DecodeShape& s = h.shape;
  const int b = row / (s.s_q * s.h_q), i = (row / s.h_q) % s.s_q, vis = s.visible_keys(b, i);
  const double c = 0.0721687836 * s.q_scale * s.k_scale;
  std::vector<double> L(vis);
  double top = -INFINITY;
  for (int t = 0; t < vis; ++t) top = std::max(top, L[t] = score(&h.q[size_t(row) * kDimQK], h.token(b, t), m) * c);
  double z = 0;
  for (double l : L) z += std::exp(l - top);
  return top + std::log(z);
}

DecodeHostData case_data(const std::string& name, int batch, int h_q, int s_q, bool causal, float qs, float ks,
                         std::vector<int> lens) {
  DecodeShape s = decode_shape(KvFormat::kFp8, batch, h_q, s_q, causal, std::move(lens));
  s.q_scale = qs;
  s.k_scale = ks;
  s.data = DataKind::kDeepSeekLike;
  auto rng = case_rng(name);
  return make_decode_data(s, rng);
}

int run_row() {
  const std::string name = "fp8_b32_h32_sq2_causal_rand1_2048_s3_ds_ws3";
  const DecodeHostData h = case_data(name, 32, 32, 2, true, 3.f, 3.f, random_lens("b32h32", 32, 1, 2048));
  const int row = 1491, b = 23, key1 = 675, key2 = 1459;  // out row (b 23, query 0, head 19) and its two keys
  const uint8_t* q = &h.q[size_t(row) * kDimQK];
  const double c = 0.0721687836 * 9.0;
  const double s1 = score(q, h.token(b, key1), kExact), s2 = score(q, h.token(b, key2), kExact);
  const double lse0 = row_lse(h, row, kExact);
  std::printf("row %d: keys %d / %d at %.3f / %.3f raw (%.3f / %.3f nats), lse %.3f nats\n", row, key1, key2, s1, s2,
              s1 * c, s2 * c, lse0);
  // The reference's model (src/ops/ref/wgmma_e4m3_sum.h: C cut with the products only in the steps whose A, Q, comes
  // from registers) on the ten keys session 61's one-key probe measures (build/s61/q1/test_zz_sprobe.cu): its
  // predictions for that probe's lse - exact, row 19, per kernel (ws3 and ws_split: the last 8 steps from registers,
  // ws_qreg: 6; mma_sync: float sums, ~0).
  for (int rs_from : {10, 12}) {
    std::printf("prediction for the probe, row 19, %s:", rs_from == 10 ? "ws3 / ws_split" : "ws_qreg");
    for (int key : {675, 1459, 783, 2, 1070, 1433, 100, 500, 900, 1300}) {
      float qf[kDimQK], kf[kDimQK];
      for (int d = 0; d < kDimQK; ++d) {
        qf[d] = e4m3_to_float(q[d]);
        kf[d] = e4m3_to_float(h.token(b, key)[d]);
      }
      const double model = ref::wgmma_e4m3_dot576(qf, kf, rs_from);
      std::printf(" %d %+.4f", key, (model - score(q, h.token(b, key), kExact)) * c);
    }
    std::printf(" nats\n");
  }
  for (const AccModel& m : models()) {
    const double e1 = (score(q, h.token(b, key1), m) - s1) * c, e2 = (score(q, h.token(b, key2), m) - s2) * c;
    print_model(m);
    std::printf(": key %d %+.3f, key %d %+.3f nats, gap %+.3f; lse %+.3f\n", key1, e1, key2, e2, e1 - e2,
                row_lse(h, row, m) - lse0);
  }
  return 0;
}

struct Spec {
  const char* prefix;
  int b, h, sq;
  bool causal;
  float qs, ks;
  std::vector<int> lens;
};

int run_calibrate(const char* path) {
  // n1's DeepSeek-like case classes (test_mla_decode_fp8.cu); a case is its class's prefix plus a variant suffix.
  const std::vector<Spec> specs = {
      {"fp8_b1_h16_sq1_len8191_s0p02_ds", 1, 16, 1, false, 0.02f, 0.02f, {8191}},
      {"fp8_b1_h128_sq1_len8191_s3_ds", 1, 128, 1, false, 3.f, 3.f, {8191}},
      {"fp8_b2_h32_sq4_causal_300_1000_s1_ds", 2, 32, 4, true, 1.f, 1.f, {300, 1000}},
      {"fp8_b2_h16_sq1_4096_1000_s0p02_k3_ds", 2, 16, 1, false, 0.02f, 3.f, {4096, 1000}},
      {"fp8_b2_h128_sq1_1000_511_s3_k0p02_ds", 2, 128, 1, false, 3.f, 0.02f, {1000, 511}},
      {"fp8_b7_h128_sq4_causal_tiny_mix_s0p02_ds", 7, 128, 4, true, 0.02f, 0.02f, {1, 2, 3, 4, 63, 64, 65}},
      {"fp8_b7_h16_sq4_causal_rand1_8191_s0p02_ds", 7, 16, 4, true, 0.02f, 0.02f, random_lens("b7h16", 7, 1, 8191)},
      {"fp8_b2_h16_sq2_8191_63_s1_ds", 2, 16, 2, false, 1.f, 1.f, {8191, 63}},
      {"fp8_b32_h128_sq1_rand1_4096_s0p02_ds", 32, 128, 1, false, 0.02f, 0.02f, random_lens("b32h128", 32, 1, 4096)},
      {"fp8_b32_h32_sq2_causal_rand1_2048_s3_ds", 32, 32, 2, true, 3.f, 3.f, random_lens("b32h32", 32, 1, 2048)},
      {"fp8_b128_h16_sq1_rand1_130_s1_ds", 128, 16, 1, false, 1.f, 1.f, random_lens("b128h16short", 128, 1, 130)},
      {"fp8_b128_h128_sq1_rand1_511_s1_ds", 128, 128, 1, false, 1.f, 1.f, random_lens("b128h128", 128, 1, 511)},
      {"fp8_b7_h16_sq2_causal_rand1_8191_s0p02_ds", 7, 16, 2, true, 0.02f, 0.02f,
       random_lens("b7h16sq2", 7, 1, 8191)},
      {"fp8_b64_h16_sq2_causal_rand1_130_s1_ds", 64, 16, 2, true, 1.f, 1.f, random_lens("b64h16sq2short", 64, 1, 130)},
  };
  const std::vector<AccModel> ms = models();
  std::vector<std::vector<double>> ratio(ms.size());
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string name;
    double rel;
    long at;
    ls >> name >> rel >> at;
    const Spec* sp = nullptr;
    for (const Spec& x : specs) {
      const size_t n = std::strlen(x.prefix);
      if (name.compare(0, n, x.prefix) == 0 && (name.size() == n || name[n] == '_')) sp = &x;
    }
    if (!sp || name.find("n32mma") != std::string::npos) continue;  // mma.sync: fp32 accumulation
    const DecodeHostData h = case_data(name, sp->b, sp->h, sp->sq, sp->causal, sp->qs, sp->ks, sp->lens);
    // lse layout [b, h_q, s_q] -> out row (b * s_q + i) * h_q + head
    const int b = int(at / (sp->h * sp->sq)), head = int(at / sp->sq) % sp->h, i = int(at % sp->sq);
    const int row = (b * sp->sq + i) * sp->h + head;
    const double exact = row_lse(h, row, kExact);
    if (std::fabs(exact) <= 5) continue;  // near 0 the check is absolute and the noise is no bias
    const double measured = rel * std::max(1.0, std::fabs(exact));
    std::printf("%-52s lse %8.3f measured |error| %.4f, models:", name.c_str(), exact, measured);
    for (size_t k = 0; k < ms.size(); ++k) {
      const double e = row_lse(h, row, ms[k]) - exact;
      std::printf(" %+.3f", e);
      ratio[k].push_back(std::fabs(e) / measured);
    }
    std::printf("\n");
  }
  for (size_t k = 0; k < ms.size(); ++k) {
    std::vector<double>& r = ratio[k];
    if (r.empty()) continue;
    std::sort(r.begin(), r.end());
    print_model(ms[k]);
    std::printf(": |emulated| / measured over %zu rows: p10 %.2f, median %.2f, p90 %.2f\n", r.size(), r[r.size() / 10],
                r[r.size() / 2], r[r.size() * 9 / 10]);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "row") == 0) return run_row();
  if (argc >= 3 && std::strcmp(argv[1], "calibrate") == 0) return run_calibrate(argv[2]);
  std::fprintf(stderr, "usage: %s row | calibrate FILE (MLA_TEST_SEED=1796448581257790)\n", argv[0]);
  return 2;
}
