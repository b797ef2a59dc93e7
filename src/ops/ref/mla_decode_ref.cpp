// CPU reference of mla_decode: the kernel's arithmetic in plain C++.
//
// Every query row walks its visible keys in 64-token blocks (one KV page) with the online softmax a
// kernel uses: running max m (moved lazily for fp8: mla/ops/decode_running_max.h), running sum l of the
// unrounded probabilities, and an accumulator rescaled by exp(m_old - m_new) per block, into which P is
// added after rounding to the MMA operand type (bf16, fp16 or e4m3; see PRounding). For fp8 the dot
// products run on the raw e4m3 values and the scales are folded in as the kernel does: scores use
// softmax_scale * q_scale * k_scale, the output is multiplied by k_scale. Split-KV runs the same block walk
// per plan part and merges by lse. With Fp8MmaSum::kWgmmaE4m3 the fp8 format's two products add up as Hopper's e4m3
// wgmma does (wgmma_e4m3_sum.h) and the softmax takes the wgmma kernels' float steps (RowAttention::wgmma_page).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "mla/core/fp8.h"
#include "mla/core/half.h"
#include "mla/core/page_table.h"
#include "mla/ops/decode_running_max.h"
#include "mla/ops/mla_decode.h"
#include "ops/common/cache_codec.h"
#include "ops/ref/parallel_for.h"
#include "ops/ref/wgmma_e4m3_sum.h"

namespace mla::ref {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kLog2e = 1.44269504088896340736f;

float load_elem(const void* base, DType t, int64_t i) {
  switch (t) {
    case DType::kBf16: return bf16_to_float(static_cast<const uint16_t*>(base)[i]);
    case DType::kFp16: return fp16_to_float(static_cast<const uint16_t*>(base)[i]);
    case DType::kE4m3: return e4m3_to_float(static_cast<const uint8_t*>(base)[i]);
    case DType::kFp32: return static_cast<const float*>(base)[i];
    default: return std::numeric_limits<float>::quiet_NaN();
  }
}

float round_p(float p, KvFormat f, PRounding r) {
  if (r == PRounding::kNone) return p;
  switch (f) {
    case KvFormat::kFp16: return round_fp16(p);
    case KvFormat::kFp8: return round_e4m3(p);
    default: return round_bf16(p);
  }
}

// One token of the cache as 576 floats, in the units the kernel's MMA sees: raw e4m3 values for fp8
// (k_scale folded in later), dequantized values for fp8_ds, plain values for bf16/fp16.
void load_token(const uint8_t* tok, KvFormat f, float* k) {
  switch (f) {
    case KvFormat::kBf16:
    case KvFormat::kFp16: {
      const DType t = kv_cache_dtype(f);
      for (int d = 0; d < kDimQK; ++d) k[d] = load_elem(tok, t, d);
      break;
    }
    case KvFormat::kFp8: {  // by lookup: e4m3_to_float's branches took a quarter of the float path (session 63)
      const float* tab = e4m3_decode_table();
      for (int d = 0; d < kDimQK; ++d) k[d] = tab[tok[d]];
      break;
    }
    case KvFormat::kFp8Ds:
      for (int d = 0; d < kDimLatent; ++d) k[d] = cache::fp8_ds_latent(tok, d);
      for (int d = 0; d < kDimRope; ++d) k[kDimLatent + d] = bf16_to_float(cache::fp8_ds_rope_bits(tok, d));
      break;
  }
}

// s[t] = q . k[t] for the n (<= 64) tokens of a page (k: [n][576]), each a float sum over the dims in order. Eight keys
// go side by side, each still its own running sum (the same bits as one key at a time), so the eight chains of 576
// dependent adds overlap (one core: 0.085 us a score against 0.27 one key at a time, session 63).
void float_scores(const float* q, const float* k, int n, float* s) {
  int t = 0;
  for (; t + 8 <= n; t += 8) {
    float acc[8] = {};
    for (int d = 0; d < kDimQK; ++d)
      for (int j = 0; j < 8; ++j) acc[j] += q[d] * k[(t + j) * kDimQK + d];
    for (int j = 0; j < 8; ++j) s[t + j] = acc[j];
  }
  for (; t < n; ++t) {
    float acc = 0.f;
    for (int d = 0; d < kDimQK; ++d) acc += q[d] * k[t * kDimQK + d];
    s[t] = acc;
  }
}

struct RowResult {
  std::vector<float> o;  // [512], normalized, in output units
  float lse = kNegInf;
};

// Attends query row (b, i, h) over key blocks [lo_blk, hi_blk) of sequence b.
class RowAttention {
 public:
  RowAttention(const MlaDecodeParams& p, const PagedKvView& kv, const MlaDecodeRefOptions& opts)
      : p_(p), kv_(kv), opts_(opts) {
    const float fp8_fold = p.format == KvFormat::kFp8 ? p.q_scale * p.k_scale : 1.f;
    score_scale_ = p.softmax_scale * fp8_fold;
    out_scale_ = p.format == KvFormat::kFp8 ? p.k_scale : 1.f;
    max_slack_log2_ = p.format == KvFormat::kFp8 ? kDecodeFp8MaxSlackLog2 : 0.f;
    wgmma_ = p.format == KvFormat::kFp8 && opts.fp8_mma_sum == Fp8MmaSum::kWgmmaE4m3;
    // The kernels' float constants (mla_decode.cu): the folded softmax scale, then its log2 form.
    kernel_scale_ = p.softmax_scale * p.q_scale * p.k_scale;
    kernel_scale_log2_ = kernel_scale_ * 1.4426950408889634f;
  }

  // Processes all rows of sequence b in [row0, row1) (row = i * h_q + h) over blocks [lo, hi).
  void run(int b, int row0, int row1, int lo, int hi, std::vector<RowResult>* results) const {
    const int s_q = static_cast<int>(p_.q.shape[1]), h_q = static_cast<int>(p_.q.shape[2]);
    const int seqlen = p_.seqlens.ptr<const int32_t>()[b];
    const int nrows = row1 - row0;
    std::vector<float> q(static_cast<size_t>(nrows) * kDimQK), m(nrows, kNegInf), l(nrows, 0.f),
        o(static_cast<size_t>(nrows) * kDimV, 0.f), kblk(static_cast<size_t>(kDecodePageSize) * kDimQK),
        s(kDecodePageSize);
    for (int r = 0; r < nrows; ++r) {
      const int64_t off = ((static_cast<int64_t>(b) * s_q) * h_q + row0 + r) * kDimQK;  // rows are (i, h) row-major
      for (int d = 0; d < kDimQK; ++d) q[r * kDimQK + d] = load_elem(p_.q.data, p_.q.dtype, off + d);
    }
    for (int blk = lo; blk < hi; ++blk) {
      const int t0 = blk * kDecodePageSize;
      const int t1 = std::min(t0 + kDecodePageSize, seqlen);
      for (int t = t0; t < t1; ++t) load_token(kv_.token(b, t), p_.format, &kblk[(t - t0) * kDimQK]);
      for (int r = 0; r < nrows; ++r) {
        const int i = (row0 + r) / h_q;
        const int visible = p_.causal ? seqlen - s_q + 1 + i : seqlen;
        const int te = std::min(t1, visible);
        if (te <= t0) continue;
        if (wgmma_) {
          wgmma_page(&q[r * kDimQK], kblk.data(), te - t0, &m[r], &l[r], &o[static_cast<size_t>(r) * kDimV]);
          continue;
        }
        float_scores(&q[r * kDimQK], kblk.data(), te - t0, s.data());
        float page_max = kNegInf;
        for (int t = 0; t < te - t0; ++t) {
          s[t] *= score_scale_;
          page_max = std::max(page_max, s[t]);
        }
        // The kernels' rule (lazy for fp8): the scores here are already scaled, so log2(e) converts to P's log2.
        const float mx = decode_running_max(m[r], page_max, kLog2e, max_slack_log2_);
        const float alpha = m[r] == kNegInf ? 0.f : std::exp(m[r] - mx);
        float* orow = &o[static_cast<size_t>(r) * kDimV];
        for (int d = 0; d < kDimV; ++d) orow[d] *= alpha;
        l[r] *= alpha;
        for (int t = t0; t < te; ++t) {
          const float pt = std::exp(s[t - t0] - mx);
          l[r] += pt;
          const float pr = round_p(pt, p_.format, opts_.p_rounding);
          const float* vr = &kblk[(t - t0) * kDimQK];
          for (int d = 0; d < kDimV; ++d) orow[d] += pr * vr[d];
        }
        m[r] = mx;
      }
    }
    for (int r = 0; r < nrows; ++r) {
      RowResult& res = (*results)[r];
      res.o.assign(kDimV, 0.f);
      if (l[r] > 0.f) {
        const float inv = out_scale_ / l[r];
        for (int d = 0; d < kDimV; ++d) res.o[d] = o[static_cast<size_t>(r) * kDimV + d] * inv;
        res.lse = wgmma_ ? m[r] * kernel_scale_ + std::log(l[r]) : m[r] + std::log(l[r]);
      } else {
        res.lse = kNegInf;
      }
    }
  }

 private:
  // One page of one row as the fp8 wgmma kernels compute it (Fp8MmaSum::kWgmmaE4m3): raw scores (q_scale, k_scale
  // and the softmax scale folded into kernel_scale_log2_), m in raw units, P = exp2(fma(s, scale_log2, -m scale_log2))
  // as the kernels' softmax, O rescaled in float, then P (e4m3) V in two k32 steps of 32 keys (keys past n add nothing).
  // kblk: the page's tokens as raw e4m3 values [64][576].
  void wgmma_page(const float* q, const float* kblk, int n, float* m, float* l, float* o) const {
    float s[kDecodePageSize], pr[kDecodePageSize] = {}, page_max = kNegInf;
    const int rs_from = 18 - opts_.s_register_steps;
    int t4 = 0;  // four keys at a time (wgmma_e4m3_dot576_n), then the rest
    for (; t4 + 4 <= n; t4 += 4) {
      const float* k4[4] = {&kblk[t4 * kDimQK], &kblk[(t4 + 1) * kDimQK], &kblk[(t4 + 2) * kDimQK],
                            &kblk[(t4 + 3) * kDimQK]};
      wgmma_e4m3_dot576_n<4>(q, k4, rs_from, &s[t4]);
    }
    for (; t4 < n; ++t4) s[t4] = wgmma_e4m3_dot576(q, &kblk[t4 * kDimQK], rs_from);
    for (int t = 0; t < n; ++t) page_max = std::max(page_max, s[t]);
    const float mx = decode_running_max(*m, page_max, kernel_scale_log2_, max_slack_log2_);
    const float ms = mx == kNegInf ? 0.f : mx * kernel_scale_log2_;
    if (mx != *m) {
      const float alpha = std::exp2(*m * kernel_scale_log2_ - ms);  // m = -inf: 0
      *l *= alpha;
      for (int d = 0; d < kDimV; ++d) o[d] *= alpha;
    }
    *m = mx;
    for (int t = 0; t < n; ++t) {
      const float pt = std::exp2(std::fma(s[t], kernel_scale_log2_, -ms));
      *l += pt;
      pr[t] = round_p(pt, KvFormat::kFp8, opts_.p_rounding);
    }
    const float* v[kDecodePageSize];
    for (int t = 0; t < kDecodePageSize; ++t) v[t] = &kblk[std::min(t, std::max(n - 1, 0)) * kDimQK];  // p 0 past n
    float scratch[3 * kDimV];
    for (int t0 = 0; t0 < kDecodePageSize; t0 += 32)
      wgmma_e4m3_pv_step(o, &pr[t0], &v[t0], 32, kDimV, opts_.pv_register_a, scratch);
  }

  const MlaDecodeParams& p_;
  const PagedKvView& kv_;
  const MlaDecodeRefOptions& opts_;
  float score_scale_ = 1.f;
  float out_scale_ = 1.f;
  float max_slack_log2_ = 0.f;
  bool wgmma_ = false;  // Fp8MmaSum::kWgmmaE4m3 on the fp8 format: m in raw score units, wgmma_page
  float kernel_scale_ = 1.f, kernel_scale_log2_ = 1.f;
};

PagedKvView make_view(const MlaDecodeParams& p) {
  PagedKvView v;
  v.cache = static_cast<const uint8_t*>(p.kv_cache.data);
  v.block_table = p.block_table.ptr<const int32_t>();
  v.token_bytes = kv_bytes_per_token(p.format);
  v.page_size = kDecodePageSize;
  v.page_stride_bytes = static_cast<int64_t>(v.token_bytes) * kDecodePageSize;
  v.block_table_stride = static_cast<int>(p.block_table.shape[1]);
  v.num_pages = static_cast<int>(p.kv_cache.shape[0]);
  return v;
}

// Data-dependent checks the host can make when it can read seqlens and the block table.
Status validate_data(const MlaDecodeParams& p, const PagedKvView& kv) {
  const int batch = static_cast<int>(p.q.shape[0]);
  for (int b = 0; b < batch; ++b) {
    const int seqlen = p.seqlens.ptr<const int32_t>()[b];
    if (seqlen < 0)
      return Status::invalid("mla_decode", "seqlens[" + std::to_string(b) + "] = " + std::to_string(seqlen) + " < 0");
    const int nblk = decode_num_blocks(seqlen);
    if (nblk > kv.block_table_stride)
      return Status::invalid("mla_decode", "seqlens[" + std::to_string(b) + "] = " + std::to_string(seqlen) +
                                               " needs " + std::to_string(nblk) + " pages but block_table " +
                                               p.block_table.str() + " has " + std::to_string(kv.block_table_stride) +
                                               " per row");
    for (int j = 0; j < nblk; ++j) {
      const int32_t pg = kv.page(b, j);
      if (pg < 0 || pg >= kv.num_pages)
        return Status::invalid("mla_decode", "block_table[" + std::to_string(b) + "][" + std::to_string(j) + "] = " +
                                                 std::to_string(pg) + " outside kv_cache " + p.kv_cache.str());
    }
  }
  return Status::ok();
}

void store_row(const MlaDecodeParams& p, int b, int row, const RowResult& r) {
  const int s_q = static_cast<int>(p.q.shape[1]), h_q = static_cast<int>(p.q.shape[2]);
  const int i = row / h_q, h = row % h_q;
  const int64_t off = ((static_cast<int64_t>(b) * s_q + i) * h_q + h) * kDimV;
  auto* out = p.out.ptr<uint16_t>() + off;
  for (int d = 0; d < kDimV; ++d) out[d] = p.out.dtype == DType::kFp16 ? float_to_fp16(r.o[d]) : float_to_bf16(r.o[d]);
  p.lse.ptr<float>()[(static_cast<int64_t>(b) * h_q + h) * s_q + i] = r.lse;
}

constexpr int kRowChunk = 16;  // rows per task: K blocks are dequantized once per chunk

}  // namespace

Status mla_decode(const MlaDecodeParams& p, const MlaDecodeRefOptions& opts) {
  MLA_TRY(validate_mla_decode(p));
  const PagedKvView kv = make_view(p);
  MLA_TRY(validate_data(p, kv));
  const int batch = static_cast<int>(p.q.shape[0]);
  const int rows = static_cast<int>(p.q.shape[1] * p.q.shape[2]);
  const int chunks = (rows + kRowChunk - 1) / kRowChunk;
  const RowAttention att(p, kv, opts);
  parallel_for(static_cast<int64_t>(batch) * chunks, [&](int64_t task) {
    const int b = static_cast<int>(task / chunks);
    const int r0 = static_cast<int>(task % chunks) * kRowChunk, r1 = std::min(rows, r0 + kRowChunk);
    std::vector<RowResult> res(r1 - r0);
    att.run(b, r0, r1, 0, decode_num_blocks(p.seqlens.ptr<const int32_t>()[b]), &res);
    for (int r = r0; r < r1; ++r) store_row(p, b, r, res[r - r0]);
  });
  return Status::ok();
}

Status mla_decode_split(const MlaDecodeParams& p, const DecodePlanView& plan, float* o_accum, float* lse_accum,
                        const MlaDecodeRefOptions& opts) {
  MLA_TRY(validate_mla_decode(p));
  const PagedKvView kv = make_view(p);
  MLA_TRY(validate_data(p, kv));
  if (!plan.parts || !plan.split_offsets || !o_accum || !lse_accum || plan.num_parts < 1)
    return Status::invalid("mla_decode", "split reference needs a plan and partial buffers");
  const int batch = static_cast<int>(p.q.shape[0]);
  const int rows = static_cast<int>(p.q.shape[1] * p.q.shape[2]);
  const int chunks = (rows + kRowChunk - 1) / kRowChunk;
  const int32_t* seqlens = p.seqlens.ptr<const int32_t>();
  const int32_t* off = plan.split_offsets;

  // (part, sequence) work items, as the kernel's CTAs see them.
  struct Item { int b, lo, hi, slot; };
  std::vector<Item> items;
  for (int part = 0; part < plan.num_parts; ++part) {
    const int32_t* rec = plan.parts + static_cast<int64_t>(part) * kPlanPartInts;
    const int bb = rec[kPartBeginBatch], eb = rec[kPartEndBatch];
    for (int b = bb; b <= eb && b < batch; ++b) {
      const int lo = b == bb ? rec[kPartBeginBlock] : 0;
      const int hi = b == eb ? rec[kPartEndBlock] : decode_num_blocks(seqlens[b]);
      if (lo >= hi) continue;
      const int k = b == bb ? rec[kPartFirstSplit] : 0;
      items.push_back({b, lo, hi, off[b] + k});
    }
  }
  const RowAttention att(p, kv, opts);
  parallel_for(static_cast<int64_t>(items.size()) * chunks, [&](int64_t task) {
    const Item& it = items[task / chunks];
    const int r0 = static_cast<int>(task % chunks) * kRowChunk, r1 = std::min(rows, r0 + kRowChunk);
    std::vector<RowResult> res(r1 - r0);
    att.run(it.b, r0, r1, it.lo, it.hi, &res);
    const bool direct = off[it.b + 1] - off[it.b] == 1;
    for (int r = r0; r < r1; ++r) {
      if (direct) {
        store_row(p, it.b, r, res[r - r0]);
      } else {
        float* o = o_accum + (static_cast<int64_t>(it.slot) * rows + r) * kDimV;
        for (int d = 0; d < kDimV; ++d) o[d] = opts.bf16_partials ? round_bf16(res[r - r0].o[d]) : res[r - r0].o[d];
        lse_accum[static_cast<int64_t>(it.slot) * rows + r] = res[r - r0].lse;
      }
    }
  });

  // Combine: sequences with 0 splits get zeros / -inf, those with >= 2 merge their partials by lse.
  parallel_for(batch, [&](int64_t bi) {
    const int b = static_cast<int>(bi);
    const int n = off[b + 1] - off[b];
    if (n == 1) return;
    for (int r = 0; r < rows; ++r) {
      RowResult res;
      res.o.assign(kDimV, 0.f);
      float mx = kNegInf;
      for (int s = 0; s < n; ++s) mx = std::max(mx, lse_accum[static_cast<int64_t>(off[b] + s) * rows + r]);
      if (mx != kNegInf) {
        float sum = 0.f;
        for (int s = 0; s < n; ++s) {
          const int64_t slot = off[b] + s;
          const float w = std::exp(lse_accum[slot * rows + r] - mx);
          sum += w;
          for (int d = 0; d < kDimV; ++d) res.o[d] += w * o_accum[(slot * rows + r) * kDimV + d];
        }
        for (int d = 0; d < kDimV; ++d) res.o[d] /= sum;
        res.lse = mx + std::log(sum);
      }
      store_row(p, b, r, res);
    }
  });
  return Status::ok();
}

}  // namespace mla::ref
