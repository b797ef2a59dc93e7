#pragma once
// Random mla_decode inputs on the host, shared by the CPU tests and the GPU tests: a paged cache in any
// format with a random permutation of pages, NaN in every cache slot no sequence uses, sentinel values in
// every unused block-table entry, and q in the format's dtype. Never zeros.
#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "mla/core/fp8.h"
#include "mla/core/half.h"
#include "mla/core/kv_format.h"
#include "mla/ops/mla_decode.h"
#include "mla/ops/concat_and_cache_mla.h"
#include "ops/common/cache_codec.h"

namespace mla::test {

constexpr int32_t kBlockTableSentinel = 0x7FFFFFF0;  // far outside any cache: a read of it faults or is caught

// What the values look like. kNormal: q and K ~ N(0, data_scale). kDeepSeekLike: the structure of real
// MLA activations that makes per-tensor FP8 hurt: kv_c rows RMS-normalized then scaled by per-channel
// norm weights, k_pe with a few outlier channels 10-100x the rest, token norms varying 10x along a
// sequence, and q with per-head norms varying 10x, per-channel weights and moderate outlier channels.
enum class DataKind { kNormal, kDeepSeekLike };

struct DecodeShape {
  int batch = 1, s_q = 1, h_q = 16;
  std::vector<int> seqlens;  // [batch]
  KvFormat format = KvFormat::kBf16;
  bool causal = false;
  float q_scale = 1.f, k_scale = 1.f;  // fp8
  float data_scale = 1.f;              // multiplies the N(0,1) draws (large values test saturation)
  DataKind data = DataKind::kNormal;
  int spare_pages = 3;                 // pages no sequence uses (NaN-filled)
  int spare_cols = 2;                  // block-table columns past the longest sequence (sentinels)
  int plan_sms = 0;  // SMs the GPU tests' plan fills (decode_plan_geometry's num_sms; 0: the device's). Fewer give a
                     // small step the long parts (and their page-copy paths) that only large steps reach otherwise
  int32_t table_sentinel = kBlockTableSentinel;  // every unused block-table entry (the 16-bit suite: a negative one)
  bool keep_kv_float = true;  // DecodeHostData::kv_float (the price-of-FP8 reference); false: left empty (1.2 GB at
                              // b128 s4096, and most of the draw's time there)

  // Keys query row i of sequence b sees (mla_decode.h: seqlen, or seqlen - s_q + 1 + i when causal), at least 0.
  int visible_keys(int b, int i) const {
    return std::max(0, causal ? std::min(seqlens[b], seqlens[b] - s_q + 1 + i) : seqlens[b]);
  }
};

// A step's shape; the other fields keep their defaults.
inline DecodeShape decode_shape(KvFormat f, int batch, int h_q, int s_q, bool causal, std::vector<int> seqlens) {
  DecodeShape s;
  s.format = f;
  s.batch = batch;
  s.h_q = h_q;
  s.s_q = s_q;
  s.causal = causal;
  s.seqlens = std::move(seqlens);
  return s;
}

struct DecodeHostData {
  DecodeShape shape;
  int num_pages = 0, max_pages = 0;
  std::vector<uint8_t> q;            // [b, s_q, h_q, 576] in kv_query_dtype(format)
  std::vector<uint8_t> cache;        // [num_pages, 64, bytes_per_token]
  std::vector<int32_t> block_table;  // [b, max_pages]
  std::vector<int32_t> seqlens;      // [b]
  std::vector<float> q_float;        // the unquantized q (for the price-of-FP8 comparison)
  std::vector<float> kv_float;       // unquantized K per (b, t): [b][max_pages*64][576], NaN where unused; empty
                                     // unless shape.keep_kv_float

  size_t out_elems() const { return size_t(shape.batch) * shape.s_q * shape.h_q * kDimV; }
  // Sequence b's token t: its kv_bytes_per_token(format) bytes in the cache, through the block table.
  const uint8_t* token(int b, int t) const {
    const int32_t pg = block_table[size_t(b) * max_pages + t / kDecodePageSize];
    return &cache[(size_t(pg) * kDecodePageSize + t % kDecodePageSize) * kv_bytes_per_token(shape.format)];
  }
  size_t lse_elems() const { return size_t(shape.batch) * shape.h_q * shape.s_q; }

  // Params over caller-provided pointers (host or device) with this data's shapes.
  MlaDecodeParams params(void* dq, void* dcache, void* dbt, void* dsl, void* dout, void* dlse,
                         float softmax_scale) const {
    const DecodeShape& s = shape;
    MlaDecodeParams p;
    p.q = TensorView::contiguous(dq, kv_query_dtype(s.format), {s.batch, s.s_q, s.h_q, kDimQK});
    p.kv_cache = TensorView::contiguous(dcache, kv_cache_dtype(s.format),
                                        {num_pages, kDecodePageSize, kv_token_elems(s.format)});
    p.block_table = TensorView::contiguous(dbt, DType::kInt32, {s.batch, max_pages});
    p.seqlens = TensorView::contiguous(dsl, DType::kInt32, {s.batch});
    p.out = TensorView::contiguous(dout, s.format == KvFormat::kFp16 ? DType::kFp16 : DType::kBf16,
                                   {s.batch, s.s_q, s.h_q, kDimV});
    p.lse = TensorView::contiguous(dlse, DType::kFp32, {s.batch, s.h_q, s.s_q});
    p.format = s.format;
    p.softmax_scale = softmax_scale;
    p.causal = s.causal;
    p.q_scale = s.q_scale;
    p.k_scale = s.k_scale;
    return p;
  }
  // Params over this data's own host copies (the CPU references only read the inputs); out / lse the caller's.
  MlaDecodeParams host_params(void* out, void* lse, float softmax_scale) const {
    return params(const_cast<uint8_t*>(q.data()), const_cast<uint8_t*>(cache.data()),
                  const_cast<int32_t*>(block_table.data()), const_cast<int32_t*>(seqlens.data()), out, lse,
                  softmax_scale);
  }
};

inline DecodeHostData make_decode_data(const DecodeShape& s, std::mt19937_64& rng) {
  DecodeHostData h;
  h.shape = s;
  const int bpt = kv_bytes_per_token(s.format);
  int used_pages = 0, longest = 0;
  for (int L : s.seqlens) { used_pages += decode_num_blocks(L); longest = std::max(longest, decode_num_blocks(L)); }
  h.num_pages = used_pages + s.spare_pages;
  h.max_pages = std::max(1, longest + s.spare_cols);
  h.seqlens.assign(s.seqlens.begin(), s.seqlens.end());
  h.cache.assign(size_t(h.num_pages) * kDecodePageSize * bpt, 0xFF);  // NaN everywhere until written
  h.block_table.assign(size_t(s.batch) * h.max_pages, s.table_sentinel);
  std::vector<int32_t> perm(h.num_pages);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);

  std::normal_distribution<float> nd(0.f, s.data_scale);
  std::normal_distribution<float> n01(0.f, 1.f);
  std::uniform_real_distribution<float> u01(0.f, 1.f);
  // DeepSeek-like structure, fixed per "layer" (per call): channel weights and outlier channels.
  std::vector<float> kv_weight(kDimLatent, 1.f), kpe_gain(kDimRope, 1.f), q_weight(kDimQK, 1.f);
  if (s.data == DataKind::kDeepSeekLike) {
    for (auto& w : kv_weight) w = std::fabs(1.f + 0.3f * n01(rng));
    for (int j = 0; j < 4; ++j) kpe_gain[rng() % kDimRope] = 10.f * std::pow(10.f, u01(rng));  // 10..100x
    for (auto& w : q_weight) w = std::fabs(1.f + 0.3f * n01(rng));
    for (int j = 0; j < 8; ++j) q_weight[rng() % kDimQK] *= 3.f + 7.f * u01(rng);              // 3..10x
  }
  auto draw_token = [&](float* kf) {
    if (s.data == DataKind::kNormal) {
      for (int d = 0; d < kDimQK; ++d) kf[d] = nd(rng);
      return;
    }
    const float g = s.data_scale * std::pow(10.f, u01(rng) - 0.5f);  // token norm: 10x range
    double ss = 0;
    for (int d = 0; d < kDimLatent; ++d) { kf[d] = n01(rng); ss += double(kf[d]) * kf[d]; }
    const float inv_rms = float(1.0 / std::sqrt(ss / kDimLatent));
    for (int d = 0; d < kDimLatent; ++d) kf[d] *= inv_rms * kv_weight[d] * g;
    // RoPE keys: small (0.1) except the outlier channels, so the outliers dominate k_pe without making
    // every softmax one-hot.
    for (int d = 0; d < kDimRope; ++d) kf[kDimLatent + d] = 0.1f * n01(rng) * kpe_gain[d] * g;
  };
  const size_t seq_floats = size_t(h.max_pages) * kDecodePageSize * kDimQK;
  if (s.keep_kv_float) h.kv_float.assign(size_t(s.batch) * seq_floats, std::numeric_limits<float>::quiet_NaN());
  std::vector<float> scratch(s.keep_kv_float ? 0 : seq_floats);  // one sequence's rows when kv_float is not kept
  int next = 0;
  // The cache is written by the cache-op reference (the same bytes the model's writer produces).
  ConcatAndCacheMlaParams write;
  write.kv_cache = TensorView::contiguous(h.cache.data(), kv_cache_dtype(s.format),
                                          {h.num_pages, kDecodePageSize, kv_token_elems(s.format)});
  write.format = s.format;
  write.k_scale = s.k_scale;
  for (int b = 0; b < s.batch; ++b) {
    const int L = s.seqlens[b];
    for (int j = 0; j < decode_num_blocks(L); ++j) h.block_table[size_t(b) * h.max_pages + j] = perm[next++];
    float* rows = s.keep_kv_float ? &h.kv_float[size_t(b) * seq_floats] : scratch.data();
    std::vector<int64_t> slots(L);
    for (int t = 0; t < L; ++t) {
      draw_token(rows + size_t(t) * kDimQK);
      slots[t] =
          int64_t(h.block_table[size_t(b) * h.max_pages + t / kDecodePageSize]) * kDecodePageSize + t % kDecodePageSize;
    }
    if (L == 0) continue;
    // kv_c and k_pe are column splits of the [L, 576] float rows.
    write.kv_c = TensorView::contiguous(rows, DType::kFp32, {L, kDimLatent});
    write.kv_c.stride[0] = kDimQK;
    write.k_pe = TensorView::contiguous(rows + kDimLatent, DType::kFp32, {L, kDimRope});
    write.k_pe.stride[0] = kDimQK;
    write.slot_mapping = TensorView::contiguous(slots.data(), DType::kInt64, {L});
    const Status st = ref::concat_and_cache_mla(write);
    if (!st.is_ok()) throw std::runtime_error("make_decode_data: " + st.to_string());
  }
  const size_t nq = size_t(s.batch) * s.s_q * s.h_q * kDimQK;
  h.q_float.resize(nq);
  if (s.data == DataKind::kNormal) {
    for (auto& x : h.q_float) x = nd(rng);
  } else {
    for (size_t row = 0; row < nq / kDimQK; ++row) {
      const float g = s.data_scale * std::pow(10.f, u01(rng) - 0.5f);  // per (token, head) norm: 10x range
      for (int d = 0; d < kDimQK; ++d) h.q_float[row * kDimQK + d] = n01(rng) * q_weight[d] * g;
    }
  }
  const DType qd = kv_query_dtype(s.format);
  h.q.resize(nq * dtype_size(qd));
  for (size_t i = 0; i < nq; ++i) {
    if (qd == DType::kE4m3) {
      h.q[i] = cache::encode_e4m3(h.q_float[i], s.q_scale);
    } else {
      const uint16_t v = qd == DType::kBf16 ? float_to_bf16(h.q_float[i]) : float_to_fp16(h.q_float[i]);
      std::memcpy(&h.q[2 * i], &v, 2);
    }
  }
  return h;
}

}  // namespace mla::test
