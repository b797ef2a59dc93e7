// mla_accuracy: the price of each KV-cache format. For every format (bf16, fp16, fp8 with scales 1.0,
// fp8 with amax-calibrated scales, fp8_ds) it runs mla_decode and reports the relative L2 and max error of
// out and lse against a float64 reference on the *unquantized* inputs, on N(0, 1) data and on
// DeepSeek-like data (tests/common/decode_data.h). Backend `ref` is the CPU reference, which reproduces
// the kernels' rounding (P rounded to the MMA operand type, blockwise online softmax).
//
//   mla_accuracy [--csv FILE] [--h-q 16,128] [--seqlens 1500,4096] [--softmax-scale S]
//
// The softmax scale sets how peaked the attention is, and with it how much a quantized key moves the output:
// the default is DeepSeek-V2's 1/sqrt(192); the FlashMLA tests behind ../shared/ANCHORS.md's accuracy rows
// use 1/sqrt(576) (flatter), which gives smaller errors for every format.
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/decode_data.h"
#include "common/metrics.h"
#include "mla/core/half.h"
#include "mla/ops/mla_decode.h"

namespace {

using mla::KvFormat;
using mla::test::DataKind;
using mla::test::DecodeHostData;
using mla::test::DecodeShape;

constexpr float kModelSoftmaxScale = 0.07216878f;  // 1/sqrt(192), DeepSeek-V2's q·k scale before YaRN mscale
constexpr const char* kUsage =
    "usage: mla_accuracy [--csv FILE] [--h-q 16,128] [--seqlens 1500,4096] [--softmax-scale S]\n";

// float64 attention over the original float inputs.
void oracle(const DecodeHostData& h, float softmax_scale, std::vector<double>* out, std::vector<double>* lse) {
  const DecodeShape& s = h.shape;
  out->assign(h.out_elems(), 0.0);
  lse->assign(h.lse_elems(), 0.0);
  for (int b = 0; b < s.batch; ++b) {
    const int L = s.seqlens[b];
    const float* kv = &h.kv_float[size_t(b) * h.max_pages * mla::kDecodePageSize * mla::kDimQK];
    for (int row = 0; row < s.s_q * s.h_q; ++row) {
      const float* q = &h.q_float[(size_t(b) * s.s_q * s.h_q + row) * mla::kDimQK];
      std::vector<double> sc(L);
      double mx = -INFINITY;
      for (int t = 0; t < L; ++t) {
        double acc = 0;
        for (int d = 0; d < mla::kDimQK; ++d) acc += double(q[d]) * kv[size_t(t) * mla::kDimQK + d];
        sc[t] = acc * softmax_scale;
        mx = std::max(mx, sc[t]);
      }
      double sum = 0;
      for (int t = 0; t < L; ++t) sum += std::exp(sc[t] - mx);
      double* o = &(*out)[(size_t(b) * s.s_q * s.h_q + row) * mla::kDimV];
      for (int t = 0; t < L; ++t) {
        const double p = std::exp(sc[t] - mx) / sum;
        for (int d = 0; d < mla::kDimV; ++d) o[d] += p * kv[size_t(t) * mla::kDimQK + d];
      }
      const int i = row / s.h_q, hh = row % s.h_q;
      (*lse)[(size_t(b) * s.h_q + hh) * s.s_q + i] = mx + std::log(sum);
    }
  }
}

struct FormatRun {
  const char* name;
  KvFormat format;
  bool calibrated;  // fp8: q_scale, k_scale = amax / 448 of this batch; else 1.0
};

std::vector<int> parse_list(const char* s) {
  std::vector<int> v;
  std::stringstream ss(s);
  std::string tok;
  while (std::getline(ss, tok, ',')) v.push_back(std::stoi(tok));
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  const char* csv_path = nullptr;
  std::vector<int> heads = {16, 128}, seqlens = {1500, 4096};
  float softmax_scale = kModelSoftmaxScale;
  for (int a = 1; a < argc; ++a) {
    if (!std::strcmp(argv[a], "--csv") && a + 1 < argc) csv_path = argv[++a];
    else if (!std::strcmp(argv[a], "--h-q") && a + 1 < argc) heads = parse_list(argv[++a]);
    else if (!std::strcmp(argv[a], "--seqlens") && a + 1 < argc) seqlens = parse_list(argv[++a]);
    else if (!std::strcmp(argv[a], "--softmax-scale") && a + 1 < argc) {
      char* end = nullptr;
      softmax_scale = std::strtof(argv[++a], &end);
      if (!end || *end || !(softmax_scale > 0.f) || !std::isfinite(softmax_scale)) {
        std::fprintf(stderr, "mla_accuracy: --softmax-scale wants a positive number, got '%s'\n", argv[a]);
        return 2;
      }
    } else { std::fprintf(stderr, "%s", kUsage); return 2; }
  }
  std::printf("softmax scale %.8g\n", softmax_scale);
  FILE* csv = csv_path ? std::fopen(csv_path, "w") : nullptr;
  if (csv_path && !csv) { std::fprintf(stderr, "mla_accuracy: cannot write %s\n", csv_path); return 1; }
  if (csv) std::fprintf(csv, "data,h_q,format,out_rel_l2,out_max_abs,lse_rel_l2,lse_max_abs\n");

  const FormatRun runs[] = {{"bf16", KvFormat::kBf16, false},
                            {"fp16", KvFormat::kFp16, false},
                            {"fp8 (scales 1.0)", KvFormat::kFp8, false},
                            {"fp8 (amax/448 scales)", KvFormat::kFp8, true},
                            {"fp8_ds", KvFormat::kFp8Ds, false}};
  std::printf(
      "| data | h_q | format | out rel L2 | out max abs | lse rel L2 | lse max abs |\n|---|---|---|---|---|---|---|\n");
  for (DataKind kind : {DataKind::kNormal, DataKind::kDeepSeekLike}) {
    const char* data_name = kind == DataKind::kNormal ? "N(0,1)" : "DeepSeek-like";
    for (int h_q : heads) {
      DecodeShape base;
      base.batch = static_cast<int>(seqlens.size());
      base.h_q = h_q;
      base.seqlens = seqlens;
      base.data = kind;
      const uint64_t seed = 1000 + h_q + (kind == DataKind::kNormal ? 0 : 7);
      std::mt19937_64 rng0(seed);
      const DecodeHostData ref_data = mla::test::make_decode_data(base, rng0);
      std::vector<double> oo, ol;
      oracle(ref_data, softmax_scale, &oo, &ol);
      float amax_q = 0.f, amax_k = 0.f;
      for (float x : ref_data.q_float) amax_q = std::max(amax_q, std::fabs(x));
      for (float x : ref_data.kv_float) if (!std::isnan(x)) amax_k = std::max(amax_k, std::fabs(x));

      for (const FormatRun& r : runs) {
        DecodeShape s = base;
        s.format = r.format;
        if (r.calibrated) { s.q_scale = amax_q / mla::kE4m3Max; s.k_scale = amax_k / mla::kE4m3Max; }
        std::mt19937_64 rng(seed);  // same draws, so the same floats, encoded in this format
        DecodeHostData h = mla::test::make_decode_data(s, rng);
        std::vector<uint16_t> out(h.out_elems());
        std::vector<float> lse(h.lse_elems());
        auto p = h.params(h.q.data(), h.cache.data(), h.block_table.data(), h.seqlens.data(), out.data(), lse.data(),
                          softmax_scale);
        const mla::Status st = mla::ref::mla_decode(p);
        if (!st.is_ok()) { std::fprintf(stderr, "%s\n", st.to_string().c_str()); return 1; }
        auto val = [&](size_t i) {
          return double(r.format == KvFormat::kFp16 ? mla::fp16_to_float(out[i]) : mla::bf16_to_float(out[i]));
        };
        const auto so = mla::test::compare(oo.size(), val, [&](size_t i) { return oo[i]; });
        const auto sl = mla::test::compare(
            ol.size(), [&](size_t i) { return double(lse[i]); }, [&](size_t i) { return ol[i]; });
        std::printf("| %s | %d | %s | %.2e | %.2e | %.2e | %.2e |\n", data_name, h_q, r.name, so.rel_l2, so.max_abs,
                    sl.rel_l2, sl.max_abs);
        if (csv)
          std::fprintf(csv, "\"%s\",%d,\"%s\",%.4e,%.4e,%.4e,%.4e\n", data_name, h_q, r.name, so.rel_l2, so.max_abs,
                       sl.rel_l2, sl.max_abs);
        std::fflush(stdout);
      }
    }
  }
  if (csv) std::fclose(csv);
  return 0;
}
