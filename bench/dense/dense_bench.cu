// bench_dense: every dense GEMM of one DeepSeek-V2-Lite decode step, at the step's shapes, through the CUDA
// backend's cuBLASLt wrapper (model/cuda/gemm.h) with the heuristic's first choice (MLA_GEMM_TUNE=0) and with
// the autotuned algorithm, and the routed-expert grouped GEMM kernel run as a dense GEMM (one "expert",
// block_m 16/32/64) where its epilogue fits (bf16 out, unbatched).
//
// At decode sizes these products stream their weights (m <= 256 rows against 1–420 MB): µs are compared with
// weight bytes / 4.2 TB/s (the copy ceiling of ANCHORS.md). The L2 is flushed before every timed rep (the
// weights of a real step come from HBM, each read once); CUDA events around one launch; median.
// "step ms" weighs each shape by how often a step runs it (27 layers; layer 0 dense MLP, 26 MoE layers).
//
//   bench_dense [--m 1,64,128,256] [--reps 30]
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/args.h"
#include "common/device_data.cuh"
#include "common/timing.h"
#include "mla/core/cuda_check.h"
#include "mla/ops/grouped_gemm.h"
#include "model/cuda/gemm.h"

namespace {

using namespace mla;
using model::cuda_backend::Gemm;
using model::cuda_backend::GemmArgs;
using bench::DeviceBuffer;
using bench::fill_bf16;

// One GEMM of the step. Unbatched: x [m, k] · w [n, k]ᵀ. Batched (absorption, 16 heads): the strides the
// attention op uses (cuda_backend_attention.cpp).
struct Shape {
  const char* name;
  int64_t n, k;
  bool fp32_out;
  int per_step;  // how many a decode step runs
  int kind;      // 0 linear, 1 W_UK (q_nope · W_UK per head), 2 W_UV (o_lat · W_UVᵀ per head)
};

constexpr int64_t kHeads = 16, kNope = 128, kV = 128, kLat = 512, kRope = 64;

const std::vector<Shape>& shapes() {
  static const std::vector<Shape> s = {
      {"q_proj", kHeads * (kNope + kRope), 2048, false, 27, 0},
      {"kv_a_proj", kLat + kRope, 2048, false, 27, 0},
      {"W_UK (16 heads)", kLat, kNope, false, 27, 1},
      {"W_UV (16 heads)", kV, kLat, false, 27, 2},
      {"o_proj", 2048, kHeads * kV, false, 27, 0},
      {"dense gate/up", 10944, 2048, false, 2, 0},
      {"dense down", 2048, 10944, false, 1, 0},
      {"router (fp32)", 64, 2048, true, 26, 0},
      {"shared gate|up", 2 * 2816, 2048, false, 26, 0},
      {"shared down", 2048, 2816, false, 26, 0},
      {"lm_head (fp32)", 102400, 2048, true, 1, 0},
  };
  return s;
}

// Weight bytes one call reads.
double weight_bytes(const Shape& s) {
  return s.kind == 0 ? double(s.n * s.k) * 2 : double(kHeads * s.n * s.k) * 2;
}

GemmArgs args_of(const Shape& s, int64_t m, void* a, void* w, void* c) {
  GemmArgs g;
  g.m = m;
  if (s.kind == 0) {
    g.a = a, g.lda = s.k, g.b = w, g.ldb = s.k, g.b_is_nk = true;
    g.c = c, g.ldc = s.n, g.c_dtype = s.fp32_out ? DType::kFp32 : DType::kBf16;
    g.n = s.n, g.k = s.k;
  } else if (s.kind == 1) {  // A = q [m, 16·192] per-head slices, B = kv_b rows as [128, 512], C = q_dec [m, 16·576]
    g.a = a, g.lda = kHeads * (kNope + kRope), g.stride_a = kNope + kRope;
    g.b = w, g.ldb = kLat, g.stride_b = (kNope + kV) * kLat, g.b_is_nk = false;
    g.c = c, g.ldc = kHeads * (kLat + kRope), g.stride_c = kLat + kRope;
    g.n = kLat, g.k = kNope, g.batch = int(kHeads);
  } else {  // A = o_lat [m, 16·512], B = kv_b rows 128.. as [128, 512] (nk), C = [m, 16·128]
    g.a = a, g.lda = kHeads * kLat, g.stride_a = kLat;
    g.b = static_cast<uint16_t*>(w) + kNope * kLat, g.ldb = kLat, g.stride_b = (kNope + kV) * kLat, g.b_is_nk = true;
    g.c = c, g.ldc = kHeads * kV, g.stride_c = kV;
    g.n = kV, g.k = kLat, g.batch = int(kHeads);
  }
  return g;
}

struct Args {
  std::vector<int64_t> ms = {1, 64, 128, 256};
  int reps = 30;
};

int run(const Args& a) {
  bench::L2Flusher l2;
  Status st = l2.init();
  if (!st.is_ok()) return std::fprintf(stderr, "%s\n", st.to_string().c_str()), 1;
  const int64_t max_m = *std::max_element(a.ms.begin(), a.ms.end());
  DeviceBuffer ws(size_t{32} << 20), act(size_t(max_m) * 16 * 1024 * 2 + (1 << 20)), out(size_t(max_m) * 102400 * 4);
  // Weights: the largest shape's bytes, plus kv_b's full [16·256, 512] for the absorbed products.
  DeviceBuffer w(size_t(102400) * 2048 * 2);
  if (!ws.p || !act.p || !out.p || !w.p) return std::fprintf(stderr, "bench_dense: cudaMalloc failed\n"), 1;
  fill_bf16<<<4096, 256>>>(static_cast<__nv_bfloat16*>(w.p), int64_t(102400) * 2048, 0.03f, 7);
  fill_bf16<<<1024, 256>>>(static_cast<__nv_bfloat16*>(act.p), max_m * 16 * 1024, 1.f, 9);
  Gemm gemm;
  // The autotuner's own flush buffer (read only, as the backend's scratch arena serves it there).
  DeviceBuffer tune_flush(size_t{128} << 20);
  if (!tune_flush.p || cudaMemset(tune_flush.p, 0, size_t{128} << 20) != cudaSuccess)
    return std::fprintf(stderr, "bench_dense: cudaMalloc failed\n"), 1;
  model::cuda_backend::GemmTuneOptions to;
  to.flush = tune_flush.p, to.flush_bytes = size_t{128} << 20;
  if (const Status si = gemm.init(ws.p, size_t{32} << 20, to); !si.is_ok())
    return std::fprintf(stderr, "%s\n", si.to_string().c_str()), 1;

  // Grouped GEMM as a dense one: one expert, offsets {0, m}, tiles (0, r0) every block_m rows.
  DeviceBuffer d_off(8), d_tiles(size_t(max_m) * 8 + 8);
  const bench::TimingOptions topt{.warmup = 3, .reps = a.reps};

  std::printf("| m | shape | n | k | per step | weight MB | heuristic µs | tuned µs (choice) | TB/s tuned | "
              "grouped bm16 µs | bm32 µs | bm64 µs |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int64_t m : a.ms) {
    double step_h = 0, step_t = 0, step_best = 0, bytes_step = 0;
    for (const Shape& s : shapes()) {
      const GemmArgs g = args_of(s, m, act.p, w.p, out.p);
      auto call = [&] { return gemm.run(s.name, g, nullptr); };
      float ms_h = 0, ms_t = 0;
      std::string choice;
      const Status rs = [&]() -> Status {  // heuristic, then tuned (MLA_GEMM_TUNE is read per call)
        setenv("MLA_GEMM_TUNE", "0", 1);
        MLA_TRY(bench::time_median_ms(call, l2, topt, &ms_h));
        setenv("MLA_GEMM_TUNE", "1", 1);
        MLA_TRY(call());
        choice = gemm.last_choice();
        return bench::time_median_ms(call, l2, topt, &ms_t);
      }();
      if (!rs.is_ok()) return std::fprintf(stderr, "bench_dense: %s\n", rs.to_string().c_str()), 1;
      float grouped[3] = {0, 0, 0};
      if (s.kind == 0 && !s.fp32_out) {
        const int bms[3] = {16, 32, 64};
        for (int i = 0; i < 3; ++i) {
          const int bm = bms[i];
          const int64_t nt = (m + bm - 1) / bm;
          std::vector<int32_t> tiles;
          for (int64_t j = 0; j < nt; ++j) tiles.push_back(0), tiles.push_back(int32_t(j * bm));
          const int32_t off[2] = {0, int32_t(m)};
          cudaMemcpy(d_off.p, off, 8, cudaMemcpyHostToDevice);
          cudaMemcpy(d_tiles.p, tiles.data(), tiles.size() * 4, cudaMemcpyHostToDevice);
          GroupedGemmParams p;
          p.a = TensorView::contiguous(act.p, DType::kBf16, {m, s.k});
          p.w = TensorView::contiguous(w.p, DType::kBf16, {1, s.n, s.k});
          p.expert_offsets = TensorView::contiguous(d_off.p, DType::kInt32, {2});
          p.tiles = TensorView::contiguous(d_tiles.p, DType::kInt32, {nt, 2});
          p.block_m = bm;
          p.out = TensorView::contiguous(out.p, DType::kBf16, {m, s.n});
          const Status gs =
              validate_grouped_gemm(p).is_ok()
                  ? bench::time_median_ms([&] { return cuda::grouped_gemm(p, nullptr); }, l2, topt, &grouped[i])
                  : Status::ok();
          if (!gs.is_ok()) grouped[i] = -1;  // e.g. block_m not built: leave the cell empty
        }
      }
      const double wb = weight_bytes(s);
      double best = std::min(ms_h, ms_t);
      for (float gv : grouped)
        if (gv > 0) best = std::min<double>(best, gv);
      step_h += s.per_step * ms_h, step_t += s.per_step * ms_t, step_best += s.per_step * best;
      bytes_step += s.per_step * wb;
      auto cell = [](float v) { return v > 0 ? std::to_string(v * 1e3).substr(0, 6) : std::string("—"); };
      std::printf("| %lld | %s | %lld | %lld | %d | %.1f | %.1f | %.1f (%s) | %.2f | %s | %s | %s |\n",
                  static_cast<long long>(m), s.name, static_cast<long long>(s.n), static_cast<long long>(s.k),
                  s.per_step, wb / 1e6, ms_h * 1e3, ms_t * 1e3, choice.c_str(), wb / (ms_t * 1e-3) / 1e12,
                  cell(grouped[0]).c_str(), cell(grouped[1]).c_str(), cell(grouped[2]).c_str());
    }
    std::printf("step m %lld: dense weights %.0f MB (%.3f ms at 4.2 TB/s); heuristic %.3f ms, tuned %.3f ms, "
                "best of all columns %.3f ms\n",
                static_cast<long long>(m), bytes_step / 1e6, bytes_step / 4.2e12 * 1e3, step_h, step_t, step_best);
  }
  return 0;
}

}  // namespace

int dense_bench_main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--m") a.ms = bench::parse_int_list(v);
    else if (k == "--reps") a.reps = std::atoi(v.c_str());
    else return std::fprintf(stderr, "usage: bench_dense [--m 1,64,128,256] [--reps 30]\n"), 2;
  }
  if (argc % 2 == 0 || a.ms.empty())
    return std::fprintf(stderr, "usage: bench_dense [--m 1,64,128,256] [--reps 30]\n"), 2;
  return run(a);
}
