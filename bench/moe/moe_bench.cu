// bench_moe: the routed experts of one MoE layer as the CUDA backend runs them (moe_align, the gate|up
// grouped GEMM with the SiLU·mul epilogue, the down grouped GEMM), DeepSeek-V2-Lite shapes by default
// (E 64, k 6, H 2048, I 1408), uniform random routing.
//
// Decode (few rows per expert) is weight-bandwidth bound: GB/s counts each active expert's weights once
// (the ideal: every weight byte read once per step) plus the activations, against the ~4.2 TB/s copy
// ceiling of ANCHORS.md. Prefill is compute bound: TFLOP/s counts useful FLOPs (2 · rows · N · K, no
// padding), against ~780 TFLOP/s measured bf16 MMA. Each timed rep uses the next of `copies` weight
// sets (together far larger than the 50 MB L2), so weights stream from HBM as they would across layers.
// CUDA events around each launch, warm-up first, median of the reps.
//
//   bench_moe [--tokens 1,64,256,2048,16384] [--experts 64] [--topk 6] [--hidden 2048] [--inter 1408]
//             [--reps 30] [--copies 4] [--block-m 0,16,32,64]   (0: the backend's rule; else forced)
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/args.h"
#include "common/dev_mem.h"
#include "common/device_data.cuh"
#include "mla/core/cuda_check.h"
#include "mla/ops/grouped_gemm.h"
#include "mla/ops/moe_align.h"

namespace {

using namespace mla;

struct Args {
  std::vector<int64_t> tokens = {1, 64, 256, 2048, 16384};
  int64_t E = 64, k = 6, H = 2048, I = 1408, reps = 30, copies = 4;
  std::vector<int64_t> block_ms = {0};  // 0: grouped_gemm_block_m's rule; else forced (16 | 32 | 64 | 128)
};

bool parse(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    const std::string key = argv[i];
    if (i + 1 >= argc) return false;
    const std::string v = argv[++i];
    if (key == "--tokens") a->tokens = bench::parse_int_list(v);
    else if (key == "--experts") a->E = std::atoll(v.c_str());
    else if (key == "--topk") a->k = std::atoll(v.c_str());
    else if (key == "--hidden") a->H = std::atoll(v.c_str());
    else if (key == "--inter") a->I = std::atoll(v.c_str());
    else if (key == "--reps") a->reps = std::atoll(v.c_str());
    else if (key == "--copies") a->copies = std::atoll(v.c_str());
    else if (key == "--block-m") a->block_ms = bench::parse_int_list(v);
    else return false;
  }
  return true;
}

using bench::DeviceBuffer;
using bench::fill_bf16;

// Median microseconds of `run(rep)`, one event pair per rep, after three warm-up calls.
Status time_us(const std::function<Status(int)>& run, int reps, double* us) {
  bench::EventPair ev;  // destroyed on every return path (a failing run used to leak the pair)
  MLA_TRY(ev.create("bench_moe"));
  for (int r = 0; r < 3; ++r) MLA_TRY(run(r));
  std::vector<double> v;
  for (int r = 0; r < reps; ++r) {
    MLA_CUDA_TRY("bench_moe", cudaEventRecord(ev.start));
    MLA_TRY(run(r));
    MLA_CUDA_TRY("bench_moe", cudaEventRecord(ev.stop));
    MLA_CUDA_TRY("bench_moe", cudaEventSynchronize(ev.stop));
    float ms = 0;
    MLA_CUDA_TRY("bench_moe", cudaEventElapsedTime(&ms, ev.start, ev.stop));
    v.push_back(ms * 1e3);
  }
  std::sort(v.begin(), v.end());
  *us = v[v.size() / 2];
  return Status::ok();
}

Status run_case(const Args& a, int64_t t, int forced_bm, const DeviceBuffer& w13, const DeviceBuffer& w2) {
  const int64_t E = a.E, k = a.k, H = a.H, I = a.I, n = t * k;
  int bm = forced_bm;
  if (bm <= 0) MLA_TRY(grouped_gemm_block_m(n, E, &bm));
  const int64_t max_tiles = moe_align_max_tiles(n, E, bm);
  std::mt19937_64 rng(1234 + uint64_t(t));
  std::vector<int32_t> ids;
  std::vector<int32_t> all(static_cast<size_t>(E));
  for (int64_t i = 0; i < t; ++i) {
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    ids.insert(ids.end(), all.begin(), all.begin() + k);
  }
  std::vector<int> used(static_cast<size_t>(E), 0);
  for (int32_t e : ids) used[size_t(e)] = 1;
  const int64_t active = std::accumulate(used.begin(), used.end(), int64_t{0});

  DeviceBuffer d_ids(size_t(n) * 4), d_off(size_t(E + 1) * 4), d_perm(size_t(n) * 4), d_src(size_t(n) * 4),
      d_tiles(size_t(max_tiles) * 8), d_err(4), d_x(size_t(t * H) * 2), d_h(size_t(n * I) * 2), d_y(size_t(n * H) * 2);
  if (!d_y.p || !d_h.p) return Status::oom("bench_moe", "activations for " + std::to_string(t) + " tokens");
  MLA_CUDA_TRY("bench_moe", cudaMemcpy(d_ids.p, ids.data(), size_t(n) * 4, cudaMemcpyHostToDevice));
  MLA_CUDA_TRY("bench_moe", cudaMemset(d_err.p, 0, 4));
  fill_bf16<<<1024, 256>>>(d_x.as<__nv_bfloat16>(), t * H, 1.f, 99);

  const MoeAlignParams ap{.topk_ids = TensorView::contiguous(d_ids.p, DType::kInt32, {t, k}),
                          .num_experts = int(E),
                          .block_m = bm,
                          .expert_offsets = TensorView::contiguous(d_off.p, DType::kInt32, {E + 1}),
                          .perm = TensorView::contiguous(d_perm.p, DType::kInt32, {n}),
                          .src = TensorView::contiguous(d_src.p, DType::kInt32, {t, k}),
                          .tiles = TensorView::contiguous(d_tiles.p, DType::kInt32, {max_tiles, 2}),
                          .error = TensorView::contiguous(d_err.p, DType::kInt32, {1})};
  MLA_TRY(cuda::moe_align(ap, nullptr));
  const size_t w13_bytes = size_t(E * 2 * I * H) * 2, w2_bytes = size_t(E * H * I) * 2;
  auto gemm1 = [&](int rep) {
    GroupedGemmParams p;
    p.a = TensorView::contiguous(d_x.p, DType::kBf16, {t, H});
    p.a_rows = ap.perm;
    p.w = TensorView::contiguous(w13.as<uint8_t>() + size_t(rep % a.copies) * w13_bytes, DType::kBf16, {E, 2 * I, H});
    p.expert_offsets = ap.expert_offsets, p.tiles = ap.tiles, p.block_m = bm;
    p.epilogue = GroupedEpilogue::kSiluMul;
    p.out = TensorView::contiguous(d_h.p, DType::kBf16, {n, I});
    return cuda::grouped_gemm(p, nullptr);
  };
  auto gemm2 = [&](int rep) {
    GroupedGemmParams p;
    p.a = TensorView::contiguous(d_h.p, DType::kBf16, {n, I});
    p.w = TensorView::contiguous(w2.as<uint8_t>() + size_t(rep % a.copies) * w2_bytes, DType::kBf16, {E, H, I});
    p.expert_offsets = ap.expert_offsets, p.tiles = ap.tiles, p.block_m = bm;
    p.out = TensorView::contiguous(d_y.p, DType::kBf16, {n, H});
    return cuda::grouped_gemm(p, nullptr);
  };
  double us_align = 0, us1 = 0, us2 = 0, us_all = 0;
  MLA_TRY(time_us([&](int) { return cuda::moe_align(ap, nullptr); }, int(a.reps), &us_align));
  MLA_TRY(time_us(gemm1, int(a.reps), &us1));
  MLA_TRY(time_us(gemm2, int(a.reps), &us2));
  MLA_TRY(time_us([&](int rep) {
            MLA_TRY(cuda::moe_align(ap, nullptr));
            MLA_TRY(gemm1(rep));
            return gemm2(rep);
          }, int(a.reps), &us_all));
  int err = 0;
  MLA_CUDA_TRY("bench_moe", cudaMemcpy(&err, d_err.p, 4, cudaMemcpyDeviceToHost));
  if (err != 0) return Status::internal("bench_moe", "moe_align flagged invalid ids");
  // Bytes: active experts' weights once, A read, out written (the gather reads t rows k times: counted k times).
  const double b1 = double(active * 2 * I * H) * 2 + double(n * H) * 2 + double(n * I) * 2;
  const double b2 = double(active * H * I) * 2 + double(n * I) * 2 + double(n * H) * 2;
  const double f1 = 2.0 * double(n) * double(2 * I) * double(H), f2 = 2.0 * double(n) * double(H) * double(I);
  auto row = [&](const char* what, double us, double bytes, double flops) {
    std::printf("| %lld | %s | %d | %lld | %.1f | %.0f | %.1f |\n", static_cast<long long>(t), what, bm,
                static_cast<long long>(active), us, bytes / us * 1e-3, flops / us * 1e-6);
  };
  row("moe_align", us_align, double(n) * 4 * 4, 0);
  row("gate|up + SiLU·mul", us1, b1, f1);
  row("down", us2, b2, f2);
  row("all three", us_all, b1 + b2, f1 + f2);
  if (bm == 128) {  // the same two GEMMs on the mma.sync kernel (what block_m 128 ran before wgmma)
    setenv("MLA_GROUPED_GEMM_MMA_SYNC", "1", 1);
    MLA_TRY(time_us(gemm1, int(a.reps), &us1));
    MLA_TRY(time_us(gemm2, int(a.reps), &us2));
    unsetenv("MLA_GROUPED_GEMM_MMA_SYNC");
    row("gate|up + SiLU·mul (mma.sync)", us1, b1, f1);
    row("down (mma.sync)", us2, b2, f2);
  }
  return Status::ok();
}

}  // namespace

int moe_bench_main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  Args a;
  if (!parse(argc, argv, &a)) {
    std::fprintf(stderr, "usage: bench_moe [--tokens 1,64,256,2048,16384] [--experts E] [--topk k] [--hidden H] "
                         "[--inter I] [--reps N] [--copies C] [--block-m 0,16,32,64]\n");
    return 2;
  }
  const size_t w13_bytes = size_t(a.E * 2 * a.I * a.H) * 2, w2_bytes = size_t(a.E * a.H * a.I) * 2;
  DeviceBuffer w13(w13_bytes * size_t(a.copies)), w2(w2_bytes * size_t(a.copies));
  if (!w13.p || !w2.p) {
    std::fprintf(stderr, "bench_moe: cannot allocate %zu MB of weights\n",
                 (w13_bytes + w2_bytes) * size_t(a.copies) >> 20);
    return 1;
  }
  // Weights ~ U(-1, 1) / sqrt(K) · sqrt(3): activations stay O(1) through both GEMMs.
  fill_bf16<<<4096, 256>>>(w13.as<__nv_bfloat16>(), int64_t(w13_bytes / 2) * a.copies, 1.7f / std::sqrt(float(a.H)), 7);
  fill_bf16<<<4096, 256>>>(w2.as<__nv_bfloat16>(), int64_t(w2_bytes / 2) * a.copies, 1.7f / std::sqrt(float(a.I)), 8);
  std::printf("grouped MoE experts: E %lld, k %lld, H %lld, I %lld; weights %.0f MB per layer, %lld copies rotated\n",
              static_cast<long long>(a.E), static_cast<long long>(a.k), static_cast<long long>(a.H),
              static_cast<long long>(a.I), double(w13_bytes + w2_bytes) / 1e6, static_cast<long long>(a.copies));
  std::printf(
      "| tokens | op | block_m | active experts | µs (median) | GB/s | TFLOP/s |\n|---|---|---|---|---|---|---|\n");
  for (int64_t t : a.tokens)
    for (int64_t bm : a.block_ms) {
      const Status s = run_case(a, t, int(bm), w13, w2);
      if (!s.is_ok()) {
        std::fprintf(stderr, "bench_moe: %s\n", s.to_string().c_str());
        return 1;
      }
    }
  return 0;
}
