// mlaserve plan decode: the split-KV plan of one decode step, computed on the host (ref::plan_decode, the schedule
// the GPU plan kernel reproduces exactly) and summarized -- which head tiles, how many CTA columns, how the pages fall
// on them. A CPU tool: it answers "what will the kernel be asked to do" without a GPU.
//   mlaserve plan decode --h-q 128 --seqlens 8192x32 [--s-q 1] [--num-sms 132] [--tune 4,4,1,2] [--format F] [--parts]
// At s_q 1 it also says what the engine runs for the step: an eager step (seqlens known) and a CUDA-graph replay.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "common/args.h"
#include "common/plan_tuning_arg.h"
#include "mla/core/tensor.h"
#include "mla/ops/decode_combine_grid.h"
#include "mla/ops/plan_decode.h"
#include "mla/ops/plan_decode_schedule.h"
#include "mla/runner/graph_buckets.h"
#include "ops/cuda/sm90/decode_fp8/kernel_family.h"
#include "ops/cuda/sm90/decode_fp8/variant64.h"

namespace mla::cli {

namespace {
constexpr const char* kOp = "plan decode";

struct PlanArgs {
  int h_q = 128;
  int s_q = 1;
  int num_sms = 132;  // H200 / H100 SXM
  std::string seqlens;
  std::string tune;
  std::string format = "bf16";  // the KV format (decode_plan_whole_sequences depends on it)
  bool parts = false;
  int max_num_seqs = 1024;             // the engine's (bench throughput's default on a >= 70 GiB GPU): graph buckets
  int max_num_batched_tokens = 16384;  // likewise
};

// "512x32,4096,0x2" -> 32 x 512, 4096, 2 x 0. A count of 0 or a negative length is an error naming the item.
Status parse_seqlens(const std::string& spec, std::vector<int32_t>* out) {
  out->clear();
  for (const std::string& item : bench::split_commas(spec)) {
    const size_t x = item.find('x');
    const std::string len_s = item.substr(0, x);
    char* end = nullptr;
    const long len = std::strtol(len_s.c_str(), &end, 10);
    long count = 1;
    bool ok = !len_s.empty() && *end == '\0' && len >= 0 && len < (1L << 31);
    if (ok && x != std::string::npos) {
      const std::string count_s = item.substr(x + 1);
      count = std::strtol(count_s.c_str(), &end, 10);
      ok = !count_s.empty() && *end == '\0' && count >= 1 && count <= (1L << 20);
    }
    if (!ok)
      return Status::invalid(
          kOp, "--seqlens wants LEN[xCOUNT] items separated by commas (LEN >= 0, COUNT >= 1); got '" + item + "' in '" +
                   spec + "'");
    out->insert(out->end(), static_cast<size_t>(count), static_cast<int32_t>(len));
  }
  if (out->empty()) return Status::invalid(kOp, "--seqlens names no sequence; got '" + spec + "'");
  return Status::ok();
}

// "3x16 2x15": count x value, ascending by value.
std::string histogram(const std::vector<int64_t>& xs) {
  std::map<int64_t, int> h;
  for (int64_t x : xs) ++h[x];
  std::string s;
  for (const auto& [value, count] : h)
    s += (s.empty() ? "" : " ") + std::to_string(count) + "x" + std::to_string(value);
  return s;
}

// Whether a step of geometry g runs the fp8 64-row kernels with the knobs at their defaults (decode_fp8/
// kernel_family.h: 64-row tiles of at least 48 query rows; fewer run the 16-row kernels).
bool runs_fp8_64row(const DecodePlanGeometry& g) {
  return sm90::decode_fp8::fp8_kernel_family(g.s_q * g.h_q, g.tile_rows, sm90::decode_fp8::N32Mode::kAuto, false) ==
         sm90::decode_fp8::Fp8KernelFamily::kWs64;
}

// The fp8 64-row kernel `auto` picks for a step of geometry g under the given merge (decode_fp8/variant64.h).
const char* fp8_kernel64(const DecodePlanGeometry& g, bool fused_merge) {
  using sm90::decode_fp8::Variant64;
  switch (sm90::decode_fp8::auto_variant64(g, fused_merge)) {
    case Variant64::kWs3: return "ws3 (scorer split: short parts, cut spread step, decode_fp8/variant64.h)";
    case Variant64::kWsSplit: return "ws_split (sequences cut: plain stores, decode_fp8/variant64.h)";
    default: return "ws";
  }
}

// What the engine's CUDA backend runs for this step (model/cuda/cuda_backend_step.cpp plan_step, s_q 1, the default
// tuning, whatever --tune says), in its two kinds of decode step:
// - eager with the step's seqlens on the host: mixed steps, --enforce-eager, batches past the largest CUDA-graph
//   bucket, sequences wider than the graphs' block table. One whose plan cuts nothing passes the merge counters
//   (64-row tiles): the bf16 / fp16 / fp8 kernels then merge nothing and no combine grid runs; fp8_ds's kernels merge
//   themselves only in some forms (mla_decode.cu launch_fp8ds), else mla_decode adds the combine.
// - a decode-only step replayed from its CUDA graph: the batch padded to its bucket (runner/graph_buckets.h), and a
//   geometry of shapes alone (no narrow tiles, no cuts known), so the combine grid and the shape rule's kernel.
Status print_engine_steps(const PlanArgs& a, const std::vector<int32_t>& lens, KvFormat format) {
  const int batch = static_cast<int>(lens.size());
  const bool fp8 = format == KvFormat::kFp8;
  auto runs64 = [&](const DecodePlanGeometry& g) { return fp8 && runs_fp8_64row(g); };
  DecodePlanGeometry eager;
  MLA_TRY(decode_plan_geometry(batch, 1, a.h_q, a.num_sms, &eager, lens.data(), format));
  const bool counters = decode_plan_passes_merge_counters(eager);
  const char* merge = "merge the combine grid";
  if (counters && format == KvFormat::kFp8Ds)
    merge = "the merge counters passed (fused where the fp8_ds form has it, else the combine grid)";
  else if (counters)
    merge = "merge fused (merge counters; no combine grid)";
  else if (eager.host_uncut)
    merge = "merge the combine grid (nothing to merge: its CTAs leave at once)";
  std::printf("engine, eager step: %s%s%s\n", merge, runs64(eager) ? "; fp8 64-row kernel: " : "",
              runs64(eager) ? fp8_kernel64(eager, counters) : "");
  const std::vector<int> buckets =
      runner::decode_graph_buckets({}, a.max_num_seqs, a.max_num_batched_tokens);  // the engine's defaults
  const int bucket = runner::decode_graph_bucket(buckets, batch);
  if (bucket == 0) {
    std::printf("engine, CUDA-graph step: none (%d sequences is past the largest bucket, %d: eager)\n", batch,
                buckets.back());
    return Status::ok();
  }
  DecodePlanGeometry graph;
  MLA_TRY(decode_plan_geometry(bucket, 1, a.h_q, a.num_sms, &graph, nullptr, format));
  std::printf("engine, CUDA-graph step (shapes only, %d sequence(s) padded to %d): %d head tile(s) of %d rows, %d CTA "
              "columns; merge the combine grid%s%s\n",
              batch, bucket, graph.num_head_tiles, std::min(graph.tile_rows, a.h_q), graph.num_parts,
              runs64(graph) ? "; fp8 64-row kernel: " : "", runs64(graph) ? fp8_kernel64(graph, false) : "");
  return Status::ok();
}

Status run_plan(const PlanArgs& a) {
  std::vector<int32_t> lens;
  MLA_TRY(parse_seqlens(a.seqlens, &lens));
  DecodePlanTuning tune;
  if (!a.tune.empty()) MLA_TRY(bench::parse_plan_tuning(kOp, a.tune, &tune));
  const int batch = static_cast<int>(lens.size());
  KvFormat format{};
  MLA_TRY(parse_kv_format(a.format, &format));
  DecodePlanGeometry g;
  MLA_TRY(decode_plan_geometry(batch, a.s_q, a.h_q, a.num_sms, &g, lens.data(), format));
  std::vector<int32_t> parts(static_cast<size_t>(g.num_parts) * kPlanPartInts), offsets(batch + 1);
  const TensorView seqlens = TensorView::contiguous(lens.data(), DType::kInt32, {batch});
  MLA_TRY(ref::plan_decode(seqlens, g, DecodePlanView{parts.data(), offsets.data(), g.num_parts}, tune));

  const DecodeStepSize step = decode_step_size(lens.data(), batch);
  const int seq_cost = decode_plan_seq_cost(step.blocks, step.seqs, g.num_parts, tune);
  std::printf("step: batch %d (%lld with keys), s_q %d, h_q %d, %lld KV pages of %d tokens\n", batch,
              static_cast<long long>(step.seqs), a.s_q, a.h_q, static_cast<long long>(step.blocks), kDecodePageSize);
  // A step of fewer query rows than a tile holds runs one short tile (h_q 16 / 32 at s_q 1: 16 / 32 rows).
  const int rows = std::min(g.tile_rows, a.s_q * a.h_q);
  std::printf("geometry: %d head tile(s) of %d query rows%s, %d CTA columns each (grid %d x %d on %d SMs), split "
              "price %d\n",
              g.num_head_tiles, rows, g.tile_rows == kDecodeNarrowTileRows ? " (narrow)" : "", g.num_parts,
              g.num_parts, g.num_head_tiles, a.num_sms, g.split_price);
  std::printf("tuning: seq_cost %d (charged %d on this step), split_cost %d, min_part_cost %d, short_step_pages %d\n",
              tune.seq_cost, seq_cost, tune.split_cost, tune.min_part_cost, tune.short_step_pages);

  std::vector<int64_t> pages_per_part, segments_per_part;
  int idle = 0;
  for (int p = 0; p < g.num_parts; ++p) {
    const int32_t* r = &parts[static_cast<size_t>(p) * kPlanPartInts];
    int64_t pages = 0, segments = 0;
    for (int b = r[kPartBeginBatch]; b <= r[kPartEndBatch] && b < batch; ++b) {
      const int lo = b == r[kPartBeginBatch] ? r[kPartBeginBlock] : 0;
      const int hi = b == r[kPartEndBatch] ? r[kPartEndBlock] : decode_num_blocks(lens[b]);
      if (lo < hi) {
        pages += hi - lo;
        ++segments;
      }
    }
    pages_per_part.push_back(pages);
    segments_per_part.push_back(segments);
    idle += pages == 0;
    if (a.parts)
      std::printf("  part %3d: (sequence %d, page %d) up to (sequence %d, page %d): %lld page(s), %lld segment(s), "
                  "first split %d\n",
                  p, r[kPartBeginBatch], r[kPartBeginBlock], r[kPartEndBatch], r[kPartEndBlock],
                  static_cast<long long>(pages), static_cast<long long>(segments), r[kPartFirstSplit]);
  }
  int split_seqs = 0, max_pieces = 0;
  for (int b = 0; b < batch; ++b) {
    const int pieces = offsets[b + 1] - offsets[b];
    split_seqs += pieces > 1;
    max_pieces = std::max(max_pieces, pieces);
  }
  const int64_t longest = *std::max_element(pages_per_part.begin(), pages_per_part.end());
  std::printf("parts: pages per part %s; segments per part %s; %d of %d columns idle\n",
              histogram(pages_per_part).c_str(), histogram(segments_per_part).c_str(), idle, g.num_parts);
  std::printf("balance: longest part %lld page(s), ideal %.2f (pages / columns)\n", static_cast<long long>(longest),
              static_cast<double>(step.blocks) / g.num_parts);
  decode_plan_note_host_plan(&g, lens.data(), offsets.data());  // this plan's tuning (--tune), not the default
  const bool fused = g.host_uncut;
  std::printf("splits: %d sequence(s) cut, into at most %d pieces; %d partial slot(s) of %d; merge: %s\n", split_seqs,
              max_pieces, offsets[batch], g.max_splits,
              split_seqs == 0 ? "none needed" : fused ? "fused into the decode kernel" : "the combine grid");
  // The fp8 format's 64-row kernel for this step, with the merge above (MLA_DECODE_FP8_VARIANT64 unset or auto).
  if (runs_fp8_64row(g)) std::printf("fp8 64-row kernel: %s\n", fp8_kernel64(g, fused));
  // The combine grid is launched whatever the plan (its CTAs with nothing to merge leave at once); how it merges a
  // split row depends on the row's pieces.
  if (!fused) {
    const DecodeCombineGrid c = decode_combine_grid(a.s_q * a.h_q, batch);
    // More than few_splits pieces: the list kernel takes every chunk; the direct kernel the fewest that load the
    // row in one batch (decode_combine_many_chunks), so print what this step's largest row gets.
    std::string many;
    if (max_pieces > c.few_splits) {
      const int used = c.direct ? decode_combine_many_chunks(max_pieces, c.chunks) : c.chunks;
      many = " (this step has such rows: the largest, " + std::to_string(max_pieces) + " pieces, over " +
             std::to_string(used) + " chunk(s))";
    }
    std::printf("combine: %s grid of %lld CTAs over %lld items (%d query rows x %d sequence(s) x %d column chunk(s)); "
                "a row of 2-%d pieces merged by one thread group, more over %s%d chunk(s)%s\n",
                c.direct ? "direct (one CTA per item)" : "list (one wave)", static_cast<long long>(c.ctas),
                static_cast<long long>(c.items), a.s_q * a.h_q, batch, c.chunks, c.few_splits,
                c.direct ? "up to " : "the ", c.chunks, many.c_str());
  }
  if (a.s_q == 1) MLA_TRY(print_engine_steps(a, lens, format));
  return Status::ok();
}
}  // namespace

void add_plan_decode(CLI::App& plan, std::function<int()>* run) {
  CLI::App* app = plan.add_subcommand("decode", "the split-KV plan of one decode step, computed on the host (no GPU)");
  auto a = std::make_shared<PlanArgs>();
  app->add_option("--seqlens", a->seqlens, "sequence lengths in tokens: LEN[xCOUNT],... e.g. 8192x32 or 512,4096x3")
      ->required();
  app->add_option("--h-q", a->h_q, "query heads (16, 32, 64 or 128)")->capture_default_str();
  app->add_option("--s-q", a->s_q, "query tokens per sequence (1-4; > 1: causal MTP / speculative decode)")
      ->capture_default_str();
  app->add_option("--num-sms", a->num_sms, "the GPU's multiprocessors (132 on H100 SXM / H200)")->capture_default_str();
  app->add_option("--tune", a->tune, "DecodePlanTuning as SEQ_COST,SPLIT_COST,MIN_PART_COST[,SHORT_STEP_PAGES] "
                                     "(bench_decode's --tune; default 4,4,1,2: the engine's)");
  app->add_option("--format", a->format, "KV cache format: bf16 (auto), fp16, fp8 or fp8_ds (the column count of short "
                                         "steps depends on it)")
      ->capture_default_str();
  app->add_flag("--parts", a->parts, "print every part's record");
  app->add_option("--max-num-seqs", a->max_num_seqs, "the engine's --max-num-seqs (its CUDA-graph batch buckets)")
      ->capture_default_str();
  app->add_option("--max-num-batched-tokens", a->max_num_batched_tokens, "the engine's --max-num-batched-tokens")
      ->capture_default_str();
  app->callback([a, run] {
    *run = [a]() -> int {
      const Status s = run_plan(*a);
      return s.is_ok() ? 0 : report(s);
    };
  });
}

}  // namespace mla::cli
