#pragma once
// plan_decode: the split-KV schedule of one decode step, computed once and reused by every layer.
//
// Work is counted in 64-token KV blocks. Sequence b costs nblk(b) + seq_cost (the fixed price of
// setting up a sequence and writing its result); the batch's total cost is cut into `num_parts` about
// equal intervals, one per CTA column of the decode grid, whose ends move to sequence ends where that
// does not lengthen the longest part (compute_decode_plan). A part therefore covers a contiguous run of
// (sequence, block) pairs, possibly starting and ending mid-sequence; a sequence touched by k parts
// has k splits whose partial results the combine step merges (k == 1: the kernel writes `out` itself).
//
// The geometry (num_parts, grid, workspace size) depends only on shapes and the SM count, so buffers
// are fixed-size and a captured CUDA graph stays valid across steps; only the contents depend on seqlens.
// The schedule itself (compute_decode_plan and its parts) is in plan_decode_schedule.h: only the plan's own
// sources and tests include it, so the decode kernels, which read just the record layout below, do not
// recompile when the schedule changes.
#include <cstddef>
#include <cstdint>

#include "mla/core/kv_format.h"
#include "mla/core/macros.h"
#include "mla/core/mla_shapes.h"
#include "mla/core/status.h"
#include "mla/core/stream.h"
#include "mla/core/tensor.h"

namespace mla {

// Query rows one CTA handles: s_q * h_q rows are cut into tiles of 64 (one wgmma M tile), or of 16 (narrow tiles,
// decode_plan_narrow_tiles: s_q 1 steps of h_q 64 / 128 with few pages, which would otherwise keep most SMs idle).
constexpr int kDecodeRowsPerCta = 64;
constexpr int kDecodeNarrowTileRows = 16;
constexpr int kPlanPartInts = 8;  // ints per part record (padded for 32-byte loads)

// Fields of one part record: the part covers blocks [begin_block, nblk) of begin_batch, all blocks of
// the batches strictly between, and blocks [0, end_block) of end_batch (end_block == 0: none of it).
enum PlanPartField : int {
  kPartBeginBatch = 0,
  kPartBeginBlock = 1,
  kPartEndBatch = 2,
  kPartEndBlock = 3,
  kPartFirstSplit = 4,  // split index of this part within begin_batch (0 if the part starts it)
  // Start hints: what a decode CTA would otherwise fetch in two dependent global loads (seqlens, then the
  // block table) before its first KV page can be requested. -1: not given, the kernel loads it itself.
  kPartFirstSeqlen = 5,  // seqlens[begin_batch] (-1 when begin_batch == batch)
  kPartFirstPage = 6,    // physical page of the part's first item (begin_batch, begin_block)
  kPartSecondPage = 7,   // ... of its second item, when that is (begin_batch, begin_block + 1)
};

// The block table [batch, stride] the page hints come from; data == nullptr: no page hints (fields 6-7 = -1).
struct DecodePlanPages {
  const int32_t* data = nullptr;
  int64_t stride = 0;
};

struct DecodePlanTuning {
  int seq_cost = 4;       // a sequence's fixed cost, in blocks
  int min_part_cost = 1;  // no part gets less than this, so tiny batches don't split into slivers
  int split_cost = 4;     // a cut's price per piece, in blocks: fp32 partials written, then merged by the combine
  // A short step -- at most this many KV pages per CTA column (rounded up), and sequences that span at least
  // kDecodeShortStepSpan columns on average -- charges no seq_cost (decode_plan_seq_cost); 0: never.
  int short_step_pages = 2;
};
// How many columns a short step's sequences must span on average for decode_plan_seq_cost to drop their fixed cost.
constexpr int kDecodeShortStepSpan = 3;

// Shape-only geometry of a decode step's plan.
struct DecodePlanGeometry {
  int batch = 0;
  int s_q = 0;
  int h_q = 0;
  int tile_rows = kDecodeRowsPerCta;  // query rows per head tile: 64, or kDecodeNarrowTileRows
  int num_head_tiles = 0;             // ceil(s_q * h_q / tile_rows): grid.y
  int num_parts = 0;                  // grid.x
  int max_splits = 0;                 // batch + num_parts - 1: partial-result slots the workspace must hold
  // What a split costs beyond DecodePlanTuning::split_cost, in blocks (decode_split_price): charged per true
  // split, and added to per_part when decode_plan_snap picks a sequence's piece count (a sequence of under
  // ~1.5 x (per_part + split_price) is not cut). Also weighs the partials against the pages of a lone sequence
  // spread over >= 3/4 of the parts (decode_plan_per_part: batch-1 plans, e.g. h_q 64 s8192 64 x 2 pages, not
  // 128 x 1).
  int split_price = 0;
  // ceil(the step's pages / num_parts) when decode_plan_geometry was given the host seqlens, else 0 (unknown): what a
  // launcher may pick a kernel by for a step of short parts (the fp8 64-row tiles' scorer-split kernel,
  // decode_fp8/variant64.h). A CUDA graph replayed across steps has no seqlens and keeps the shapes' default.
  int host_mean_part_pages = 0;
  // Pages of the step's longest sequence when decode_plan_geometry was given the host seqlens, else 0 (unknown): the
  // block-table width the step needs. mla_decode and plan_decode reject a narrower table before launching anything
  // (a kernel would read past the row: other sequences' pages, or past the buffer).
  int host_max_seq_pages = 0;
  // True when decode_plan_geometry was given the host seqlens and the step's plan, under DecodePlanTuning's defaults
  // (the engine's), cuts no sequence: every one is a single piece, so nothing merges and every segment is direct.
  // False when some sequence is cut, or unknown (no seqlens: a graph's geometry). A launcher's kernel choice only
  // (decode_plan_spreads_sequences, decode_fp8/variant64.h); every kernel is right for any plan.
  bool host_uncut = false;
};

// The tuning a plan_decode call may run with: seq_cost, split_cost, short_step_pages and the geometry's split_price
// >= 0, min_part_cost >= 1 (the host and device plan_decode both check it).
Status check_decode_plan_tuning(const DecodePlanTuning& tune, const DecodePlanGeometry& g);

// Shape validation + geometry. num_sms: the device's multiprocessor count (132 on H200). host_seqlens (optional, host
// int32 [batch]): the step's sequence lengths, read only for the head-tile choice (decode_plan_narrow_tiles) and the
// column count (decode_plan_whole_sequences, which also reads `format`, the KV format the step runs); without them
// the tiles are 64 rows over the machine's columns, so the geometry of a step is a function of its shapes alone --
// what a CUDA graph replayed across steps needs (it holds the grid it was captured with). With host_seqlens, a
// negative length is an error, and host_max_seq_pages records the block-table width the step needs.
Status decode_plan_geometry(int batch, int s_q, int h_q, int num_sms, DecodePlanGeometry* out,
                            const int32_t* host_seqlens = nullptr, KvFormat format = KvFormat::kBf16);

// The geometry's facts of a host plan (host_mean_part_pages, host_uncut), from the step's host seqlens [batch] and the
// split_offsets [batch + 1] of the plan it runs. decode_plan_geometry records them for the default tuning on its own
// columns; a caller that plans with another tuning or column count (bench_decode --tune / --price / --parts, mlaserve
// plan decode --tune) records its own plan's.
void decode_plan_note_host_plan(DecodePlanGeometry* g, const int32_t* host_seqlens, const int32_t* host_split_offsets);

// Whether a step of 64-row head tiles takes one CTA column per sequence (num_parts = batch) instead of num_sms / tiles
// columns: with the step's seqlens given, s_q 1, h_q 128, fewer sequences than num_sms / 2 (and more than the narrow
// tiles take), every one of kDecodeWholeSeqPages pages (449-512 tokens), and the format bf16, fp16 or fp8. The plan
// then cuts nothing, so a caller that follows decode_plan_wants_fused_merge launches no combine grid; the machine's
// columns would cut each sequence in two pieces of 4 pages and merge them in the combine. H200 (bench/decode/NOTES.md
// "Session 50" items 7-8, with the fused merge): h_q 128 b32 s512 bf16 26.0-28.0 -> 23.8-24.1 us, fp8 20.0-20.3 (ws3)
// -> 18.9-19.2, b24 s512 -1.4..-1.6 / -0.2..-0.3; no gain at 4-7 pages (s256-s448: ties, fp8 +0.2..+0.4 at 5-6) or 12
// (s768: fp8 +0.9); fp8_ds loses (+0.9..+3: its page costs more under half the CTAs), h_q 16 loses (132 columns:
// +1.4..+2.6). Without the fused merge it ties (session 47), so only callers that pass merge counters gain.
// MLA_DECODE_WHOLE_SEQS = auto (default) | on (any step given its seqlens, 64-row tiles and fewer sequences than
// num_sms / tiles: tests) | off, read on every call.
constexpr int kDecodeWholeSeqPages = 8;
Status decode_plan_whole_sequences(int batch, int s_q, int h_q, int num_sms, const int32_t* host_seqlens,
                                   KvFormat format, bool* whole);

// Whether a step cuts its query rows into 16-row head tiles (kDecodeNarrowTileRows) instead of 64-row ones: s_q 1,
// h_q 64 or 128, and with the step's seqlens given, either at most 1.5 KV pages per CTA column of the narrow grid
// (pages of all sequences <= 1.5 num_sms / tiles: h_q 128 24, h_q 64 49), or no sequence over 8 pages (512 tokens)
// and no more sequences than columns (h_q 128 16, h_q 64 33). Such a step has few pages, or short sequences, for many
// SMs; as 8 tiles of 16 rows (h_q 128; 16 columns each, instead of 2 tiles x 66) every CTA takes 8 times fewer rows
// of its pages, read 8 times (from L2 after the first), a page's chain -- S, softmax, P.V of 16 rows -- is the h_q 16
// kernels' short one, and a short sequence stays whole on its column instead of being cut into one-page pieces.
// H200 (bench/decode/NOTES.md "Session 28", "Session 29"): h_q 128 b1 s512 bf16 13.2 -> 11.6 us, fp8 12.1 -> 10.45;
// b8 s256 bf16 18.2 -> 15.0, fp8 17.25 -> 12.35; at 4 pages per CTA (b1 s4096) 17.7 -> 19.9 (bf16), so the choice
// needs the pages. MLA_DECODE_TILE_ROWS = auto (default) | 16 | 64 forces either tile (16 only where s_q is 1 and
// h_q >= 64; tests and benchmarks), read on every call.
Status decode_plan_narrow_tiles(int batch, int s_q, int h_q, int num_sms, const int32_t* host_seqlens, bool* narrow);

// split_price of a head tile of `rows` query rows (<= 64): the fp32 partial one piece writes and the combine
// reads back (rows x 512 x 4 B) over three KV pages of 64 x 576 one-byte values, rounded down: 1 for a 64-row tile
// (h_q >= 64, or s_q x h_q >= 64), 0 below, in every format. Since the partials are stored in the accumulator's
// order (fcb23dd), it is a tie-breaker towards fewer splits, no longer a reason to keep short sequences whole: a
// cut's combine pass and partials' round trip cost less than one page on the longest CTA. The divisor 3 is fitted
// on the H200 (NOTES_plan.md "Session 9, price": --price 0..3 over the s_q 1 shapes whose plan the price changes):
// - 64 rows, b > 1 (h_q 128 / 64, b8..b64 s256..s2048): whole sequences (session 6's price 3) lost on every h_q 128
//   shape in every format, +0.5..+12 us against their cuts (b32 s512 / s768, b8..b24 s256), at h_q 64 b48 / b64 by
//   -0.4..+0.9 (fp8, bf16) and +1.6..+5.7 (fp8_ds); the sums of price 3 were 3-9 % above price 1's at h_q 128, and
//   price 1's within 0.8 % of the best price's (it wins 0.2-1.9 us where fewer splits leave the longest part as
//   long, h128 b12 s768 / b24 s1024, and loses 1-3 where they lengthen it by 1-2 pages, h128 b24 s2048).
// - Batch 1 (decode_plan_per_part's raise, weight 3 x price): 64 rows want 2-page pieces (h_q 64 s8192: -0.8 us
//   fp8 against 1-page ones) but no coarser at h_q 128 (s6144 / s8192 2 pages against 3: 0..-1.55); 32 rows
//   want 1-page pieces (h_q 32 s6144 / s8192: 2-page pieces +1.75..+3.7 us), so 32 rows get 0. At b > 1, h_q 32
//   price 0 against 1 moved -0.3..+1.8 us (h32 b24 s768, b48 s384 / s1024).
// Was floor over one page (session 6): 3 / 2 / 1 / 0 at 64 / 48 / 32 / 16 rows. With fp16 partials (x 512 x 2 B)
// the same rule gives 0 at every tile, which the same sweep with fp16 partial values supports (within 1 %; batch 1
// then wants no raise). The fp8 64-row kernel has written bf16 partials since 41708c6, so its true price is 0; the
// geometry does not know the format and keeps 1: price 0 against 1 on fp8 rows 10-18 measured -0.27..+0.13 us, noise
// (session 13).
MLA_HD_INLINE constexpr int decode_split_price(int rows) {
  return static_cast<int>(static_cast<int64_t>(rows) * kDimV * 4 /
                          (3 * static_cast<int64_t>(kDecodePageSize) * kDimQK));
}

// The plan's contents, in caller-owned buffers (host for the reference, device for the kernels).
struct DecodePlanView {
  int32_t* parts = nullptr;          // [num_parts, kPlanPartInts]
  int32_t* split_offsets = nullptr;  // [batch + 1]: splits of sequence b are slots [off[b], off[b+1])
  int num_parts = 0;
  // Optional [decode_plan_counters(g)] int32: arrival counters of the fused merge. Given, mla_decode has the decode
  // kernel merge the split sequences itself and launches no combine grid (the 16-bit ws / n16ws, fp8 wgmma and fp8_ds
  // ws16 / owner-converts kernels; the others still launch it); nullptr: the combine grid merges. plan_decode zeroes
  // them and every mla_decode call leaves them zero. Pass them for a step only where decode_plan_wants_fused_merge
  // says so (the fused merge is correct for any plan, but slow for a sequence of many pieces).
  int32_t* merge_counters = nullptr;
};

// Entries of DecodePlanView::merge_counters: one per (sequence, head tile).
inline int64_t decode_plan_counters(const DecodePlanGeometry& g) {
  return static_cast<int64_t>(g.batch) * g.num_head_tiles;
}

// Whether a step should pass merge_counters, from its plan's split_offsets [batch + 1] on the host (the host plan, or
// a copy): only where no sequence is cut, i.e. where nothing merges and the fused form just spares the step the
// combine grid, whose existence alone costs 1-3 us a call (H200, bench/decode/NOTES.md "Session 24": b128 rows -0.5..
// -3.5 us). A merge in the decode kernel runs on the CTA of the sequence's last piece after its part, instruction-bound
// (~1.3 us per round of loads, session 25), so on a balanced plan it lengthens the critical path: session 24's b32 rows
// (every sequence in 2-4 pieces) +4..+16 us, a 128-piece sequence +165 us; and session 50 found the rule of then
// (batch >= 64, at most 2 pieces) wrong wherever such a batch had cuts: h_q 128 b70 / b100 s4096 +34..+36 us, b80 s8192
// +34, h_q 64 b66 s2048 +12, h_q 16 b200 s2048 +7..+12 (bf16 and fp8; fp8_ds +11..+29), against the combine.
constexpr int kFusedMergeMaxPieces = 1;
inline bool decode_plan_wants_fused_merge(const DecodePlanGeometry& g, const int32_t* host_split_offsets) {
  for (int b = 0; b < g.batch; ++b)
    if (host_split_offsets[b + 1] - host_split_offsets[b] > kFusedMergeMaxPieces) return false;
  return true;
}

// Whether a caller whose geometry knows the step's seqlens passes the plan's merge counters (the engine's eager steps;
// what `mlaserve plan decode` reports for them): its default-tuned plan cuts nothing (host_uncut, from the rule above)
// and its head tiles are 64 rows (narrow 16-row tiles have no fused merge: mla_decode would drop the counters).
inline bool decode_plan_passes_merge_counters(const DecodePlanGeometry& g) {
  return g.host_uncut && g.tile_rows == kDecodeRowsPerCta;
}

// Whether a step's sequences average at least two CTA columns each (2 x batch <= num_parts) and the geometry does not
// know them to be uncut (host_uncut): on about equal lengths of >= 10 pages its plan then cuts nearly every sequence
// into pieces, each written as a split partial (a skewed step cuts only its long ones: test_plan_decode.cpp). The fp8
// and fp8_ds 64-row kernels run a form without their TMA-store epilogue for direct segments on such steps when the
// combine merges them (decode_fp8/variant64.h, mla_decode.cu). Without seqlens a shape rule, so a CUDA graph replayed
// across steps keeps its kernel. With them, a step of short sequences the default tuning keeps whole (3-5 pages, 17-66
// sequences) keeps the TMA form: there every segment is direct, and the plain form lost 5-20 % on all 29 such shapes
// of h_q 64 / 128 (fp8, H200, bench/decode/NOTES.md "Session 59"; bf16 3-10 %).
inline bool decode_plan_spreads_sequences(const DecodePlanGeometry& g) {
  return 2 * g.batch <= g.num_parts && !g.host_uncut;
}

// Workspace for split partials: o_accum fp32 [max_splits, s_q * h_q, 512] at offset 0, then lse_accum
// fp32 [max_splits, s_q * h_q] at decode_workspace_lse_offset(g). Fixed-size from the geometry. (The plan
// buffers are separate: parts int32 [num_parts * kPlanPartInts], split_offsets int32 [batch + 1].)
size_t decode_workspace_bytes(const DecodePlanGeometry& g);
inline size_t decode_workspace_lse_offset(const DecodePlanGeometry& g) {
  const size_t o = static_cast<size_t>(g.max_splits) * g.s_q * g.h_q * kDimV * sizeof(float);
  return (o + 255) / 256 * 256;
}

MLA_HD_INLINE int decode_num_blocks(int seqlen) {
  return seqlen > 0 ? (seqlen + kDecodePageSize - 1) / kDecodePageSize : 0;
}

// KV pages of a part, from its record alone (a kernel sizes its own part with it before walking it): exact when the
// part lies in one sequence, or in two with the first one's length in the record's seqlen hint; otherwise (more
// sequences) each sequence in between counts one page: a lower bound unless some of them are empty (an empty one
// counts one page too much). With no hint, the largest int.
MLA_HD_INLINE int decode_part_pages_from_record(const int32_t* rec) {
  const int b0 = rec[kPartBeginBatch], k0 = rec[kPartBeginBlock], b1 = rec[kPartEndBatch], k1 = rec[kPartEndBlock];
  const int first_seqlen = rec[kPartFirstSeqlen];
  if (b1 == b0) return k1 - k0;
  if (first_seqlen < 0) return 0x7fffffff;
  return decode_num_blocks(first_seqlen) - k0 + k1 + (b1 - b0 - 1);
}

// Checks the optional block table of plan_decode: int32 [batch, max_blocks], contiguous (empty: no page hints).
Status check_plan_block_table(const TensorView& block_table, int batch, DecodePlanPages* out);

// The block-table width a step needs against the one given (op: the caller's name for the error): an error where the
// geometry knows the step's longest sequence (host_max_seq_pages) and the table's rows are narrower. For the device
// entry points, which cannot read the seqlens (the host plan checks each sequence against the table itself).
Status check_block_table_width(const char* op, const TensorView& block_table, const DecodePlanGeometry& g);

namespace ref {
// Host plan: seqlens host [batch] int32 -> plan (host buffers sized from the geometry). With the step's
// block table (host int32 [batch, max_blocks]) the records also carry the page hints.
Status plan_decode(const TensorView& seqlens, const DecodePlanGeometry& g, DecodePlanView plan,
                   DecodePlanTuning tune = {});
Status plan_decode(const TensorView& seqlens, const TensorView& block_table, const DecodePlanGeometry& g,
                   DecodePlanView plan, DecodePlanTuning tune = {});
}  // namespace ref

namespace cuda {
// Device plan: seqlens device int32 [batch] -> plan in device buffers, on `stream`, no host sync, no
// allocation (CUDA-graph safe). Produces exactly what compute_decode_plan produces on the host. With the
// step's block table (device int32 [batch, max_blocks], written before the plan on the same stream) the
// records carry the page hints; the decode of every layer then starts one dependent load earlier.
Status plan_decode(const TensorView& seqlens, const DecodePlanGeometry& g, DecodePlanView plan, Stream stream,
                   DecodePlanTuning tune = {});
Status plan_decode(const TensorView& seqlens, const TensorView& block_table, const DecodePlanGeometry& g,
                   DecodePlanView plan, Stream stream, DecodePlanTuning tune = {});
}  // namespace cuda

}  // namespace mla
