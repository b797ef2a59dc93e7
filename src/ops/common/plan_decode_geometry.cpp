#include <algorithm>
#include <string>
#include <vector>

#include "mla/core/check.h"
#include "mla/core/env_knob.h"
#include "mla/ops/plan_decode.h"
#include "mla/ops/plan_decode_schedule.h"

namespace mla {
namespace {
// A sequence this short (pages) runs whole on one narrow column (decode_plan_narrow_tiles' second case).
constexpr int kNarrowShortSeqPages = 8;
}  // namespace

void decode_plan_note_host_plan(DecodePlanGeometry* g, const int32_t* host_seqlens, const int32_t* host_split_offsets) {
  const int64_t pages = decode_step_size(host_seqlens, g->batch).blocks;
  g->host_mean_part_pages = static_cast<int>((pages + g->num_parts - 1) / g->num_parts);
  g->host_uncut = decode_plan_wants_fused_merge(*g, host_split_offsets);
}

Status decode_plan_narrow_tiles(int batch, int s_q, int h_q, int num_sms, const int32_t* host_seqlens, bool* narrow) {
  *narrow = false;
  const EnvKnob k = read_env_knob("MLA_DECODE_TILE_ROWS", {"auto", "16", "64"});
  MLA_TRY(k.status);
  // Only the 16-row kernels (s_q 1: no causal rows) take narrow tiles; h_q 16 / 32 keep their one short tile.
  if (s_q != 1 || h_q < 64 || k.index == 2) return Status::ok();
  if (k.index == 1) {
    *narrow = true;
    return Status::ok();
  }
  if (host_seqlens == nullptr) return Status::ok();
  int64_t pages = 0;
  int longest = 0;
  for (int b = 0; b < batch; ++b) {
    const int n = decode_num_blocks(host_seqlens[b]);
    pages += n;
    longest = n > longest ? n : longest;
  }
  const int tiles = (s_q * h_q + kDecodeNarrowTileRows - 1) / kDecodeNarrowTileRows;
  const int64_t columns = num_sms / tiles;
  // Narrow tiles win (H200, bench/decode/NOTES.md "Session 29" items 5-6: h_q 64 / 128, b1-b64, s256-s4096, three
  // formats):
  // - up to 1.5 pages per CTA column of the narrow grid, whatever the lengths (session 28: h_q 128 b1 s1536 = 24 pages
  //   on 16 columns -0.4 / -0.9 us bf16 / fp8, s2048 = 32 pages +1.1 / +0.25; h_q 64 s3072 = 48 on 33 columns);
  // - or no sequence over 8 pages (s <= 512) and no more sequences than columns: each column then holds at most one
  //   short sequence, which 64-row tiles would cut into one- or two-page pieces, each with its own Q tile read and a
  //   128 KB partial for the combine (h_q 128 b8 s256 bf16 / fp8 / fp8_ds -3.25 / -4.9 / -3.55 us, b16 s512
  //   -0.75..+0.85 / -1.65 / -2.8; h_q 64 b32 s256 -2.65 / -4.55 / -5.0; the one loss measured: h_q 128 b4 s512,
  //   +0.1..+1.2). With more sequences than columns a narrow CTA walks several (h_q 128 b24 s256 bf16 +5.15, h_q 64
  //   b64 s256 +0.65..+6.65), and longer sequences lose from 2 pages per column on (h_q 128 b4 s1024 +0.9..+1.8).
  *narrow = 2 * pages <= 3 * columns || (longest <= kNarrowShortSeqPages && batch <= columns);
  return Status::ok();
}

Status decode_plan_whole_sequences(int batch, int s_q, int h_q, int num_sms, const int32_t* host_seqlens,
                                   KvFormat format, bool* whole) {
  *whole = false;
  const EnvKnob k = read_env_knob("MLA_DECODE_WHOLE_SEQS", {"auto", "on", "off"});
  MLA_TRY(k.status);
  if (k.index == 2 || host_seqlens == nullptr) return Status::ok();
  const int tiles = (s_q * h_q + kDecodeRowsPerCta - 1) / kDecodeRowsPerCta;
  if (batch >= num_sms / tiles) return Status::ok();  // as many sequences as columns, or more: nothing to change
  if (k.index == 1) {
    *whole = true;
    return Status::ok();
  }
  if (s_q != 1 || h_q != 128 || format == KvFormat::kFp8Ds) return Status::ok();
  // Every sequence of kDecodeWholeSeqPages pages: the plan of `batch` columns then gives each a column of its own,
  // uncut. Mixed lengths would need that checked (its snapped boundaries can pair two short sequences on one column
  // and leave another idle: one of 8 pages among twenty of 6 made two parts of 12), and shorter sequences did not gain.
  for (int b = 0; b < batch; ++b)
    if (decode_num_blocks(host_seqlens[b]) != kDecodeWholeSeqPages) return Status::ok();
  *whole = true;
  return Status::ok();
}

Status check_decode_plan_tuning(const DecodePlanTuning& tune, const DecodePlanGeometry& g) {
  if (tune.seq_cost < 0 || tune.min_part_cost < 1 || tune.split_cost < 0 || tune.short_step_pages < 0 ||
      g.split_price < 0)
    return Status::invalid("plan_decode", "tuning: seq_cost " + std::to_string(tune.seq_cost) + ", split_cost " +
                                              std::to_string(tune.split_cost) + ", short_step_pages " +
                                              std::to_string(tune.short_step_pages) + " and geometry split_price " +
                                              std::to_string(g.split_price) + " must be >= 0, min_part_cost (" +
                                              std::to_string(tune.min_part_cost) + ") >= 1");
  return Status::ok();
}

Status decode_plan_geometry(int batch, int s_q, int h_q, int num_sms, DecodePlanGeometry* out,
                            const int32_t* host_seqlens, KvFormat format) {
  const std::string shape = "batch " + std::to_string(batch) + ", s_q " + std::to_string(s_q) + ", h_q " +
                            std::to_string(h_q) + ", num_sms " + std::to_string(num_sms);
  if (batch < 1) return Status::invalid("plan_decode", "batch must be >= 1 (" + shape + ")");
  if (s_q < 1 || s_q > kMaxDecodeSq)
    return Status::unsupported("plan_decode", "s_q must be in 1.." + std::to_string(kMaxDecodeSq) + " (" + shape + ")");
  if (!is_supported_decode_heads(h_q))
    return Status::unsupported("plan_decode", "h_q must be 16, 32, 64 or 128 (" + shape + ")");
  if (num_sms < 1) return Status::invalid("plan_decode", "num_sms must be >= 1 (" + shape + ")");
  DecodePlanGeometry g;
  g.batch = batch;
  g.s_q = s_q;
  g.h_q = h_q;
  bool narrow = false;
  MLA_TRY(decode_plan_narrow_tiles(batch, s_q, h_q, num_sms, host_seqlens, &narrow));
  g.tile_rows = narrow ? kDecodeNarrowTileRows : kDecodeRowsPerCta;
  g.num_head_tiles = (s_q * h_q + g.tile_rows - 1) / g.tile_rows;
  // Fill the machine once: each head tile gets num_sms / num_head_tiles CTA columns; or, for a step of short whole
  // sequences, one column each (decode_plan_whole_sequences).
  g.num_parts = num_sms / g.num_head_tiles > 0 ? num_sms / g.num_head_tiles : 1;
  bool whole = false;
  if (!narrow) MLA_TRY(decode_plan_whole_sequences(batch, s_q, h_q, num_sms, host_seqlens, format, &whole));
  if (whole) g.num_parts = batch;
  g.max_splits = batch + g.num_parts - 1;
  g.split_price = decode_split_price(s_q * h_q < g.tile_rows ? s_q * h_q : g.tile_rows);
  if (host_seqlens != nullptr) {
    for (int b = 0; b < batch; ++b) {
      if (host_seqlens[b] < 0)
        return Status::invalid("plan_decode", "seqlens[" + std::to_string(b) +
                                                  "] = " + std::to_string(host_seqlens[b]) + " < 0 (" + shape + ")");
      g.host_max_seq_pages = std::max(g.host_max_seq_pages, decode_num_blocks(host_seqlens[b]));
    }
    // The default-tuned host plan (its walk: O(batch + num_parts), a few us at b128), for its facts.
    std::vector<int32_t> parts(static_cast<size_t>(g.num_parts) * kPlanPartInts), offsets(batch + 1);
    compute_decode_plan(host_seqlens, batch, g.num_parts, g.split_price, DecodePlanTuning{}, parts.data(),
                        offsets.data());
    decode_plan_note_host_plan(&g, host_seqlens, offsets.data());
  }
  *out = g;
  return Status::ok();
}

Status check_block_table_width(const char* op, const TensorView& block_table, const DecodePlanGeometry& g) {
  if (block_table.rank == 2 && block_table.shape[1] < g.host_max_seq_pages)
    return Status::invalid(op, "block_table " + block_table.str() + " has " + std::to_string(block_table.shape[1]) +
                                   " pages per row, the step's longest sequence needs " +
                                   std::to_string(g.host_max_seq_pages) + " (host seqlens given to the plan geometry)");
  return Status::ok();
}

Status check_plan_block_table(const TensorView& block_table, int batch, DecodePlanPages* out) {
  *out = {};
  if (!block_table.defined()) return Status::ok();
  // Rows may be strided (a view into a wider table), the blocks of a row must be adjacent.
  MLA_TRY(check_tensor("plan_decode", "block_table", block_table, DType::kInt32, {batch, kAnyDim}, false));
  if (block_table.stride[1] != 1)
    return Status::invalid("plan_decode", "block_table rows must be contiguous, got " + block_table.str());
  out->data = block_table.ptr<const int32_t>();
  out->stride = block_table.stride[0];
  return Status::ok();
}

size_t decode_workspace_bytes(const DecodePlanGeometry& g) {
  const size_t rows = static_cast<size_t>(g.s_q) * g.h_q;
  const size_t o = static_cast<size_t>(g.max_splits) * rows * kDimV * sizeof(float);
  const size_t l = static_cast<size_t>(g.max_splits) * rows * sizeof(float);
  return (o + 255) / 256 * 256 + l;
}

}  // namespace mla
