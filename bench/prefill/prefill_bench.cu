// bench_prefill: prefill_attention (MLA's expanded prefill: causal varlen attention, d_qk 192 = 128 nope +
// 64 shared rope, d_v 128) in the CUDA backend's layout: k_nope and v interleaved per head as kv_b_proj
// writes them, k_pe read from 576-wide latent rows. Compute bound, so the figure is TFLOP/s of useful work
// (causal: query i of a chunk sees k_len - q_len + i + 1 keys; 2 · (192 + 128) FLOPs per visible key and
// head) against the ~780 TFLOP/s bf16 MMA ceiling of ANCHORS.md. CUDA events, warm-up, L2 flushed before
// each rep, median (bench/common/timing.h).
//
//   bench_prefill [--heads 16,128] [--reps 20]
//
// Rows: whole prompts (8 x 2048, 1 x 8192, 32 x 512) and a chunk continuing a cached prefix (the last 4096
// queries of 8192 keys), the shapes chunked prefill gives the engine.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/args.h"
#include "common/dev_mem.h"
#include "common/timing.h"
#include "mla/core/cuda_check.h"
#include "mla/core/half.h"
#include "mla/ops/prefill_attention.h"

namespace {

using namespace mla;

struct Row {
  int batch, q_len, k_len;
};

// N(0, 1)-like bf16 values from a counter hash (sum of four uniforms, rescaled): fresh, non-zero data
// without a host round trip for the ~1 GB the h_q 128 rows need.
__global__ void fill_bf16(uint16_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t x = uint32_t(i) * 0x9E3779B9u ^ seed ^ uint32_t(i >> 32) * 0x85EBCA6Bu;
    float s = 0.f;
    for (int k = 0; k < 4; ++k) {
      x ^= x >> 16, x *= 0x7FEB352Du, x ^= x >> 15, x *= 0x846CA68Bu, x ^= x >> 16;
      s += float(x >> 8) * (1.f / 16777216.f);
    }
    p[i] = float_to_bf16((s - 2.f) * 1.7320508f);  // variance of a sum of 4 U(0,1) is 1/3
  }
}

constexpr const char* kOp = "bench prefill";

Status alloc_fill(bench::DevMem<uint16_t>* a, size_t elems, uint32_t seed) {
  MLA_TRY(a->alloc(elems, kOp));
  fill_bf16<<<132 * 8, 256>>>(a->p, elems, seed);
  MLA_CUDA_TRY_LAUNCH("bench prefill fill");
  return Status::ok();
}

Status run_row(int64_t h, const Row& r, const bench::L2Flusher& l2, const bench::TimingOptions& opt) {
  const int64_t tq = int64_t(r.batch) * r.q_len, tk = int64_t(r.batch) * r.k_len;
  const int64_t dkv = kPrefillDimNope + kPrefillDimV;
  std::vector<int32_t> seqs;
  double visible = 0;  // (query, key) pairs the causal mask keeps, per head
  for (int b = 0; b < r.batch; ++b) {
    seqs.insert(seqs.end(), {b * r.q_len, r.q_len, b * r.k_len, r.k_len});
    visible += double(r.q_len) * (r.k_len - r.q_len) + double(r.q_len) * (r.q_len + 1) / 2;
  }
  bench::DevMem<uint16_t> q, kv, lat, out;
  bench::DevMem<float> lse;
  bench::DevMem<int32_t> dseqs;
  MLA_TRY(alloc_fill(&q, size_t(tq * h * kPrefillDimQK), 1));
  MLA_TRY(alloc_fill(&kv, size_t(tk * h * dkv), 2));
  MLA_TRY(alloc_fill(&lat, size_t(tk * 576), 3));
  MLA_TRY(out.alloc(size_t(tq * h * kPrefillDimV), kOp));
  MLA_TRY(lse.alloc(size_t(h * tq), kOp));
  MLA_TRY(dseqs.alloc(seqs.size(), kOp));
  MLA_CUDA_TRY(kOp, cudaMemcpy(dseqs.p, seqs.data(), seqs.size() * 4, cudaMemcpyHostToDevice));

  auto v3 = [](void* d, int64_t rows, int64_t heads, int64_t w, int64_t rs, int64_t hs) {
    TensorView v = TensorView::contiguous(d, DType::kBf16, {rows, heads, w});
    v.stride[0] = rs, v.stride[1] = hs;
    return v;
  };
  PrefillAttentionParams p;
  p.q = v3(q.p, tq, h, kPrefillDimQK, h * kPrefillDimQK, kPrefillDimQK);
  p.k_nope = v3(kv.p, tk, h, kPrefillDimNope, h * dkv, dkv);
  p.v = v3(kv.p + kPrefillDimNope, tk, h, kPrefillDimV, h * dkv, dkv);
  p.k_pe = TensorView::contiguous(lat.p + 512, DType::kBf16, {tk, kPrefillDimRope});
  p.k_pe.stride[0] = 576;
  p.out = v3(out.p, tq, h, kPrefillDimV, h * kPrefillDimV, kPrefillDimV);
  p.lse = TensorView::contiguous(lse.p, DType::kFp32, {h, tq});
  p.seqs = TensorView::contiguous(dseqs.p, DType::kInt32, {r.batch, kPrefillSeqFields});
  p.max_q_len = r.q_len;
  p.softmax_scale = 1.f / std::sqrt(float(kPrefillDimQK));

  float ms = 0;
  MLA_TRY(bench::time_median_ms([&] { return cuda::prefill_attention(p, nullptr); }, l2, opt, &ms));
  const double flops = 2.0 * (kPrefillDimQK + kPrefillDimV) * visible * double(h);
  const double tflops = flops / (double(ms) * 1e-3) / 1e12;
  std::printf("| %lld | %d | %d | %d | %.1f | %.1f | %.1f %% |\n", (long long)h, r.batch, r.q_len, r.k_len, ms * 1e3,
              tflops, 100.0 * tflops / 780.0);
  return Status::ok();
}

}  // namespace

int prefill_bench_main(int argc, char** argv) {
  std::vector<int64_t> heads = {16, 128};
  bench::TimingOptions opt;
  opt.warmup = 3, opt.reps = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string key = argv[i];
    if (i + 1 >= argc || (key != "--heads" && key != "--reps")) {
      std::fprintf(stderr, "bench prefill: usage: [--heads 16,128] [--reps N]; got '%s'\n", key.c_str());
      return 2;
    }
    const std::string v = argv[++i];
    if (key == "--heads") heads = bench::parse_int_list(v);
    else opt.reps = std::atoi(v.c_str());
  }
  int dev = 0;
  if (cudaGetDeviceCount(&dev) != cudaSuccess || dev == 0) {
    std::fprintf(stderr, "bench prefill: no CUDA GPU visible\n");
    return 1;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  bench::L2Flusher l2;
  std::printf("bench prefill_attention on %s: median of %d reps after %d warm-up, L2 flushed; TFLOP/s of causal "
              "useful work vs the ~780 TFLOP/s bf16 MMA ceiling (ANCHORS.md)\n\n",
              prop.name, opt.reps, opt.warmup);
  std::printf("| h_q | batch | q_len | k_len | µs | TFLOP/s | of MMA ceiling |\n|---|---|---|---|---|---|---|\n");
  const std::vector<Row> rows = {{8, 2048, 2048}, {1, 8192, 8192}, {1, 4096, 8192}, {32, 512, 512}};
  auto run_all = [&]() -> Status {
    MLA_TRY(l2.init());
    for (int64_t h : heads)
      for (const Row& r : rows) MLA_TRY(run_row(h, r, l2, opt));
    return Status::ok();
  };
  const Status st = run_all();
  if (!st.is_ok()) {
    std::fprintf(stderr, "bench prefill: %s\n", st.to_string().c_str());
    return 1;
  }
  return 0;
}
