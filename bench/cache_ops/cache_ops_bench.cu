// bench_cache_ops: bandwidth of the KV-cache ops at serving sizes (issue 5). Bytes = bytes read + bytes
// written by the op (the ANCHORS.md copy ceiling counts the same way: 4.19 TB/s on the H200).
//
//   concat_and_cache_mla               64k tokens of bf16 [kv_c | k_pe] into each format, page size 64
//   gather_and_maybe_dequant_cache_mla 1M cached tokens of each format -> bf16 and fp32 (random finite
//                                      cache contents), next to a streaming "read N, write k N" ceiling for
//                                      its shape and a sweep of the kernel's knobs (gather_study.h)
//   merge_attn_states                  64k tokens x 16 heads x 128 (bf16), prefill chunk merge
//   quantize_fp8_per_tensor            Q of 128 sequences x 128 heads x 576 (bf16 -> e4m3), x 16
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cache_ops/gather_study.h"
#include "common/dev_mem.h"
#include "common/timing.h"
#include "mla/core/cuda_check.h"
#include "mla/ops/concat_and_cache_mla.h"
#include "mla/ops/gather_cache_mla.h"
#include "mla/ops/merge_attn_states.h"
#include "mla/ops/quantize_fp8.h"

namespace mla::bench {
namespace {

constexpr double kCopyCeilingGBs = 4190.0;  // ANCHORS.md: device-to-device copy, read + written
constexpr int kPage = 64;
constexpr KvFormat kFormats[] = {KvFormat::kBf16, KvFormat::kFp16, KvFormat::kFp8, KvFormat::kFp8Ds};

struct Args {
  int64_t concat_tokens = 64 * 1024;
  int64_t gather_tokens = 1024 * 1024;
  bool sweep = true;  // --sweep 0: skip the gather knob sweep
  TimingOptions timing;
};

using bench::DevMem;
constexpr const char* kOp = "bench_cache_ops";  // names this benchmark in its set-up errors

// Random bf16 values N(0, 1) as bits, generated on the host once per size.
std::vector<uint16_t> random_bf16(size_t n, std::mt19937_64& rng) {
  std::vector<uint16_t> v(n);
  std::normal_distribution<float> d(0.f, 1.f);
  for (auto& x : v) {
    const float f = d(rng);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    x = static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
  }
  return v;
}

// shape_gbs > 0: also the share of the measured streaming ceiling of the op's read/write shape.
double print_row(const char* op, const std::string& fmt, const std::string& what, int64_t tokens, double bytes,
                 float ms, double shape_gbs = 0) {
  const double gbs = bytes / (ms * 1e-3) / 1e9;
  char shape[32] = "-";
  if (shape_gbs > 0) std::snprintf(shape, sizeof shape, "%5.1f %%", 100.0 * gbs / shape_gbs);
  std::printf("| %-34s | %-6s | %-12s | %8lld | %9.1f | %7.0f | %5.1f %% | %7s |\n", op, fmt.c_str(), what.c_str(),
              static_cast<long long>(tokens), ms * 1e3, gbs, 100.0 * gbs / kCopyCeilingGBs, shape);
  return gbs;
}

// Pages handed out in a random order (as a block manager would after churn); tokens fill pages in order.
std::vector<int32_t> shuffled_pages(int64_t num_pages, std::mt19937_64& rng) {
  std::vector<int32_t> p(num_pages);
  std::iota(p.begin(), p.end(), 0);
  std::shuffle(p.begin(), p.end(), rng);
  return p;
}

Status bench_concat(const Args& a, const L2Flusher& l2, std::mt19937_64& rng) {
  const int64_t t = a.concat_tokens, num_pages = (t + kPage - 1) / kPage;
  const std::vector<int32_t> pages = shuffled_pages(num_pages, rng);
  std::vector<int64_t> slots(t);
  for (int64_t i = 0; i < t; ++i) slots[i] = int64_t(pages[i / kPage]) * kPage + i % kPage;
  DevMem<uint16_t> rows;
  DevMem<int64_t> slot_map;
  DevMem<uint8_t> cache;
  MLA_TRY(rows.upload(random_bf16(size_t(t) * kDimQK, rng), kOp));
  MLA_TRY(slot_map.upload(slots, kOp));
  MLA_TRY(cache.alloc_zeroed(size_t(num_pages) * kPage * Fp8DsLayout::kBytes * 2, kOp));  // fits every format
  for (KvFormat f : kFormats) {
    ConcatAndCacheMlaParams p;
    p.kv_c = TensorView::contiguous(rows.p, DType::kBf16, {t, kDimLatent});
    p.kv_c.stride[0] = kDimQK;  // column split of the [t, 576] kv_a_proj output, as in the model
    p.k_pe = TensorView::contiguous(rows.p + kDimLatent, DType::kBf16, {t, kDimRope});
    p.k_pe.stride[0] = kDimQK;
    p.slot_mapping = TensorView::contiguous(slot_map.p, DType::kInt64, {t});
    p.kv_cache = TensorView::contiguous(cache.p, kv_cache_dtype(f), {num_pages, kPage, kv_token_elems(f)});
    p.format = f;
    p.k_scale = 0.1f;
    float ms = 0;
    MLA_TRY(time_median_ms([&] { return cuda::concat_and_cache_mla(p, nullptr); }, l2, a.timing, &ms));
    const double bytes = double(t) * (kDimQK * 2 + kv_bytes_per_token(f) + sizeof(int64_t));
    print_row("concat_and_cache_mla", std::string(kv_format_name(f)), "bf16 in", t, bytes, ms);
  }
  return Status::ok();
}

// Read/write ratio k of a gather (written bytes / read bytes, rounded to the streaming kernels' 1, 2, 4):
// bf16/fp16 -> bf16 1, -> fp32 2; fp8 -> bf16 2, -> fp32 4; fp8_ds (656 B read) -> bf16 1.76 ~ 2, -> fp32 3.5 ~ 4.
int shape_k(KvFormat f, DType out) {
  const bool wide_in = f == KvFormat::kBf16 || f == KvFormat::kFp16;
  return out == DType::kBf16 ? (wide_in ? 1 : 2) : (wide_in ? 2 : 4);
}

Status bench_gather(const Args& a, const L2Flusher& l2, std::mt19937_64& rng) {
  const int64_t total = a.gather_tokens;
  const int seq_len = 4096;  // 256 sequences of 4k tokens of context for 1M tokens
  const int batch = static_cast<int>((total + seq_len - 1) / seq_len);
  const int max_pages = seq_len / kPage;
  const int64_t num_pages = int64_t(batch) * max_pages;
  const std::vector<int32_t> bt = shuffled_pages(num_pages, rng);
  std::vector<int32_t> cu(batch + 1);
  for (int b = 0; b <= batch; ++b) cu[b] = static_cast<int32_t>(std::min<int64_t>(int64_t(b) * seq_len, total));
  DevMem<int32_t> d_bt, d_cu;
  DevMem<uint8_t> cache, dst;
  MLA_TRY(d_bt.upload(bt, kOp));
  MLA_TRY(d_cu.upload(cu, kOp));
  MLA_TRY(cache.alloc_zeroed(size_t(num_pages) * kPage * 2 * kDimQK, kOp));  // the largest format (bf16/fp16)
  MLA_TRY(dst.alloc_zeroed(size_t(total) * kDimQK * 4, kOp));                // the largest output (fp32)

  // Streaming ceilings of the gather's shapes: read N, write k N, N = the tokens' cache bytes (bf16 tokens
  // for k = 1, fp8 tokens for k = 2 and 4), same buffers, same timing.
  MLA_TRY(fill_cache(KvFormat::kBf16, cache.p, num_pages * kPage, 7));
  double shape_gbs[5] = {};
  for (int k : {1, 2, 4}) {
    const int64_t n_in = total * (k == 1 ? 2 * kDimQK : kDimQK);
    float ms = 0;
    MLA_TRY(time_stream(k, cache.p, dst.p, n_in, l2, a.timing, &ms));
    const std::string what = "read N, write " + (k == 1 ? std::string("N") : std::to_string(k) + "N");
    shape_gbs[k] = print_row("stream (shape ceiling)", "-", what, total, double(n_in) * (1 + k), ms);
  }

  struct Sweep { KvFormat f; DType out; float ms[4]; };
  std::vector<Sweep> sweeps;
  for (KvFormat f : kFormats) {
    MLA_TRY(fill_cache(f, cache.p, num_pages * kPage, 11 + static_cast<uint32_t>(f)));
    for (DType out : {DType::kBf16, DType::kFp32}) {
      GatherCacheMlaParams p;
      p.kv_cache = TensorView::contiguous(cache.p, kv_cache_dtype(f), {num_pages, kPage, kv_token_elems(f)});
      p.dst = TensorView::contiguous(dst.p, out, {total, kDimQK});
      p.block_table = TensorView::contiguous(d_bt.p, DType::kInt32, {batch, max_pages});
      p.cu_seq_lens = TensorView::contiguous(d_cu.p, DType::kInt32, {batch + 1});
      p.format = f;
      p.k_scale = 0.1f;
      float ms = 0;
      MLA_TRY(time_median_ms([&] { return cuda::gather_and_maybe_dequant_cache_mla(p, nullptr); }, l2, a.timing, &ms));
      const double bytes = double(total) * (kv_bytes_per_token(f) + kDimQK * dtype_size(out));
      print_row("gather_and_maybe_dequant_cache_mla", std::string(kv_format_name(f)),
                "-> " + std::string(dtype_name(out)), total, bytes, ms, shape_gbs[shape_k(f, out)]);
      if (!a.sweep) continue;
      const cache::GatherKernelParams kp{
          .cache = cache.p, .dst = dst.p, .block_table = d_bt.p,
          .cu_seq_lens = d_cu.p, .seq_starts = nullptr, .n_rows = total, .batch = batch,
          .max_pages = max_pages, .page_size = kPage, .num_pages = static_cast<int>(num_pages), .k_scale = p.k_scale};
      Sweep sw{f, out, {}};
      const bool fp32 = out == DType::kFp32;
      MLA_TRY(time_gather_variant(f, fp32, 64, false, kp, l2, a.timing, &sw.ms[0]));
      MLA_TRY(time_gather_variant(f, fp32, 128, false, kp, l2, a.timing, &sw.ms[1]));
      MLA_TRY(time_gather_variant(f, fp32, 256, false, kp, l2, a.timing, &sw.ms[2]));
      MLA_TRY(time_gather_variant(f, fp32, 128, true, kp, l2, a.timing, &sw.ms[3]));
      sweeps.push_back(sw);
    }
  }
  if (sweeps.empty()) return Status::ok();
  std::printf("\ngather knobs (kernel launched directly, same data and timing; %% of the copy ceiling): read bytes in "
              "flight per lane 64 / 128 (the op's default) / 256, and 128 with streaming stores (st.global.cs)\n\n");
  std::printf("| format | dtypes  | 64 B   | 128 B  | 256 B  | 128 B + st.cs |\n|---|---|---|---|---|---|\n");
  for (const Sweep& sw : sweeps) {
    const double bytes = double(total) * (kv_bytes_per_token(sw.f) + kDimQK * dtype_size(sw.out));
    auto pct = [&](float ms) { return 100.0 * bytes / (ms * 1e-3) / 1e9 / kCopyCeilingGBs; };
    std::printf("| %-6s | -> %-4s | %5.1f %% | %5.1f %% | %5.1f %% | %5.1f %% |\n",
                std::string(kv_format_name(sw.f)).c_str(), std::string(dtype_name(sw.out)).c_str(), pct(sw.ms[0]),
                pct(sw.ms[1]), pct(sw.ms[2]), pct(sw.ms[3]));
  }
  std::printf("\n");
  return Status::ok();
}

Status bench_merge(const Args& a, const L2Flusher& l2, std::mt19937_64& rng) {
  const int64_t n = 64 * 1024, h = 16, d = 128, numel = n * h * d;
  DevMem<uint16_t> oa, ob, o;
  DevMem<float> la, lb, l;
  MLA_TRY(oa.alloc_zeroed(numel, kOp));
  MLA_TRY(ob.alloc_zeroed(numel, kOp));
  MLA_TRY(o.alloc_zeroed(numel, kOp));
  std::vector<float> lse(n * h);
  std::normal_distribution<float> nd(0.f, 3.f);
  for (auto& x : lse) x = nd(rng);
  MLA_TRY(la.upload(lse, kOp));
  MLA_TRY(lb.upload(lse, kOp));
  MLA_TRY(l.alloc_zeroed(n * h, kOp));
  MergeAttnStatesParams p;
  p.out = TensorView::contiguous(o.p, DType::kBf16, {n, h, d});
  p.out_a = TensorView::contiguous(oa.p, DType::kBf16, {n, h, d});
  p.out_b = TensorView::contiguous(ob.p, DType::kBf16, {n, h, d});
  p.lse = TensorView::contiguous(l.p, DType::kFp32, {h, n});
  p.lse_a = TensorView::contiguous(la.p, DType::kFp32, {h, n});
  p.lse_b = TensorView::contiguous(lb.p, DType::kFp32, {h, n});
  float ms = 0;
  MLA_TRY(time_median_ms([&] { return cuda::merge_attn_states(p, nullptr); }, l2, a.timing, &ms));
  print_row("merge_attn_states", "bf16", "h16 d128", n, double(numel) * 2 * 3 + double(n * h) * 4 * 3, ms);
  return Status::ok();
}

Status bench_quant(const Args& a, const L2Flusher& l2, std::mt19937_64& rng) {
  const int64_t rows = 16 * 128 * 128, numel = rows * kDimQK;
  DevMem<uint16_t> x;
  DevMem<uint8_t> y;
  MLA_TRY(x.upload(random_bf16(size_t(numel), rng), kOp));
  MLA_TRY(y.alloc_zeroed(numel, kOp));
  QuantizeFp8Params p;
  p.x = TensorView::contiguous(x.p, DType::kBf16, {rows, kDimQK});
  p.out = TensorView::contiguous(y.p, DType::kE4m3, {rows, kDimQK});
  p.scale = 0.05f;
  float ms = 0;
  MLA_TRY(time_median_ms([&] { return cuda::quantize_fp8_per_tensor(p, nullptr); }, l2, a.timing, &ms));
  print_row("quantize_fp8_per_tensor", "fp8", "bf16 -> e4m3", rows, double(numel) * 3, ms);
  return Status::ok();
}

Status run_all(const Args& a) {
  std::mt19937_64 rng(1234);
  L2Flusher l2;
  MLA_TRY(l2.init());
  MLA_TRY(bench_concat(a, l2, rng));
  MLA_TRY(bench_gather(a, l2, rng));
  MLA_TRY(bench_merge(a, l2, rng));
  return bench_quant(a, l2, rng);
}

int usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s [--reps N] [--warmup N] [--concat-tokens N] [--gather-tokens N] [--sweep 0|1]\n",
               argv0);
  return 2;
}

}  // namespace
}  // namespace mla::bench

int cache_ops_bench_main(int argc, char** argv) {
  using namespace mla::bench;
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) return usage(argv[0]);
    const long long v = std::atoll(argv[++i]);
    if (v < 0 || (v == 0 && k != "--sweep")) return usage(argv[0]);
    if (k == "--reps") a.timing.reps = static_cast<int>(v);
    else if (k == "--warmup") a.timing.warmup = static_cast<int>(v);
    else if (k == "--concat-tokens") a.concat_tokens = v;
    else if (k == "--gather-tokens") a.gather_tokens = v;
    else if (k == "--sweep") a.sweep = v != 0;
    else return usage(argv[0]);
  }
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::fprintf(stderr, "bench cache_ops: no CUDA device visible (needs an sm_90 GPU)\n");
    return 2;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("bench cache_ops on %s: median of %d reps after %d warm-up, L2 flushed before each rep; "
              "%% of the %.2f TB/s copy ceiling (ANCHORS.md), bytes = read + written; shape = %% of the "
              "stream row of the same write/read ratio (fp8_ds: 1.76 and 3.5 against 2 and 4)\n\n",
              prop.name, a.timing.reps, a.timing.warmup, kCopyCeilingGBs / 1e3);
  std::printf("| %-34s | %-6s | %-12s | %8s | %9s | %7s | %7s | %7s |\n", "op", "format", "dtypes", "tokens", "us",
              "GB/s", "ceiling", "shape");
  std::printf("|%s|%s|%s|%s|%s|%s|%s|%s|\n", std::string(36, '-').c_str(), std::string(8, '-').c_str(),
              std::string(14, '-').c_str(), std::string(10, '-').c_str(), std::string(11, '-').c_str(),
              std::string(9, '-').c_str(), std::string(9, '-').c_str(), std::string(9, '-').c_str());
  const mla::Status st = run_all(a);
  if (!st.is_ok()) {
    std::fprintf(stderr, "bench cache_ops: %s\n", st.to_string().c_str());
    return 1;
  }
  return 0;
}
